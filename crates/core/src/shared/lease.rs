//! Directory leases: one daemon acknowledges creates in a directory from
//! memory and commits them in batches, as the embedded engine does, while
//! no other daemon can change that directory's entries (issue 24's lever
//! for creates on etcd; docs/design.md, "Directory leases").
//!
//! **The lease.** A key `L dir` holding the daemon's session, put on its
//! session's lease by a commit that requires it absent. Every commit of
//! any daemon that writes an entry of `dir`, its record, or depends on its
//! emptiness requires `L dir` absent ([`super::ns::Tx`]'s guard), unless it
//! is the holder's (whose commits all require its session key, which lives
//! and dies with `L dir`). So from the lease's commit until `L dir` goes,
//! the directory's entries change only by the holder.
//!
//! **Acknowledging from memory.** On taking the lease the holder reads the
//! directory's record and every entry (at a revision after the lease's: all
//! that any other daemon could have added), and then answers a create in it
//! from that listing and its own pending creates: a name absent from both
//! is absent from the store, and nobody else can add it. The create is
//! queued and acknowledged; a flusher thread commits the queue in order,
//! as many creates per transaction as the store takes, each transaction
//! requiring the session key.
//!
//! **Order, and what a crash keeps.** Every other operation of the holder
//! that reads the store through a transaction first waits for the queue
//! to be committed (`settle`), so the daemon's commits follow its
//! acknowledgements: a crash or a lost session loses a suffix of them (the
//! creates still queued), never one in the middle. fsync of a file or a
//! directory waits for the queue too.
//!
//! **Giving it back, in turns.** The holder releases a directory when one
//! of its own operations would change the directory other than by a
//! create (after committing the queue), and when another daemon asks: a
//! daemon whose commit failed on `L dir` puts `R dir` and retries; the
//! holder follows the change stream and, at the end of its 100 ms slice,
//! commits its queue and deletes `L dir` and `R dir` in one transaction.
//! A daemon whose create waited takes the lease at its next create, so
//! daemons creating in one directory take turns. A holder that dies or is
//! cut off loses `L dir` with its session lease; its queued creates can
//! never commit (fenced).
//!
//! **Kept listings.** A directory given back keeps its listing, updated
//! from the change stream; taking it again reads only its record.
//!
//! **Changes to queued creates** (a file's bytes, mode, owner, times,
//! chunk table) are made in the queue while its batch has not left.

use super::ns::{ekey, enc_entry, erange, ikey, lkey, rkey, skey, tkey, Node, SharedFs};
use super::{Cond, KvError, Op, Outcome};
use crate::error::{Error, Result};
use crate::types::{Attr, Ino, Kind, Ts};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// Creates in a row in one directory (by transactions) before the daemon
/// tries to take its lease.
const STREAK: u32 = 4;
/// A directory with more entries than this is not leased (its listing is
/// read whole when the lease is taken, and kept in memory).
const MAX_LISTING: usize = 100_000;
/// Creates acknowledged and not yet committed, at most; a create past it
/// waits for the flusher.
const MAX_QUEUE: usize = 1024;
/// A queue whose oldest create waited this long means the store does not
/// keep up: no more creates from memory until it does.
const STALE: Duration = Duration::from_secs(1);
/// The flusher waits up to this long after a create for more to commit
/// with it, or until this many are queued (about what one etcd transaction
/// of 128 operations takes): group commit. 20 ms: 31 creates per commit
/// and 1,490 creates/s through one mount, against 7.8 and 1,342 at 5 ms
/// (docs/perf-log/20-lease-turns-cold-listings-untar.md). Whoever waits for the queue (fsync, another
/// operation, a lease given back) does not wait for the linger.
const LINGER: Duration = Duration::from_millis(20);
const FULL: usize = 60;
/// A holder asked for a directory gives it back no sooner than this after
/// taking it: daemons creating in one directory take turns this long.
const SLICE: Duration = Duration::from_millis(100);
/// After giving a directory back on request, the daemon does not take it
/// again for this long (the asker takes it first).
const HANDOFF_GAP: Duration = Duration::from_millis(20);
/// A directory that was gone or too large is not tried again for this long.
const BACKOFF_MAX: Duration = Duration::from_secs(64);

/// A directory's entries: name -> child and kind.
type Names = HashMap<Vec<u8>, (Ino, Kind)>;

/// A directory this daemon holds.
struct Held {
    /// The directory's record when the lease was taken (a create inherits
    /// its setgid group; nobody else can change it while held).
    dir: Node,
    /// Every entry: the store's at the lease plus this daemon's creates.
    names: Names,
    /// Being given back: no more creates from memory.
    releasing: bool,
    /// When it was taken (another daemon's request waits for `SLICE`).
    since: Instant,
    /// The revision `names` is exact at (the lease's commit, or the
    /// listing's read): later changes to the entries are this daemon's.
    at: super::Rev,
    /// `names` went to the cold listings (being given back, its queue
    /// committed): lookups read the store.
    moved: bool,
}

/// The listing of a directory this daemon gave back, kept current from
/// the change stream, so that taking it again reads only the record.
struct Cold {
    names: Names,
    /// The revision `names` was exact at (taken then, or read then): the
    /// stream's changes after it are applied to it.
    after: super::Rev,
}

/// Cold listings kept, at most.
const MAX_COLD: usize = 16;

/// A create acknowledged from memory.
struct Pending {
    dir: Ino,
    name: Vec<u8>,
    ino: Ino,
    kind: Kind,
    t: Ts,
    /// When it was acknowledged.
    at: Instant,
}

#[derive(Default)]
struct State {
    held: HashMap<Ino, Held>,
    queue: VecDeque<Pending>,
    /// Records of the queued (and in-flight) creates.
    nodes: HashMap<Ino, Node>,
    /// Creates being committed now.
    in_flight: usize,
    /// Transactional creates in a row per directory (for taking a lease).
    streak: HashMap<Ino, u32>,
    /// Not taken again before this.
    not_before: HashMap<Ino, Instant>,
    /// Asked for by another daemon: given back at this time (its slice's end).
    due: HashMap<Ino, Instant>,
    /// Being taken by one of this daemon's threads (the others wait).
    acquiring: HashSet<Ino>,
    /// Listings of directories given back, while the stream follows.
    cold: HashMap<Ino, Cold>,
    /// The change stream runs (since before every cold listing was made).
    following: bool,
    /// The revision the stream delivered through.
    seen: super::Rev,
    /// The store refused the queue (full): why, while it lasts.
    stalled: Option<Error>,
    /// Someone waits for the queue (`settle`): commit without lingering.
    urgent: bool,
}

impl State {
    /// Another daemon asked for `dir`: due at the end of this one's slice.
    fn asked_for(&mut self, dir: Ino) {
        if let Some(h) = self.held.get(&dir) {
            let at = h.since + SLICE;
            self.due.entry(dir).or_insert(at);
        }
    }
}

/// The daemon's leases and its queue of creates acknowledged from memory.
pub(super) struct Leases {
    st: Mutex<State>,
    cv: Condvar,
    /// This daemon takes leases (`SessionOpts::dir_leases`, and the store
    /// has a change stream to hear requests on).
    pub(super) enabled: bool,
}

impl Leases {
    pub(super) fn new(enabled: bool) -> Leases {
        Leases {
            st: Mutex::new(State::default()),
            cv: Condvar::new(),
            enabled,
        }
    }

    /// Wake the flusher and wait a little for the state to change (a
    /// commit, a release); the caller checks again.
    fn nudge<'a>(&self, st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.cv.notify_all();
        self.cv
            .wait_timeout(st, Duration::from_millis(50))
            .unwrap()
            .0
    }
}

/// What taking a lease came to.
enum Acquired {
    Took,
    /// Another daemon holds it.
    Other,
    /// Gone, too large to hold, or the store would not say.
    Not,
}

/// What a lookup in a held directory found without the store.
pub(super) enum Known {
    Absent,
    At(Ino),
}

/// The lost-session error, as `SharedFs::run` words it.
fn lost() -> Error {
    Error::Io("this mount's etcd session expired (cut off longer than its lease): remount".into())
}

impl SharedFs {
    /// Whether this daemon holds `dir`'s lease (for tests and `stats`).
    pub fn holds_lease(&self, dir: Ino) -> bool {
        self.holds(dir)
    }

    /// Whether the session surely lives: half its lease has not passed
    /// since the last renewal was sent. Only then is anything answered from
    /// memory (after it ends, another daemon could win what was answered).
    fn session_sure(&self) -> bool {
        self.renewed.lock().unwrap().elapsed() < self.ttl / 2
    }

    /// Whether this daemon holds `dir`'s lease.
    pub(super) fn holds(&self, dir: Ino) -> bool {
        self.leases.enabled && self.leases.st.lock().unwrap().held.contains_key(&dir)
    }

    /// A queued create's record (it is not in the store yet).
    pub(super) fn pending_node(&self, ino: Ino) -> Option<Node> {
        if !self.leases.enabled {
            return None;
        }
        self.leases.st.lock().unwrap().nodes.get(&ino).cloned()
    }

    /// Change, in memory, a node created from memory whose batch has not
    /// left yet (chmod, chown, times, a small file's bytes, a file's chunk
    /// table after its uploads): no other daemon can see it before that
    /// batch commits, and the batch carries the change. A crash loses the
    /// change with the create, a suffix as before. None: not queued (the
    /// caller runs a transaction). `f`'s error leaves the node unchanged.
    pub(super) fn amend_queued<T>(
        &self,
        ino: Ino,
        f: impl FnOnce(&mut Node) -> Result<T>,
    ) -> Option<Result<T>> {
        if !self.leases.enabled || self.lost.load(Ordering::Relaxed) {
            return None;
        }
        let mut st = self.leases.st.lock().unwrap();
        // Its record is here until its batch committed; it is still in the
        // queue until its batch left (then the batch has it encoded).
        if !st.nodes.contains_key(&ino)
            || !st.queue.iter().any(|p| p.ino == ino)
            || !self.session_sure()
        {
            return None;
        }
        let n = st.nodes.get_mut(&ino)?;
        let mut changed = n.clone();
        let r = f(&mut changed);
        if r.is_ok() {
            changed.attr.version += 1;
            *n = changed;
            self.stats.lease_amends.fetch_add(1, Ordering::Relaxed);
        }
        Some(r)
    }

    /// A name in a held directory, answered from the listing.
    pub(super) fn known(&self, dir: Ino, name: &[u8]) -> Option<Known> {
        if !self.leases.enabled {
            return None;
        }
        let st = self.leases.st.lock().unwrap();
        let h = st.held.get(&dir).filter(|h| !h.moved)?;
        Some(match h.names.get(name) {
            Some(&(ino, _)) => Known::At(ino),
            None => Known::Absent,
        })
    }

    /// Wait until every create acknowledged from memory is committed.
    pub(super) fn settle(&self) -> Result<()> {
        if !self.leases.enabled {
            return Ok(());
        }
        let since = Instant::now();
        let mut st = self.leases.st.lock().unwrap();
        while !st.queue.is_empty() || st.in_flight > 0 {
            st.urgent = true;
            if let Some(e) = &st.stalled {
                return Err(e.clone());
            }
            if self.lost.load(Ordering::Relaxed) {
                return Err(lost());
            }
            if since.elapsed() >= self.unavailable_wait {
                return Err(Error::Io(format!(
                    "the metadata store did not take this mount's {} queued creates for {:?}; the operation failed, and the mount carries on by itself when the store is back",
                    st.queue.len() + st.in_flight,
                    self.unavailable_wait
                )));
            }
            st = self.leases.nudge(st);
        }
        Ok(())
    }

    /// A create in `parent` answered from memory, if this daemon holds
    /// `parent`'s lease (or takes it now: after `STREAK` creates in a row
    /// there). None: run it as a transaction (counted for the streak).
    pub(super) fn lease_create(
        &self,
        parent: Ino,
        name: &[u8],
        ino: Ino,
        make: &dyn Fn(&Node, Ts) -> Node,
    ) -> Result<Option<Attr>> {
        if !self.leases.enabled || self.lost.load(Ordering::Relaxed) {
            return Ok(None);
        }
        // Waiting for another daemon's turn ends by this time at the
        // latest (its session ends by then if it froze).
        let deadline = Instant::now() + self.ttl * 2 + Duration::from_secs(5);
        let mut wanted = false;
        let mut asked: Option<Instant> = None;
        loop {
            let mut st = self.leases.st.lock().unwrap();
            while st.queue.len() >= MAX_QUEUE && st.stalled.is_none() {
                if st.queue.front().is_some_and(|p| p.at.elapsed() >= STALE) {
                    // The store does not keep up: by transaction (which
                    // waits for the queue, a bounded time).
                    return Ok(None);
                }
                st = self.leases.nudge(st);
                if self.lost.load(Ordering::Relaxed) {
                    return Err(lost());
                }
            }
            // Only while the session surely lives, and not while the store
            // does not keep up (unavailable, no quorum): then creates wait,
            // and fail after a bounded time, as every other operation does.
            let usable = st.stalled.is_none()
                && self.session_sure()
                && st.queue.front().is_none_or(|p| p.at.elapsed() < STALE);
            if let Some(h) = st.held.get_mut(&parent).filter(|h| !h.releasing && usable) {
                if h.names.contains_key(name) {
                    return Err(Error::Exists);
                }
                let t = Ts::now();
                let mut n = make(&h.dir, t);
                n.attr.version = 1;
                let kind = n.attr.kind;
                h.names.insert(name.to_vec(), (ino, kind));
                let attr = n.attr;
                st.nodes.insert(ino, n);
                st.queue.push_back(Pending {
                    dir: parent,
                    name: name.to_vec(),
                    ino,
                    kind,
                    t,
                    at: Instant::now(),
                });
                self.stats.lease_creates.fetch_add(1, Ordering::Relaxed);
                self.stats.ops.fetch_add(1, Ordering::Relaxed);
                self.leases.cv.notify_all();
                return Ok(Some(attr));
            }
            if !usable || st.held.contains_key(&parent) || Instant::now() > deadline {
                return Ok(None);
            }
            if st.acquiring.contains(&parent) {
                st = self.leases.nudge(st);
                drop(st);
                continue;
            }
            if !wanted {
                let streak = st.streak.entry(parent).or_default();
                *streak += 1;
                if *streak < STREAK {
                    return Ok(None);
                }
                *streak = 0;
                if st.streak.len() > 4096 {
                    st.streak.clear();
                }
                wanted = true;
            }
            match st.not_before.get(&parent).copied() {
                // Just given back to another daemon: let it take it first.
                Some(t) if t > Instant::now() && t - Instant::now() <= HANDOFF_GAP => {
                    drop(st);
                    std::thread::sleep(t - Instant::now());
                    continue;
                }
                Some(t) if t > Instant::now() => return Ok(None),
                _ => {}
            }
            st.acquiring.insert(parent);
            drop(st);
            let took = self.acquire(parent);
            self.leases.st.lock().unwrap().acquiring.remove(&parent);
            self.leases.cv.notify_all();
            match took? {
                Acquired::Took => {}
                Acquired::Not => return Ok(None),
                // Another daemon's turn: ask for it, wait until it is given
                // back (at the end of its slice), and take it.
                Acquired::Other => {
                    if asked.is_none_or(|t| t.elapsed() > Duration::from_millis(100)) {
                        self.request_lease(parent);
                        asked = Some(Instant::now());
                    }
                    self.wait_given_back(parent, deadline)?;
                }
            }
        }
    }

    /// Wait until no daemon holds `dir` (polling its key), up to `deadline`
    /// or 100 ms (the caller asks again).
    fn wait_given_back(&self, dir: Ino, deadline: Instant) -> Result<()> {
        let until = deadline.min(Instant::now() + Duration::from_millis(100));
        let mut pause = Duration::from_millis(1);
        while Instant::now() < until {
            if self.patient(|| self.store.get(&lkey(dir)))?.is_none() {
                return Ok(());
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(4));
        }
        Ok(())
    }

    /// A create of this daemon waited for another's lease on `dir`: take
    /// it at the next create there (the streak is shown).
    pub(super) fn want_lease(&self, dir: Ino) {
        if self.leases.enabled {
            self.leases
                .st
                .lock()
                .unwrap()
                .streak
                .insert(dir, STREAK - 1);
        }
    }

    /// Another operation of this daemon changes `dir`: no more creates in
    /// it are taken from memory.
    pub(super) fn not_streaking(&self, dir: Ino) {
        if self.leases.enabled {
            self.leases.st.lock().unwrap().streak.remove(&dir);
        }
    }

    /// Take `dir`'s lease and read its listing.
    fn acquire(&self, dir: Ino) -> Result<Acquired> {
        if self.pending_node(dir).is_some() {
            // Made from memory and not committed yet: its record must be
            // there to be read after the lease's commit.
            self.settle()?;
        }
        let conds = [Cond::Exists(skey(self.sid)), Cond::Absent(lkey(dir))];
        let ops = [Op::Put(
            lkey(dir),
            self.sid.to_le_bytes().to_vec(),
            Some(self.lease),
        )];
        let mut at = 0;
        let took = match self.store.commit(&conds, &ops) {
            Ok(Outcome::Committed(rev)) => {
                self.note_own(rev, &ops);
                at = rev;
                true
            }
            Ok(Outcome::Conflict(_)) => false,
            // Lost answer: it is ours if the key says so.
            Err(KvError::Unknown(_)) => self
                .patient(|| self.store.get(&lkey(dir)))?
                .is_some_and(|v| v.value == self.sid.to_le_bytes()),
            Err(_) => {
                self.not_before(dir, Duration::from_secs(1));
                return Ok(Acquired::Not);
            }
        };
        if !took {
            return Ok(Acquired::Other);
        }
        // The record and every entry, read after the lease's commit.
        let listing = (|| -> Result<Option<(Node, Names, super::Rev)>> {
            let Some(v) = self.patient(|| self.store.get(&ikey(dir)))? else {
                return Ok(None);
            };
            let node = Node::decode(dir, &v.value)?;
            if node.attr.kind != Kind::Dir {
                return Ok(None);
            }
            if let Some(names) = self.cold_listing(dir, at) {
                return Ok(Some((node, names, at)));
            }
            let (lo, hi) = erange(dir);
            let (kvs, rev) = self.patient(|| self.store.scan(&lo, &hi, MAX_LISTING + 1))?;
            self.stats
                .lease_listed
                .fetch_add(kvs.len() as u64, Ordering::Relaxed);
            if kvs.len() > MAX_LISTING {
                return Ok(None);
            }
            let mut names = HashMap::with_capacity(kvs.len());
            for (k, v) in kvs {
                names.insert(k[9..].to_vec(), super::ns::dec_entry(&v.value)?);
            }
            Ok(Some((node, names, if at > 0 { at } else { rev })))
        })();
        match listing {
            Ok(Some((node, names, at))) => {
                let mut st = self.leases.st.lock().unwrap();
                st.held.insert(
                    dir,
                    Held {
                        dir: node,
                        names,
                        releasing: false,
                        since: Instant::now(),
                        at,
                        moved: false,
                    },
                );
                self.stats.leases_taken.fetch_add(1, Ordering::Relaxed);
                Ok(Acquired::Took)
            }
            other => {
                // Not worth holding (gone, too large) or unreadable: give it back.
                self.delete_lease(dir)?;
                self.not_before(dir, BACKOFF_MAX);
                other.map(|_| Acquired::Not)
            }
        }
    }

    /// The listing kept since this daemon gave `dir` back, once the stream
    /// delivered every change up to `at` (the lease's commit: after it
    /// only this daemon changes the entries). None: read it whole.
    fn cold_listing(&self, dir: Ino, at: super::Rev) -> Option<Names> {
        let mut st = self.leases.st.lock().unwrap();
        if at == 0 {
            st.cold.remove(&dir);
            return None;
        }
        if !st.cold.contains_key(&dir) {
            return None;
        }
        let since = Instant::now();
        while st.following && st.seen < at && since.elapsed() < Duration::from_secs(1) {
            st = self
                .leases
                .cv
                .wait_timeout(st, Duration::from_millis(10))
                .unwrap()
                .0;
        }
        let c = st.cold.remove(&dir)?;
        (st.following && st.seen >= at).then_some(c.names)
    }

    /// What the stream delivered: requests for this daemon's leases, and
    /// changes to the entries of directories it gave back.
    pub(super) fn lease_events(&self, evs: &[super::Event]) {
        if !self.leases.enabled {
            return;
        }
        let mut st = self.leases.st.lock().unwrap();
        for e in evs {
            st.seen = st.seen.max(e.rev);
            match e.key.first() {
                // (A request of this daemon's own is a thread of it that
                // met the lease while another was taking it: ignored.)
                Some(b'R') if e.key.len() == 9 => {
                    let mine = e.value.as_deref() == Some(&self.sid.to_le_bytes()[..]);
                    if e.value.is_some() && !mine {
                        let dir = u64::from_be_bytes(e.key[1..9].try_into().unwrap());
                        st.asked_for(dir);
                    }
                }
                Some(b'E') if e.key.len() > 9 => {
                    let dir = u64::from_be_bytes(e.key[1..9].try_into().unwrap());
                    let Some(c) = st.cold.get_mut(&dir).filter(|c| e.rev > c.after) else {
                        continue;
                    };
                    let name = e.key[9..].to_vec();
                    match e.value.as_deref().map(super::ns::dec_entry) {
                        Some(Ok(v)) => {
                            c.names.insert(name, v);
                        }
                        None => {
                            c.names.remove(&name);
                        }
                        // Unreadable: read it whole next time.
                        Some(Err(_)) => {
                            st.cold.remove(&dir);
                        }
                    }
                }
                _ => {}
            }
        }
        self.leases.cv.notify_all();
    }

    fn not_before(&self, dir: Ino, d: Duration) {
        let mut st = self.leases.st.lock().unwrap();
        if st.not_before.len() > 4096 {
            st.not_before.clear();
        }
        st.not_before.insert(dir, Instant::now() + d);
    }

    /// Give `dir` back: commit the queue, then delete `L dir` (and any
    /// request for it). `asked`: another daemon wants it (let it take it
    /// first, then ask for it again at the next create here).
    pub(super) fn release_lease(&self, dir: Ino, asked: bool) -> Result<()> {
        {
            let mut st = self.leases.st.lock().unwrap();
            loop {
                match st.held.get_mut(&dir) {
                    None => return Ok(()),
                    Some(h) if !h.releasing => {
                        h.releasing = true;
                        // Counted before the delete commits: whoever waits
                        // for the lease may go on the moment it does.
                        self.stats.leases_given.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    // Another thread is giving it back: wait for it.
                    Some(_) => st = self.leases.nudge(st),
                }
            }
        }
        let r = self.settle().and_then(|()| {
            // The queue is committed: the listing is kept (before the
            // delete, so that the stream's changes after it land in it).
            self.keep_cold(dir);
            self.delete_lease(dir)
        });
        let mut st = self.leases.st.lock().unwrap();
        st.held.remove(&dir);
        st.due.remove(&dir);
        if r.is_err() {
            st.cold.remove(&dir);
        }
        if asked {
            st.streak.insert(dir, STREAK - 1);
        }
        self.leases.cv.notify_all();
        drop(st);
        if asked {
            self.not_before(dir, HANDOFF_GAP);
        }
        r
    }

    /// Keep a held directory's listing as a cold one, from its revision
    /// on (while the stream follows).
    fn keep_cold(&self, dir: Ino) {
        let mut st = self.leases.st.lock().unwrap();
        if !st.following {
            return;
        }
        let Some(h) = st.held.get_mut(&dir) else {
            return;
        };
        let names = std::mem::take(&mut h.names);
        let after = h.at;
        h.moved = true;
        if st.cold.len() >= MAX_COLD {
            let k = *st.cold.keys().next().unwrap();
            st.cold.remove(&k);
        }
        st.cold.insert(dir, Cold { names, after });
    }

    /// Delete `L dir` (and `R dir`).
    fn delete_lease(&self, dir: Ino) -> Result<()> {
        let since = Instant::now();
        loop {
            let ops = [Op::Delete(lkey(dir)), Op::Delete(rkey(dir))];
            match self.store.commit(&[Cond::Exists(skey(self.sid))], &ops) {
                Ok(Outcome::Committed(rev)) => {
                    self.note_own(rev, &ops);
                    return Ok(());
                }
                // The session is gone, and the lease with it.
                Ok(Outcome::Conflict(_)) => return Ok(()),
                // A delete applied twice is one delete.
                Err(KvError::Unknown(_)) => {}
                Err(KvError::Unavailable(m)) => self.wait_available(since, &m)?,
                Err(e) => return Err(Error::from(e)),
            }
        }
    }

    /// Ask the holder of `dir` to give it back (another daemon: this one's
    /// commit failed on its lease).
    pub(super) fn request_lease(&self, dir: Ino) {
        self.stats.lease_waits.fetch_add(1, Ordering::Relaxed);
        let op = Op::Put(rkey(dir), self.sid.to_le_bytes().to_vec(), Some(self.lease));
        if let Ok(Outcome::Committed(rev)) = self.store.commit(&[], std::slice::from_ref(&op)) {
            self.note_own(rev, &[op]);
        }
    }

    /// Give back every lease (unmount): the queue first.
    pub(super) fn release_all(&self) -> Result<()> {
        if !self.leases.enabled {
            return Ok(());
        }
        let dirs: Vec<Ino> = self
            .leases
            .st
            .lock()
            .unwrap()
            .held
            .keys()
            .copied()
            .collect();
        let mut first = self.settle();
        for d in dirs {
            let r = self.release_lease(d, false);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// One round of the flusher: wait for queued creates (up to `wait`),
    /// commit as many as one transaction takes.
    fn flush_round(&self, wait: Duration) {
        let mut st = self.leases.st.lock().unwrap();
        if st.queue.is_empty() {
            st = self.leases.cv.wait_timeout(st, wait).unwrap().0;
        }
        // Linger for a fuller batch (each commit costs every etcd member
        // CPU and a disk flush, whatever its size), unless someone waits.
        while let Some(age) = st.queue.front().map(|p| p.at.elapsed()) {
            if st.urgent || st.queue.len() >= FULL || age >= LINGER {
                break;
            }
            st = self.leases.cv.wait_timeout(st, LINGER - age).unwrap().0;
        }
        if st.queue.is_empty() || self.lost.load(Ordering::Relaxed) {
            st.urgent = false;
            return;
        }
        // One condition (the session) and per create two puts, per
        // directory one time: as many as the store's limit takes.
        let max = self.store.limits().max_ops;
        let mut ops = Vec::new();
        let mut times: HashMap<Ino, Ts> = HashMap::new();
        let mut n = 0;
        for p in st.queue.iter() {
            let more = 2 + usize::from(!times.contains_key(&p.dir));
            if 1 + ops.len() + times.len() + more > max {
                break;
            }
            let node = &st.nodes[&p.ino];
            ops.push(Op::Put(ikey(p.ino), node.encode(), None));
            ops.push(Op::Put(
                ekey(p.dir, &p.name),
                enc_entry(p.ino, p.kind),
                None,
            ));
            let t = times.entry(p.dir).or_insert(p.t);
            *t = (*t).max(p.t);
            n += 1;
        }
        for (dir, t) in &times {
            let mut v = t.sec.to_le_bytes().to_vec();
            v.extend_from_slice(&t.nsec.to_le_bytes());
            ops.push(Op::Put(tkey(*dir), v, None));
        }
        let batch: Vec<Pending> = st.queue.drain(..n).collect();
        st.in_flight = n;
        drop(st);
        let r = self.commit_batch(&ops);
        let mut st = self.leases.st.lock().unwrap();
        st.in_flight = 0;
        match r {
            Ok(()) => {
                st.stalled = None;
                if st.queue.is_empty() {
                    st.urgent = false;
                }
                for p in &batch {
                    st.nodes.remove(&p.ino);
                }
                self.stats.lease_batches.fetch_add(1, Ordering::Relaxed);
            }
            Err(Error::NoSpace) => {
                // Kept, in order, for the next round: the way out is the
                // store's (etcd: compact, defragment, a larger quota).
                for p in batch.into_iter().rev() {
                    st.queue.push_front(p);
                }
                st.stalled = Some(Error::NoSpace);
            }
            Err(e) => {
                tracing::error!(
                    "{} creates acknowledged from memory could not be committed ({e}): this mount's session is lost, remount",
                    batch.len() + st.queue.len()
                );
                self.lost.store(true, Ordering::SeqCst);
                st.queue.clear();
                st.nodes.clear();
                st.held.clear();
            }
        }
        self.leases.cv.notify_all();
    }

    /// Commit one batch of queued creates; waits out an unavailable store
    /// (the creates are acknowledged: they must not be dropped while the
    /// session lives).
    fn commit_batch(&self, ops: &[Op]) -> Result<()> {
        let conds = [Cond::Exists(skey(self.sid))];
        loop {
            if self.lost.load(Ordering::Relaxed) {
                return Err(lost());
            }
            match self.store.commit(&conds, ops) {
                Ok(Outcome::Committed(rev)) => {
                    self.stats.commits.fetch_add(1, Ordering::Relaxed);
                    self.note_own(rev, ops);
                    return Ok(());
                }
                Ok(Outcome::Conflict(_)) => {
                    self.lost.store(true, Ordering::SeqCst);
                    return Err(lost());
                }
                Err(KvError::Unknown(_)) => {
                    self.stats.unknown.fetch_add(1, Ordering::Relaxed);
                    self.cache.unsure(ops);
                    // Read back; a store that cannot answer that is tried
                    // again (the creates are acknowledged: never dropped
                    // while the session may live).
                    match self.applied(ops) {
                        Ok(true) => return Ok(()),
                        Ok(false) => {}
                        Err(e) => {
                            tracing::warn!("reading back a batch of creates: {e}; trying again");
                        }
                    }
                }
                Err(KvError::NoSpace) => {
                    std::thread::sleep(Duration::from_millis(500));
                    return Err(Error::NoSpace);
                }
                Err(e) => {
                    tracing::warn!("committing acknowledged creates: {e}; trying again");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }

    /// How long the stream may wait for changes before a requested
    /// directory's slice ends (`release_due`).
    pub(super) fn lease_wait(&self) -> Duration {
        let st = self.leases.st.lock().unwrap();
        let now = Instant::now();
        st.due
            .values()
            .map(|t| t.saturating_duration_since(now))
            .min()
            .unwrap_or(Duration::from_millis(200))
    }

    /// Give back each requested directory whose slice has ended.
    pub(super) fn release_due(&self) -> Result<()> {
        let now = Instant::now();
        let due: Vec<Ino> = {
            let st = self.leases.st.lock().unwrap();
            st.due
                .iter()
                .filter(|(_, t)| **t <= now)
                .map(|(d, _)| *d)
                .collect()
        };
        for dir in due {
            self.release_lease(dir, true)?;
        }
        Ok(())
    }

    /// The change stream follows from after revision `at` (`super::stream`):
    /// listings kept before missed some changes (dropped); requests made
    /// while no stream followed are answered.
    pub(super) fn lease_stream_from(&self, at: super::Rev) {
        if !self.leases.enabled {
            return;
        }
        let held: Vec<Ino> = {
            let mut st = self.leases.st.lock().unwrap();
            st.cold.clear();
            st.following = true;
            st.seen = at;
            st.held.keys().copied().collect()
        };
        for d in held {
            if let Ok(Some(v)) = self.store.get(&rkey(d)) {
                if v.value != self.sid.to_le_bytes() {
                    self.leases.st.lock().unwrap().asked_for(d);
                }
            }
        }
    }

    /// The change stream broke: no listing is kept until it follows again.
    pub(super) fn lease_stream_lost(&self) {
        let mut st = self.leases.st.lock().unwrap();
        st.following = false;
        st.cold.clear();
    }

    /// Start the flusher; it ends when the daemon does. (Requests for
    /// leases come by the change stream: `super::stream`.)
    pub(super) fn start_leases(fs: &Arc<SharedFs>) {
        if !fs.leases.enabled {
            return;
        }
        let weak: Weak<SharedFs> = Arc::downgrade(fs);
        std::thread::Builder::new()
            .name("shoal-lease-flush".into())
            .spawn(move || loop {
                let Some(fs) = weak.upgrade() else { return };
                if fs.stop.load(Ordering::Relaxed) && fs.leases.st.lock().unwrap().queue.is_empty()
                {
                    return;
                }
                fs.flush_round(Duration::from_millis(100));
            })
            .expect("spawn lease flusher");
    }
}
