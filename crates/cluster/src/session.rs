//! Sessions and fencing: how a daemon joins the namespace (`SessionOpts`,
//! `ClusterFs::open_with_data`), renews its session lease, is fenced when it
//! loses it, and leaves.

use super::blob::Blobs;
use super::{ClusterStore, Cond, KvError, Op, Outcome};
use shoal_core::error::{Error, Result};
use shoal_core::sync::PlainMutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::keys::{skey, FORMAT_KEY};
use crate::ns::{ClusterFs, SHARED_FORMAT};
use crate::txn::kv;

/// How a daemon joins a shared namespace.
#[derive(Clone, Debug)]
pub struct SessionOpts {
    /// The session lease's time to live: a daemon cut off for longer loses
    /// its session and can no longer commit.
    pub ttl: Duration,
    /// A directory's time is written at most this often per daemon (0:
    /// with every change to it, the default).
    pub dir_time: Duration,
    /// What the session key says: the mount's daemon writes a JSON object
    /// (host, pid, start time, version, mountpoint: `shoal status`).
    pub who: String,
    /// How long an operation waits for an unavailable store (an election,
    /// lost quorum) before it fails.
    pub unavailable_wait: Duration,
    /// Buffered writes of all files together before a write commits its
    /// file's (each file's alone: 32 MiB): the daemon's memory for them.
    pub dirty_max: u64,
    /// Take directory leases: creates in a directory this daemon alone
    /// writes are acknowledged from memory and committed in batches
    /// (`super::dirlease`). Off: every operation commits before it answers.
    pub dir_leases: bool,
    /// Take lock leases: an inode's file locks are answered from memory
    /// while no other daemon holds one (`super::filelocks`). Off: every lock
    /// and unlock commits.
    pub lock_leases: bool,
    /// The record cache's budget in bytes (`super::record_cache`; 0: none, every
    /// stat and lookup the kernel does not answer reads the store).
    pub record_cache: u64,
    /// How long a file whose last name went stays for daemons that have
    /// it open to hold it (`super::holds`); zero: removed at once unless
    /// open on the daemon that unlinked it.
    pub unlinked_grace: Duration,
}

impl Default for SessionOpts {
    fn default() -> Self {
        SessionOpts {
            ttl: Duration::from_secs(10),
            // Every change: a blind put in the same transaction costs no
            // conflict, and stat after a create must see the new time.
            dir_time: Duration::ZERO,
            who: format!("pid {}", std::process::id()),
            unavailable_wait: Duration::from_secs(30),
            dirty_max: 256 << 20,
            dir_leases: true,
            lock_leases: true,
            record_cache: super::record_cache::DEFAULT_BYTES,
            unlinked_grace: Duration::from_secs(10),
        }
    }
}

impl ClusterFs {
    /// Join the namespace on `store` with a new session, without an object
    /// store (files stay within the inline size).
    pub fn open(store: Arc<dyn ClusterStore>, opts: SessionOpts) -> Result<Arc<ClusterFs>> {
        Self::open_with_data(store, None, opts)
    }

    /// Join the namespace on `store` with a new session; file data past the
    /// inline size goes to `blobs`.
    pub fn open_with_data(
        store: Arc<dyn ClusterStore>,
        blobs: Option<Arc<dyn Blobs>>,
        opts: SessionOpts,
    ) -> Result<Arc<ClusterFs>> {
        match store.get(FORMAT_KEY).map_err(kv)? {
            None => {
                return Err(Error::Corrupted(
                    "no shoal filesystem here (make one with `shoal mkfs`)".into(),
                ))
            }
            Some(v) if v.value != SHARED_FORMAT.to_le_bytes() => {
                return Err(Error::Corrupted(format!(
                    "shared format {:?}, this shoal reads {SHARED_FORMAT}",
                    v.value
                )))
            }
            Some(_) => {}
        }
        // Leases are given back on request, and the record cache is kept
        // current, by the change stream (TiKV has none: neither there).
        let has_watch = !matches!(
            store.watch(b"R", store.revision().map_err(kv)? + 1),
            Err(KvError::Unsupported(_))
        );
        let granted = Instant::now();
        let lease = store.lease_grant(opts.ttl).map_err(kv)?;
        let sid = lease as u64;
        match store
            .commit(
                &[Cond::Absent(skey(sid))],
                &[Op::Put(skey(sid), opts.who.into_bytes(), Some(lease))],
            )
            .map_err(kv)?
        {
            Outcome::Committed(_) => {}
            Outcome::Conflict(_) => return Err(Error::Io("session key taken".into())),
        }
        let fs = Arc::new(ClusterFs {
            store: store.clone(),
            sid,
            lease,
            chunk: PlainMutex::new((0, 0)),
            touched: PlainMutex::new(HashMap::new()),
            dir_time: opts.dir_time,
            unavailable_wait: opts.unavailable_wait,
            stats: Arc::default(),
            stop: Arc::new(AtomicBool::new(false)),
            keeper: PlainMutex::new(None),
            lost: Arc::new(AtomicBool::new(false)),
            opens: PlainMutex::new(HashMap::new()),
            locks: super::filelocks::Held::new(opts.lock_leases && has_watch),
            orphaned: PlainMutex::new(Default::default()),
            linkable: PlainMutex::new(Default::default()),
            statfs_seen: PlainMutex::new(None),
            own: PlainMutex::new(Default::default()),
            blobs,
            bufs: PlainMutex::new(HashMap::new()),
            blob_seq: AtomicU64::new(0),
            dirty_total: AtomicU64::new(0),
            dirty_max: opts.dirty_max,
            chunks: Arc::default(),
            leases: super::dirlease::DirLeases::new(opts.dir_leases && has_watch),
            has_watch,
            cache: super::record_cache::RecordCache::new(opts.record_cache),
            subscribers: PlainMutex::new(Vec::new()),
            ttl: opts.ttl,
            renewed: Arc::new(PlainMutex::new(granted)),
            grace: opts.unlinked_grace,
            holds: Default::default(),
        });
        ClusterFs::start_holds(&fs);
        ClusterFs::start_leases(&fs);
        ClusterFs::start_stream(&fs);
        let (stop, lost, every) = (fs.stop.clone(), fs.lost.clone(), opts.ttl / 3);
        let renewed = fs.renewed.clone();
        let h = std::thread::Builder::new()
            .name("shoal-session".into())
            .spawn(move || {
                let mut wait = every;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    while t.elapsed() < wait && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(50).min(wait));
                    }
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let sent = Instant::now();
                    match store.lease_renew(lease) {
                        Ok(()) => {
                            *renewed.lock() = sent;
                            wait = every;
                        }
                        Err(KvError::LeaseExpired(_)) => {
                            tracing::error!("session lease {lease:x} expired: remount");
                            lost.store(true, Ordering::SeqCst);
                            return;
                        }
                        // Unavailable: try again soon (another member may
                        // answer); the lease may still be alive.
                        Err(e) => {
                            tracing::warn!("session renewal: {e}");
                            wait = Duration::from_millis(250).min(every);
                        }
                    }
                }
            })
            .expect("spawn session keeper");
        *fs.keeper.lock() = Some(h);
        Ok(fs)
    }

    /// This daemon's commit of `ops` at `rev`: the record cache learns
    /// what it wrote, and the stream's events at `rev` will be known as its
    /// own.
    pub(super) fn note_own(&self, rev: u64, ops: &[Op]) {
        self.cache.committed(ops, rev);
        let mut o = self.own.lock();
        let (ring, set) = &mut *o;
        if ring.len() >= 4096 {
            if let Some(old) = ring.pop_front() {
                set.remove(&old);
            }
        }
        ring.push_back(rev);
        set.insert(rev);
    }

    /// Whether the commit at `rev` was this daemon's (among its latest 4096).
    pub fn is_own(&self, rev: u64) -> bool {
        self.own.lock().1.contains(&rev)
    }

    /// Run a read, waiting while the store is unavailable (no quorum, no
    /// leader, an election), up to `SessionOpts::unavailable_wait`; then
    /// fail with an error that says the mount recovers by itself.
    pub(super) fn patient<T>(&self, mut f: impl FnMut() -> super::KvResult<T>) -> Result<T> {
        let since = Instant::now();
        loop {
            match f() {
                Err(KvError::Unavailable(m)) => self.wait_available(since, &m)?,
                other => return other.map_err(kv),
            }
        }
    }

    /// After an `Unavailable` answer: sleep a little, or fail once the
    /// store was unavailable for `unavailable_wait` since `since`.
    pub(super) fn wait_available(&self, since: Instant, m: &str) -> Result<()> {
        self.stats.unavailable.fetch_add(1, Ordering::Relaxed);
        if since.elapsed() >= self.unavailable_wait {
            return Err(Error::Io(format!(
                "the metadata store did not answer for {:?} ({m}); the operation failed (if the store went away during its commit, it may have been made: look again), {}",
                self.unavailable_wait,
                self.way_back()
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
        Ok(())
    }

    /// The end of an outage's error: the way back. The mount carries on by
    /// itself when the store is back, unless the cluster ended its session
    /// meanwhile: possible once its last renewal is older than its lease
    /// (a partition that cut this daemon alone off; a cluster without
    /// quorum ends no lease, its next leader renews them all), and then
    /// only a remount gets a new one.
    pub(super) fn way_back(&self) -> String {
        let since = self.renewed.lock().elapsed();
        let mut s = String::from("and the mount carries on by itself when the store is back");
        if since > self.ttl {
            s += &format!(
                ", unless the store ended its session, last renewed {since:.1?} ago (its lease: {:?}): then the next operation says so and only a remount recovers, losing the creates answered since the last fsync",
                self.ttl
            );
        }
        s
    }

    /// The session id (its lease).
    pub fn session(&self) -> u64 {
        self.sid
    }

    /// Leave: stop renewing and end the session now.
    pub fn close(&self) -> Result<()> {
        // Creates acknowledged from memory are committed first.
        let released = self.release_all();
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.keeper.lock().take() {
            let _ = h.join();
        }
        match self.store.lease_revoke(self.lease) {
            Ok(()) | Err(KvError::LeaseExpired(_)) => released,
            Err(e) => Err(kv(e)),
        }
    }

    /// Stop renewing without ending the session (a daemon that froze or
    /// was cut off): for the fencing tests.
    pub fn stop_renewing(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.keeper.lock().take() {
            let _ = h.join();
        }
    }
}

impl Drop for ClusterFs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}
