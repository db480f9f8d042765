//! The embedded default store: one fjall database under `STORE/db`, one
//! keyspace holding the whole key schema (so every batch is one journal
//! record, atomic across inodes, entries and data).
//!
//! `STORE/SHOAL` marks a shoal store (format line), and `STORE/LOCK` is held
//! with `flock` for the daemon's life, so two daemons never open one store.
//! mkfs writes the marker last (write, rename, fsync of the directory), after
//! the formatted store is durable: a directory with `db` but no marker is an
//! interrupted mkfs, which mkfs makes again and mount and fsck name as such.

use parking_lot::Mutex;
use shoal_core::store::{BatchItem, StoreCounters};
use shoal_core::{Error, Result, Store};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const MARKER: &str = "SHOAL";
const MARKER_TEXT: &str = "shoal store, format 1\n";
/// What an interrupted mkfs can leave (and a failed mount's log).
const MKFS_LEFTOVERS: [&str; 4] = ["db", "LOCK", "SHOAL.tmp", "daemon.log"];

pub struct FjallStore {
    db: fjall::Database,
    ks: fjall::Keyspace,
    path: PathBuf,
    _lock: File,
    gets: AtomicU64,
    scans: AtomicU64,
    writes: AtomicU64,
    syncs: AtomicU64,
    keys_written: AtomicU64,
    /// Serialises sync calls (fjall's persist is thread-safe; this only keeps counters honest).
    sync_lock: Mutex<()>,
}

/// Map a fjall error to the engine's: ENOSPC stays ENOSPC, decode and checksum
/// failures are corruption, the rest is I/O.
fn map_err(e: fjall::Error) -> Error {
    let s = format!("{e:?}");
    if let fjall::Error::Io(io) = &e {
        if io.raw_os_error() == Some(libc::ENOSPC) {
            return Error::NoSpace;
        }
    }
    if s.contains("No space left") || s.contains("StorageFull") {
        return Error::NoSpace;
    }
    if s.contains("Checksum") || s.contains("Decode") || s.contains("Unrecoverable") || s.contains("InvalidVersion") || s.contains("Corrupt") {
        return Error::Corrupted(s);
    }
    Error::Io(s)
}

fn io_err(what: &str, p: &Path, e: std::io::Error) -> Error {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        return Error::NoSpace;
    }
    Error::Io(format!("{what} {}: {e}", p.display()))
}

impl FjallStore {
    /// Create a new store directory (mkfs) and format it with `format` (the
    /// engine's records); the store counts as made only once that is
    /// durable. Refuses a store and a non-empty directory that is not a
    /// half-made store.
    pub fn create(path: &Path, format: impl FnOnce(&FjallStore) -> Result<()>) -> Result<FjallStore> {
        if path.join(MARKER).exists() {
            return Err(Error::Exists);
        }
        if path.exists() {
            if Self::half_made(path) {
                for name in MKFS_LEFTOVERS {
                    let p = path.join(name);
                    let r = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
                    if let Err(e) = r {
                        if e.kind() != std::io::ErrorKind::NotFound {
                            return Err(io_err("remove", &p, e));
                        }
                    }
                }
            }
            let nonempty = std::fs::read_dir(path).map_err(|e| io_err("read", path, e))?.next().is_some();
            if nonempty {
                return Err(Error::Invalid);
            }
        }
        std::fs::create_dir_all(path).map_err(|e| io_err("create", path, e))?;
        let store = Self::open_inner(path)?;
        format(&store)?;
        store.db.persist(fjall::PersistMode::SyncAll).map_err(map_err)?;
        let tmp = path.join("SHOAL.tmp");
        let mut f = File::create(&tmp).map_err(|e| io_err("create", &tmp, e))?;
        f.write_all(MARKER_TEXT.as_bytes()).map_err(|e| io_err("write", &tmp, e))?;
        f.sync_all().map_err(|e| io_err("sync", &tmp, e))?;
        std::fs::rename(&tmp, path.join(MARKER)).map_err(|e| io_err("rename", &tmp, e))?;
        File::open(path).and_then(|d| d.sync_all()).map_err(|e| io_err("sync", path, e))?;
        Ok(store)
    }

    /// A directory an interrupted mkfs left: the database was started, the
    /// marker never written, and nothing else is there.
    fn half_made(path: &Path) -> bool {
        if path.join(MARKER).exists() || !path.join("db").is_dir() {
            return false;
        }
        let Ok(rd) = std::fs::read_dir(path) else { return false };
        rd.flatten().all(|e| MKFS_LEFTOVERS.iter().any(|n| e.file_name() == *n))
    }

    /// Is there a store at `path`? The errors `open` gives, without opening
    /// or locking anything (and without writing: `mount -d` asks before it
    /// starts a daemon that would log into the store).
    pub fn probe(path: &Path) -> Result<()> {
        if !path.exists() {
            return Err(Error::NotFound);
        }
        match std::fs::read_to_string(path.join(MARKER)) {
            Ok(s) if s == MARKER_TEXT => Ok(()),
            Ok(_) => Err(Error::Corrupted(format!("{}: unknown store format", path.display()))),
            Err(_) if Self::half_made(path) => Err(Error::Io(format!(
                "{p}: an interrupted mkfs left a half-made store; run `shoal mkfs {p}` to make it again",
                p = path.display()
            ))),
            Err(_) => Err(Error::Invalid),
        }
    }

    /// Open an existing store.
    pub fn open(path: &Path) -> Result<FjallStore> {
        Self::probe(path)?;
        Self::open_inner(path)
    }

    fn open_inner(path: &Path) -> Result<FjallStore> {
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path.join("LOCK"))
            .map_err(|e| io_err("open", path, e))?;
        // A daemon that was just unmounted or killed may still be exiting (its
        // threads hold the lock a moment after the leader is gone): wait a little.
        let t0 = std::time::Instant::now();
        loop {
            // SAFETY: flock on a file descriptor we own.
            let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                break;
            }
            if t0.elapsed() > std::time::Duration::from_secs(3) {
                return Err(Error::Io(format!("{} is in use by another shoal daemon", path.display())));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // fjall's own memory (block cache, memtables) is outside the engine's
        // cache budget; keep it small and bounded: the engine caches what is hot.
        let db = fjall::Database::builder(path.join("db"))
            .manual_journal_persist(true)
            .cache_size(64 << 20)
            .open()
            .map_err(map_err)?;
        let ks = db
            .keyspace("meta", || {
                // Filter and index blocks pinned at every level (fjall pins
                // only L0/L1): at 10M+ files an unpinned, unpartitioned filter
                // block of a large table was reloaded and re-checksummed on
                // most point reads (perf: xxh3 + copy_to_iter at 87%). Cost:
                // about 1.3 bytes of filter per key, held for the store's life.
                //
                // 64 MiB memtables and 8 tables in L0 before they are merged
                // into L1 (fjall: 16 MiB here before, and 4): fewer, larger
                // flushes and less rewriting. Measured on 8 x 1M creates and
                // rm -rf under a 2 GiB bound: create 58.0 -> 44.5 s, remove
                // 119.5 -> 100.2 s, peak RSS 1.48 -> 1.55 GB (docs/BENCHMARKS.md, run 5).
                fjall::KeyspaceCreateOptions::default()
                    .max_memtable_size(64 << 20)
                    .compaction_strategy(std::sync::Arc::new(fjall::compaction::Leveled::default().with_l0_threshold(8)))
                    .filter_block_pinning_policy(fjall::config::PinningPolicy::all(true))
                    .index_block_pinning_policy(fjall::config::PinningPolicy::all(true))
            })
            .map_err(map_err)?;
        Ok(FjallStore {
            db,
            ks,
            path: path.to_path_buf(),
            _lock: lock,
            gets: AtomicU64::new(0),
            scans: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            keys_written: AtomicU64::new(0),
            sync_lock: Mutex::new(()),
        })
    }

    /// Wait until no process holds the store's lock (a daemon has fully exited).
    pub fn wait_unlocked(path: &Path, timeout: std::time::Duration) -> bool {
        let Ok(f) = File::open(path.join("LOCK")) else { return true };
        let t0 = std::time::Instant::now();
        loop {
            // SAFETY: flock on a file descriptor we own; released when f is dropped.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return true;
            }
            if t0.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes on disk (tables, journals).
    pub fn disk_space(&self) -> u64 {
        self.db.disk_space().unwrap_or(0)
    }

    /// Flush memtables and compact fully (for space measurements).
    pub fn compact(&self) -> Result<()> {
        self.ks.rotate_memtable_and_wait().map_err(map_err)?;
        self.ks.major_compact().map_err(map_err)
    }
}

impl Store for FjallStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        Ok(self.ks.get(key).map_err(map_err)?.map(|v| v.to_vec()))
    }

    fn scan(&self, lo: &[u8], hi: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scans.fetch_add(1, Ordering::Relaxed);
        let mut out = Vec::new();
        for g in self.ks.range(lo.to_vec()..hi.to_vec()) {
            if out.len() >= limit {
                break;
            }
            let (k, v) = g.into_inner().map_err(map_err)?;
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    fn write(&self, batch: &[BatchItem], sync: bool) -> Result<()> {
        let mut b = self.db.batch();
        for (k, v) in batch {
            match v {
                Some(v) => b.insert(&self.ks, k.clone(), v.clone()),
                None => b.remove(&self.ks, k.clone()),
            }
        }
        b.commit().map_err(map_err)?;
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.keys_written.fetch_add(batch.len() as u64, Ordering::Relaxed);
        if sync {
            self.sync()?;
        } else {
            // Hand the journal to the OS so a killed daemon loses nothing written.
            self.db.persist(fjall::PersistMode::Buffer).map_err(map_err)?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let _g = self.sync_lock.lock();
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.db.persist(fjall::PersistMode::SyncAll).map_err(map_err)
    }

    fn space(&self) -> (u64, u64) {
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        let p = std::ffi::CString::new(self.path.as_os_str().as_encoded_bytes()).unwrap_or_default();
        // SAFETY: p is a valid C string and s a valid out-pointer.
        if unsafe { libc::statvfs(p.as_ptr(), &mut s) } == 0 {
            let f = s.f_frsize as u64;
            (s.f_blocks as u64 * f, s.f_bavail as u64 * f)
        } else {
            (1 << 40, 1 << 40)
        }
    }

    fn counters(&self) -> StoreCounters {
        StoreCounters {
            gets: self.gets.load(Ordering::Relaxed),
            scans: self.scans.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            syncs: self.syncs.load(Ordering::Relaxed),
            keys_written: self.keys_written.load(Ordering::Relaxed),
        }
    }
}
