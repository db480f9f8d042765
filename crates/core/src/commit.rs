//! The one commit path: delayed logging (seed 003) as group commit.
//!
//! Every mutating operation enters the *gate*: it locks one gate shard (picked
//! by its thread, so two threads rarely meet), reads the open epoch `E`, makes
//! its in-memory changes, appends their records to the shard's queue, and
//! leaves. The committer closes epoch `E` by locking every shard (in index
//! order), taking the queues and opening `E + 1`. Because an operation holds a
//! shard from before its first mutation until its records are queued, the
//! closed epoch contains every operation whose effects any other operation in
//! it could have seen: the committed state is always a prefix of the history
//! (argued in docs/design.md).
//!
//! Records carry a per-key version; merging a closed epoch keeps the highest
//! version of each key, so repeated changes to one inode collapse into one
//! store write, and queue order does not matter. A key that was absent when
//! the epoch opened and is deleted when it closes (a file created and removed
//! within one epoch, a temporary name renamed away) is not written at all:
//! the store never sees short-lived objects (XFS's delayed logging keeps them
//! out of the log the same way).

use crate::error::{Error, Result};
use crate::store::{BatchItem, Store};
use crate::sync::{Arc, AtomicBool, AtomicU64, Condvar, LockClass, Mutex, Ordering, PlainMutex};
use crate::types::Durability;
use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::time::{Duration, Instant};

const GATE_SHARDS: usize = 16;

/// One key's change, as an operation records it.
pub struct Record {
    pub key: Vec<u8>,
    pub ver: u64,
    pub val: Option<Vec<u8>>,
    /// The key had no value when this record's epoch opened.
    pub fresh: bool,
}

/// A gate shard's queue: records, and inodes to format when the epoch closes.
#[derive(Default)]
pub struct Queue {
    recs: Vec<Record>,
    /// Bytes of `recs`' keys and values (`Committer::open_bytes`).
    bytes: usize,
    marks: Vec<u64>,
    /// Inodes created in the open epoch: none of their keys is in the store
    /// (inode numbers are never reused).
    born: Vec<u64>,
}

/// Formats the marked inodes' current state at epoch close (delayed logging).
pub type Formatter = Box<dyn Fn(&[u64], u64) -> Vec<Record> + Send + Sync>;

/// Counters of the commit path (for `shoal stats` and benchmarks).
#[derive(Default)]
pub struct CommitStats {
    pub commits: AtomicU64,
    pub records_in: AtomicU64,
    pub keys_out: AtomicU64,
    /// Keys absent before their epoch and deleted by its end: not written.
    pub keys_elided: AtomicU64,
    pub commit_ns: AtomicU64,
    /// Commits by the keys they wrote: bucket b counts those of
    /// [2^(b-1), 2^b) keys (b = 0: none, every key elided).
    pub keys_hist: [AtomicU64; COMMIT_BUCKETS],
}

/// Buckets of `CommitStats::keys_hist`: the last takes 2^30 keys and more.
pub const COMMIT_BUCKETS: usize = 32;

pub struct Committer {
    shards: Vec<CachePadded<Mutex<Queue>>>,
    /// The open epoch. Changes only while every gate shard is held.
    epoch: AtomicU64,
    /// Every epoch <= this is in the store (and synced unless Buffered).
    durable: AtomicU64,
    poisoned: AtomicBool,
    /// The poisoning failure was a full disk: report ENOSPC, not EIO.
    poisoned_nospace: AtomicBool,
    /// What failed, said once (`failure`: `shoal stats`, the metrics).
    // protects: the first failure's description, set once.
    failure: PlainMutex<Option<String>>,
    /// `errors=ro`: changes after a failure get EROFS, not EIO.
    ro_on_error: AtomicBool,
    stop: AtomicBool,
    kick: PlainMutex<bool>,
    kick_cv: Condvar,
    done: PlainMutex<()>,
    done_cv: Condvar,
    store: Arc<dyn Store>,
    durability: Durability,
    interval: Duration,
    pub stats: CommitStats,
    /// Records queued in the open epoch (approximate while gates are held).
    open: crate::sync::Counter,
    /// Their bytes: what the next commit will write at least (space admission).
    open_bytes: crate::sync::Counter,
    /// One commit at a time (the thread, or an inline commit after shutdown).
    commit_lock: PlainMutex<()>,
    /// Called after each successful commit, from the committer thread (batched reclaim).
    after_commit: PlainMutex<Option<Box<dyn Fn() + Send + Sync>>>,
    /// Formats marked inodes while the epoch is being closed.
    formatter: PlainMutex<Option<Formatter>>,
}

/// A held gate shard. Records pushed here are queued in epoch `self.epoch`.
pub struct Gate<'a> {
    q: crate::sync::MutexGuard<'a, Queue>,
    pub epoch: u64,
    null: bool,
    /// Records queued through this gate (added to `Committer::open` on drop).
    added: usize,
    /// Their bytes (keys and values), added to `Committer::open_bytes`.
    added_bytes: usize,
    open: &'a crate::sync::Counter,
    open_bytes: &'a crate::sync::Counter,
}

impl Drop for Gate<'_> {
    fn drop(&mut self) {
        // Runs before the shard guard is released: counted in its epoch.
        if self.added > 0 {
            self.open.add(self.added as i64);
            self.open_bytes.add(self.added_bytes as i64);
        }
    }
}

impl Gate<'_> {
    /// Records are dropped (memory-only engine): callers may skip encoding them.
    #[inline]
    pub fn is_null(&self) -> bool {
        self.null
    }
    #[inline]
    fn push(&mut self, r: Record) {
        if !self.null {
            let n = r.key.len() + r.val.as_ref().map_or(0, |v| v.len());
            self.q.bytes += n;
            self.added_bytes += n;
            self.q.recs.push(r);
            self.added += 1;
        }
    }
    #[inline]
    pub fn put(&mut self, key: Vec<u8>, ver: u64, val: Vec<u8>) {
        self.push(Record {
            key,
            ver,
            val: Some(val),
            fresh: false,
        });
    }
    /// A put of a key the caller knows had no value when this epoch opened.
    #[inline]
    pub fn put_new(&mut self, key: Vec<u8>, ver: u64, val: Vec<u8>) {
        self.push(Record {
            key,
            ver,
            val: Some(val),
            fresh: true,
        });
    }
    #[inline]
    pub fn del(&mut self, key: Vec<u8>, ver: u64) {
        self.push(Record {
            key,
            ver,
            val: None,
            fresh: false,
        });
    }
    /// Inode `ino` was created in this epoch: if it is gone by the end of the
    /// epoch, none of its keys is written.
    #[inline]
    pub fn born(&mut self, ino: u64) {
        if !self.null {
            self.q.born.push(ino);
        }
    }
    /// Have the committer format this inode's state when the epoch closes.
    #[inline]
    pub fn mark(&mut self, ino: u64) {
        if !self.null && self.q.marks.last() != Some(&ino) {
            self.q.marks.push(ino);
        }
    }
}

impl Committer {
    pub fn new(store: Arc<dyn Store>, durability: Durability, interval_ms: u64) -> Arc<Committer> {
        Arc::new(Committer {
            shards: (0..GATE_SHARDS)
                .map(|_| CachePadded::new(Mutex::new(LockClass::Gate, Queue::default())))
                .collect(),
            epoch: AtomicU64::new(1),
            durable: AtomicU64::new(0),
            poisoned: AtomicBool::new(false),
            poisoned_nospace: AtomicBool::new(false),
            failure: PlainMutex::new(None),
            ro_on_error: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            kick: PlainMutex::new(false),
            kick_cv: Condvar::new(),
            done: PlainMutex::new(()),
            done_cv: Condvar::new(),
            store,
            durability,
            interval: Duration::from_millis(interval_ms.max(1)),
            stats: CommitStats::default(),
            open: Default::default(),
            open_bytes: Default::default(),
            commit_lock: PlainMutex::new(()),
            after_commit: PlainMutex::new(None),
            formatter: PlainMutex::new(None),
        })
    }

    pub fn set_formatter(&self, f: Formatter) {
        *self.formatter.lock() = Some(f);
    }

    /// What a change gets after a store failure (`Config::on_error`).
    pub fn set_on_error(&self, m: crate::types::OnError) {
        self.ro_on_error
            .store(m == crate::types::OnError::ReadOnly, Ordering::Relaxed);
    }

    pub fn set_after_commit(&self, f: Box<dyn Fn() + Send + Sync>) {
        *self.after_commit.lock() = Some(f);
    }

    pub fn start(self: &Arc<Self>) -> std::thread::JoinHandle<()> {
        let me = self.clone();
        std::thread::Builder::new()
            .name("shoal-commit".into())
            .spawn(move || me.run())
            .expect("spawn committer")
    }

    /// Enter the gate. Fails once the store has failed: EIO (`errors=shutdown`,
    /// the default), EROFS (`errors=ro`), or ENOSPC if a full disk did it.
    #[inline]
    pub fn enter(&self) -> Result<Gate<'_>> {
        if self.poisoned.load(Ordering::Relaxed) {
            let e = self.poison_error();
            if e != Error::NoSpace && self.ro_on_error.load(Ordering::Relaxed) {
                return Err(Error::ReadOnly);
            }
            return Err(e);
        }
        let q = self.shards[crate::sync::thread_slot() % GATE_SHARDS].lock();
        let epoch = self.epoch.load(Ordering::Acquire);
        Ok(Gate {
            q,
            epoch,
            null: self.store.is_null(),
            added: 0,
            added_bytes: 0,
            open: &self.open,
            open_bytes: &self.open_bytes,
        })
    }

    /// Records queued in the open epoch: writers wait for a commit when it
    /// passes `Committer::MAX_OPEN` (`Engine::throttle`), which bounds the
    /// commit batch and the memory it takes to write it.
    pub fn open_records(&self) -> u64 {
        self.open.get().max(0) as u64
    }

    /// Bytes of the records queued in the open epoch.
    pub fn open_bytes(&self) -> u64 {
        self.open_bytes.get().max(0) as u64
    }

    /// The bound on `open_records` (see there). Measured: unbounded, 8
    /// writers queued about 1M records per epoch while a commit ran, and
    /// writing that batch took several hundred MB for a moment.
    pub const MAX_OPEN: u64 = 64 * 1024;

    /// The open epoch (what `wait` on it covers: everything queued so far).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    pub fn durable_epoch(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Relaxed)
    }

    /// What made the store fail (None: it has not).
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().clone()
    }

    /// The store failed outside a commit (a background flush, a data
    /// object's sync): shut the filesystem down as a failed commit does.
    pub fn fail(&self, why: String) {
        if !self.poisoned.load(Ordering::Relaxed) {
            let _ = self.poison(Error::Io(why));
        }
    }

    /// Wait until epoch `e` is committed. Kicks the committer so the wait is one commit, not one interval.
    pub fn wait(&self, e: u64) -> Result<()> {
        if self.store.is_null() {
            return Ok(());
        }
        loop {
            // Failed first: after a store failure no fsync reports success,
            // even for an epoch that was durable (its file's data object may
            // not be, and the caller cannot tell which it asked about).
            if self.poisoned.load(Ordering::Relaxed) {
                return Err(self.poison_error());
            }
            if self.durable.load(Ordering::Acquire) >= e {
                return Ok(());
            }
            if self.stop.load(Ordering::SeqCst) {
                // The committer thread is gone (or going): commit inline.
                self.commit_once()?;
                continue;
            }
            self.kick();
            let mut g = self.done.lock();
            if self.durable.load(Ordering::Acquire) >= e || self.poisoned.load(Ordering::Relaxed) {
                continue;
            }
            self.done_cv.wait_for(&mut g, Duration::from_millis(50));
        }
    }

    /// Wait for everything queued so far, and make it durable even in Buffered mode.
    pub fn sync_all(&self) -> Result<()> {
        let e = self.epoch.load(Ordering::Acquire);
        self.wait(e)?;
        if self.durability == Durability::Buffered && !self.store.is_null() {
            self.store.sync().map_err(|e| self.poison(e))?;
        }
        Ok(())
    }

    pub fn kick(&self) {
        let mut k = self.kick.lock();
        *k = true;
        self.kick_cv.notify_one();
    }

    /// What operations get after a failed commit: ENOSPC if the disk filled, else EIO.
    fn poison_error(&self) -> Error {
        if self.poisoned_nospace.load(Ordering::Relaxed) {
            Error::NoSpace
        } else {
            Error::Io("the store failed earlier; shoal is shut down".into())
        }
    }

    fn poison(&self, e: Error) -> Error {
        {
            let mut f = self.failure.lock();
            if f.is_none() {
                let mode = if self.ro_on_error.load(Ordering::Relaxed) {
                    "EROFS (errors=ro)"
                } else {
                    "EIO (errors=shutdown)"
                };
                tracing::error!(
                    "store failed: {e}. shoal is shut down: every change gets {mode}, \
                     fsync gets EIO, reads go on. Unmount it; what was fsync'ed before is in \
                     the store's journal and replays at the next mount once the cause is \
                     cleared (then `shoal fsck` to check)"
                );
                *f = Some(e.to_string());
            }
        }
        if e == Error::NoSpace {
            self.poisoned_nospace.store(true, Ordering::SeqCst);
        }
        self.poisoned.store(true, Ordering::SeqCst);
        let _g = self.done.lock();
        self.done_cv.notify_all();
        match e {
            Error::NoSpace => Error::NoSpace,
            other => Error::Io(other.to_string()),
        }
    }

    /// Stop the committer after a final commit.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.kick();
    }

    fn run(&self) {
        loop {
            {
                let mut k = self.kick.lock();
                if !*k && !self.stop.load(Ordering::SeqCst) {
                    self.kick_cv.wait_for(&mut k, self.interval);
                }
                *k = false;
            }
            let stopping = self.stop.load(Ordering::SeqCst);
            if !self.poisoned.load(Ordering::Relaxed) {
                // A store that failed on its own (a background flush) is
                // a failure of the filesystem, found within one tick.
                if let Some(why) = self.store.failure() {
                    self.fail(why);
                } else {
                    let _ = self.commit_once();
                }
            }
            if stopping {
                return;
            }
        }
    }

    /// Close the open epoch and write it. Public for tests that drive commits by hand.
    pub fn commit_once(&self) -> Result<()> {
        let _one = self.commit_lock.lock();
        let t0 = Instant::now();
        // Close the epoch: all shards, in index order (the only place more than one is held).
        let mut taken = Vec::new();
        let mut born = Vec::new();
        let closed;
        {
            let mut guards: Vec<_> = self.shards.iter().map(|s| s.lock()).collect();
            closed = self.epoch.load(Ordering::Acquire);
            let mut marks = Vec::new();
            let mut bytes = 0;
            for g in guards.iter_mut() {
                if !g.recs.is_empty() {
                    taken.push(std::mem::take(&mut g.recs));
                }
                bytes += std::mem::take(&mut g.bytes);
                marks.append(&mut g.marks);
                born.append(&mut g.born);
            }
            let queued: usize = taken.iter().map(|v| v.len()).sum();
            self.open.add(-(queued as i64));
            self.open_bytes.add(-(bytes as i64));
            if !marks.is_empty() {
                // No operation is in flight (every shard is held): the marked
                // inodes' state is exactly the state after this epoch.
                marks.sort_unstable();
                marks.dedup();
                if let Some(f) = self.formatter.lock().as_ref() {
                    taken.push(f(&marks, closed));
                }
            }
            self.epoch.store(closed + 1, Ordering::Release);
        }
        let nrec: usize = taken.iter().map(|v| v.len()).sum();
        if nrec > 0 {
            let mut merged: HashMap<Vec<u8>, Latest> = HashMap::with_capacity(nrec);
            for r in taken.into_iter().flatten() {
                match merged.get_mut(&r.key) {
                    Some(slot) => {
                        slot.fresh |= r.fresh;
                        if slot.ver <= r.ver {
                            (slot.ver, slot.val) = (r.ver, r.val);
                        }
                    }
                    None => {
                        let (ver, val, fresh) = (r.ver, r.val, r.fresh);
                        merged.insert(r.key, Latest { ver, val, fresh });
                    }
                }
            }
            let born: std::collections::HashSet<u64> = born.into_iter().collect();
            let before = merged.len();
            // Absent before the epoch and deleted at its end: nothing to write.
            merged.retain(|k, Latest { val, fresh, .. }| {
                val.is_some()
                    || !(*fresh || crate::schema::owner_ino(k).is_some_and(|i| born.contains(&i)))
            });
            self.stats
                .keys_elided
                .fetch_add((before - merged.len()) as u64, Ordering::Relaxed);
            let mut batch: Vec<BatchItem> = merged.into_iter().map(|(k, l)| (k, l.val)).collect();
            batch.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            let sync = self.durability != Durability::Buffered;
            // Everything elided: nothing to write, and earlier epochs are
            // already in the store. The fault point fails the write as the
            // store would, so it poisons like a real failure: returning
            // early would drop the closed epoch's records, and a later
            // epoch's commit would then report them durable.
            let wrote = crate::fault::point("commit.before_write").and_then(|()| {
                if batch.is_empty() {
                    Ok(())
                } else {
                    self.store.write(&batch, sync)
                }
            });
            if let Err(e) = wrote {
                return Err(self.poison(e));
            }
            self.stats
                .records_in
                .fetch_add(nrec as u64, Ordering::Relaxed);
            self.stats
                .keys_out
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            let b = (64 - (batch.len() as u64).leading_zeros() as usize).min(COMMIT_BUCKETS - 1);
            self.stats.keys_hist[b].fetch_add(1, Ordering::Relaxed);
            self.stats.commits.fetch_add(1, Ordering::Relaxed);
        }
        self.durable.store(closed, Ordering::Release);
        self.stats
            .commit_ns
            .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        {
            let _g = self.done.lock();
            self.done_cv.notify_all();
        }
        if let Some(f) = self.after_commit.lock().as_ref() {
            f();
        }
        Ok(())
    }
}

/// One key's record within a closing epoch, merged over the shards.
struct Latest {
    /// The highest version queued for the key.
    ver: u64,
    /// Its value (None: deleted).
    val: Option<Vec<u8>>,
    /// The key was absent when the epoch opened.
    fresh: bool,
}
