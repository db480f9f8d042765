//! The transaction loop: one operation's reads (its conditions) and writes
//! (`Tx`), run again on a conflict, committed with one conditional commit
//! (`ClusterFs::run_at`), a lost answer resolved by reading back.

use super::filedata::Piece;
use super::{Cond, KvError, Op, Outcome, Rev, Versioned};
use shoal_core::error::{Again, Error, Result};
use shoal_core::types::{Ino, Kind, Ts};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::keys::{dec_entry, ekey, enc_entry, erange, ikey, lrange, skey, tkey};
use crate::ns::{ClusterFs, Node};

/// Retries of one operation before it gives up with EIO.
pub(crate) const MAX_TRIES: u32 = 200;

/// One operation's reads (its conditions) and writes.
pub struct Tx<'a> {
    pub(super) fs: &'a ClusterFs,
    pub(super) conds: Vec<Cond>,
    /// Read keys -> the version seen (0 = absent), so a key read twice is one condition.
    pub(super) seen: HashMap<Vec<u8>, u64>,
    pub(super) ops: Vec<Op>,
    /// Objects this transaction stops naming: deleted once it committed.
    pub(super) doomed: Vec<String>,
    /// Inodes whose last name this transaction removes while another
    /// daemon may have them open: removed after the grace, once it committed.
    pub(super) later: Vec<Ino>,
    /// A create: it counts towards taking its directory's lease, where
    /// any other change of the directory counts against.
    pub(super) creating: bool,
    /// A create that, meeting another daemon's lease, asks for the range
    /// of this name and goes to take it (`mknod_in`); None: asks for the
    /// whole directory back and waits.
    pub(super) want: Option<Vec<u8>>,
    /// Round trips that read the conditions (`get`, `get_many`,
    /// `require_empty`); `untracked`: a condition came from elsewhere
    /// (a scan of the caller's). Reads of one round trip are one
    /// snapshot; any more must be checked together (`ClusterFs::run_at`).
    pub(super) trips: u32,
    pub(super) untracked: bool,
    /// Whether `node_known` may take a record from the record cache: on
    /// the first try only (a conflict may mean the guess was stale, and
    /// the tries after it read the store).
    pub(super) guessing: bool,
}

/// An entry found and the inode it names: (inode number, kind, record).
type Named = (Ino, Kind, Node);

impl Tx<'_> {
    /// Read a key; the commit requires it unchanged.
    pub fn get(&mut self, key: Vec<u8>) -> Result<Option<Versioned>> {
        // Creates acknowledged from memory commit first: this operation
        // reads after them, and commits after them.
        self.fs.settle()?;
        self.fs.stats.reads.fetch_add(1, Ordering::Relaxed);
        let v = self.fs.patient(|| self.fs.store.get(&key))?;
        self.trips += 1;
        self.require_read(key, &v)?;
        Ok(v)
    }
    /// Several keys in one round trip, each a condition like `get`'s.
    pub fn get_many(&mut self, keys: Vec<Vec<u8>>) -> Result<Vec<Option<Versioned>>> {
        self.fs.settle()?;
        self.fs.stats.reads.fetch_add(1, Ordering::Relaxed);
        let (vs, _) = self.fs.patient(|| self.fs.store.get_many(&keys))?;
        self.trips += 1;
        for (key, v) in keys.into_iter().zip(&vs) {
            self.require_read(key, v)?;
        }
        Ok(vs)
    }
    /// The commit requires `key` as read (`v`): at its version, or absent.
    /// (`super::filelocks` passes the epoch as its scan of an inode's locks
    /// found it.)
    pub(super) fn require(&mut self, key: Vec<u8>, v: &Option<Versioned>) -> Result<()> {
        self.untracked = true;
        self.require_read(key, v)
    }

    pub(super) fn require_read(&mut self, key: Vec<u8>, v: &Option<Versioned>) -> Result<()> {
        let rev = v.as_ref().map_or(0, |v| v.mod_rev);
        match self.seen.get(&key) {
            // Changed between two reads of one operation: the commit would
            // fail on the first; fail now.
            Some(&was) if was != rev => Err(RETRY),
            Some(_) => Ok(()),
            None => {
                // A name read as absent may be one another daemon answered
                // from memory in a directory it leases: the answer rests
                // on no such lease too (an unlink on one mount answered
                // ENOENT for a name another had acknowledged).
                if v.is_none() && key.len() >= 9 && key[0] == b'E' {
                    let dir = u64::from_be_bytes(key[1..9].try_into().unwrap_or_default());
                    self.require_unleased(dir);
                }
                self.seen.insert(key.clone(), rev);
                self.conds.push(Cond::as_read(key, v));
                Ok(())
            }
        }
    }

    /// The commit requires that no other daemon leases a range of `dir`
    /// (this daemon's own acknowledged creates there are committed before
    /// any read, `settle`). Not read: an answer without writes checks it
    /// at commit, and a lease it meets is asked back (`ClusterFs::run_at`).
    pub(super) fn require_unleased(&mut self, dir: Ino) {
        if !self.fs.holds(dir) {
            self.require_no_lease(dir);
        }
    }

    /// The commit requires that no daemon leases a range of `dir`.
    pub(super) fn require_no_lease(&mut self, dir: Ino) {
        let (lo, hi) = lrange(dir);
        if !self.seen.contains_key(&lo) {
            self.seen.insert(lo.clone(), 0);
            self.conds.push(Cond::Empty(lo, hi));
            self.untracked = true;
        }
    }

    /// The commit requires `[lo, hi)` to have no key.
    /// The commit requires directory `dir` to have no entry.
    pub fn require_empty(&mut self, dir: Ino) -> Result<bool> {
        self.guard(dir)?;
        self.fs.settle()?;
        let (lo, hi) = erange(dir);
        self.fs.stats.reads.fetch_add(1, Ordering::Relaxed);
        let (keys, _) = self.fs.patient(|| self.fs.store.scan(&lo, &hi, 1))?;
        self.trips += 1;
        match keys.into_iter().next() {
            None => {
                self.conds.push(Cond::Empty(lo, hi));
                Ok(true)
            }
            // Not empty: the answer (ENOTEMPTY) rests on this entry.
            Some((k, v)) => {
                self.require_read(k, &Some(v))?;
                Ok(false)
            }
        }
    }
    /// `node`, from what this daemon knows of the record when it knows it
    /// (its own last commit of it, the change stream's, a read's): a guess
    /// the commit checks, requiring the record at the revision it was
    /// written at, so a stale guess fails the commit and the next try
    /// reads the store (`run_at`). A file's data commit (`commit_buffer`)
    /// takes the record it committed itself last, without a round trip.
    pub(super) fn node_known(&mut self, ino: Ino) -> Result<Node> {
        if self.guessing {
            let key = ikey(ino);
            if let Some(v) = self.fs.cache.versioned(&key) {
                // As `get`: after this daemon's creates from memory.
                self.fs.settle()?;
                self.fs.stats.guesses.fetch_add(1, Ordering::Relaxed);
                let n = Node::decode(ino, &v.value)?;
                // Not read in this transaction: an answer that commits
                // nothing checks it too (`run_at`).
                self.untracked = true;
                self.require_read(key, &Some(v))?;
                return Ok(n);
            }
        }
        self.node(ino)
    }
    pub fn node(&mut self, ino: Ino) -> Result<Node> {
        match self.get(ikey(ino))? {
            Some(v) => Node::decode(ino, &v.value),
            None => Err(Error::NotFound),
        }
    }
    pub fn entry(&mut self, parent: Ino, name: &[u8]) -> Result<Option<(Ino, Kind)>> {
        self.get(ekey(parent, name))?
            .map(|v| dec_entry(&v.value))
            .transpose()
    }
    pub(super) fn dir(&mut self, ino: Ino) -> Result<Node> {
        let n = self.node(ino)?;
        if n.attr.kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        Ok(n)
    }
    /// Directory `parent`'s record (its attributes for the permission
    /// rules, its flags for the flag rules), its entry `name` and, if
    /// `guess` is the inode that entry names (the record cache's word),
    /// that inode: one round trip where `dir`, `entry` and `node` take
    /// three. A wrong guess reads the inode apart (its record, absent or
    /// not, is one more condition, which no commit of the operation depends
    /// on).
    pub(super) fn dir_entry_node(
        &mut self,
        parent: Ino,
        name: &[u8],
        guess: Option<Ino>,
    ) -> Result<(Node, Option<Named>)> {
        // All three known to the record cache (a lookup just read them: rm
        // -rf's unlinks and rmdirs): guesses the commit requires, as
        // `node_known`'s, and no round trip.
        if let Some(found) = self.dir_entry_node_known(parent, name, guess)? {
            return Ok(found);
        }
        let mut keys = vec![ikey(parent), ekey(parent, name)];
        keys.extend(guess.map(ikey));
        let mut vs = self.get_many(keys)?.into_iter();
        let p = vs.next().flatten().ok_or(Error::NotFound)?;
        let p = Node::decode(parent, &p.value)?;
        if p.attr.kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        let Some(e) = vs.next().flatten() else {
            return Ok((p, None));
        };
        let (ino, kind) = dec_entry(&e.value)?;
        let node = match vs.next() {
            Some(Some(v)) if guess == Some(ino) => Node::decode(ino, &v.value)?,
            _ => self.node(ino)?,
        };
        Ok((p, Some((ino, kind, node))))
    }
    /// `dir_entry_node` from the record cache, if it knows the three
    /// records (the entry naming `guess`) with the revisions they were
    /// written at, on a transaction's first try.
    fn dir_entry_node_known(
        &mut self,
        parent: Ino,
        name: &[u8],
        guess: Option<Ino>,
    ) -> Result<Option<(Node, Option<Named>)>> {
        let Some(g) = guess.filter(|_| self.guessing) else {
            return Ok(None);
        };
        let keys = [ikey(parent), ekey(parent, name), ikey(g)];
        let known: Option<Vec<Versioned>> =
            keys.iter().map(|k| self.fs.cache.versioned(k)).collect();
        let Some(known) = known else {
            return Ok(None);
        };
        let (ino, kind) = dec_entry(&known[1].value)?;
        if ino != g {
            return Ok(None);
        }
        let p = Node::decode(parent, &known[0].value)?;
        let n = Node::decode(g, &known[2].value)?;
        // As `get_many`: after this daemon's creates from memory.
        self.fs.settle()?;
        self.fs.stats.guesses.fetch_add(3, Ordering::Relaxed);
        self.untracked = true;
        for (k, v) in keys.into_iter().zip(known) {
            self.require_read(k, &Some(v))?;
        }
        if p.attr.kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        Ok(Some((p, Some((ino, kind, n)))))
    }
    /// The commit stops naming these pieces of `ino`: their objects are
    /// deleted after it.
    pub(super) fn forget(&mut self, ino: Ino, pieces: &[Piece]) {
        self.doomed.extend(pieces.iter().map(|p| p.name(ino)));
    }
    pub(super) fn put_node(&mut self, n: &mut Node) -> Result<()> {
        if n.attr.kind == Kind::Dir {
            self.guard(n.attr.ino)?;
        }
        n.attr.version += 1;
        self.ops.push(Op::Put(ikey(n.attr.ino), n.encode(), None));
        Ok(())
    }
    pub(super) fn put_entry(
        &mut self,
        parent: Ino,
        name: &[u8],
        ino: Ino,
        kind: Kind,
    ) -> Result<()> {
        self.guard(parent)?;
        self.ops
            .push(Op::Put(ekey(parent, name), enc_entry(ino, kind), None));
        Ok(())
    }
    pub(super) fn del_entry(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.guard(parent)?;
        self.ops.push(Op::Delete(ekey(parent, name)));
        Ok(())
    }
    /// This commit changes `dir` (an entry, its record, its emptiness):
    /// it requires that no daemon holds a lease on any of `dir`'s name
    /// ranges, and this daemon gives back its own first (`super::dirlease`).
    pub(super) fn guard(&mut self, dir: Ino) -> Result<()> {
        if self.fs.holds(dir) {
            self.fs.release_lease(dir, None, None)?;
        }
        if !self.creating {
            self.fs.not_streaking(dir);
        }
        // Its own lease given back first: every range must be free.
        self.require_no_lease(dir);
        Ok(())
    }
    pub(super) fn del(&mut self, key: Vec<u8>) {
        self.ops.push(Op::Delete(key));
    }
    /// Put a key that outlives this daemon's session.
    pub(super) fn put_plain(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.ops.push(Op::Put(key, value, None));
    }
    /// Once committed, try to remove `ino` after the grace (`super::holds`).
    pub(super) fn remove_after_grace(&mut self, ino: Ino) {
        self.later.push(ino);
    }
    /// The commit requires `c` (not read through this transaction).
    pub(super) fn require_cond(&mut self, c: Cond) {
        self.untracked = true;
        self.conds.push(c);
    }
    /// Put a key that goes with this daemon's session (`super::filelocks`).
    pub(super) fn put_on_session(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.ops.push(Op::Put(key, value, Some(self.fs.lease)));
    }
    /// A directory's times changed (not a condition: the last writer wins).
    pub(super) fn touch_dir(&mut self, dir: Ino, t: Ts) {
        if self.fs.should_touch(dir) {
            let mut v = t.sec.to_le_bytes().to_vec();
            v.extend_from_slice(&t.nsec.to_le_bytes());
            self.ops.push(Op::Put(tkey(dir), v, None));
        }
    }
}

/// A transaction to run again (a key changed between two reads).
pub(crate) const RETRY: Error = Error::Again(Again::Conflict);
/// A create whose directory this daemon took meanwhile.
pub(crate) const LEASED: Error = Error::Again(Again::Leased);
/// A create met another daemon's lease on its directory: take the lease
/// of its name's range (`mknod_in`).
pub(crate) const LEASED_ELSEWHERE: Error = Error::Again(Again::LeasedElsewhere);

pub(crate) fn kv(e: KvError) -> Error {
    Error::from(e)
}

impl ClusterFs {
    /// Run `body` as one transaction until it commits (or fails with an
    /// error of its own).
    pub(super) fn run<T>(&self, body: impl FnMut(&mut Tx) -> Result<T>) -> Result<T> {
        self.run_at(body).map(|(out, _)| out)
    }

    /// `run`, and the revision its commit took (None: nothing to commit,
    /// or a commit whose answer was lost and that was found applied).
    pub(super) fn run_at<T>(
        &self,
        mut body: impl FnMut(&mut Tx) -> Result<T>,
    ) -> Result<(T, Option<Rev>)> {
        self.stats.ops.fetch_add(1, Ordering::Relaxed);
        let since = Instant::now();
        let mut backoff = Duration::from_micros(50);
        let mut lease_wait = Duration::from_micros(200);
        let mut asked: Option<Instant> = None;
        let mut tries = 0;
        while tries < MAX_TRIES {
            tries += 1;
            if self.lost.load(Ordering::Relaxed) {
                return Err(Error::Io(
                    "this mount's etcd session expired (cut off longer than its lease): remount"
                        .into(),
                ));
            }
            let mut tx = Tx {
                fs: self,
                conds: vec![Cond::Exists(skey(self.sid))],
                seen: HashMap::new(),
                ops: vec![],
                doomed: vec![],
                later: vec![],
                creating: false,
                want: None,
                trips: 0,
                untracked: false,
                guessing: tries == 1,
            };
            let out = body(&mut tx);
            if let Err(RETRY) = &out {
                self.stats.conflicts.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            // An answer that writes nothing (a rename onto the name it
            // already has, an error) still rests on its reads: when they
            // took more than one round trip, or it met a condition it did
            // not read (another daemon's lease on the directory, `guard`),
            // they must have been true together, which a commit of the
            // conditions alone checks (etcd: a read-only Txn). Else another
            // daemon's commit between two reads could make both daemons
            // win one rename, and an unlink could answer ENOENT for a name
            // another daemon acknowledged from memory in its leased
            // directory. A conflict is handled as a commit's: a lease met
            // is asked back and waited for.
            let answer_only = tx.ops.is_empty() || out.is_err();
            if answer_only && !((tx.trips > 1 || tx.untracked) && tx.conds.len() > 1) {
                return out.map(|o| (o, None));
            }
            let ops: &[Op] = if answer_only { &[] } else { &tx.ops };
            match self.store.commit(&tx.conds, ops) {
                Ok(Outcome::Committed(_)) if answer_only => return out.map(|o| (o, None)),
                Ok(Outcome::Committed(rev)) => {
                    let out = out?;
                    self.stats.commits.fetch_add(1, Ordering::Relaxed);
                    self.note_own(rev, &tx.ops);
                    self.after_commit(&tx);
                    return Ok((out, Some(rev)));
                }
                Ok(Outcome::Conflict(failed)) => {
                    if failed.contains(&0) {
                        self.lost.store(true, Ordering::SeqCst);
                        continue;
                    }
                    let leased: Vec<Ino> = failed
                        .iter()
                        .filter_map(|&i| tx.conds.get(i))
                        .filter(|c| c.key().len() == 9 && c.key()[0] == b'L')
                        .map(|c| u64::from_be_bytes(c.key()[1..9].try_into().unwrap()))
                        .collect();
                    if !leased.is_empty() {
                        // Another daemon holds a directory this changes:
                        // ask for it (again every 100 ms) and wait, up to
                        // twice the session's lease (a holder that froze
                        // loses its lease by then), not counted as tries.
                        // A create asks for its name's range and goes to
                        // take it (the holder may split the directory
                        // rather than give it all back).
                        if let Some(name) = tx.want.as_deref().filter(|_| self.leases.enabled) {
                            for &d in &leased {
                                self.request_lease(d, name);
                                self.want_lease(d);
                            }
                            return Err(LEASED_ELSEWHERE);
                        }
                        if asked.is_none_or(|t| t.elapsed() > Duration::from_millis(100)) {
                            for &d in &leased {
                                self.request_lease(d, b"");
                                // A create that waited for another's turn
                                // takes the next turn itself.
                                if tx.creating {
                                    self.want_lease(d);
                                }
                            }
                            asked = Some(Instant::now());
                        }
                        if since.elapsed() > self.ttl * 2 + Duration::from_secs(5) {
                            return Err(Error::Io(format!(
                                "another mount holds directory {:?} and did not give it back within {:?}: try again",
                                leased, self.ttl * 2
                            )));
                        }
                        tries -= 1;
                        std::thread::sleep(lease_wait);
                        lease_wait = (lease_wait * 2).min(Duration::from_millis(10));
                        continue;
                    }
                    self.stats.conflicts.fetch_add(1, Ordering::Relaxed);
                }
                Err(KvError::Unknown(_)) if answer_only => continue,
                Err(KvError::Unknown(m)) => {
                    self.stats.unknown.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!("commit result unknown ({m}): reading back");
                    self.cache.unsure(&tx.ops);
                    if self.applied(&tx.ops)? {
                        let out = out?;
                        self.stats.commits.fetch_add(1, Ordering::Relaxed);
                        self.after_commit(&tx);
                        return Ok((out, None));
                    }
                }
                Err(KvError::Unavailable(m)) => {
                    // Nothing applied: run again once the store answers.
                    self.wait_available(since, &m)?;
                    continue;
                }
                Err(e) => return Err(kv(e)),
            }
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_millis(20));
        }
        Err(Error::Io(format!(
            "gave up after {MAX_TRIES} conflicting tries"
        )))
    }

    /// What a committed transaction stopped naming goes from the object
    /// store; the inodes it left nameless are removed after the grace.
    fn after_commit(&self, tx: &Tx) {
        for name in &tx.doomed {
            self.delete_object(name);
        }
        for &ino in &tx.later {
            self.remove_after_grace(ino);
        }
    }

    /// Whether a commit whose answer was lost applied: every put key holds
    /// what it wrote, every deleted key is gone.
    pub(super) fn applied(&self, ops: &[Op]) -> Result<bool> {
        for op in ops {
            let now = self.patient(|| self.store.get(op.key()))?;
            let ok = match op {
                Op::Put(k, v, _) => k.first() == Some(&b'T') || now.is_some_and(|n| &n.value == v),
                Op::Delete(_) => now.is_none(),
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
