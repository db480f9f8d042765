//! The operations API. Every method takes `&self` and is safe to call from any
//! number of threads.
//!
//! One `Engine`, its methods in a file per concept: `records` (loading
//! inodes, queueing records, the ending of every mutation), `lookup`,
//! `namespace` (create, unlink, link, rename, rmdir), `attr`, `data` (read,
//! write, fallocate, fsync), `readdir`, `xattr`, `reclaim` (orphans,
//! eviction, statfs); this file holds the struct, open and shutdown, space
//! admission and the shared checks.
//!
//! Lock order (docs/locking.md argues it): rename mutex -> name slots (by slot
//! index) -> reclaim (shared, only around store fills, released before the
//! gate) -> commit gate shard -> one inode state at a time -> directory shard
//! / inode-table shard (leaves). No operation holds two inode states at once.

use crate::acl;
use crate::cache::{Dent, Inode, InodeState, InodeTable, NameLocks, DIR_STRIPES};
use crate::commit::{Committer, Gate, Record};
use crate::data::DataStore;
use crate::error::{Error, Result};
use crate::rules;
use crate::schema::{self, name_hash, AG_SHIFT};
use crate::stats::{Op, OpStats};
use crate::store::Store;
use crate::sync::{
    Arc, AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Counter, LockClass, Mutex, Ordering,
    PlainMutex, RwLock,
};
use crate::types::*;
use std::collections::{BTreeMap, HashMap};

mod alloc;
mod attr;
mod data;
pub mod flags;
mod lookup;
mod namespace;
mod readdir;
mod reclaim;
mod records;
mod xattr;

use alloc::INO_CHUNK;
/// The most of a process memory bound the cache may have (70%; see
/// `Engine::adapt_budget` for why): the budget's ceiling under the bound, and
/// the base of the demotion threshold.
fn cache_share(bound: u64) -> u64 {
    bound / 10 * 7
}
/// Entries or inodes reclaim evicts per exclusive hold of the `reclaim` lock
/// (about a millisecond of work: the longest a fill waits for reclaim).
const RECLAIM_CHUNK: usize = 4096;

/// Attribute changes for `setattr`.
#[derive(Clone, Debug, Default)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeSet>,
    pub mtime: Option<TimeSet>,
    pub ctime: Option<Ts>,
    /// Through an open handle (ftruncate): the open already checked write access.
    pub by_handle: bool,
}

#[derive(Clone, Copy, Debug)]
pub enum TimeSet {
    Now,
    At(Ts),
}

pub const RENAME_NOREPLACE: u32 = 1;
pub const RENAME_EXCHANGE: u32 = 2;
/// renameat2's `RENAME_WHITEOUT`: the old name becomes a whiteout (a
/// character device 0:0, as overlayfs makes them) in the same commit.
pub const RENAME_WHITEOUT: u32 = 4;
pub const XATTR_CREATE: u32 = 1;
pub const XATTR_REPLACE: u32 = 2;
pub const FALLOC_KEEP_SIZE: u32 = 1;
pub const FALLOC_PUNCH_HOLE: u32 = 2;
pub const FALLOC_ZERO_RANGE: u32 = 0x10;

/// Access mask bits for [`Engine::access`].
pub use crate::rules::perm::{R_OK, W_OK, X_OK};
/// With `R_OK`/`W_OK` in `Engine::open_file`'s mask: the open has `O_APPEND`.
pub const OPEN_APPEND: u32 = 0x100;
/// With `R_OK`/`W_OK` in `Engine::open_file`'s mask: the open has `O_TRUNC`.
pub const OPEN_TRUNC: u32 = 0x200;

static ENGINE_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

#[derive(Default)]
struct DirCache {
    /// Live `DirRef`s of this thread.
    depth: usize,
    ents: Vec<(u64, Ino, Arc<Inode>)>,
}

thread_local! {
    static DIRS: std::cell::RefCell<DirCache> = std::cell::RefCell::new(DirCache::default());
}

/// A borrowed directory inode (see `Engine::dir_ref`). Not Send: it lives on
/// the thread whose cache pins it.
pub(crate) struct DirRef {
    ptr: *const Inode,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl std::ops::Deref for DirRef {
    type Target = Inode;
    fn deref(&self) -> &Inode {
        // SAFETY: see Engine::dir_ref: the thread-local cache holds an Arc to
        // the pointee and does not drop it while this DirRef lives.
        unsafe { &*self.ptr }
    }
}

impl Drop for DirRef {
    fn drop(&mut self) {
        DIRS.with(|c| c.borrow_mut().depth -= 1);
    }
}

/// What one inode or entry record costs the store at most, beside its name
/// and data (space admission, `Engine::room`).
const RECORD_ROOM: u64 = 512;

pub struct Engine {
    pub cfg: Config,
    id: u64,
    store: Arc<dyn Store>,
    /// The bytes of files past `INLINE_MAX` (`crate::data`).
    data: Arc<dyn DataStore>,
    /// Data objects of destroyed inodes, with the epoch of the destruction:
    /// removed once it is durable (`remove_doomed`). Inode numbers are never
    /// used again, so nothing can write to such an object meanwhile.
    /// Sharded by number, as `gone` is: one engine-wide lock here, taken by
    /// every unlink of a file, cost seed 000's crunl a quarter of its
    /// 2-worker rate (docs/perf-log/27-unlink-object-queue.md).
    doomed: Vec<PlainMutex<Vec<(Ino, u64)>>>,
    /// Inodes whose data objects were written since their last sync, sharded
    /// by number: what `sync` and `shutdown` must sync besides the commit.
    dirty_data: Vec<PlainMutex<std::collections::HashSet<Ino>>>,
    inodes: InodeTable,
    names: NameLocks,
    /// protects: the shape of the directory tree against concurrent
    /// cross-directory renames (Linux's s_vfs_rename_mutex).
    rename_lock: Mutex<()>,
    /// protects: cache fills against batched eviction (fills share it).
    reclaim: RwLock<()>,
    pub committer: Arc<Committer>,
    commit_thread: PlainMutex<Option<std::thread::JoinHandle<()>>>,
    /// Space admission (`room`): when the store's free space was last
    /// sampled (ms since `SPACE_EPOCH`), and whether it was plenty then.
    space_at: AtomicU64,
    space_plenty: AtomicBool,
    /// Inodes deleted in an epoch not yet durable, with that epoch, sharded
    /// by number: their records are still in the store, so a miss in the
    /// inode table must not load them back (`Engine::inode`). A library
    /// caller may hold an inode number without a reference (the kernel
    /// always holds one, so through a mount the table keeps the object);
    /// found by the same-name race tests (rmdir against a create inside,
    /// `crates/core/tests/same_name.rs`).
    gone: Vec<PlainMutex<HashMap<Ino, u64>>>,
    /// Next free inode sequence per AG (chunks are carved from it).
    ag_next: Vec<crossbeam_utils::CachePadded<AtomicU64>>,
    spread_rr: AtomicU64,
    pub stats: OpStats,
    pub cached_dents: Counter,
    /// Writers that waited in `throttle`.
    pub throttled: AtomicU64,
    /// Bytes of directories' evicted-name filters (see `cache::EvictedFilter`).
    pub evicted_filter_bytes: Arc<AtomicI64>,
    pub cached_data: Counter,
    reclaim_cursor: AtomicUsize,
    /// The cache budget in force: `cfg.cache_bytes`, lowered under a
    /// process memory bound (`adapt_budget`).
    budget: AtomicU64,
    /// Unix milliseconds of the last resident-memory sample.
    budget_sampled: AtomicU64,
    /// Unix milliseconds of the last reclaim pass that freed more than 5% of
    /// the memory bound (`adapt_budget`).
    big_reclaim_at: AtomicU64,
    /// The process is near its memory bound: writers stall (`throttle`).
    over_bound: AtomicBool,
    pub evicted_inodes: AtomicU64,
    pub evicted_dents: AtomicU64,
    /// Evicted-name hashes dropped by demoting directories to incomplete.
    pub demoted_hashes: AtomicU64,
    pub reclaim_batches: AtomicU64,
    pub fills: AtomicU64,
    /// Unlinks that deleted their inode without reading it (sole entries).
    pub unread_unlinks: AtomicU64,
}

fn now() -> Ts {
    Ts::now()
}

use crate::rules::names::{self, NameOp};
/// POSIX permission check against one inode's attributes (the rule:
/// `rules::perm::access`).
pub use crate::rules::perm::access as check_access;

impl Engine {
    /// Format an empty store.
    pub fn mkfs(store: &dyn Store, ags: u32) -> Result<()> {
        if ags == 0 || ags > MAX_AGS {
            return Err(Error::Invalid);
        }
        if store.get(&schema::super_key())?.is_some() {
            return Err(Error::Exists);
        }
        let t = now();
        let root = Attr::root(t);
        let mut b = vec![
            (schema::super_key(), Some(schema::encode_super(ags))),
            (
                schema::inode_key(ROOT_INO),
                Some(schema::encode_inode(
                    &root,
                    &ROOT_INO.to_le_bytes(),
                    &[],
                    None,
                    0,
                )),
            ),
        ];
        for ag in 0..ags {
            b.push((
                schema::ag_key(ag),
                Some(schema::encode_u64(if ag == 0 { 2 } else { 1 })),
            ));
        }
        store.write(&b, true)
    }

    /// Open an engine on a formatted store: read the superblock and AG
    /// counters, reclaim orphans, start the committer.
    pub fn open(store: Arc<dyn Store>, mut cfg: Config) -> Result<Arc<Engine>> {
        if store.is_null() {
            // Memory only: format on the fly.
            cfg.ags = cfg.ags.max(1);
        } else {
            let sb = store.get(&schema::super_key())?.ok_or_else(|| {
                Error::Corrupted("no superblock: not a shoal store (run `shoal mkfs`)".into())
            })?;
            let (ags, format) = schema::decode_super_format(&sb)?;
            if ags == 0 || ags > MAX_AGS {
                return Err(Error::Corrupted(format!(
                    "superblock: {ags} allocation groups (1 to {MAX_AGS} are valid)"
                )));
            }
            cfg.ags = ags;
            if format < schema::FORMAT_DATA_OBJECTS {
                if cfg.read_only {
                    let (lo, hi) = schema::data_records();
                    if !store.scan(&lo, &hi, 1)?.is_empty() {
                        return Err(Error::Io(format!(
                            "this store (format {format}) keeps file data in its records; \
                             mount it read-write once with this shoal to move the data \
                             to data objects (format {}), or read it with the shoal that made it",
                            schema::FORMAT
                        )));
                    }
                } else {
                    Self::move_data_records(&*store)?;
                }
            }
            if format < schema::FORMAT && !cfg.read_only {
                // Records of the newer format may follow: mark the store so an
                // older shoal refuses it instead of calling them corrupt.
                store.write(
                    &[(schema::super_key(), Some(schema::encode_super(ags)))],
                    true,
                )?;
            }
        }
        let committer = Committer::new(store.clone(), cfg.durability, cfg.commit_interval_ms);
        committer.set_on_error(cfg.on_error);
        let cache_bytes = cfg.cache_bytes;
        let mut ag_next = Vec::new();
        for ag in 0..cfg.ags {
            let next = if store.is_null() {
                if ag == 0 {
                    2
                } else {
                    1
                }
            } else {
                match store.get(&schema::ag_key(ag))? {
                    Some(v) => schema::decode_u64("allocation group", &v)?,
                    None => {
                        return Err(Error::Corrupted(format!(
                            "allocation group {ag} record missing"
                        )))
                    }
                }
            };
            // Chunks start on a multiple of their size, so each lies in one
            // inode-table shard (`cache::ino_shard`); the few numbers skipped
            // here are never used (numbers only grow).
            ag_next.push(crossbeam_utils::CachePadded::new(AtomicU64::new(
                next.next_multiple_of(INO_CHUNK),
            )));
        }
        let e = Arc::new(Engine {
            names: NameLocks::new(cfg.lock_scope),
            cfg,
            id: ENGINE_IDS.fetch_add(1, Ordering::Relaxed),
            store: store.clone(),
            data: store.data(),
            doomed: (0..16).map(|_| PlainMutex::new(Vec::new())).collect(),
            dirty_data: (0..16)
                .map(|_| PlainMutex::new(Default::default()))
                .collect(),
            inodes: InodeTable::default(),
            rename_lock: Mutex::new(LockClass::Rename, ()),
            reclaim: RwLock::new(LockClass::Reclaim, ()),
            committer,
            commit_thread: PlainMutex::new(None),
            ag_next,
            spread_rr: AtomicU64::new(0),
            stats: OpStats::default(),
            cached_dents: Counter::default(),
            evicted_filter_bytes: Arc::default(),
            throttled: AtomicU64::new(0),
            cached_data: Counter::default(),
            reclaim_cursor: AtomicUsize::new(0),
            budget: AtomicU64::new(cache_bytes),
            budget_sampled: AtomicU64::new(0),
            big_reclaim_at: AtomicU64::new(0),
            over_bound: AtomicBool::new(false),
            space_at: AtomicU64::new(0),
            space_plenty: AtomicBool::new(false),
            evicted_inodes: AtomicU64::new(0),
            evicted_dents: AtomicU64::new(0),
            demoted_hashes: AtomicU64::new(0),
            reclaim_batches: AtomicU64::new(0),
            gone: (0..16).map(|_| PlainMutex::new(HashMap::new())).collect(),
            fills: AtomicU64::new(0),
            unread_unlinks: AtomicU64::new(0),
        });
        if store.is_null() {
            let t = now();
            let root = Attr::root(t);
            e.inodes.insert(Inode::new(
                e.new_state(root, ROOT_INO.to_le_bytes().to_vec()),
                true,
                Some(&e.evicted_filter_bytes),
            ));
        } else {
            let root = e.inode(ROOT_INO)?;
            if root.kind != Kind::Dir {
                return Err(Error::Corrupted("root inode is not a directory".into()));
            }
            if !e.cfg.read_only {
                e.recover_orphans()?;
                if e.cfg.sweep_data {
                    e.sweep_data()?;
                }
            }
        }
        // Directory records are formatted when their epoch closes.
        let weak = Arc::downgrade(&e);
        e.committer
            .set_formatter(Box::new(move |inos, epoch| match weak.upgrade() {
                Some(e) => e.format_marked(inos, epoch),
                None => Vec::new(),
            }));
        // Batched reclaim runs on the committer thread after each commit.
        let weak = Arc::downgrade(&e);
        e.committer.set_after_commit(Box::new(move || {
            if let Some(e) = weak.upgrade() {
                e.forget_gone(e.committer.durable_epoch());
                // Buffered commits are not durable until a sync: their
                // objects go at the next `sync` (a crash before it could
                // bring the inode back).
                if e.cfg.durability != Durability::Buffered {
                    e.remove_doomed(e.committer.durable_epoch());
                }
                e.maybe_reclaim();
            }
        }));
        if !store.is_null() {
            *e.commit_thread.lock() = Some(e.committer.start());
        }
        Ok(e)
    }

    /// Commit everything and stop the committer. The engine stays readable.
    pub fn shutdown(&self) -> Result<()> {
        let r = self.sync();
        self.committer.shutdown();
        self.join_committer();
        r
    }

    /// Stop the commit thread (its last commit attempt included) without
    /// syncing anything: what a power cut leaves. For tests, which then cut
    /// the store's power; dropping the engine may not end the thread at
    /// once, since the thread's own after-commit work can hold the last
    /// reference for a moment.
    pub fn halt(&self) {
        self.committer.shutdown();
        self.join_committer();
    }

    /// Wait for the commit thread to end, unless this is it (the last
    /// reference to the engine can be dropped by the commit thread's own
    /// after-commit work).
    fn join_committer(&self) {
        if let Some(h) = self.commit_thread.lock().take() {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    fn new_state(&self, attr: Attr, blob: Vec<u8>) -> InodeState {
        InodeState {
            attr,
            blob,
            blocks: BTreeMap::new(),
            xattrs: Vec::new(),
            dirty_epoch: 0,
            data_epoch: 0,
            dead: false,
            destroyed: false,
            object: false,
            primary: None,
            pinned: 0,
            flags: 0,
            linkable: false,
        }
    }

    /// Space admission for an operation that makes the store grow by about
    /// `need` bytes: ENOSPC unless the store's usable space (what is free
    /// less the room it keeps for deletes, flushes and compactions, see
    /// `Store::space`) covers it and what the open epoch already holds.
    /// Deletes never ask, so on a full store they still commit and give
    /// space back; nothing acknowledged then fails to commit for want of
    /// room. With plenty of space (over 1 GiB usable) the answer is sampled
    /// every 100 ms; near full, every call asks the store.
    fn room(&self, need: u64) -> Result<()> {
        if self.store.is_null() {
            return Ok(());
        }
        static SPACE_EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        let now = SPACE_EPOCH
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_millis() as u64
            + 1;
        if self.space_plenty.load(Ordering::Relaxed)
            && now.saturating_sub(self.space_at.load(Ordering::Relaxed)) < 100
        {
            return Ok(());
        }
        let (_, usable) = self.store.space();
        self.space_at.store(now, Ordering::Relaxed);
        self.space_plenty.store(usable > 1 << 30, Ordering::Relaxed);
        if usable < need.saturating_add(self.committer.open_bytes()) {
            return Err(Error::NoSpace);
        }
        Ok(())
    }

    fn writable(&self) -> Result<()> {
        if self.cfg.read_only {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }
}

/// Under a memory bound, notes when a reclaim pass ends whether it freed
/// more than 5% of the bound (see `Engine::adapt_budget`).
struct BigReclaim<'a> {
    e: &'a Engine,
    before: u64,
}

impl Drop for BigReclaim<'_> {
    fn drop(&mut self) {
        if self.before.saturating_sub(self.e.cache_usage()) > self.e.cfg.memory_bytes / 20 {
            self.e.big_reclaim_at.store(unix_ms(), Ordering::Relaxed);
        }
    }
}

fn unix_ms() -> u64 {
    let now = crate::types::Ts::now();
    now.sec as u64 * 1000 + now.nsec as u64 / 1_000_000
}

/// This process's resident memory (Linux: VmRSS of /proc/self/status).
pub fn resident_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb << 10)
}

fn copy_from_block(blk: &[u8], boff: usize, dst: &mut [u8]) {
    if boff < blk.len() {
        let n = dst.len().min(blk.len() - boff);
        dst[..n].copy_from_slice(&blk[boff..boff + n]);
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.committer.shutdown();
        self.join_committer();
    }
}
