//! Directory leases: one daemon acknowledges creates in a directory from
//! memory and commits them in batches, as the embedded engine does, while
//! no other daemon can change that directory's entries (issue 24's lever
//! for creates on etcd; docs/design.md, "Directory leases").
//!
//! **The lease.** A directory's names are cut into ranges by split points
//! (`P dir`; none: one range). A key `L dir lo` holding the daemon's
//! session, put on its session's lease by a commit that requires it absent
//! and `P dir` unchanged, leases the range from `lo`. Every transaction of
//! any daemon that writes an entry of `dir`, its record, or depends on its
//! emptiness requires no `L dir *` at all ([`super::ns::Tx`]'s guard); the
//! holder's batches of queued creates write only in its ranges. So from
//! the lease's commit until `L dir lo` goes, the range's entries change only
//! by the holder.
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
//! **Giving it back, in turns.** The holder releases its ranges of a
//! directory when one of its own operations would change the directory
//! other than by a create (after committing the queue), and when another
//! daemon asks: a daemon whose commit failed on a lease puts `R dir` with
//! the name it wants and goes to take that name's range; the holder
//! follows the change stream and, at the end of its 100 ms slice, commits
//! its queue and deletes `L dir lo` and `R dir` in one transaction.
//!
//! **Splitting.** If all of the holder's own creates in the range sort on
//! one side of the asked name, it splits the range there instead
//! (`split_lease`) and keeps its side: two mounts creating apart in one
//! directory both answer from memory.
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

use super::ns::{
    ekey, enc_entry, erange, ikey, lkey_at, lrange, okey, pkey, rkey, skey, tkey, ClusterFs, Node,
};
use super::{Cond, KvError, Op, Outcome, Versioned};
use shoal_core::error::{Error, Result};
use shoal_core::rules;
use shoal_core::sync::{Condvar, PlainMutex, PlainMutexGuard};
use shoal_core::types::{Attr, Ctx, Ino, Kind, Ts};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
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

/// A name range of a directory this daemon holds.
struct Held {
    /// The range: names from `lo` up to `hi` (None: every name after).
    lo: Vec<u8>,
    hi: Option<Vec<u8>>,
    /// The directory's record when the lease was taken (a create inherits
    /// its setgid group; nobody else can change it while held).
    dir: Node,
    /// Every entry in the range: the store's at the lease plus this
    /// daemon's creates.
    names: Names,
    /// The least and greatest name this daemon created here from memory
    /// since it took the range (where to split it: `split_lease`).
    own: Option<(Vec<u8>, Vec<u8>)>,
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

impl Held {
    fn contains(&self, name: &[u8]) -> bool {
        in_range(name, &self.lo, self.hi.as_deref())
    }
}

fn in_range(name: &[u8], lo: &[u8], hi: Option<&[u8]>) -> bool {
    name >= lo && hi.is_none_or(|h| name < h)
}

/// A directory's split points (`P dir`), in order: each begins a range
/// (the first range begins at the empty name).
fn dec_splits(v: Option<&[u8]>) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut v = v.unwrap_or_default();
    while !v.is_empty() {
        let n = *v.first().unwrap() as usize;
        if v.len() < 1 + n || n == 0 {
            return Err(Error::Corrupted("a directory's split points".into()));
        }
        out.push(v[1..1 + n].to_vec());
        v = &v[1 + n..];
    }
    Ok(out)
}

fn enc_splits(splits: &[Vec<u8>]) -> Vec<u8> {
    let mut v = Vec::new();
    for s in splits {
        v.push(s.len() as u8);
        v.extend_from_slice(s);
    }
    v
}

/// The range `name` falls in: its first name and the next range's.
fn range_of(splits: &[Vec<u8>], name: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
    let i = splits.partition_point(|s| s.as_slice() <= name);
    let lo = if i == 0 {
        Vec::new()
    } else {
        splits[i - 1].clone()
    };
    (lo, splits.get(i).cloned())
}

/// The shortest name `s` with `a < s <= b` (`a < b`): `b` cut just past
/// where it first differs from `a`. Names `2m1p-0-K` below and `2m1p-1-K`
/// above split at `2m1p-1`, so every later name of either side stays on it.
fn between(a: &[u8], b: &[u8]) -> Vec<u8> {
    let k = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    b[..(k + 1).min(b.len())].to_vec()
}

/// The listing of a directory's range this daemon gave back, kept
/// current from the change stream, so that taking it again reads only
/// the record.
struct Cold {
    /// The range it is exact for (the stream's changes to names outside
    /// it are applied too, and ignored when it is used).
    lo: Vec<u8>,
    hi: Option<Vec<u8>>,
    names: Names,
    /// The revision `names` was exact at (taken then, or read then): the
    /// stream's changes after it are applied to it.
    after: super::Rev,
}

/// Cold listings kept, at most.
const MAX_COLD: usize = 16;
/// Split points a directory gets, at most (then its ranges take turns).
const MAX_SPLITS: usize = 64;

/// Another daemon asked for a range: given back, or split, at `at`.
struct Due {
    at: Instant,
    /// The name it wants (empty: the whole directory).
    wanted: Vec<u8>,
}

/// What a queued change is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PendOp {
    /// `name` made, naming the new inode `ino` (its record in `nodes`).
    Create,
    /// `name` (naming `ino`, not a directory) removed: its inode's change
    /// is computed on its record as it is when the batch commits.
    Unlink,
    /// `name` (the empty directory `ino`, whose only range this daemon
    /// held) removed, with the directory's keys and its lease.
    Rmdir,
}

/// A create, unlink or rmdir acknowledged from memory.
struct Pending {
    op: PendOp,
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
    /// Per directory, the ranges held.
    held: HashMap<Ino, Vec<Held>>,
    queue: VecDeque<Pending>,
    /// Records of the queued (and in-flight) creates.
    nodes: HashMap<Ino, Node>,
    /// Creates being committed now, and the directories they change.
    in_flight: usize,
    in_flight_dirs: HashSet<Ino>,
    /// Batches sent so far: a stat that subtracts queued unlinks from a
    /// record it read checks no batch was sent meanwhile
    /// (`unlinks_settled`).
    batches: u64,
    /// Transactional creates in a row per directory (for taking a lease).
    streak: HashMap<Ino, u32>,
    /// Not taken again before this.
    not_before: HashMap<Ino, Instant>,
    /// Ranges (directory, first name) asked for by another daemon: given
    /// back or split at the end of their slice.
    due: HashMap<(Ino, Vec<u8>), Due>,
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
    /// Per directory, the time of its latest create from memory: its
    /// stat shows it before the batch carrying it commits (a stat right
    /// after a create showed the directory's old mtime; xfstests
    /// generic/003 on etcd).
    dir_times: HashMap<Ino, Ts>,
    /// Per inode, its names removed from memory and not committed yet:
    /// its stat shows that many links less.
    unlinked: HashMap<Ino, u32>,
}

impl State {
    /// Another daemon asked for `wanted` in `dir` (empty: all of it): the
    /// ranges it names are due at the end of their slice.
    fn asked_for(&mut self, dir: Ino, wanted: &[u8]) {
        let Some(hs) = self.held.get(&dir) else {
            return;
        };
        for h in hs {
            if !wanted.is_empty() && !h.contains(wanted) {
                continue;
            }
            let d = self.due.entry((dir, h.lo.clone())).or_insert(Due {
                at: h.since + SLICE,
                wanted: wanted.to_vec(),
            });
            // Asked for all of it: given back, not split.
            if wanted.is_empty() {
                d.wanted.clear();
            }
        }
    }

    /// The range of `dir` held that `name` falls in.
    fn range(&self, dir: Ino, name: &[u8]) -> Option<&Held> {
        self.held.get(&dir)?.iter().find(|h| h.contains(name))
    }
    fn range_mut(&mut self, dir: Ino, name: &[u8]) -> Option<&mut Held> {
        self.held
            .get_mut(&dir)?
            .iter_mut()
            .find(|h| h.contains(name))
    }
    /// The range of `dir` held from `lo`.
    fn at_lo(&mut self, dir: Ino, lo: &[u8]) -> Option<&mut Held> {
        self.held.get_mut(&dir)?.iter_mut().find(|h| h.lo == lo)
    }
    fn remove(&mut self, dir: Ino, lo: &[u8]) {
        if let Some(hs) = self.held.get_mut(&dir) {
            hs.retain(|h| h.lo != lo);
            if hs.is_empty() {
                self.held.remove(&dir);
            }
        }
    }
}

/// The daemon's leases and its queue of creates acknowledged from memory.
pub(super) struct DirLeases {
    st: PlainMutex<State>,
    cv: Condvar,
    /// This daemon takes leases (`SessionOpts::dir_leases`, and the store
    /// has a change stream to hear requests on).
    pub(super) enabled: bool,
}

impl DirLeases {
    pub(super) fn new(enabled: bool) -> DirLeases {
        DirLeases {
            st: PlainMutex::new(State::default()),
            cv: Condvar::new(),
            enabled,
        }
    }

    /// Wait a little for the state to change (a commit, a release: whoever
    /// makes one notifies); the caller checks again. Waiters do not wake
    /// each other: two threads that each notified before waiting woke one
    /// another without end (two workers on a full queue: 5,000-8,800
    /// creates/s in process against 11,000-13,600 for one).
    fn wait<'a>(&self, mut st: PlainMutexGuard<'a, State>) -> PlainMutexGuard<'a, State> {
        self.cv.wait_for(&mut st, Duration::from_millis(50));
        st
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

/// The keys a queued change writes (besides its directory's time), at
/// most: a batch never holds two changes of one key.
fn touched(sid: u64, p: &Pending) -> Vec<Vec<u8>> {
    match p.op {
        PendOp::Create => vec![ikey(p.ino), ekey(p.dir, &p.name)],
        PendOp::Unlink => vec![ikey(p.ino), ekey(p.dir, &p.name), okey(sid, p.ino)],
        PendOp::Rmdir => vec![
            ekey(p.dir, &p.name),
            ikey(p.ino),
            tkey(p.ino),
            pkey(p.ino),
            lkey_at(p.ino, b""),
            rkey(p.ino),
        ],
    }
}

/// The lost-session error, as `ClusterFs::run` words it.
fn lost() -> Error {
    Error::Io("this mount's etcd session expired (cut off longer than its lease): remount".into())
}

impl ClusterFs {
    /// Whether this daemon holds `dir`'s lease (for tests and `stats`).
    pub fn holds_lease(&self, dir: Ino) -> bool {
        self.holds(dir)
    }

    /// Whether the session surely lives: half its lease has not passed
    /// since the last renewal was sent. Only then is anything answered from
    /// memory (after it ends, another daemon could win what was answered).
    pub(super) fn session_sure(&self) -> bool {
        self.renewed.lock().elapsed() < self.ttl / 2
    }

    /// Whether this daemon holds a lease on any of `dir`'s ranges.
    pub(super) fn holds(&self, dir: Ino) -> bool {
        self.leases.enabled && self.leases.st.lock().held.contains_key(&dir)
    }

    /// Whether this daemon holds the lease on the range of `dir` that
    /// `name` falls in.
    pub(super) fn holds_name(&self, dir: Ino, name: &[u8]) -> bool {
        self.leases.enabled && self.leases.st.lock().range(dir, name).is_some()
    }

    /// A queued create's record (it is not in the store yet).
    /// The time of the latest create from memory in `dir`, if any: a
    /// directory's mtime and ctime are at least this (the batch that
    /// carries it writes it to `T dir`).
    pub(super) fn pending_dir_time(&self, dir: Ino) -> Option<Ts> {
        if !self.leases.enabled {
            return None;
        }
        self.leases.st.lock().dir_times.get(&dir).copied()
    }

    /// Forget `dir`'s latest create from memory (its batches committed,
    /// and a setattr set its times since).
    pub(super) fn forget_dir_time(&self, dir: Ino) {
        if self.leases.enabled {
            self.leases.st.lock().dir_times.remove(&dir);
        }
    }

    pub(super) fn pending_node(&self, ino: Ino) -> Option<Node> {
        if !self.leases.enabled {
            return None;
        }
        self.leases.st.lock().nodes.get(&ino).cloned()
    }

    /// `pending_node` as a stat sees it: less the names of it removed from
    /// memory since (queued behind its create), read under one lock.
    pub(super) fn pending_seen(&self, ino: Ino) -> Option<Node> {
        if !self.leases.enabled {
            return None;
        }
        let st = self.leases.st.lock();
        let mut n = st.nodes.get(&ino).cloned()?;
        let gone = st.unlinked.get(&ino).copied().unwrap_or(0);
        n.attr.nlink = n.attr.nlink.saturating_sub(gone);
        Some(n)
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
        let mut st = self.leases.st.lock();
        // Its record is here until its batch committed; it is still in the
        // queue until its batch left (then the batch has it encoded).
        if !st.nodes.contains_key(&ino)
            || !st
                .queue
                .iter()
                .any(|p| p.ino == ino && p.op == PendOp::Create)
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
        let st = self.leases.st.lock();
        let h = st.range(dir, name).filter(|h| !h.moved)?;
        Some(match h.names.get(name) {
            Some(&(ino, _)) => Known::At(ino),
            None => Known::Absent,
        })
    }

    /// Wait until every create acknowledged from memory is committed.
    pub(super) fn settle(&self) -> Result<()> {
        self.settle_where(|_| true)
    }

    /// `settle` for the changes of entries of `dirs` only: what a listing
    /// of one of them, or an rmdir, rests on. The queue's changes in other
    /// directories stay queued (rm -rf committed each directory's unlinks
    /// apart, at its next getdents, instead of in the flusher's batches).
    pub(super) fn settle_dirs(&self, dirs: &[Ino]) -> Result<()> {
        self.settle_where(|d| dirs.contains(&d))
    }

    fn settle_where(&self, dir: impl Fn(Ino) -> bool) -> Result<()> {
        if !self.leases.enabled {
            return Ok(());
        }
        let since = Instant::now();
        let mut st = self.leases.st.lock();
        let mut woke = false;
        while st.queue.iter().any(|p| dir(p.dir))
            || (st.in_flight > 0 && st.in_flight_dirs.iter().any(|&d| dir(d)))
        {
            st.urgent = true;
            if !woke {
                // The flusher may be lingering for a fuller batch.
                self.leases.cv.notify_all();
                woke = true;
            }
            if let Some(e) = &st.stalled {
                return Err(e.clone());
            }
            if self.lost.load(Ordering::Relaxed) {
                return Err(lost());
            }
            if since.elapsed() >= self.unavailable_wait {
                return Err(self.not_taken(&st));
            }
            st = self.leases.wait(st);
        }
        Ok(())
    }

    /// Directory leases held now (directories, name ranges) and the
    /// creates acknowledged from memory and not yet committed (what a
    /// kill -9 would lose): for `shoal stats` and the metrics.
    pub fn leases_held(&self) -> (usize, usize, usize) {
        let st = self.leases.st.lock();
        let ranges = st.held.values().map(Vec::len).sum();
        (st.held.len(), ranges, st.queue.len() + st.in_flight)
    }

    /// The queue waited `unavailable_wait` for the store: the error.
    fn not_taken(&self, st: &State) -> Error {
        Error::Io(format!(
            "the metadata store did not take this mount's {} queued creates for {:?}; the operation failed, {}",
            st.queue.len() + st.in_flight,
            self.unavailable_wait,
            self.way_back()
        ))
    }

    /// A create in `parent` answered from memory, if this daemon holds
    /// `parent`'s lease (or takes it now: after `STREAK` creates in a row
    /// there). None: run it as a transaction (counted for the streak).
    pub(super) fn lease_create(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        ino: Ino,
        make: &dyn Fn(&Node, Ts) -> Result<Node>,
    ) -> Result<Option<Attr>> {
        if !self.leases.enabled || self.lost.load(Ordering::Relaxed) {
            return Ok(None);
        }
        // Waiting for another daemon's turn ends by this time at the
        // latest (its session ends by then if it froze).
        let started = Instant::now();
        let deadline = started + self.ttl * 2 + Duration::from_secs(5);
        let mut wanted = false;
        let mut asked: Option<Instant> = None;
        loop {
            let mut st = self.leases.st.lock();
            while st.queue.len() >= MAX_QUEUE && st.stalled.is_none() {
                // The store does not keep up: by transaction (which waits
                // for the queue, a bounded time); in a range held here, wait
                // for the queue here as long (a transaction would give back
                // every range of the directory held here).
                let held = st.range(parent, name).is_some_and(|h| !h.releasing);
                if held && started.elapsed() >= self.unavailable_wait {
                    return Err(self.not_taken(&st));
                }
                if !held && st.queue.front().is_some_and(|p| p.at.elapsed() >= STALE) {
                    return Ok(None);
                }
                st = self.leases.wait(st);
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
            if let Some(h) = st
                .range_mut(parent, name)
                .filter(|h| !h.releasing && usable)
            {
                // Search on the directory before the name's test, as Linux
                // (docs/rules.md, the order of the checks).
                rules::perm::access(ctx, &h.dir.attr, rules::perm::X_OK)?;
                if h.names.contains_key(name) {
                    return Err(Error::Exists);
                }
                let t = Ts::now();
                let mut n = make(&h.dir, t)?;
                n.attr.version = 1;
                let kind = n.attr.kind;
                h.names.insert(name.to_vec(), (ino, kind));
                match &mut h.own {
                    None => h.own = Some((name.to_vec(), name.to_vec())),
                    Some((least, _)) if name < least.as_slice() => *least = name.to_vec(),
                    Some((_, most)) if name > most.as_slice() => *most = name.to_vec(),
                    Some(_) => {}
                }
                let attr = n.attr;
                st.nodes.insert(ino, n);
                if st.dir_times.len() > 4096 {
                    st.dir_times.clear();
                }
                let dt = st.dir_times.entry(parent).or_insert(t);
                *dt = (*dt).max(t);
                st.queue.push_back(Pending {
                    op: PendOp::Create,
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
            // Held, and the queue behind (a busy store): wait for it, up
            // to the bound any operation waits for an unavailable store
            // (a transaction would give back every range held here).
            if !usable
                && st.stalled.is_none()
                && self.session_sure()
                && st.range(parent, name).is_some_and(|h| !h.releasing)
            {
                if started.elapsed() >= self.unavailable_wait {
                    return Err(self.not_taken(&st));
                }
                st = self.leases.wait(st);
                drop(st);
                continue;
            }
            if !usable || Instant::now() > deadline {
                return Ok(None);
            }
            if st.range(parent, name).is_some() {
                // Being given back by another thread: once it is gone,
                // take it again (after the asker), rather than a
                // transaction, which would give back every range of the
                // directory held here.
                st = self.leases.wait(st);
                drop(st);
                continue;
            }
            if st.acquiring.contains(&parent) {
                st = self.leases.wait(st);
                drop(st);
                continue;
            }
            // A daemon holding a range of the directory takes the range of
            // a name outside it at once (a transaction would give back
            // what it holds).
            if !wanted && st.held.contains_key(&parent) {
                wanted = true;
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
            let took = self.acquire(parent, name);
            self.leases.st.lock().acquiring.remove(&parent);
            self.leases.cv.notify_all();
            match took? {
                Acquired::Took => {}
                Acquired::Not => return Ok(None),
                // Another daemon's turn: ask for it, wait until it is given
                // back (at the end of its slice), and take it.
                Acquired::Other => {
                    if asked.is_none_or(|t| t.elapsed() > Duration::from_millis(100)) {
                        self.request_lease(parent, name);
                        asked = Some(Instant::now());
                    }
                    self.wait_given_back(parent, name, deadline)?;
                }
            }
        }
    }

    /// Before a stat reads `ino`'s record to subtract its queued unlinks
    /// (`queued_unlinks_since`): None when it has none (nothing to
    /// subtract); else, once no batch is in flight (whose commit changes
    /// the record before the count drops: a file of two names showed
    /// none for a moment), the batches sent so far.
    pub(super) fn unlinks_settled(&self, ino: Ino) -> Option<u64> {
        if !self.leases.enabled {
            return None;
        }
        let mut st = self.leases.st.lock();
        loop {
            if !st.unlinked.contains_key(&ino) {
                return None;
            }
            if st.in_flight == 0 || self.lost.load(Ordering::Relaxed) {
                return Some(st.batches);
            }
            st = self.leases.wait(st);
        }
    }

    /// `ino`'s queued unlinks, if no batch was sent since `unlinks_settled`
    /// said `since` (the record read in between matches the count); None:
    /// read the record again.
    pub(super) fn queued_unlinks_since(&self, ino: Ino, since: u64) -> Option<u32> {
        let st = self.leases.st.lock();
        (st.batches == since && st.in_flight == 0)
            .then(|| st.unlinked.get(&ino).copied().unwrap_or(0))
    }

    /// Whether this daemon holds the range of `parent` that `name` falls
    /// in, or takes it now for a removal (after `STREAK` changes in a row
    /// there, as creates do: rm -rf). False: run it as a transaction.
    fn removal_lease(&self, parent: Ino, name: &[u8]) -> Result<bool> {
        let mut st = self.leases.st.lock();
        if st.range(parent, name).is_some() {
            return Ok(true);
        }
        if st.acquiring.contains(&parent) || !self.session_sure() || st.stalled.is_some() {
            return Ok(false);
        }
        // A daemon holding another range of the directory takes this one
        // at once (a transaction would give back what it holds).
        if !st.held.contains_key(&parent) {
            let streak = st.streak.entry(parent).or_default();
            *streak += 1;
            if *streak < STREAK {
                return Ok(false);
            }
            *streak = 0;
        }
        if st
            .not_before
            .get(&parent)
            .is_some_and(|&t| t > Instant::now())
        {
            return Ok(false);
        }
        st.acquiring.insert(parent);
        drop(st);
        let took = self.acquire(parent, name);
        self.leases.st.lock().acquiring.remove(&parent);
        self.leases.cv.notify_all();
        Ok(matches!(took?, Acquired::Took))
    }

    /// The range of `parent` holding `name`, if it answers from memory
    /// now (held, not being given back, the session sure, the queue
    /// keeping up); waits for room in a full queue, as creates do.
    fn removal_range<'a>(
        &self,
        mut st: PlainMutexGuard<'a, State>,
        parent: Ino,
        name: &[u8],
    ) -> Result<Option<PlainMutexGuard<'a, State>>> {
        let started = Instant::now();
        while st.queue.len() >= MAX_QUEUE && st.stalled.is_none() {
            if started.elapsed() >= self.unavailable_wait {
                return Err(self.not_taken(&st));
            }
            st = self.leases.wait(st);
            if self.lost.load(Ordering::Relaxed) {
                return Err(lost());
            }
        }
        let usable = st.stalled.is_none()
            && self.session_sure()
            && st.queue.front().is_none_or(|p| p.at.elapsed() < STALE);
        let held = st
            .range(parent, name)
            .is_some_and(|h| !h.releasing && !h.moved);
        Ok((usable && held).then_some(st))
    }

    /// An unlink in a range of `parent` this daemon holds, answered from
    /// memory and queued (docs/design.md, "Unlinks and rmdirs under the
    /// lease"), after the rules the transaction applies
    /// (`super::ns::may_remove_name`): the directory's record as leased, the
    /// file's as queued here, as the record cache knows it, or read. False:
    /// not held; run it as a transaction.
    pub(super) fn lease_unlink(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<bool> {
        if !self.leases.enabled || self.lost.load(Ordering::Relaxed) {
            return Ok(false);
        }
        if !self.removal_lease(parent, name)? {
            return Ok(false);
        }
        // The file's record, read outside the lock when not queued here:
        // then the name must still name it.
        let mut read: Option<Node> = None;
        loop {
            let Some(mut st) = self.removal_range(self.leases.st.lock(), parent, name)? else {
                return Ok(false);
            };
            let h = st.range(parent, name).unwrap();
            let (ino, kind) = match h.names.get(name) {
                None => return Err(Error::NotFound),
                Some(&(_, Kind::Dir)) => return Err(Error::IsDir),
                Some(&e) => e,
            };
            let n = match st.nodes.get(&ino) {
                Some(n) => n.clone(),
                None => match read.take().filter(|n| n.attr.ino == ino) {
                    Some(n) => n,
                    None => {
                        drop(st);
                        read = Some(self.removal_node(ino)?);
                        continue;
                    }
                },
            };
            super::ns::may_remove_name(ctx, &h.dir, &n)?;
            st.range_mut(parent, name).unwrap().names.remove(name);
            self.queue_removal(&mut st, PendOp::Unlink, parent, name, ino, kind);
            *st.unlinked.entry(ino).or_default() += 1;
            return Ok(true);
        }
    }

    fn queue_removal(
        &self,
        st: &mut State,
        op: PendOp,
        parent: Ino,
        name: &[u8],
        ino: Ino,
        kind: Kind,
    ) {
        let t = Ts::now();
        if st.dir_times.len() > 4096 {
            st.dir_times.clear();
        }
        let dt = st.dir_times.entry(parent).or_insert(t);
        *dt = (*dt).max(t);
        st.queue.push_back(Pending {
            op,
            dir: parent,
            name: name.to_vec(),
            ino,
            kind,
            t,
            at: Instant::now(),
        });
        self.stats.lease_removals.fetch_add(1, Ordering::Relaxed);
        self.stats.ops.fetch_add(1, Ordering::Relaxed);
        self.leases.cv.notify_all();
    }

    /// An rmdir in a range of `parent` this daemon holds: from memory if
    /// it also holds the child's only range and knows it empty, else
    /// committed now under the parent's lease. False: not held; run it
    /// as a transaction.
    pub(super) fn lease_rmdir(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<bool> {
        if !self.leases.enabled || self.lost.load(Ordering::Relaxed) {
            return Ok(false);
        }
        if !self.removal_lease(parent, name)? {
            return Ok(false);
        }
        let Some(mut st) = self.removal_range(self.leases.st.lock(), parent, name)? else {
            return Ok(false);
        };
        let h = st.range(parent, name).unwrap();
        let child = match h.names.get(name) {
            None => return Err(Error::NotFound),
            Some(&(ino, Kind::Dir)) => ino,
            Some(_) => return Err(Error::NotDir),
        };
        let whole = st.held.get(&child).filter(|hs| {
            hs.len() == 1
                && hs[0].lo.is_empty()
                && hs[0].hi.is_none()
                && !hs[0].releasing
                && !hs[0].moved
                && hs[0].names.is_empty()
        });
        if let Some(hs) = whole {
            // The rules on both records as leased here.
            super::ns::may_remove_name(ctx, &h.dir, &hs[0].dir)?;
            // Its lease answers nothing more; the batch deletes it.
            st.held.remove(&child);
            st.cold.remove(&child);
            st.due.retain(|(d, _), _| *d != child);
            st.range_mut(parent, name).unwrap().names.remove(name);
            self.queue_removal(&mut st, PendOp::Rmdir, parent, name, child, Kind::Dir);
            return Ok(true);
        }
        drop(st);
        self.rmdir_under_lease(ctx, parent, name, child)
    }

    /// Commit the rmdir of `parent`'s `name` (directory `child`) now,
    /// keeping the parent's lease: after the queue, requiring this
    /// daemon's lease on the name's range, the child empty and unleased,
    /// the entry and the child's record as read. False: the range was
    /// given back meanwhile (run it as a transaction).
    fn rmdir_under_lease(&self, ctx: &Ctx, parent: Ino, name: &[u8], child: Ino) -> Result<bool> {
        // The child's queued unlinks (it is found empty in the store), and
        // the parent's changes (the entry is required as read).
        self.settle_dirs(&[parent, child])?;
        let since = Instant::now();
        let mut asked: Option<Instant> = None;
        let mut pause = Duration::from_micros(200);
        let mut guessing = true;
        loop {
            let (lo, dir) = {
                let st = self.leases.st.lock();
                match st.range(parent, name).filter(|h| !h.releasing && !h.moved) {
                    Some(h) => (h.lo.clone(), h.dir.clone()),
                    None => return Ok(false),
                }
            };
            // The two records as the record cache knows them on the first
            // try (rm -rf looked the directory up), required at the
            // revisions they were written at: a stale guess fails the
            // commit, and the next try reads them.
            let keys = [ikey(child), ekey(parent, name)];
            let known: Option<Vec<Option<Versioned>>> = keys
                .iter()
                .map(|k| {
                    guessing
                        .then(|| self.cache.versioned(k))
                        .flatten()
                        .map(Some)
                })
                .collect();
            guessing = false;
            let guessed = known.is_some();
            let vs = match known {
                Some(vs) => {
                    self.stats.guesses.fetch_add(2, Ordering::Relaxed);
                    vs
                }
                None => {
                    self.stats.reads.fetch_add(2, Ordering::Relaxed);
                    self.patient(|| self.store.get_many(&keys))?.0
                }
            };
            if vs[1].is_none() {
                return Err(Error::NotFound);
            }
            // The rules on the child's record as read (the commit requires
            // it) and the directory's as leased.
            let n = vs[0].as_ref().ok_or(Error::NotFound)?;
            let may = Node::decode(child, &n.value)
                .and_then(|n| super::ns::may_remove_name(ctx, &dir, &n));
            match may {
                // A refusal rests on records read, not guessed.
                Err(_) if guessed => continue,
                other => other?,
            }
            // Empty is the commit's condition (4): no scan before it.
            let (from, to) = erange(child);
            let (llo, lhi) = lrange(child);
            let conds = [
                Cond::Exists(skey(self.sid)),
                Cond::Exists(lkey_at(parent, &lo)),
                Cond::as_read(ikey(child), &vs[0]),
                Cond::as_read(ekey(parent, name), &vs[1]),
                Cond::Empty(from, to),
                Cond::Empty(llo, lhi),
            ];
            let t = Ts::now();
            let mut tv = t.sec.to_le_bytes().to_vec();
            tv.extend_from_slice(&t.nsec.to_le_bytes());
            let ops = [
                Op::Delete(ekey(parent, name)),
                Op::Delete(ikey(child)),
                Op::Delete(tkey(child)),
                Op::Delete(pkey(child)),
                Op::Put(tkey(parent), tv, None),
            ];
            let done = match self.store.commit(&conds, &ops) {
                Ok(Outcome::Committed(rev)) => {
                    self.note_own(rev, &ops);
                    true
                }
                Ok(Outcome::Conflict(failed)) => {
                    if failed.contains(&0) {
                        self.lost.store(true, Ordering::SeqCst);
                        return Err(lost());
                    }
                    if failed.contains(&1) {
                        return Ok(false);
                    }
                    if failed.contains(&4) {
                        // Entries there at the commit: the answer rests on
                        // it, whatever else failed.
                        return Err(Error::NotEmpty);
                    }
                    if failed.contains(&5) {
                        // Another daemon leases the child: ask for it back.
                        if asked.is_none_or(|t| t.elapsed() > Duration::from_millis(100)) {
                            self.request_lease(child, b"");
                            asked = Some(Instant::now());
                        }
                        if since.elapsed() > self.ttl * 2 + Duration::from_secs(5) {
                            return Err(Error::Io(format!(
                                "another mount holds directory {child} and did not give it back within {:?}: try again",
                                self.ttl * 2
                            )));
                        }
                    } else {
                        self.stats.conflicts.fetch_add(1, Ordering::Relaxed);
                    }
                    false
                }
                Err(KvError::Unknown(_)) => {
                    self.cache.unsure(&ops);
                    self.applied(&ops)?
                }
                Err(KvError::Unavailable(m)) => {
                    self.wait_available(since, &m)?;
                    false
                }
                Err(e) => return Err(Error::from(e)),
            };
            if done {
                self.stats.commits.fetch_add(1, Ordering::Relaxed);
                self.stats.ops.fetch_add(1, Ordering::Relaxed);
                let mut st = self.leases.st.lock();
                if let Some(h) = st.range_mut(parent, name) {
                    if h.names.get(name).is_some_and(|&(i, _)| i == child) {
                        h.names.remove(name);
                    }
                }
                let dt = st.dir_times.entry(parent).or_insert(t);
                *dt = (*dt).max(t);
                return Ok(true);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        }
    }

    /// `P dir` as it is in the store, and the split points it holds.
    fn read_splits(&self, dir: Ino) -> Result<(Option<super::Versioned>, Vec<Vec<u8>>)> {
        let p = self.patient(|| self.store.get(&pkey(dir)))?;
        let splits = dec_splits(p.as_ref().map(|v| &v.value[..]))?;
        Ok((p, splits))
    }

    /// Wait until no daemon holds the range of `dir` that `name` falls in
    /// (polling its split points and its lease: the holder may have given
    /// it back, or split it and kept the other side), up to `deadline` or
    /// 100 ms (the caller asks again).
    fn wait_given_back(&self, dir: Ino, name: &[u8], deadline: Instant) -> Result<()> {
        let until = deadline.min(Instant::now() + Duration::from_millis(100));
        let mut pause = Duration::from_millis(1);
        while Instant::now() < until {
            let (lo, _) = range_of(&self.read_splits(dir)?.1, name);
            if self
                .patient(|| self.store.get(&lkey_at(dir, &lo)))?
                .is_none()
            {
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
            self.leases.st.lock().streak.insert(dir, STREAK - 1);
        }
    }

    /// Another operation of this daemon changes `dir`: no more creates in
    /// it are taken from memory.
    pub(super) fn not_streaking(&self, dir: Ino) {
        if self.leases.enabled {
            self.leases.st.lock().streak.remove(&dir);
        }
    }

    /// Take the lease on the range of `dir` that `name` falls in, and read
    /// the range's listing.
    fn acquire(&self, dir: Ino, name: &[u8]) -> Result<Acquired> {
        if self.pending_node(dir).is_some() {
            // Made from memory and not committed yet: its record must be
            // there to be read after the lease's commit.
            self.settle()?;
        }
        let mut at = 0;
        let mut tries = 0;
        let (lo, hi) = loop {
            tries += 1;
            // The split points as they are; the lease's commit requires
            // them unchanged, so the range it takes is one of today's.
            let (p, splits) = self.read_splits(dir)?;
            let (lo, hi) = range_of(&splits, name);
            let conds = [
                Cond::Exists(skey(self.sid)),
                Cond::Absent(lkey_at(dir, &lo)),
                Cond::as_read(pkey(dir), &p),
            ];
            let ops = [Op::Put(
                lkey_at(dir, &lo),
                self.sid.to_le_bytes().to_vec(),
                Some(self.lease),
            )];
            let took = match self.store.commit(&conds, &ops) {
                Ok(Outcome::Committed(rev)) => {
                    self.note_own(rev, &ops);
                    at = rev;
                    true
                }
                // Split meanwhile: look again.
                Ok(Outcome::Conflict(failed)) if failed.contains(&2) && tries < 10 => continue,
                Ok(Outcome::Conflict(_)) => false,
                // Lost answer: it is ours if the key says so.
                Err(KvError::Unknown(_)) => self
                    .patient(|| self.store.get(&lkey_at(dir, &lo)))?
                    .is_some_and(|v| v.value == self.sid.to_le_bytes()),
                Err(_) => {
                    self.not_before(dir, Duration::from_secs(1));
                    return Ok(Acquired::Not);
                }
            };
            if !took {
                return Ok(Acquired::Other);
            }
            break (lo, hi);
        };
        // The record and every entry of the range, read after the lease's
        // commit.
        let listing = (|| -> Result<Option<(Node, Names, super::Rev)>> {
            let Some(v) = self.patient(|| self.store.get(&ikey(dir)))? else {
                return Ok(None);
            };
            let node = Node::decode(dir, &v.value)?;
            if node.attr.kind != Kind::Dir {
                return Ok(None);
            }
            if let Some(names) = self.cold_listing(dir, &lo, hi.as_deref(), at) {
                return Ok(Some((node, names, at)));
            }
            let from = ekey(dir, &lo);
            let to = match &hi {
                Some(h) => ekey(dir, h),
                None => erange(dir).1,
            };
            let (kvs, rev) = self.patient(|| self.store.scan(&from, &to, MAX_LISTING + 1))?;
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
                let mut st = self.leases.st.lock();
                st.held.entry(dir).or_default().push(Held {
                    lo,
                    hi,
                    dir: node,
                    names,
                    own: None,
                    releasing: false,
                    since: Instant::now(),
                    at,
                    moved: false,
                });
                self.stats.leases_taken.fetch_add(1, Ordering::Relaxed);
                Ok(Acquired::Took)
            }
            other => {
                // Not worth holding (gone, too large) or unreadable: give it back.
                self.delete_lease(dir, &lo)?;
                self.not_before(dir, BACKOFF_MAX);
                other.map(|_| Acquired::Not)
            }
        }
    }

    /// The listing of `[lo, hi)` kept since this daemon gave `dir` back
    /// (if it covered that range), once the stream delivered every change
    /// up to `at` (the lease's commit: after it only this daemon changes
    /// the range's entries). None: read it whole.
    fn cold_listing(
        &self,
        dir: Ino,
        lo: &[u8],
        hi: Option<&[u8]>,
        at: super::Rev,
    ) -> Option<Names> {
        let mut st = self.leases.st.lock();
        if at == 0 {
            st.cold.remove(&dir);
            return None;
        }
        let covers = st.cold.get(&dir).is_some_and(|c| {
            c.lo.as_slice() <= lo
                && match (&c.hi, hi) {
                    (None, _) => true,
                    (Some(ch), Some(h)) => h <= ch.as_slice(),
                    (Some(_), None) => false,
                }
        });
        if !covers {
            return None;
        }
        let since = Instant::now();
        while st.following && st.seen < at && since.elapsed() < Duration::from_secs(1) {
            self.leases.cv.wait_for(&mut st, Duration::from_millis(10));
        }
        let mut c = st.cold.remove(&dir)?;
        c.names.retain(|n, _| in_range(n, lo, hi));
        (st.following && st.seen >= at).then_some(c.names)
    }

    /// What the stream delivered: requests for this daemon's leases, and
    /// changes to the entries of directories it gave back.
    pub(super) fn lease_events(&self, evs: &[super::Event]) {
        self.lock_lease_events(evs);
        if !self.leases.enabled {
            return;
        }
        let mut st = self.leases.st.lock();
        for e in evs {
            st.seen = st.seen.max(e.rev);
            match e.key.first() {
                // (A request of this daemon's own is a thread of it that
                // met the lease while another was taking it: ignored.)
                Some(b'R') if e.key.len() == 9 => {
                    let Some(v) = e.value.as_deref().filter(|v| v.len() >= 8) else {
                        continue;
                    };
                    if v[..8] != self.sid.to_le_bytes() {
                        let dir = u64::from_be_bytes(e.key[1..9].try_into().unwrap());
                        st.asked_for(dir, &v[8..]);
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
        let mut st = self.leases.st.lock();
        if st.not_before.len() > 4096 {
            st.not_before.clear();
        }
        st.not_before.insert(dir, Instant::now() + d);
    }

    /// Give back this daemon's ranges of `dir` (`lo`: the one from `lo`;
    /// None: all). `asked`: another daemon wants the name given (empty:
    /// the whole directory); a range whose own creates all sort on one
    /// side of that name is split instead (`split_lease`), else given
    /// back and taken again at the next create here, after the asker.
    pub(super) fn release_lease(
        &self,
        dir: Ino,
        lo: Option<&[u8]>,
        asked: Option<&[u8]>,
    ) -> Result<()> {
        let los: Vec<Vec<u8>> = {
            let st = self.leases.st.lock();
            let Some(hs) = st.held.get(&dir) else {
                return Ok(());
            };
            hs.iter()
                .filter(|h| lo.is_none_or(|l| h.lo == l))
                .map(|h| h.lo.clone())
                .collect()
        };
        let mut first = Ok(());
        for lo in los {
            if let Some(w) = asked.filter(|w| !w.is_empty()) {
                match self.split_lease(dir, &lo, w) {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(e) => tracing::warn!("splitting a directory's lease: {e}; giving it back"),
                }
            }
            let r = self.give_back(dir, &lo, asked.is_some());
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Give back the range of `dir` from `lo`: commit the queue, then
    /// delete its lease (and any request for the directory).
    fn give_back(&self, dir: Ino, lo: &[u8], asked: bool) -> Result<()> {
        {
            let mut st = self.leases.st.lock();
            loop {
                match st.at_lo(dir, lo) {
                    None => return Ok(()),
                    Some(h) if !h.releasing => {
                        h.releasing = true;
                        // Counted before the delete commits: whoever waits
                        // for the lease may go on the moment it does.
                        self.stats.leases_given.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    // Another thread is giving it back: wait for it.
                    Some(_) => st = self.leases.wait(st),
                }
            }
        }
        let r = self.settle().and_then(|()| {
            // The queue is committed: the listing is kept (before the
            // delete, so that the stream's changes after it land in it).
            self.keep_cold(dir, lo);
            self.delete_lease(dir, lo)
        });
        let mut st = self.leases.st.lock();
        st.remove(dir, lo);
        st.due.remove(&(dir, lo.to_vec()));
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

    /// Another daemon wants `wanted` in the range of `dir` from `lo`. If
    /// every create this daemon made there from memory sorts below it (or
    /// above), split the range between them: one commit adds a split point
    /// to `P dir` and leaves this daemon the side of its own creates, so
    /// the asker can take the other while both answer from memory. False:
    /// names interleave (or nothing to go by): give it back instead.
    ///
    /// Why it is safe: no queued create of this daemon lies on the side
    /// given up (its own creates are all on the other side, and from the
    /// moment the range is narrowed here, under the state's lock, creates
    /// from memory are answered only on the kept side); the commit
    /// requires this daemon's lease on the whole range and the split
    /// points unchanged, so the ranges stay disjoint and cover every name.
    fn split_lease(&self, dir: Ino, lo: &[u8], wanted: &[u8]) -> Result<bool> {
        // Narrow the range in memory first (its listing keeps the names
        // past the new bound until the split commits: nothing looks them
        // up in this range any more).
        let (s, upper, old_hi) = {
            let mut st = self.leases.st.lock();
            let Some(h) = st
                .at_lo(dir, lo)
                .filter(|h| !h.releasing && h.contains(wanted))
            else {
                return Ok(false);
            };
            let Some((min, max)) = h.own.clone() else {
                return Ok(false);
            };
            let (s, upper) = if max.as_slice() < wanted {
                (between(&max, wanted), false)
            } else if min.as_slice() > wanted {
                (between(wanted, &min), true)
            } else {
                return Ok(false);
            };
            if s.len() > 255 {
                return Ok(false);
            }
            let old_hi = h.hi.clone();
            if upper {
                h.lo = s.clone();
            } else {
                h.hi = Some(s.clone());
            }
            st.due.remove(&(dir, lo.to_vec()));
            (s, upper, old_hi)
        };
        let r = self.commit_split(dir, lo, &s, upper);
        let kept = if upper { s.clone() } else { lo.to_vec() };
        let mut st = self.leases.st.lock();
        let Some(h) = st.at_lo(dir, &kept) else {
            return r.map(|_| false);
        };
        if !matches!(r, Ok(true)) {
            // Not split: the store has the whole range held; so does
            // memory again (the caller gives it back).
            h.lo = lo.to_vec();
            h.hi = old_hi;
            return r.map(|_| false);
        }
        let (l, hi) = (h.lo.clone(), h.hi.clone());
        h.names.retain(|n, _| in_range(n, &l, hi.as_deref()));
        h.since = Instant::now();
        self.stats.lease_splits.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// The split's commit: `s` into `P dir`; if this daemon keeps the
    /// upper side, its lease moves from `L dir lo` to `L dir s`.
    fn commit_split(&self, dir: Ino, lo: &[u8], s: &[u8], upper: bool) -> Result<bool> {
        let since = Instant::now();
        for _ in 0..10 {
            let (p, mut splits) = self.read_splits(dir)?;
            if splits.len() >= MAX_SPLITS {
                return Ok(false);
            }
            let i = splits.partition_point(|x| x.as_slice() < s);
            if splits.get(i).is_some_and(|x| x == s) {
                return Ok(false);
            }
            splits.insert(i, s.to_vec());
            let mut conds = vec![
                Cond::Exists(skey(self.sid)),
                Cond::Exists(lkey_at(dir, lo)),
                Cond::as_read(pkey(dir), &p),
            ];
            let mut ops = vec![
                Op::Put(pkey(dir), enc_splits(&splits), None),
                Op::Delete(rkey(dir)),
            ];
            if upper {
                conds.push(Cond::Absent(lkey_at(dir, s)));
                ops.push(Op::Delete(lkey_at(dir, lo)));
                ops.push(Op::Put(
                    lkey_at(dir, s),
                    self.sid.to_le_bytes().to_vec(),
                    Some(self.lease),
                ));
            }
            match self.store.commit(&conds, &ops) {
                Ok(Outcome::Committed(rev)) => {
                    self.note_own(rev, &ops);
                    return Ok(true);
                }
                // Another range of this directory split meanwhile.
                Ok(Outcome::Conflict(failed)) if failed == [2] => continue,
                Ok(Outcome::Conflict(_)) => return Ok(false),
                // Lost answer: applied if `P dir` has the split point.
                Err(KvError::Unknown(_)) => {
                    return Ok(self.read_splits(dir)?.1.iter().any(|x| x == s));
                }
                Err(KvError::Unavailable(m)) => self.wait_available(since, &m)?,
                Err(e) => return Err(Error::from(e)),
            }
        }
        Ok(false)
    }

    /// Keep a held range's listing as the directory's cold one, from its
    /// revision on (while the stream follows).
    fn keep_cold(&self, dir: Ino, lo: &[u8]) {
        let mut st = self.leases.st.lock();
        if !st.following {
            return;
        }
        let Some(h) = st.at_lo(dir, lo) else {
            return;
        };
        let names = std::mem::take(&mut h.names);
        let after = h.at;
        let hi = h.hi.clone();
        h.moved = true;
        if st.cold.len() >= MAX_COLD {
            let k = *st.cold.keys().next().unwrap();
            st.cold.remove(&k);
        }
        st.cold.insert(
            dir,
            Cold {
                lo: lo.to_vec(),
                hi,
                names,
                after,
            },
        );
    }

    /// Delete the lease on `dir`'s range from `lo` (and `R dir`).
    fn delete_lease(&self, dir: Ino, lo: &[u8]) -> Result<()> {
        let since = Instant::now();
        loop {
            let ops = [Op::Delete(lkey_at(dir, lo)), Op::Delete(rkey(dir))];
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

    /// Ask the holder of the range of `dir` that `wanted` falls in (empty:
    /// every holder of `dir`) to give it back or split it (this daemon's
    /// commit failed on another's lease).
    pub(super) fn request_lease(&self, dir: Ino, wanted: &[u8]) {
        self.stats.lease_waits.fetch_add(1, Ordering::Relaxed);
        let mut v = self.sid.to_le_bytes().to_vec();
        v.extend_from_slice(wanted);
        let op = Op::Put(rkey(dir), v, Some(self.lease));
        if let Ok(Outcome::Committed(rev)) = self.store.commit(&[], std::slice::from_ref(&op)) {
            self.note_own(rev, &[op]);
        }
    }

    /// Give back every lease (unmount): the queue first.
    pub(super) fn release_all(&self) -> Result<()> {
        if !self.leases.enabled {
            return Ok(());
        }
        let dirs: Vec<Ino> = self.leases.st.lock().held.keys().copied().collect();
        let mut first = self.settle();
        for d in dirs {
            let r = self.release_lease(d, None, None);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// One round of the flusher: wait for queued creates (up to `wait`),
    /// commit as many as one transaction takes.
    fn flush_round(&self, wait: Duration) {
        let mut st = self.leases.st.lock();
        if st.queue.is_empty() {
            self.leases.cv.wait_for(&mut st, wait);
        }
        // Linger for a fuller batch (each commit costs every etcd member
        // CPU and a disk flush, whatever its size), unless someone waits.
        while let Some(age) = st.queue.front().map(|p| p.at.elapsed()) {
            if st.urgent || st.queue.len() >= FULL || age >= LINGER {
                break;
            }
            self.leases.cv.wait_for(&mut st, LINGER - age);
        }
        if st.queue.is_empty() || self.lost.load(Ordering::Relaxed) {
            st.urgent = false;
            return;
        }
        // A batch: the queue in order, as many as one transaction takes,
        // ending before a change that touches a key an earlier one of the
        // batch touched (etcd refuses a key twice in one transaction).
        let max = self.store.limits().max_ops;
        let mut keys: HashSet<Vec<u8>> = HashSet::new();
        let mut dirs: HashSet<Ino> = HashSet::new();
        // Names an unlink of the batch removed and nothing put back yet: a
        // create of one of them joins the batch, its entry the only write
        // of that key (`commit_queued` drops the unlink's delete). SQLite
        // unlinks its rollback journal at the end of a transaction and
        // creates it again at the start of the next: one commit, not two.
        let mut freed: HashSet<Vec<u8>> = HashSet::new();
        let (mut nops, mut nconds, mut n) = (0, 1, 0);
        for p in st.queue.iter() {
            let its = touched(self.sid, p);
            let new_dir = usize::from(!dirs.contains(&p.dir));
            let cond = usize::from(p.op == PendOp::Unlink);
            let entry = ekey(p.dir, &p.name);
            let refills = p.op == PendOp::Create && freed.contains(&entry);
            // (The store's limit counts conditions and operations together.)
            if n > 0
                && (nops + its.len() + dirs.len() + new_dir + nconds + cond > max
                    || its
                        .iter()
                        .any(|k| keys.contains(k) && !(refills && *k == entry)))
            {
                break;
            }
            match p.op {
                PendOp::Unlink => {
                    freed.insert(entry);
                }
                _ => {
                    freed.remove(&entry);
                }
            }
            nops += its.len();
            keys.extend(its);
            dirs.insert(p.dir);
            nconds += cond;
            n += 1;
        }
        let batch: Vec<Pending> = st.queue.drain(..n).collect();
        let nodes: HashMap<Ino, Vec<u8>> = batch
            .iter()
            .filter(|p| p.op == PendOp::Create)
            .map(|p| (p.ino, st.nodes[&p.ino].encode()))
            .collect();
        st.in_flight = n;
        st.in_flight_dirs = dirs;
        st.batches += 1;
        drop(st);
        let r = self.commit_queued(&batch, &nodes);
        let mut st = self.leases.st.lock();
        st.in_flight = 0;
        st.in_flight_dirs.clear();
        match r {
            Ok(()) => {
                st.stalled = None;
                if st.queue.is_empty() {
                    st.urgent = false;
                }
                for p in &batch {
                    match p.op {
                        PendOp::Create => {
                            st.nodes.remove(&p.ino);
                        }
                        PendOp::Unlink => {
                            if let Some(c) = st.unlinked.get_mut(&p.ino) {
                                *c -= 1;
                                if *c == 0 {
                                    st.unlinked.remove(&p.ino);
                                }
                            }
                        }
                        PendOp::Rmdir => {}
                    }
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
                    "{} changes acknowledged from memory could not be committed ({e}): this mount's session is lost, remount",
                    batch.len() + st.queue.len()
                );
                self.lost.store(true, Ordering::SeqCst);
                st.queue.clear();
                st.nodes.clear();
                st.held.clear();
                st.unlinked.clear();
            }
        }
        self.leases.cv.notify_all();
    }

    /// Commit one batch of queued changes; waits out an unavailable store
    /// (they are acknowledged: they must not be dropped while the session
    /// lives). An unlink's inode is changed as a transactional unlink
    /// would change it, on its record read here, which the commit requires
    /// unchanged; if another daemon changed one meanwhile, the records are
    /// read again and the whole batch committed again (docs/design.md,
    /// "Unlinks and rmdirs under the lease").
    fn commit_queued(&self, batch: &[Pending], nodes: &HashMap<Ino, Vec<u8>>) -> Result<()> {
        let mut guessing = true;
        loop {
            if self.lost.load(Ordering::Relaxed) {
                return Err(lost());
            }
            let unlinked: Vec<Vec<u8>> = batch
                .iter()
                .filter(|p| p.op == PendOp::Unlink)
                .map(|p| ikey(p.ino))
                .collect();
            // On the first try, the records as the record cache knows them
            // (a file just looked up, or committed by this daemon: a
            // database's journal, each file rm -rf stats first), each
            // required at the revision it was written at, as a read's
            // would be: a stale one fails the commit, and the next try
            // reads them all.
            let known: Option<Vec<Option<Versioned>>> = if guessing && !unlinked.is_empty() {
                unlinked
                    .iter()
                    .map(|k| self.cache.versioned(k).map(Some))
                    .collect()
            } else {
                None
            };
            guessing = false;
            let records = if unlinked.is_empty() {
                Vec::new()
            } else if let Some(known) = known {
                self.stats
                    .guesses
                    .fetch_add(known.len() as u64, Ordering::Relaxed);
                known
            } else {
                self.stats.reads.fetch_add(1, Ordering::Relaxed);
                match self.patient(|| self.store.get_many(&unlinked)) {
                    Ok((vs, _)) => vs,
                    Err(e) => {
                        tracing::warn!("reading the records of queued unlinks: {e}; trying again");
                        std::thread::sleep(Duration::from_millis(200));
                        continue;
                    }
                }
            };
            let mut records = records.into_iter();
            // Entries a create of the batch puts: an unlink of the same
            // name before it in the batch (`flush_round` lets only that
            // pair share a key) leaves the key to the create's put.
            let put_again: HashSet<Vec<u8>> = batch
                .iter()
                .filter(|p| p.op == PendOp::Create)
                .map(|p| ekey(p.dir, &p.name))
                .collect();
            let mut conds = vec![Cond::Exists(skey(self.sid))];
            let mut ops = Vec::new();
            let mut doomed = Vec::new();
            let mut later = Vec::new();
            let mut times: HashMap<Ino, Ts> = HashMap::new();
            let removed: HashSet<Ino> = batch
                .iter()
                .filter(|p| p.op == PendOp::Rmdir)
                .map(|p| p.ino)
                .collect();
            for p in batch {
                match p.op {
                    PendOp::Create => {
                        ops.push(Op::Put(ikey(p.ino), nodes[&p.ino].clone(), None));
                        ops.push(Op::Put(
                            ekey(p.dir, &p.name),
                            enc_entry(p.ino, p.kind),
                            None,
                        ));
                    }
                    PendOp::Unlink => {
                        let entry = ekey(p.dir, &p.name);
                        if !put_again.contains(&entry) {
                            ops.push(Op::Delete(entry));
                        }
                        let v = records.next().flatten();
                        conds.push(Cond::as_read(ikey(p.ino), &v));
                        let Some(v) = v else { continue };
                        match Node::decode(p.ino, &v.value)
                            .and_then(|mut n| self.unlink_ops(&mut n))
                        {
                            Ok((o, d, l)) => {
                                ops.extend(o);
                                doomed.extend(d);
                                later.extend(l);
                            }
                            Err(e) => tracing::warn!(
                                "inode {} of a queued unlink: {e}; its name goes, the inode stays for fsck",
                                p.ino
                            ),
                        }
                    }
                    PendOp::Rmdir => {
                        ops.push(Op::Delete(ekey(p.dir, &p.name)));
                        ops.push(Op::Delete(ikey(p.ino)));
                        ops.push(Op::Delete(tkey(p.ino)));
                        ops.push(Op::Delete(pkey(p.ino)));
                        ops.push(Op::Delete(lkey_at(p.ino, b"")));
                        ops.push(Op::Delete(rkey(p.ino)));
                    }
                }
                if !removed.contains(&p.dir) {
                    let t = times.entry(p.dir).or_insert(p.t);
                    *t = (*t).max(p.t);
                }
            }
            for (dir, t) in &times {
                let mut v = t.sec.to_le_bytes().to_vec();
                v.extend_from_slice(&t.nsec.to_le_bytes());
                ops.push(Op::Put(tkey(*dir), v, None));
            }
            let after = || {
                for name in &doomed {
                    self.delete_object(name);
                }
                for &ino in &later {
                    self.remove_after_grace(ino);
                }
            };
            match self.store.commit(&conds, &ops) {
                Ok(Outcome::Committed(rev)) => {
                    self.stats.commits.fetch_add(1, Ordering::Relaxed);
                    self.note_own(rev, &ops);
                    after();
                    return Ok(());
                }
                Ok(Outcome::Conflict(failed)) if failed.contains(&0) => {
                    self.lost.store(true, Ordering::SeqCst);
                    return Err(lost());
                }
                // An unlinked inode changed since it was read: again.
                Ok(Outcome::Conflict(_)) => {
                    self.stats.conflicts.fetch_add(1, Ordering::Relaxed);
                }
                Err(KvError::Unknown(_)) => {
                    self.stats.unknown.fetch_add(1, Ordering::Relaxed);
                    self.cache.unsure(&ops);
                    // Read back; a store that cannot answer that is tried
                    // again (acknowledged: never dropped while the session
                    // may live).
                    match self.applied(&ops) {
                        Ok(true) => {
                            after();
                            return Ok(());
                        }
                        Ok(false) => {}
                        Err(e) => {
                            tracing::warn!(
                                "reading back a batch of queued changes: {e}; trying again"
                            );
                        }
                    }
                }
                Err(KvError::NoSpace) => {
                    std::thread::sleep(Duration::from_millis(500));
                    return Err(Error::NoSpace);
                }
                Err(e) => {
                    tracing::warn!("committing acknowledged changes: {e}; trying again");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }

    /// How long the stream may wait for changes before a requested
    /// directory's slice ends (`release_due`).
    pub(super) fn lease_wait(&self) -> Duration {
        let st = self.leases.st.lock();
        let now = Instant::now();
        st.due
            .values()
            .map(|d| d.at.saturating_duration_since(now))
            .min()
            .unwrap_or(Duration::from_millis(200))
            .min(self.lock_lease_wait())
    }

    /// Give back each requested directory whose slice has ended.
    pub(super) fn release_due(&self) -> Result<()> {
        self.give_back_due_locks();
        let now = Instant::now();
        let due: Vec<(Ino, Vec<u8>, Vec<u8>)> = {
            let st = self.leases.st.lock();
            st.due
                .iter()
                .filter(|(_, d)| d.at <= now)
                .map(|((dir, lo), d)| (*dir, lo.clone(), d.wanted.clone()))
                .collect()
        };
        for (dir, lo, wanted) in due {
            self.leases.st.lock().due.remove(&(dir, lo.clone()));
            self.release_lease(dir, Some(&lo), Some(&wanted))?;
        }
        Ok(())
    }

    /// The change stream follows from after revision `at` (`super::change_stream`):
    /// listings kept before missed some changes (dropped); requests made
    /// while no stream followed are answered.
    pub(super) fn lease_stream_from(&self, at: super::Rev) {
        if !self.leases.enabled {
            return;
        }
        let held: Vec<Ino> = {
            let mut st = self.leases.st.lock();
            st.cold.clear();
            st.following = true;
            st.seen = at;
            st.held.keys().copied().collect()
        };
        for d in held {
            if let Ok(Some(v)) = self.store.get(&rkey(d)) {
                if v.value.len() >= 8 && v.value[..8] != self.sid.to_le_bytes() {
                    self.leases.st.lock().asked_for(d, &v.value[8..]);
                }
            }
        }
    }

    /// The change stream broke: no listing is kept until it follows again.
    pub(super) fn lease_stream_lost(&self) {
        let mut st = self.leases.st.lock();
        st.following = false;
        st.cold.clear();
    }

    /// Start the flusher; it ends when the daemon does. (Requests for
    /// leases come by the change stream: `super::change_stream`.)
    pub(super) fn start_leases(fs: &Arc<ClusterFs>) {
        if !fs.leases.enabled {
            return;
        }
        let weak: Weak<ClusterFs> = Arc::downgrade(fs);
        std::thread::Builder::new()
            .name("shoal-lease-flush".into())
            .spawn(move || loop {
                let Some(fs) = weak.upgrade() else { return };
                if fs.stop.load(Ordering::Relaxed) && fs.leases.st.lock().queue.is_empty() {
                    return;
                }
                fs.flush_round(Duration::from_millis(100));
            })
            .expect("spawn lease flusher");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_point_between_two_names_is_short_and_between_them() {
        for (a, b, s) in [
            (&b"2m1p-0-999"[..], &b"2m1p-1-5"[..], &b"2m1p-1"[..]),
            (b"a", b"ab", b"ab"),
            (b"a99", b"b0", b"b"),
            (b"", b"x", b"x"),
        ] {
            let got = between(a, b);
            assert_eq!(got, s);
            assert!(a < got.as_slice() && got.as_slice() <= b);
        }
    }

    #[test]
    fn every_name_falls_in_exactly_one_range() {
        let splits = vec![b"g".to_vec(), b"m".to_vec(), b"t".to_vec()];
        assert_eq!(dec_splits(Some(&enc_splits(&splits))).unwrap(), splits);
        assert_eq!(dec_splits(None).unwrap(), Vec::<Vec<u8>>::new());
        assert!(dec_splits(Some(&[5, b'a'])).is_err());
        for name in [&b""[..], b"a", b"g", b"gz", b"m", b"s", b"t", b"zz"] {
            let (lo, hi) = range_of(&splits, name);
            assert!(in_range(name, &lo, hi.as_deref()), "{name:?}");
            let los = [&b""[..], b"g", b"m", b"t"];
            let n = los
                .iter()
                .enumerate()
                .filter(|(i, l)| in_range(name, l, los.get(i + 1).copied()))
                .count();
            assert_eq!(n, 1);
        }
        assert_eq!(
            range_of(&splits, b"h"),
            (b"g".to_vec(), Some(b"m".to_vec()))
        );
        assert_eq!(range_of(&splits, b"a"), (vec![], Some(b"g".to_vec())));
        assert_eq!(range_of(&splits, b"u"), (b"t".to_vec(), None));
    }
}
