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
use std::sync::Arc;

const MARKER: &str = "SHOAL";
const MARKER_TEXT: &str = "shoal store, format 1\n";
/// What an interrupted mkfs can leave (and a failed mount's log).
const MKFS_LEFTOVERS: [&str; 4] = ["db", "LOCK", "SHOAL.tmp", "daemon.log"];

pub struct FjallStore {
    db: fjall::Database,
    ks: fjall::Keyspace,
    path: PathBuf,
    /// File data past INLINE_MAX, in `STORE/data/` (`DataFiles`).
    data: Arc<crate::DataFiles>,
    _lock: Option<File>,
    gets: AtomicU64,
    scans: AtomicU64,
    writes: AtomicU64,
    syncs: AtomicU64,
    keys_written: AtomicU64,
    /// Under a memory bound (`open_bounded`): the active memtable is sealed
    /// past this many bytes (0: fjall's own size, 64 MiB). fjall keeps a
    /// keyspace's `max_memtable_size` as mkfs created it, so a mount cannot
    /// set it; the write path rotates instead.
    memtable_cap: u64,
    /// Serialises sync calls (fjall's persist is thread-safe; this only keeps counters honest).
    sync_lock: Mutex<()>,
    space: Space,
    /// A read-only open's copy of the database (see `open_read_only`),
    /// removed after the database is closed (fields drop in order).
    _shadow: Option<Shadow>,
}

/// A directory removed when dropped.
struct Shadow(PathBuf);

impl Drop for Shadow {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How much of its device the store may still fill, and the room it keeps.
///
/// fjall stops for good (it poisons the database) when a journal write, a
/// flush or a compaction fails, a full disk included. So the store must never
/// reach a full device: it keeps free, beside what the engine may fill,
///   - what flushing the journal will write (about the journal's size),
///   - what a compaction may write before it deletes its inputs (the
///     tables' size, up to `COMPACTION_ROOM`),
///   - a headroom for deletes (1/32 of the device, 4 MiB to 1 GiB).
///
/// The engine refuses growth past that (ENOSPC, `Engine::room`) and lets
/// deletes through, so a full store can always commit the operations that
/// free space. A reserve file (`STORE/reserve`, half the headroom, at most
/// `DEFAULT_RESERVE_MAX`, or `-o reserve_mb=N`) holds
/// part of that room against other programs filling the device; the store
/// gives it back when the device is nearly full whoever filled it, and takes
/// it again when there is room. After deletes on a nearly full store, a
/// maintenance thread flushes the journal (deleted data often still lies
/// there) and compacts when the device can hold the compaction, so the space
/// comes back within seconds. Described in docs/design.md ("A full disk").
struct Space {
    /// (when, device size, usable bytes) of the last sample, shared by
    /// concurrent callers.
    sample: Mutex<(std::time::Instant, u64, u64)>,
    maint: Arc<Maint>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct Maint {
    reserve: PathBuf,
    /// Bytes the reserve file holds now (0: not held).
    held: AtomicU64,
    /// The most the reserve file may hold (`FjallStore::set_reserve_max`).
    max: AtomicU64,
    /// 1: deletes happened on a nearly full store; 2: stop.
    state: std::sync::Mutex<u8>,
    cv: std::sync::Condvar,
    /// Deletes were written since the last give-back (or since the store
    /// was opened: an earlier daemon's may not have been given back).
    frees_pending: std::sync::atomic::AtomicBool,
}

impl Maint {
    /// Take the reserve when the device has room for it beside `keep`.
    fn restore_reserve(&self, dir: &Path, keep: u64) {
        let (total, avail) = statvfs(dir);
        let want = reserve_size(total, self.max.load(Ordering::Relaxed));
        let held = self.held.load(Ordering::Relaxed);
        if held > want {
            // Held larger than it may be now (a smaller `reserve_mb`, or a
            // reserve an older shoal made at half the headroom): shrink it.
            let cut = if want == 0 {
                std::fs::remove_file(&self.reserve)
            } else {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&self.reserve)
                    .and_then(|f| f.set_len(want))
            };
            match cut {
                Ok(()) => self.held.store(want, Ordering::Relaxed),
                Err(e) => tracing::warn!("{}: {e} (not shrunk)", self.reserve.display()),
            }
            return;
        }
        if want == 0 || held >= want || avail < want + headroom(total) + keep {
            return;
        }
        let made = File::create(&self.reserve).and_then(|f| {
            // SAFETY: fallocate on a file descriptor we own.
            if unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, want as i64) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            f.sync_all()
        });
        match made {
            Ok(()) => self.held.store(want, Ordering::Relaxed),
            Err(e) => {
                let _ = std::fs::remove_file(&self.reserve);
                tracing::warn!("{}: {e} (no reserve held)", self.reserve.display());
            }
        }
    }

    /// Give the reserve back to the device.
    fn release_reserve(&self, why: &str) {
        if self.held.swap(0, Ordering::Relaxed) > 0 {
            let _ = std::fs::remove_file(&self.reserve);
            tracing::warn!("{}: released ({why})", self.reserve.display());
        }
    }

    fn kick(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if *st == 0 {
            *st = 1;
            self.cv.notify_one();
        }
    }
}

/// The most room kept for a compaction's output. fjall's tables are 64 MB
/// and a leveled compaction merges a few of them at once.
const COMPACTION_ROOM: u64 = 512 << 20;

fn headroom(total: u64) -> u64 {
    (total / 32).clamp(4 << 20, 1 << 30)
}

/// The most the reserve file holds by default: 64 MiB covers the journal
/// records of a great many deletes, and a store on a large device no longer
/// takes half a gigabyte of it at its first mount (it was half the
/// headroom, 512 MiB past 32 GiB).
pub const DEFAULT_RESERVE_MAX: u64 = 64 << 20;

/// The reserve file's size on a device of `total` bytes: half the headroom,
/// at most `max`.
pub fn reserve_size(total: u64, max: u64) -> u64 {
    (headroom(total) / 2).min(max)
}

/// What a writable mount of a store at `dir` keeps as its reserve file
/// with the default limit, in bytes (mkfs says it).
pub fn default_reserve_at(dir: &Path) -> u64 {
    reserve_size(statvfs(dir).0, DEFAULT_RESERVE_MAX)
}

/// (total, available to unprivileged writers) bytes of the device holding `p`.
fn statvfs(p: &Path) -> (u64, u64) {
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap_or_default();
    // SAFETY: c is a valid C string and s a valid out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } == 0 {
        let f = s.f_frsize as u64;
        (s.f_blocks as u64 * f, s.f_bavail as u64 * f)
    } else {
        (1 << 40, 1 << 40)
    }
}

/// How a damaged journal's `Error::Corrupted` message begins: a salvage
/// opens such a store with a shorter journal (`salvage_store`).
pub(crate) const JOURNAL_DAMAGED: &str = "the journal is damaged";

/// Map a fjall error to the engine's: a full device is ENOSPC, what fjall
/// found undecodable (a checksum, a tag, a version, a cut file) is
/// corruption, the rest is I/O.
fn map_err(e: fjall::Error) -> Error {
    use fjall::{Error as F, LsmError as L};
    let io = match &e {
        F::Io(io) | F::Storage(L::Io(io)) => Some(io),
        _ => None,
    };
    if let Some(io) = io {
        if io.raw_os_error() == Some(libc::ENOSPC) || io.kind() == std::io::ErrorKind::StorageFull {
            return Error::NoSpace;
        }
    }
    let damaged = match &e {
        F::JournalRecovery(_) => return Error::Corrupted(format!("{JOURNAL_DAMAGED}: {e:?}")),
        F::Storage(
            L::ChecksumMismatch { .. }
            | L::Decompress(_)
            | L::InvalidVersion(_)
            | L::InvalidTag(_)
            | L::InvalidTrailer
            | L::InvalidHeader(_)
            | L::Utf8(_)
            | L::Unrecoverable,
        )
        | F::InvalidVersion(_)
        | F::Decompress(_)
        | F::InvalidTrailer
        | F::InvalidTag(_)
        | F::Unrecoverable => true,
        // A file shorter than what it says it holds: a cut table or journal.
        F::Io(io) | F::Storage(L::Io(io)) => io.kind() == std::io::ErrorKind::UnexpectedEof,
        _ => false,
    };
    if damaged {
        Error::Corrupted(format!("{e:?}"))
    } else {
        Error::Io(format!("{e:?}"))
    }
}

/// A failure to open the database: which store, and what can be done.
/// Damage fjall names (a checksum, an unreadable table) stays `Corrupted`,
/// which `shoal fsck --repair` salvages around; anything else (its table
/// list unreadable, say) is said with the store's name.
fn open_err(path: &Path, e: fjall::Error) -> Error {
    match map_err(e) {
        Error::Corrupted(m) => Error::Corrupted(format!("{}/db: {m}", path.display())),
        Error::NoSpace => Error::NoSpace,
        other => Error::Io(format!(
            "the database of {p} ({p}/db) does not open: {other}; a file of it is damaged or unreadable. \
             `shoal fsck --repair` saves stores whose tables or journal are damaged, not one whose table list \
             (db/keyspaces/*/v*, current) is: restore it from a copy",
            p = path.display()
        )),
    }
}

fn io_err(what: &str, p: &Path, e: std::io::Error) -> Error {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        return Error::NoSpace;
    }
    Error::Io(format!("{what} {}: {e}", p.display()))
}

/// Is the store at `path` the source of a mount (`PATH` or `shoal:PATH`)?
/// From /proc/self/mountinfo: the source is the field after the type,
/// which follows the " - " separator; spaces in it are escaped as \040.
fn mounted(path: &Path) -> bool {
    let want = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines().any(|line| {
        let Some((_, after)) = line.split_once(" - ") else {
            return false;
        };
        let mut f = after.split(' ');
        let (Some(fstype), Some(src)) = (f.next(), f.next()) else {
            return false;
        };
        let src = src.replace("\\040", " ");
        let src = Path::new(src.strip_prefix("shoal:").unwrap_or(&src));
        fstype.starts_with("fuse")
            && std::fs::canonicalize(src).unwrap_or_else(|_| src.to_path_buf()) == want
    })
}

impl FjallStore {
    /// Create a new store directory (mkfs) and format it with `format` (the
    /// engine's records); the store counts as made only once that is
    /// durable. Refuses a store and a non-empty directory that is not a
    /// half-made store.
    pub fn create(
        path: &Path,
        format: impl FnOnce(&FjallStore) -> Result<()>,
    ) -> Result<FjallStore> {
        if path.join(MARKER).exists() {
            return Err(Error::Exists);
        }
        if path.exists() {
            if Self::half_made(path) {
                for name in MKFS_LEFTOVERS {
                    let p = path.join(name);
                    let r = if p.is_dir() {
                        std::fs::remove_dir_all(&p)
                    } else {
                        std::fs::remove_file(&p)
                    };
                    if let Err(e) = r {
                        if e.kind() != std::io::ErrorKind::NotFound {
                            return Err(io_err("remove", &p, e));
                        }
                    }
                }
            }
            let nonempty = std::fs::read_dir(path)
                .map_err(|e| io_err("read", path, e))?
                .next()
                .is_some();
            if nonempty {
                return Err(Error::Invalid);
            }
        }
        std::fs::create_dir_all(path).map_err(|e| io_err("create", path, e))?;
        let store = Self::open_inner(path)?;
        format(&store)?;
        store
            .db
            .persist(fjall::PersistMode::SyncAll)
            .map_err(map_err)?;
        let tmp = path.join("SHOAL.tmp");
        let mut f = File::create(&tmp).map_err(|e| io_err("create", &tmp, e))?;
        f.write_all(MARKER_TEXT.as_bytes())
            .map_err(|e| io_err("write", &tmp, e))?;
        f.sync_all().map_err(|e| io_err("sync", &tmp, e))?;
        std::fs::rename(&tmp, path.join(MARKER)).map_err(|e| io_err("rename", &tmp, e))?;
        File::open(path)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_err("sync", path, e))?;
        Ok(store)
    }

    /// A directory an interrupted mkfs left: the database was started, the
    /// marker never written, and nothing else is there.
    fn half_made(path: &Path) -> bool {
        if path.join(MARKER).exists() || !path.join("db").is_dir() {
            return false;
        }
        let Ok(rd) = std::fs::read_dir(path) else {
            return false;
        };
        rd.flatten()
            .all(|e| MKFS_LEFTOVERS.iter().any(|n| e.file_name() == *n))
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

    /// Open an existing store without writing a byte of it (`-o ro`, fsck
    /// without `--repair`), also on read-only media. fjall writes while it
    /// opens (it recovers the journal in place, takes a lock file, may
    /// delete unreferenced tables), so it opens a shadow of the database in
    /// a private temporary directory: table and blob files are symbolic
    /// links to the store's (they are immutable, and only read), every other
    /// file (journals, manifests, small) is copied. Writes then go to the
    /// shadow, which is removed on close. Costs a copy of the journal: after
    /// a clean unmount at most 4 MiB.
    pub fn open_read_only(path: &Path) -> Result<FjallStore> {
        Self::open_read_only_journal(path, u64::MAX)
    }

    /// Bytes of journal (all journal files in order, oldest first).
    pub fn journal_len(path: &Path) -> u64 {
        journals(&path.join("db"))
            .iter()
            .map(|(_, m)| m.len())
            .sum()
    }

    /// `open_read_only` with only the first `keep` bytes of the journal
    /// (its files in order, oldest first): how a salvage opens a store whose
    /// journal is damaged part way.
    pub fn open_read_only_journal(path: &Path, keep: u64) -> Result<FjallStore> {
        Self::open_shadow(path, keep, None)
    }

    /// `open` (`read_only`: `open_read_only`) for a walk of the whole
    /// store in bounded memory (`shoal fsck --memory-mb`): a block cache of
    /// `cache` bytes. (The filter and index blocks stay pinned: fjall keeps
    /// a keyspace's pinning as it was created, so they take what they take,
    /// about 5 bytes a file, and fsck counts them as part of the open.)
    pub fn open_bounded(path: &Path, read_only: bool, cache: u64) -> Result<FjallStore> {
        if read_only {
            return Self::open_shadow(path, u64::MAX, Some(cache));
        }
        Self::probe(path)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path.join("LOCK"))
            .map_err(|e| io_err("open", path, e))?;
        Self::flock_or_wait(&lock, path)?;
        Self::open_db_with(path, &path.join("db"), Some(lock), Some(cache))
    }

    fn open_shadow(path: &Path, keep: u64, bounded: Option<u64>) -> Result<FjallStore> {
        Self::probe(path)?;
        // The shadow's links must name the tables absolutely.
        let path = &std::fs::canonicalize(path).map_err(|e| io_err("resolve", path, e))?;
        // The store's lock, when there is one, still keeps a daemon and a
        // read-only open apart (a store being changed cannot be checked).
        let lock = File::open(path.join("LOCK")).ok();
        if let Some(l) = &lock {
            Self::flock_or_wait(l, path)?;
        }
        static N: AtomicU64 = AtomicU64::new(0);
        let shadow = Shadow(std::env::temp_dir().join(format!(
            "shoal-ro-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )));
        let _ = std::fs::remove_dir_all(&shadow.0);
        shadow_copy(&path.join("db"), &shadow.0.join("db"), false)
            .map_err(|e| io_err("copy (read-only open)", &shadow.0, e))?;
        if keep != u64::MAX {
            let mut left = keep;
            for (name, m) in journals(&path.join("db")) {
                let len = m.len();
                let p = shadow.0.join("db").join(&name);
                let r = if left == 0 {
                    std::fs::remove_file(&p)
                } else {
                    File::options()
                        .write(true)
                        .open(&p)
                        .and_then(|f| f.set_len(len.min(left)))
                };
                r.map_err(|e| io_err("truncate", &p, e))?;
                left = left.saturating_sub(len);
            }
        }
        let mut s = Self::open_db_with(path, &shadow.0.join("db"), lock, bounded)?;
        s._shadow = Some(shadow);
        Ok(s)
    }

    fn flock_or_wait(lock: &File, path: &Path) -> Result<()> {
        // A daemon that was just unmounted or killed may still be exiting:
        // its last commit and the store's close hold the lock after the
        // kernel's umount returned (`umount M; mount S M` in a script, as
        // xfstests' cycle mounts do: generic/754 on a loaded machine). While
        // no mount serves the store, the holder is such a daemon: wait for
        // it up to a minute. A store that is mounted is refused after 3 s.
        let t0 = std::time::Instant::now();
        loop {
            // SAFETY: flock on a file descriptor we own.
            let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(());
            }
            let waited = t0.elapsed();
            if waited > std::time::Duration::from_secs(3)
                && (waited > std::time::Duration::from_secs(60) || mounted(path))
            {
                return Err(Error::Io(format!(
                    "{} is in use by another shoal daemon (unmount it, or stop the `shoal` process that has it open)",
                    path.display()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    fn open_inner(path: &Path) -> Result<FjallStore> {
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path.join("LOCK"))
            .map_err(|e| io_err("open", path, e))?;
        Self::flock_or_wait(&lock, path)?;
        Self::open_db(path, &path.join("db"), Some(lock))
    }

    /// Open fjall at `db` for the store at `path`.
    fn open_db(path: &Path, db: &Path, lock: Option<File>) -> Result<FjallStore> {
        Self::open_db_with(path, db, lock, None)
    }

    /// `bounded`: the block cache's bytes (`open_bounded`).
    fn open_db_with(
        path: &Path,
        db: &Path,
        lock: Option<File>,
        bounded: Option<u64>,
    ) -> Result<FjallStore> {
        let db_path = db;
        // fjall's own memory (block cache, memtables) is outside the engine's
        // cache budget; keep it small and bounded: the engine caches what is hot.
        // A flush frees the journal only once it is sealed, which fjall does
        // (when it flushes) past this size. fjall's 64 MB would be most of a
        // small device, and after a clean unmount (which flushes) the next
        // mount would read up to that much journal again.
        let rotation = 4 << 20;
        let mut b = fjall::Database::builder(db)
            .journal_rotation_size(rotation)
            .manual_journal_persist(true)
            .cache_size(bounded.unwrap_or(64 << 20));
        if bounded.is_some() && db_path != path.join("db") {
            // A bounded walk of a read-only open writes nothing: no
            // background flushes or compactions of the shadow (after a
            // crash they would rewrite the replayed journal, and take
            // memory the walk cannot count).
            b = b.worker_threads_unchecked(0);
        }
        let db = b.open().map_err(|e| open_err(path, e))?;
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
                // 119.5 -> 100.2 s, peak RSS 1.48 -> 1.55 GB (docs/perf-log/05-elided-keys-reclaim-clock.md).
                // Under a memory bound (`open_bounded`), memtables no
                // larger than the block cache: with two sealed and one
                // active, fjall's 64 MiB took 192 MiB of a 200 MiB bound.
                fjall::KeyspaceCreateOptions::default()
                    .max_memtable_size(bounded.map_or(64 << 20, bounded_memtable))
                    .compaction_strategy(std::sync::Arc::new(
                        fjall::compaction::Leveled::default().with_l0_threshold(8),
                    ))
                    .filter_block_pinning_policy(fjall::config::PinningPolicy::all(true))
                    .index_block_pinning_policy(fjall::config::PinningPolicy::all(true))
            })
            .map_err(|e| open_err(path, e))?;
        // A read-only open reads a copy of the database (`open_read_only`)
        // and the data files in place, without writing them.
        let read_only = db_path != path.join("db");
        Ok(FjallStore {
            db,
            ks,
            path: path.to_path_buf(),
            data: Arc::new(crate::DataFiles::new(path, read_only)),
            _lock: lock,
            _shadow: None,
            gets: AtomicU64::new(0),
            scans: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            keys_written: AtomicU64::new(0),
            memtable_cap: bounded.map_or(0, bounded_memtable),
            sync_lock: Mutex::new(()),
            space: Space {
                sample: Mutex::new((
                    std::time::Instant::now() - std::time::Duration::from_secs(1),
                    0,
                    0,
                )),
                maint: Arc::new(Maint {
                    reserve: path.join("reserve"),
                    held: AtomicU64::new(
                        std::fs::metadata(path.join("reserve"))
                            .map(|m| m.len())
                            .unwrap_or(0),
                    ),
                    max: AtomicU64::new(DEFAULT_RESERVE_MAX),
                    state: Default::default(),
                    cv: Default::default(),
                    frees_pending: Default::default(),
                }),
                thread: Mutex::new(None),
            },
        })
    }

    /// The most the reserve file may hold (`-o reserve_mb=N`; 0: none).
    /// Call before `keep_room`.
    pub fn set_reserve_max(&self, bytes: u64) {
        self.space.maint.max.store(bytes, Ordering::Relaxed);
    }

    /// For a writable mount: hold the reserve file (see `Space`) and start
    /// the thread that gives space back after deletes on a nearly full store.
    pub fn keep_room(&self) {
        self.space
            .maint
            .frees_pending
            .store(true, Ordering::Relaxed);
        self.space
            .maint
            .restore_reserve(&self.path, self.flush_and_compaction_room());
        let (total, avail) = statvfs(&self.path);
        if avail < 2 * (headroom(total) + self.flush_and_compaction_room()) {
            // Nearly full already: what an earlier daemon deleted may still
            // take room.
            self.space.maint.kick();
        }
        let (db, ks, maint) = (self.db.clone(), self.ks.clone(), self.space.maint.clone());
        let path = self.path.clone();
        let h = std::thread::Builder::new()
            .name("shoal-space".into())
            .spawn(move || give_back(&db, &ks, &maint, &path));
        *self.space.thread.lock() = h.ok();
    }

    /// Bytes the journal files take on disk. (fjall's own count is their
    /// length, and a new journal is made 64 MiB long before it is written.)
    fn journal_bytes(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        journals(&self.path.join("db"))
            .iter()
            .map(|(_, m)| m.blocks() * 512)
            .sum()
    }

    /// What flushing the memtables and one compaction may write, and the
    /// journal that stays until its memtables are flushed. (The journal may
    /// be compressed and the tables not: a flush can write more than the
    /// journal holds.)
    fn flush_and_compaction_room(&self) -> u64 {
        let journal = self.journal_bytes();
        journal.max(self.db.write_buffer_size()) + self.ks.disk_space().min(COMPACTION_ROOM)
    }

    /// Wait until no process holds the store's lock (a daemon has fully exited).
    pub fn wait_unlocked(path: &Path, timeout: std::time::Duration) -> bool {
        let Ok(f) = File::open(path.join("LOCK")) else {
            return true;
        };
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

    /// Write the memtables to tables, so that opening the store again
    /// replays no journal (a clean unmount does this). Never waits forever
    /// (`flush_bounded`): when the store has failed, or no memtable was
    /// flushed for `FLUSH_STALL`, it returns the reason; the journal still
    /// holds every committed change and replays at the next mount.
    pub fn flush_memtables(&self) -> Result<()> {
        flush_bounded(&self.db, &self.ks, &self.path, || false)?;
        self.db
            .persist(fjall::PersistMode::SyncAll)
            .map_err(map_err)
    }

    /// Flush memtables and compact fully (for space measurements).
    pub fn compact(&self) -> Result<()> {
        flush_bounded(&self.db, &self.ks, &self.path, || false)?;
        self.ks.major_compact().map_err(map_err)
    }

    /// Why the store failed on its own, if it did: fjall stops for good when
    /// a journal write or sync fails, or when a background flush or
    /// compaction does (it poisons the database; vendor patch: the worker's
    /// error is kept). Every later write fails; a reopen (the next mount)
    /// recovers from the journal.
    pub fn failure(&self) -> Option<String> {
        failure_of(&self.db, &self.path)
    }
}

impl FjallStore {
    /// A write's error: fjall's `Poisoned` says only that an earlier
    /// failure stopped the database; say which (`failure`).
    fn write_err(&self, e: fjall::Error) -> Error {
        match (&e, self.failure()) {
            (fjall::Error::Poisoned, Some(why)) => Error::Io(why),
            _ => map_err(e),
        }
    }
}

/// A memtable's size under a memory bound whose block cache is `cache`
/// bytes: no larger than the cache, within 4 to 64 MiB (`open_bounded`).
fn bounded_memtable(cache: u64) -> u64 {
    cache.clamp(4 << 20, 64 << 20)
}

/// `FjallStore::failure` of the database `db` of the store at `path`.
fn failure_of(db: &fjall::Database, path: &Path) -> Option<String> {
    db.poisoned()
        .map(|why| format!("{why} (in {}/db)", path.display()))
}

/// A flush that made no progress for this long is given up (the store is
/// stuck, not failed: a disk that stopped answering). A flush of a full
/// 64 MiB memtable takes about a second.
pub const FLUSH_STALL: std::time::Duration = std::time::Duration::from_secs(60);

/// Seal the active memtable and wait until every sealed one is a table,
/// with a way out: fjall's `rotate_memtable_and_wait` sleeps until its
/// flush worker has written them, and a worker that failed (its error is
/// logged, the database poisoned) never will: an unmount waited forever
/// (issue 43). Here the wait ends when the database is poisoned (the
/// reason returned), when `stop` says so, or after `FLUSH_STALL` without
/// a memtable flushed.
fn flush_bounded(
    db: &fjall::Database,
    ks: &fjall::Keyspace,
    path: &Path,
    stop: impl Fn() -> bool,
) -> Result<()> {
    if let Some(why) = failure_of(db, path) {
        return Err(Error::Io(why));
    }
    ks.rotate_memtable().map_err(map_err)?;
    let mut last = (ks.sealed_memtable_count(), std::time::Instant::now());
    loop {
        let left = ks.sealed_memtable_count();
        if left == 0 {
            return Ok(());
        }
        if let Some(why) = failure_of(db, path) {
            return Err(Error::Io(why));
        }
        if stop() {
            return Err(Error::Io("flush abandoned: the store is closing".into()));
        }
        if left < last.0 {
            last = (left, std::time::Instant::now());
        } else if last.1.elapsed() > FLUSH_STALL {
            return Err(Error::Io(format!(
                "{left} memtables of {}/db not flushed after {} s without progress (the journal holds them)",
                path.display(),
                FLUSH_STALL.as_secs()
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

impl Store for FjallStore {
    fn data(&self) -> Arc<dyn shoal_core::data::DataStore> {
        self.data.clone()
    }
    fn snapshot(&self) -> Result<Arc<dyn Store>> {
        Ok(Arc::new(FjallSnapshot {
            snap: self.db.snapshot(),
            ks: self.ks.clone(),
            data: self.data.clone(),
        }))
    }
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
        let bytes: u64 = batch
            .iter()
            .map(|(k, v)| (k.len() + v.as_ref().map_or(0, |v| v.len()) + 32) as u64)
            .sum();
        let (total, avail) = statvfs(&self.path);
        if avail < 2 * bytes + headroom(total) / 4 {
            // Another program (or this one, past its admission) nearly
            // filled the device: the reserve's room goes to this commit.
            self.space
                .maint
                .release_reserve("the device is nearly full");
        }
        let frees = batch.iter().any(|(_, v)| v.is_none());
        let mut b = self.db.batch();
        for (k, v) in batch {
            match v {
                Some(v) => b.insert(&self.ks, k.clone(), v.clone()),
                None => b.remove(&self.ks, k.clone()),
            }
        }
        b.commit().map_err(|e| self.write_err(e))?;
        if self.memtable_cap > 0 {
            use fjall::AbstractTree;
            if self.ks.tree.active_memtable().size() > self.memtable_cap {
                // Sealed here, flushed by fjall's worker (as its own
                // rotation past `max_memtable_size` does).
                self.ks.rotate_memtable().map_err(map_err)?;
            }
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.keys_written
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        if frees {
            self.space
                .maint
                .frees_pending
                .store(true, Ordering::Relaxed);
            if avail < 2 * (headroom(total) + self.flush_and_compaction_room()) {
                self.space.maint.kick();
            }
        }
        if sync {
            self.sync()?;
        } else {
            // Hand the journal to the OS so a killed daemon loses nothing written.
            self.db
                .persist(fjall::PersistMode::Buffer)
                .map_err(|e| self.write_err(e))?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let _g = self.sync_lock.lock();
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.db
            .persist(fjall::PersistMode::SyncAll)
            .map_err(|e| self.write_err(e))
    }

    /// (device size, what the engine may still fill): the device's free
    /// bytes and the reserve, less the room kept (see `Space`). Sampled at
    /// most every 10 ms (the tables' sizes are summed for it).
    fn space(&self) -> (u64, u64) {
        let mut s = self.space.sample.lock();
        if s.0.elapsed() < std::time::Duration::from_millis(10) {
            return (s.1, s.2);
        }
        let (total, avail) = statvfs(&self.path);
        let keep = headroom(total) + self.flush_and_compaction_room();
        let usable = (avail + self.space.maint.held.load(Ordering::Relaxed)).saturating_sub(keep);
        if usable == 0 && self.space.maint.frees_pending.load(Ordering::Relaxed) {
            // Full, and deleted records may still take room: give it back.
            self.space.maint.kick();
        }
        *s = (std::time::Instant::now(), total, usable);
        tracing::debug!(
            avail,
            held = self.space.maint.held.load(Ordering::Relaxed),
            journal = self.journal_bytes(),
            wbs = self.db.write_buffer_size(),
            tables = self.ks.disk_space(),
            usable,
            "space"
        );
        (total, usable)
    }

    fn failure(&self) -> Option<String> {
        FjallStore::failure(self)
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

impl Drop for FjallStore {
    fn drop(&mut self) {
        *self
            .space
            .maint
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = 2;
        self.space.maint.cv.notify_all();
        if let Some(h) = self.space.thread.lock().take() {
            let _ = h.join();
        }
    }
}

/// The maintenance thread (`FjallStore::keep_room`): after deletes on a
/// nearly full store, flush the journal, which frees it (a file written and
/// deleted since the last flush lies there whole), then compact if the device
/// can hold the compaction's output, which drops the deleted records from
/// the tables. At most once a second.
fn give_back(db: &fjall::Database, ks: &fjall::Keyspace, maint: &Maint, path: &Path) {
    loop {
        {
            let mut st = maint.state.lock().unwrap_or_else(|e| e.into_inner());
            while *st == 0 {
                st = maint.cv.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if *st == 2 {
                return;
            }
            *st = 0;
        }
        // Let a burst of deletes (rm -r) finish first.
        std::thread::sleep(std::time::Duration::from_millis(300));
        if *maint.state.lock().unwrap_or_else(|e| e.into_inner()) == 2 {
            return;
        }
        maint.frees_pending.store(false, Ordering::Relaxed);
        let before = statvfs(path).1;
        let closing = || *maint.state.lock().unwrap_or_else(|e| e.into_inner()) == 2;
        if let Err(e) = flush_bounded(db, ks, path, closing) {
            tracing::warn!("flush after deletes: {e}");
            continue;
        }
        // A compaction writes at most its input (the tables) before it
        // deletes it. The reserve is the store's own room: given up for the
        // compaction if need be, taken again after.
        let (total, avail) = statvfs(path);
        let tables = ks.disk_space();
        let held = maint.held.load(Ordering::Relaxed);
        if avail + held > tables + headroom(total) / 4 {
            if avail < tables + headroom(total) / 4 {
                maint.release_reserve("room for a compaction after deletes");
            }
            // The table version the compaction replaced is collected only
            // once a newer sequence number exists: a delete of a key outside
            // the schema (tags are capital letters) makes one.
            let done = ks
                .major_compact()
                .and_then(|()| ks.remove(&b"\xffgc"[..]))
                .and_then(|()| ks.collect_old_versions());
            if let Err(e) = done {
                tracing::warn!("compaction after deletes: {e:?}");
            }
        }
        maint.restore_reserve(path, ks.disk_space().min(COMPACTION_ROOM));
        tracing::info!(
            "space given back after deletes: {} MiB free, was {} MiB",
            statvfs(path).1 >> 20,
            before >> 20
        );
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// The shadow of a database directory for `open_read_only`: directories made,
/// files under `tables/` and `blobs/` linked, the rest copied.
fn shadow_copy(from: &Path, to: &Path, immutable: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ty = e.file_type()?;
        if ty.is_dir() {
            let name = e.file_name();
            shadow_copy(&src, &dst, immutable || name == "tables" || name == "blobs")?;
        } else if immutable {
            std::os::unix::fs::symlink(&src, &dst)?;
        } else {
            copy_sparse(&src, &dst)?;
        }
    }
    Ok(())
}

/// Copy a file, leaving its zero-filled MiBs as holes: fjall makes each new
/// journal 64 MiB long before writing it, and a copy need not hold the zeros.
fn copy_sparse(src: &Path, dst: &Path) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut r = File::open(src)?;
    let mut w = File::create(dst)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0u64;
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if buf[..n].iter().any(|&b| b != 0) {
            w.seek(SeekFrom::Start(pos))?;
            w.write_all(&buf[..n])?;
        }
        pos += n as u64;
    }
    w.set_len(pos)
}

/// The journal files of a database directory, oldest first, with their
/// metadata (fjall makes each 64 MiB long ahead and writes it from the
/// start: its length is not what it holds, its allocated blocks nearly are).
fn journals(db: &Path) -> Vec<(std::ffi::OsString, std::fs::Metadata)> {
    let mut js: Vec<(u64, std::ffi::OsString, std::fs::Metadata)> = std::fs::read_dir(db)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let n = name.to_str()?.strip_suffix(".jnl")?.parse::<u64>().ok()?;
            Some((n, name, e.metadata().ok()?))
        })
        .collect();
    js.sort_by_key(|j| j.0);
    js.into_iter().map(|(_, name, m)| (name, m)).collect()
}

/// One instant of a `FjallStore`'s records (fjall's MVCC snapshot: what
/// it reads stays as it was while the store goes on), read-only. fjall
/// keeps the versions it needs until it is dropped, so hold it only as
/// long as one dump.
struct FjallSnapshot {
    snap: fjall::Snapshot,
    ks: fjall::Keyspace,
    data: Arc<crate::DataFiles>,
}

impl Store for FjallSnapshot {
    fn data(&self) -> Arc<dyn shoal_core::data::DataStore> {
        self.data.clone()
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        use fjall::Readable;
        Ok(self
            .snap
            .get(&self.ks, key)
            .map_err(map_err)?
            .map(|v| v.to_vec()))
    }
    fn scan(&self, lo: &[u8], hi: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        use fjall::Readable;
        let mut out = Vec::new();
        for g in self.snap.range(&self.ks, lo.to_vec()..hi.to_vec()) {
            if out.len() >= limit {
                break;
            }
            let (k, v) = g.into_inner().map_err(map_err)?;
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }
    fn write(&self, _batch: &[BatchItem], _sync: bool) -> Result<()> {
        Err(Error::ReadOnly)
    }
    fn sync(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod reserve_tests {
    use super::*;

    /// The reserve is half the headroom, capped: 2 MiB on a 64 MiB device
    /// (enospc.sh's), 64 MiB on a large one (it was 512 MiB), none at 0.
    #[test]
    fn reserve_is_half_the_headroom_capped() {
        assert_eq!(reserve_size(64 << 20, DEFAULT_RESERVE_MAX), 2 << 20);
        assert_eq!(reserve_size(1 << 30, DEFAULT_RESERVE_MAX), 16 << 20);
        assert_eq!(reserve_size(1 << 40, DEFAULT_RESERVE_MAX), 64 << 20);
        assert_eq!(reserve_size(1 << 40, 1 << 30), 512 << 20);
        assert_eq!(reserve_size(1 << 40, 0), 0);
    }
}
