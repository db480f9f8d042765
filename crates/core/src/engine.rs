//! The operations API. Every method takes `&self` and is safe to call from any
//! number of threads.
//!
//! Lock order (docs/locking.md argues it): rename mutex -> name slots (by slot
//! index) -> reclaim (shared, only around store fills, released before the
//! gate) -> commit gate shard -> one inode state at a time -> directory shard
//! / inode-table shard (leaves). No operation holds two inode states at once.

use crate::acl;
use crate::cache::{Dent, Inode, InodeState, InodeTable, NameLocks, DIR_STRIPES};
use crate::commit::{Committer, Gate, Record};
use crate::error::{Error, Result};
use crate::schema::{self, name_hash, AG_SHIFT};
use crate::stats::{Op, OpStats};
use crate::store::Store;
use crate::sync::{Arc, AtomicBool, Counter, AtomicI64, AtomicU64, AtomicUsize, LockClass, Mutex, Ordering, PlainMutex, RwLock};
use crate::types::*;
use std::collections::{BTreeMap, HashMap};

/// Inode numbers are handed to threads in chunks, like XFS's inode chunks, so
/// creating files does not touch a shared counter per file. The inode cache
/// is sharded by chunk (`cache::ino_shard`).
const INO_CHUNK: u64 = 1 << crate::cache::INO_CHUNK_SHIFT;
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
pub const XATTR_CREATE: u32 = 1;
pub const XATTR_REPLACE: u32 = 2;
pub const FALLOC_KEEP_SIZE: u32 = 1;
pub const FALLOC_PUNCH_HOLE: u32 = 2;
pub const FALLOC_ZERO_RANGE: u32 = 0x10;

/// Access mask bits for [`Engine::access`].
pub const R_OK: u32 = 4;
pub const W_OK: u32 = 2;
pub const X_OK: u32 = 1;

static ENGINE_IDS: AtomicU64 = AtomicU64::new(1);

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

thread_local! {
    static INO_CACHE: std::cell::RefCell<HashMap<(u64, u32), (u64, u64)>> = std::cell::RefCell::new(HashMap::new());
}

/// What one inode or entry record costs the store at most, beside its name
/// and data (space admission, `Engine::room`).
const RECORD_ROOM: u64 = 512;

pub struct Engine {
    pub cfg: Config,
    id: u64,
    store: Arc<dyn Store>,
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

fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() {
        return Err(Error::NotFound);
    }
    if name.len() > NAME_MAX {
        return Err(Error::NameTooLong);
    }
    if name.contains(&b'/') || name.contains(&0) {
        return Err(Error::Invalid);
    }
    Ok(())
}

/// xattr(7)'s namespaces, as ext4 has them: `user.`, `trusted.`,
/// `security.` and the two POSIX ACLs; any other name is EOPNOTSUPP, an
/// empty name after the namespace EINVAL. ACLs are refused where the engine
/// checks permissions itself (`ctx.check_perms`): its checks do not evaluate
/// them, and an ACL that is stored but not enforced is worse than none. The
/// kernel enforces them through a mount (FUSE_POSIX_ACL).
fn check_xattr_name(ctx: &Ctx, name: &[u8]) -> Result<()> {
    if name.len() > 255 {
        return Err(Error::Range);
    }
    if name == acl::ACCESS || name == acl::DEFAULT {
        return if ctx.check_perms { Err(Error::NotSupported) } else { Ok(()) };
    }
    for ns in [&b"user."[..], b"trusted.", b"security."] {
        if let Some(rest) = name.strip_prefix(ns) {
            return if rest.is_empty() { Err(Error::Invalid) } else { Ok(()) };
        }
    }
    Err(if name.is_empty() { Error::Invalid } else { Error::NotSupported })
}

fn is_dot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

/// POSIX permission check against one inode's attributes.
pub fn check_access(ctx: &Ctx, a: &Attr, mask: u32) -> Result<()> {
    if !ctx.check_perms || mask == 0 {
        return Ok(());
    }
    if ctx.uid == 0 {
        // Root may do anything, except execute a file with no x bit at all.
        if mask & X_OK != 0 && a.kind != Kind::Dir && a.perm & 0o111 == 0 {
            return Err(Error::PermissionDenied);
        }
        return Ok(());
    }
    let bits = if ctx.uid == a.uid {
        (a.perm >> 6) & 7
    } else if ctx.in_group(a.gid) {
        (a.perm >> 3) & 7
    } else {
        a.perm & 7
    } as u32;
    if bits & mask == mask {
        Ok(())
    } else {
        Err(Error::PermissionDenied)
    }
}

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
        let root = Attr {
            ino: ROOT_INO, kind: Kind::Dir, perm: 0o755, nlink: 2, uid: 0, gid: 0, rdev: 0, size: 0,
            atime: t, mtime: t, ctime: t, crtime: t, version: 1,
        };
        let mut b = vec![
            (schema::super_key(), Some(schema::encode_super(ags))),
            (schema::inode_key(ROOT_INO), Some(schema::encode_inode(&root, &ROOT_INO.to_le_bytes(), &[], None))),
        ];
        for ag in 0..ags {
            b.push((schema::ag_key(ag), Some(schema::encode_u64(if ag == 0 { 2 } else { 1 }))));
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
            let sb = store
                .get(&schema::super_key())?
                .ok_or_else(|| Error::Corrupted("no superblock: not a shoal store (run `shoal mkfs`)".into()))?;
            let (ags, format) = schema::decode_super_format(&sb)?;
            if ags == 0 || ags > MAX_AGS {
                return Err(Error::Corrupted(format!("superblock: {ags} allocation groups (1 to {MAX_AGS} are valid)")));
            }
            cfg.ags = ags;
            if format < schema::FORMAT && !cfg.read_only {
                // Records of the newer format may follow: mark the store so an
                // older shoal refuses it instead of calling them corrupt.
                store.write(&[(schema::super_key(), Some(schema::encode_super(ags)))], true)?;
            }
        }
        let committer = Committer::new(store.clone(), cfg.durability, cfg.commit_interval_ms);
        let cache_bytes = cfg.cache_bytes;
        let mut ag_next = Vec::new();
        for ag in 0..cfg.ags {
            let next = if store.is_null() {
                if ag == 0 { 2 } else { 1 }
            } else {
                match store.get(&schema::ag_key(ag))? {
                    Some(v) => schema::decode_u64("allocation group", &v)?,
                    None => return Err(Error::Corrupted(format!("allocation group {ag} record missing"))),
                }
            };
            // Chunks start on a multiple of their size, so each lies in one
            // inode-table shard (`cache::ino_shard`); the few numbers skipped
            // here are never used (numbers only grow).
            ag_next.push(crossbeam_utils::CachePadded::new(AtomicU64::new(next.next_multiple_of(INO_CHUNK))));
        }
        let e = Arc::new(Engine {
            names: NameLocks::new(cfg.lock_scope),
            cfg,
            id: ENGINE_IDS.fetch_add(1, Ordering::Relaxed),
            store: store.clone(),
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
            fills: AtomicU64::new(0),
            unread_unlinks: AtomicU64::new(0),
        });
        if store.is_null() {
            let t = now();
            let root = Attr {
                ino: ROOT_INO, kind: Kind::Dir, perm: 0o755, nlink: 2, uid: 0, gid: 0, rdev: 0, size: 0,
                atime: t, mtime: t, ctime: t, crtime: t, version: 1,
            };
            e.inodes.insert(Inode::new(e.new_state(root, ROOT_INO.to_le_bytes().to_vec()), true, Some(&e.evicted_filter_bytes)));
        } else {
            let root = e.inode(ROOT_INO)?;
            if root.kind != Kind::Dir {
                return Err(Error::Corrupted("root inode is not a directory".into()));
            }
            if !e.cfg.read_only {
                e.recover_orphans()?;
            }
        }
        // Directory records are formatted when their epoch closes.
        let weak = Arc::downgrade(&e);
        e.committer.set_formatter(Box::new(move |inos, epoch| match weak.upgrade() {
            Some(e) => e.format_marked(inos, epoch),
            None => Vec::new(),
        }));
        // Batched reclaim runs on the committer thread after each commit.
        let weak = Arc::downgrade(&e);
        e.committer.set_after_commit(Box::new(move || {
            if let Some(e) = weak.upgrade() {
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
        let r = self.committer.sync_all();
        self.committer.shutdown();
        if let Some(h) = self.commit_thread.lock().take() {
            let _ = h.join();
        }
        r
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    fn new_state(&self, attr: Attr, blob: Vec<u8>) -> InodeState {
        InodeState {
            attr,
            blob,
            blocks: BTreeMap::new(),
            blocks_complete: true,
            holes_from: u64::MAX,
            xattrs: Vec::new(),
            dirty_epoch: 0,
            dead: false,
            destroyed: false,
            primary: None,
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
        let now = SPACE_EPOCH.get_or_init(std::time::Instant::now).elapsed().as_millis() as u64 + 1;
        if self.space_plenty.load(Ordering::Relaxed) && now.saturating_sub(self.space_at.load(Ordering::Relaxed)) < 100 {
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

    // ---------------------------------------------------------------- cache

    /// The cached inode, or load it from the store.
    pub(crate) fn inode(&self, ino: Ino) -> Result<Arc<Inode>> {
        if let Some(i) = self.inodes.get(ino) {
            return Ok(i);
        }
        if ino == 0 || self.store.is_null() {
            return Err(Error::NotFound);
        }
        let _r = self.reclaim.read();
        if let Some(i) = self.inodes.get(ino) {
            return Ok(i);
        }
        let v = self.store.get(&schema::inode_key(ino)).map_err(|e| e.about(format_args!("inode {ino}")))?.ok_or(Error::NotFound)?;
        let (attr, extra) = schema::decode_inode(ino, &v)?;
        let mut st = self.new_state(attr, Vec::new());
        st.xattrs = extra.xattrs;
        st.primary = extra.primary;
        match attr.kind {
            Kind::File => {
                if attr.size <= INLINE_MAX {
                    if !extra.blob.is_empty() {
                        self.cached_data.add(extra.blob.len() as i64);
                        st.blocks.insert(0, extra.blob);
                    }
                } else {
                    st.blocks_complete = false;
                }
            }
            _ => st.blob = extra.blob,
        }
        self.fills.fetch_add(1, Ordering::Relaxed);
        Ok(self.inodes.fill(Inode::new(st, false, Some(&self.evicted_filter_bytes))))
    }

    /// A directory for the duration of one operation, without touching the
    /// inode table or the directory's reference count: hot directories are
    /// pinned in a small per-thread cache (8 entries). Two threads working in
    /// one directory then share only the cache lines they must (the
    /// directory's state and one index shard), which is what lets them scale.
    ///
    /// Safety argument for the raw pointer in [`DirRef`]: the pointee is kept
    /// alive by the `Arc` in the thread-local cache, and entries are removed
    /// from that cache only when no `DirRef` of this thread is alive (depth 0).
    /// A pinned inode is never evicted (eviction requires that the table holds
    /// the only reference), so the cached object is the cache's object.
    fn dir_ref(&self, ino: Ino) -> Result<DirRef> {
        let id = self.id;
        let hit = DIRS.with(|c| {
            let mut c = c.borrow_mut();
            let p = c.ents.iter().find(|e| e.0 == id && e.1 == ino).map(|e| Arc::as_ptr(&e.2));
            if p.is_some() {
                c.depth += 1;
            }
            p
        });
        if let Some(ptr) = hit {
            return Ok(DirRef { ptr, _not_send: std::marker::PhantomData });
        }
        let i = self.dir_inode(ino)?;
        Ok(DIRS.with(|c| {
            let mut c = c.borrow_mut();
            if c.depth == 0 && c.ents.len() >= 8 {
                c.ents.remove(0);
            }
            let ptr = Arc::as_ptr(&i);
            c.ents.push((id, ino, i));
            c.depth += 1;
            DirRef { ptr, _not_send: std::marker::PhantomData }
        }))
    }

    fn dir_inode(&self, ino: Ino) -> Result<Arc<Inode>> {
        let i = self.inode(ino)?;
        if i.kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        Ok(i)
    }

    /// Resolve a name in a directory: the cache first; the store only when
    /// the directory is not known complete.
    /// Returns (child, kind, sole flag).
    fn find(&self, dir: &Inode, name: &[u8]) -> Result<Option<(Ino, Kind, bool)>> {
        self.find_in(dir, name, false).map(|f| f.map(|(ino, kind, sole, _)| (ino, kind, sole)))
    }

    /// `find`, and the child's inode when its cached entry pins it
    /// (`want_inode`; see `cache::Slot::inode`).
    fn find_in(&self, dir: &Inode, name: &[u8], want_inode: bool) -> Result<Option<(Ino, Kind, bool, Option<Arc<Inode>>)>> {
        let d = dir.dir.as_ref().ok_or(Error::NotDir)?;
        let h = name_hash(name);
        let (cached, node, complete) = match self.cfg.dir_index {
            DirIndex::Indexed => d.probe(h, name, want_inode),
            DirIndex::Linear => {
                let (c, complete) = d.resolve_linear(name);
                (c, None, complete)
            }
        };
        if let Some(c) = cached {
            if c.ino != 0 || self.cfg.name_cache != NameCache::Off || c.dirty_epoch > self.committer.durable_epoch() {
                return Ok(if c.ino == 0 { None } else { Some((c.ino, c.kind, c.sole, node)) });
            }
        }
        if complete || self.store.is_null() {
            return Ok(None);
        }
        let _r = self.reclaim.read();
        let got = match self.store.get(&schema::entry_key(dir.ino, h, name)).map_err(|e| e.about(format_args!("an entry of directory inode {}", dir.ino)))? {
            Some(v) => Some(schema::decode_entry(&v)?),
            None => None,
        };
        self.fills.fetch_add(1, Ordering::Relaxed);
        if self.cfg.name_cache == NameCache::Off {
            return Ok(got.map(|(ino, kind, sole)| (ino, kind, sole, None)));
        }
        let dent = Dent {
            ino: got.map_or(0, |g| g.0), kind: got.map_or(Kind::File, |g| g.1), sole: got.is_some_and(|g| g.2), ver: 0, dirty_epoch: 0,
        };
        let (d2, inserted) = d.fill(h, name, dent);
        if inserted {
            self.cached_dents.add(1);
        }
        Ok(if d2.ino == 0 { None } else { Some((d2.ino, d2.kind, d2.sole, None)) })
    }

    /// Set an entry (positive or negative) in the directory cache and queue its
    /// record. `was_absent`: the caller found no entry under this name (it holds
    /// the name's lock, so that is still true). `sole`: the entry's sole flag
    /// (the caller keeps the inode's `primary` in step). `node`: the entry's
    /// inode if the caller has it, pinned in the cached entry
    /// (`cache::Slot::inode`); without it an entry naming the same inode
    /// keeps its pointer.
    #[allow(clippy::too_many_arguments)]
    fn put_entry(&self, g: &mut Gate<'_>, dir: &Inode, name: &[u8], ino: Ino, node: Option<&Arc<Inode>>, kind: Kind, sole: bool, was_absent: bool) {
        let d = dir.dir.as_ref().expect("directory");
        let h = name_hash(name);
        if g.is_null() && ino == 0 {
            // Memory only: nothing in a store to shadow, so no negative entry.
            if d.remove(h, name) {
                self.cached_dents.add(-1);
            }
            return;
        }
        // The version grows per key under the name slot the caller holds.
        let sole = sole && ino != 0;
        let (ver, fresh, first_in_epoch) = d.set_next(h, name, ino, node, kind, sole, g.epoch);
        if fresh {
            self.cached_dents.add(1);
        }
        if g.is_null() {
            return;
        }
        let key = schema::entry_key(dir.ino, h, name);
        if ino == 0 {
            g.del(key, ver);
        } else if was_absent && first_in_epoch {
            // Absent now and unchanged since the epoch opened: absent then too
            // (dirty entries are never evicted, so "not cached" means unchanged).
            g.put_new(key, ver, schema::encode_entry(ino, kind, sole));
        } else {
            g.put(key, ver, schema::encode_entry(ino, kind, sole));
        }
    }

    /// A change to a directory's entries made by this operation. Only this
    /// thread's stripe of the directory is touched (its lock is the only
    /// shared write); the committer folds the stripes into the directory's
    /// record when the epoch closes. Fails if the directory was removed.
    fn dir_update(&self, g: &mut Gate<'_>, d: &Inode, entries: i64, subdirs: i64, t: Ts) -> Result<()> {
        let dir = d.dir.as_ref().ok_or(Error::NotDir)?;
        let mut s = dir.stripes[crate::sync::thread_slot() % DIR_STRIPES].lock();
        if s.dead {
            return Err(Error::NotFound);
        }
        s.entries += entries;
        s.subdirs += subdirs;
        if t > s.mtime {
            s.mtime = t;
        }
        s.dirty_epoch = s.dirty_epoch.max(g.epoch);
        drop(s);
        g.mark(d.ino);
        Ok(())
    }

    /// Move a directory's stripe deltas into its attributes. Lock order: the
    /// inode's state (held by the caller), then the stripes in index order.
    fn dir_fold(d: &Inode, st: &mut InodeState) {
        let Some(dir) = &d.dir else { return };
        let dirty = Self::add_stripes(dir, &mut st.attr, true);
        st.dirty_epoch = st.dirty_epoch.max(dirty);
    }

    /// Add a directory's stripe deltas to `a` (size, nlink, and the newest
    /// stripe mtime as mtime and ctime: every stripe change is newer than the
    /// last fold or explicit setattr). With `reset`, the stripes are emptied
    /// (a fold). Returns the stripes' highest dirty epoch. The caller holds
    /// the directory's inode lock; stripes are taken in index order.
    fn add_stripes(dir: &crate::cache::Dir, a: &mut Attr, reset: bool) -> u64 {
        let mut latest: Option<Ts> = None;
        let mut dirty = 0;
        for s in &dir.stripes {
            let mut s = s.lock();
            a.size = (a.size as i64 + s.entries) as u64;
            a.nlink = (a.nlink as i64 + s.subdirs) as u32;
            if s.mtime != Ts::default() {
                latest = latest.max(Some(s.mtime));
            }
            dirty = dirty.max(s.dirty_epoch);
            if reset {
                s.entries = 0;
                s.subdirs = 0;
                s.mtime = Ts::default();
            }
        }
        if let Some(m) = latest {
            a.mtime = m;
            a.ctime = m;
        }
        dirty
    }

    /// An inode's current attributes; for a directory, with its stripes' deltas.
    fn attr_of(&self, i: &Inode) -> Attr {
        let st = i.st.lock();
        let mut a = st.attr;
        if let Some(dir) = &i.dir {
            Self::add_stripes(dir, &mut a, false);
        }
        a
    }

    /// rmdir and rename over a directory: fail unless empty, else mark it
    /// dead in its state and every stripe, all held at once, so no create can
    /// slip in between the check and the mark.
    fn dir_kill_if_empty(d: &Inode) -> Result<()> {
        let mut st = d.st.lock();
        let dir = d.dir.as_ref().ok_or(Error::NotDir)?;
        let mut stripes: Vec<_> = dir.stripes.iter().map(|s| s.lock()).collect();
        let total = st.attr.size as i64 + stripes.iter().map(|s| s.entries).sum::<i64>();
        if total != 0 {
            return Err(Error::NotEmpty);
        }
        for s in stripes.iter_mut() {
            s.dead = true;
        }
        st.dead = true;
        Ok(())
    }

    /// The committer's formatter: the current record of every marked inode,
    /// with its stripes folded in (delayed logging, seed 003). Runs while every
    /// gate shard is held, so the state is exactly the closed epoch's.
    fn format_marked(&self, inos: &[Ino], epoch: u64) -> Vec<Record> {
        let mut out = Vec::with_capacity(inos.len());
        for &ino in inos {
            let Some(i) = self.inodes.get(ino) else { continue };
            let mut st = i.st.lock();
            if st.destroyed {
                continue;
            }
            Self::dir_fold(&i, &mut st);
            Self::bump(&mut st);
            st.dirty_epoch = st.dirty_epoch.max(epoch);
            let (key, ver, val) = Self::inode_record(&st);
            out.push(Record { key, ver, val: Some(val), fresh: false });
        }
        out
    }

    fn inode_record(st: &InodeState) -> (Vec<u8>, u64, Vec<u8>) {
        let a = &st.attr;
        let blob: Vec<u8>;
        let b: &[u8] = match a.kind {
            Kind::File if a.size <= INLINE_MAX => {
                let mut v = st.blocks.get(&0).cloned().unwrap_or_default();
                v.resize(a.size as usize, 0);
                blob = v;
                &blob
            }
            Kind::File => &[],
            _ => &st.blob,
        };
        // The sole flag promises no data blocks (see `Engine::unshare`).
        debug_assert!(st.primary.is_none() || (a.kind != Kind::Dir && a.nlink <= 1 && (a.kind != Kind::File || a.size <= INLINE_MAX)));
        (schema::inode_key(a.ino), a.version, schema::encode_inode(a, b, &st.xattrs, st.primary))
    }

    /// Queue the inode record (attributes, inline data or symlink target or
    /// parent pointer, xattrs).
    fn emit_inode(&self, g: &mut Gate<'_>, st: &mut InodeState) {
        st.dirty_epoch = g.epoch;
        // A destroyed inode's records are deleted in this or an earlier
        // commit; writing one again would leak an inode no name reaches.
        if g.is_null() || st.destroyed {
            return;
        }
        let (key, ver, val) = Self::inode_record(st);
        g.put(key, ver, val);
    }

    /// The end of a change to one inode's record (nothing else changed):
    /// its version bumped, its record queued in the gate's epoch, the gate
    /// left, then the commit waited for if durability asks it.
    fn finish_inode_change(&self, mut g: Gate<'_>, mut st: crate::sync::MutexGuard<'_, InodeState>) -> Result<()> {
        Self::bump(&mut st);
        self.emit_inode(&mut g, &mut st);
        drop(st);
        self.leave(g)
    }

    /// The end of every mutation: leave the gate (its records are queued in
    /// its epoch), then wait for that epoch's commit if durability asks it.
    /// Waiting with the gate held would stop the epoch from closing.
    fn leave(&self, g: Gate<'_>) -> Result<()> {
        let e = g.epoch;
        drop(g);
        self.after_mutation(e)
    }

    fn bump(st: &mut InodeState) {
        st.attr.version += 1;
    }

    /// Pick an AG and hand out an inode number from this thread's chunk.
    fn alloc_ino(&self, g: &mut Gate<'_>, parent: Ino, kind: Kind) -> Result<Ino> {
        let nags = self.ag_next.len() as u32;
        let pag = ((parent >> AG_SHIFT) as u32).min(nags - 1);
        let ag = if kind == Kind::Dir && self.cfg.placement == Placement::Spread {
            (self.spread_rr.fetch_add(1, Ordering::Relaxed) % nags as u64) as u32
        } else {
            pag
        };
        let id = self.id;
        let seq = INO_CACHE.with(|c| {
            let mut c = c.borrow_mut();
            let slot = c.entry((id, ag)).or_insert((0, 0));
            if slot.0 >= slot.1 {
                let start = self.ag_next[ag as usize].fetch_add(INO_CHUNK, Ordering::Relaxed);
                *slot = (start, start + INO_CHUNK);
                // Persist the AG's high-water mark with this operation; the value only grows.
                g.put(schema::ag_key(ag), start + INO_CHUNK, schema::encode_u64(start + INO_CHUNK));
            }
            let s = slot.0;
            slot.0 += 1;
            s
        });
        if seq >= 1 << AG_SHIFT {
            return Err(Error::NoSpace);
        }
        Ok(((ag as u64) << AG_SHIFT) | seq)
    }

    // ---------------------------------------------------------------- reads

    pub fn getattr(&self, ino: Ino) -> Result<Attr> {
        let _t = self.stats.start(Op::Getattr);
        let i = self.inode(ino)?;
        Ok(self.attr_of(&i))
    }

    pub fn lookup(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<Attr> {
        let _t = self.stats.start(Op::Lookup);
        let _bkl = self.names.bkl();
        if name == b"." {
            // Of any inode, not only a directory: the kernel looks up "." of
            // a file handle's inode number (open_by_handle_at, NFS export).
            let i = self.inode(parent)?;
            if i.st.lock().destroyed {
                return Err(Error::NotFound);
            }
            return Ok(self.attr_of(&i));
        }
        let p = self.dir_ref(parent)?;
        if name == b".." {
            let pp = p.st.lock().parent();
            return self.getattr(pp);
        }
        check_name(name)?;
        if ctx.check_perms {
            check_access(ctx, &p.st.lock().attr, X_OK)?;
        }
        let (ino, _, _, node) = self.find_in(&p, name, true)?.ok_or(Error::NotFound)?;
        let i = match node {
            Some(i) => i,
            None => {
                // First lookup of an entry filled from the store: pin the
                // inode in the entry, so the next lookup skips the table.
                let i = self.inode(ino)?;
                if self.cfg.dir_index == DirIndex::Indexed {
                    p.dir.as_ref().expect("directory").attach(name_hash(name), name, &i);
                }
                i
            }
        };
        Ok(self.attr_of(&i))
    }

    pub fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let _t = self.stats.start(Op::Readlink);
        let i = self.inode(ino)?;
        let st = i.st.lock();
        if st.attr.kind != Kind::Symlink {
            return Err(Error::Invalid);
        }
        Ok(st.blob.clone())
    }

    /// Check access for a library caller (FUSE leaves this to the kernel).
    pub fn access(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<()> {
        let i = self.inode(ino)?;
        let a = i.st.lock().attr;
        check_access(&Ctx { check_perms: true, ..ctx.clone() }, &a, mask)
    }

    /// Take a reference on behalf of the kernel (one per entry reply).
    pub fn inc_lookup(&self, ino: Ino) {
        if let Some(i) = self.inodes.get(ino) {
            i.lookups.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Drop `n` kernel references; an unreferenced, unlinked, closed inode leaves the cache.
    pub fn forget(&self, ino: Ino, n: u64) {
        let _t = self.stats.start(Op::Forget);
        if let Some(i) = self.inodes.get(ino) {
            let prev = i.lookups.fetch_sub(n.min(i.lookups.load(Ordering::Relaxed)), Ordering::Relaxed);
            if prev <= n && i.opens.load(Ordering::Relaxed) == 0 && i.st.lock().destroyed {
                drop(i);
                self.inodes.remove_if(ino, |x| {
                    x.lookups.load(Ordering::Relaxed) == 0 && x.opens.load(Ordering::Relaxed) == 0
                });
            }
        }
    }

    // ---------------------------------------------------------------- namespace

    /// Create a file, device node, fifo or socket (mode carries the type; 0 = regular).
    pub fn mknod(&self, ctx: &Ctx, parent: Ino, name: &[u8], mode: u32, rdev: u32) -> Result<Attr> {
        let kind = Kind::from_mode(mode).ok_or(Error::Invalid)?;
        if kind == Kind::Dir || kind == Kind::Symlink {
            return Err(Error::Invalid);
        }
        let _t = self.stats.start(Op::Create);
        self.make(ctx, parent, name, kind, (mode & 0o7777) as u16, rdev, Vec::new())
    }

    pub fn create(&self, ctx: &Ctx, parent: Ino, name: &[u8], perm: u32) -> Result<Attr> {
        let _t = self.stats.start(Op::Create);
        self.make(ctx, parent, name, Kind::File, (perm & 0o7777) as u16, 0, Vec::new())
    }

    pub fn mkdir(&self, ctx: &Ctx, parent: Ino, name: &[u8], perm: u32) -> Result<Attr> {
        let _t = self.stats.start(Op::Mkdir);
        self.make(ctx, parent, name, Kind::Dir, (perm & 0o7777) as u16, 0, Vec::new())
    }

    pub fn symlink(&self, ctx: &Ctx, parent: Ino, name: &[u8], target: &[u8]) -> Result<Attr> {
        let _t = self.stats.start(Op::Symlink);
        if target.is_empty() {
            return Err(Error::NotFound);
        }
        if target.len() > 4095 {
            return Err(Error::NameTooLong);
        }
        self.make(ctx, parent, name, Kind::Symlink, 0o777, 0, target.to_vec())
    }

    fn make(&self, ctx: &Ctx, parent: Ino, name: &[u8], kind: Kind, perm: u16, rdev: u32, target: Vec<u8>) -> Result<Attr> {
        self.throttle();
        self.writable()?;
        if is_dot(name) {
            return Err(Error::Exists);
        }
        check_name(name)?;
        self.room(RECORD_ROOM + 2 * name.len() as u64 + target.len() as u64)?;
        let p = self.dir_ref(parent)?;
        if ctx.check_perms {
            check_access(ctx, &p.st.lock().attr, W_OK | X_OK)?;
        }
        let pdir = p.dir.as_ref().expect("directory");
        // The directory's default ACL replaces the umask (acl(5)); read only
        // when the directory has one, so a plain create takes no extra lock.
        let default_acl = if pdir.default_acl.load(Ordering::Relaxed) {
            p.st.lock().xattrs.iter().find(|(n, _)| n == acl::DEFAULT).map(|(_, v)| v.clone())
        } else {
            None
        };
        let mut xattrs = Vec::new();
        let mut perm = perm;
        match default_acl.as_deref().map(acl::Acl::decode).transpose()? {
            _ if kind == Kind::Symlink => {}
            Some(d) => {
                let (access, bits) = d.inherit(perm);
                perm = (perm & !0o777) | bits;
                if let Some(a) = access {
                    xattrs.push((acl::ACCESS.to_vec(), a.encode()));
                }
                if kind == Kind::Dir {
                    xattrs.push((acl::DEFAULT.to_vec(), d.encode()));
                }
            }
            None => perm &= !(ctx.umask as u16 & 0o777),
        }
        let _n = self.names.lock(&p, name);
        if self.find(&p, name)?.is_some() {
            return Err(Error::Exists);
        }
        let mut g = self.committer.enter()?;
        let t = now();
        self.dir_update(&mut g, &p, 1, (kind == Kind::Dir) as i64, t)?;
        let (pgid, psgid) = (pdir.gid.load(Ordering::Relaxed), pdir.sgid.load(Ordering::Relaxed));
        let ino = self.alloc_ino(&mut g, parent, kind)?;
        g.born(ino);
        let gid = if psgid { pgid } else { ctx.gid };
        if kind == Kind::Dir && psgid {
            perm |= 0o2000;
        }
        let attr = Attr {
            ino, kind, perm, nlink: if kind == Kind::Dir { 2 } else { 1 }, uid: ctx.uid, gid, rdev,
            size: if kind == Kind::Symlink { target.len() as u64 } else { 0 },
            atime: t, mtime: t, ctime: t, crtime: t, version: 1,
        };
        let blob = if kind == Kind::Dir { parent.to_le_bytes().to_vec() } else { target };
        let mut st = self.new_state(attr, blob);
        st.xattrs = xattrs;
        // A new non-directory has one name and no data blocks: its entry is sole.
        let sole = kind != Kind::Dir;
        if sole {
            st.primary = Some((parent, name_hash(name)));
        }
        self.emit_inode(&mut g, &mut st);
        let node = Inode::new(st, self.cfg.name_cache == NameCache::Primed, Some(&self.evicted_filter_bytes));
        self.inodes.insert(node.clone());
        self.put_entry(&mut g, &p, name, ino, Some(&node), kind, sole, true);
        self.leave(g)?;
        Ok(attr)
    }

    /// In SyncEach mode, wait for the commit covering epoch `e`.
    fn after_mutation(&self, e: u64) -> Result<()> {
        if self.cfg.durability == Durability::SyncEach {
            self.committer.wait(e)?;
        }
        Ok(())
    }

    /// Sticky-directory rule for library callers.
    fn check_delete(&self, ctx: &Ctx, p: &Inode, child: &Inode) -> Result<()> {
        if self.check_delete_dir(ctx, p)? && ctx.uid != child.st.lock().attr.uid {
            return Err(Error::NotPermitted);
        }
        Ok(())
    }

    /// The part of `check_delete` that needs only the directory. Returns
    /// whether the child's owner must be checked too (a sticky directory the
    /// caller does not own).
    fn check_delete_dir(&self, ctx: &Ctx, p: &Inode) -> Result<bool> {
        if !ctx.check_perms {
            return Ok(false);
        }
        let pa = p.st.lock().attr;
        check_access(ctx, &pa, W_OK | X_OK)?;
        Ok(pa.perm & 0o1000 != 0 && ctx.uid != 0 && ctx.uid != pa.uid)
    }

    pub fn unlink(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        self.throttle();
        let _t = self.stats.start(Op::Unlink);
        self.writable()?;
        if is_dot(name) {
            return Err(Error::IsDir);
        }
        check_name(name)?;
        let p = self.dir_ref(parent)?;
        let _n = self.names.lock(&p, name);
        let (ino, kind, sole) = self.find(&p, name)?.ok_or(Error::NotFound)?;
        if kind == Kind::Dir {
            return Err(Error::IsDir);
        }
        // A sole entry's inode, if nothing holds it (the kernel's and open
        // handles' inodes are pinned in the cache), is deleted unread: it has
        // no record but its `I` key. This is rm -rf's store read per file saved.
        let unread = sole && !self.store.is_null() && self.inodes.get(ino).is_none() && !self.check_delete_dir(ctx, &p)?;
        let c = if unread { None } else { Some(self.inode(ino)?) };
        if let Some(c) = &c {
            self.check_delete(ctx, &p, c)?;
        }
        let mut g = self.committer.enter()?;
        let t = now();
        self.put_entry(&mut g, &p, name, 0, None, kind, false, false);
        self.dir_update(&mut g, &p, -1, 0, t)?;
        match &c {
            Some(c) => self.drop_link(&mut g, c, t)?,
            None => {
                // No record of an uncached inode is queued (dirty inodes are
                // not evicted), so this delete is the key's only record in the epoch.
                g.del(schema::inode_key(ino), u64::MAX);
                self.unread_unlinks.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.leave(g)
    }

    /// Clear the sole flag of `c`'s entry, and its `primary` pointer, before
    /// an operation breaks the flag's promise: a second name (link) or data
    /// blocks (a size past INLINE_MAX). A separate step before the caller's
    /// own locks, because it takes the entry's name lock; clearing the flag
    /// is always safe (the entry then just costs unlink a read), so it need
    /// not be atomic with the caller's change, only committed no later.
    /// Nothing sets `primary` again once it is clear.
    fn unshare(&self, c: &Inode) -> Result<()> {
        loop {
            let Some((parent, h)) = c.st.lock().primary else { return Ok(()) };
            let p = match self.dir_ref(parent) {
                Ok(p) => p,
                Err(Error::NotFound) => return self.lost_primary(c),
                Err(e) => return Err(e),
            };
            let _n = self.names.lock_hash(&p, h);
            if c.st.lock().primary != Some((parent, h)) {
                continue; // renamed meanwhile: its rename moved the pointer
            }
            let Some(name) = self.name_at(&p, h, c.ino)? else { return self.lost_primary(c) };
            let mut g = self.committer.enter()?;
            self.put_entry(&mut g, &p, &name, c.ino, None, c.kind, false, false);
            let mut cs = c.st.lock();
            cs.primary = None;
            Self::bump(&mut cs);
            self.emit_inode(&mut g, &mut cs);
            return Ok(());
        }
    }

    /// The name of `dir` with hash `h` that names `ino`, if any.
    fn name_at(&self, dir: &Inode, h: u64, ino: Ino) -> Result<Option<Vec<u8>>> {
        let d = dir.dir.as_ref().ok_or(Error::NotDir)?;
        let mut names: Vec<Vec<u8>> = d.range(h, h, usize::MAX).into_iter().map(|(_, n, _)| n.into_vec()).collect();
        if !d.listing_complete() && !self.store.is_null() {
            let (mut lo, hi) = schema::entry_range(dir.ino, h);
            'scan: loop {
                let got = self.store.scan(&lo, &hi, 16)?;
                for (k, _) in &got {
                    let (_, kh, name) = schema::parse_entry_key(k)?;
                    if kh != h {
                        break 'scan;
                    }
                    names.push(name.to_vec());
                }
                match got.last() {
                    Some((k, _)) if got.len() == 16 => {
                        lo = k.clone();
                        lo.push(0);
                    }
                    _ => break,
                }
            }
        }
        for n in names {
            if self.find(dir, &n)?.is_some_and(|f| f.0 == ino) {
                return Ok(Some(n));
            }
        }
        Ok(None)
    }

    /// `c` says a sole entry names it, but none does: an unlink deleted it
    /// unread while this thread loaded it from the store by number (the
    /// window between that unlink and its commit). It is gone.
    fn lost_primary(&self, c: &Inode) -> Result<()> {
        let mut cs = c.st.lock();
        cs.primary = None;
        cs.attr.nlink = 0;
        cs.destroyed = true;
        drop(cs);
        self.inodes.remove_if(c.ino, |x| x.lookups.load(Ordering::Acquire) == 0 && x.opens.load(Ordering::Acquire) == 0);
        Err(Error::NotFound)
    }

    /// One name of `c` is gone: nlink - 1, and destroy or orphan at zero.
    fn drop_link(&self, g: &mut Gate<'_>, c: &Inode, t: Ts) -> Result<()> {
        let mut cs = c.st.lock();
        cs.attr.nlink = cs.attr.nlink.saturating_sub(1);
        // A sole entry is the only name, and it is the one going.
        cs.primary = None;
        if c.kind == Kind::Dir {
            cs.attr.nlink = 0;
            cs.dead = true;
        }
        cs.attr.ctime = t;
        Self::bump(&mut cs);
        if cs.attr.nlink == 0 {
            if c.opens.load(Ordering::Acquire) > 0 {
                // Unlinked while open: keep the records, mark it an orphan so
                // a crash before the last close still reclaims it.
                self.emit_inode(g, &mut cs);
                g.put(schema::orphan_key(c.ino), cs.attr.version, schema::encode_u64(c.ino));
            } else {
                // Never open when its last name went: it has no orphan record.
                self.destroy(g, &mut cs, false)?;
                drop(cs);
                // Nobody can reach it any more unless the kernel holds it (then forget removes it).
                if c.lookups.load(Ordering::Acquire) == 0 {
                    self.inodes.remove_if(c.ino, |x| {
                        x.lookups.load(Ordering::Acquire) == 0 && x.opens.load(Ordering::Acquire) == 0
                    });
                }
            }
        } else {
            self.emit_inode(g, &mut cs);
        }
        Ok(())
    }

    /// Delete every record of an inode whose last name and last handle are gone.
    /// `orphan`: it has an orphan record (its last name went while it was open:
    /// `drop_link` put one); otherwise no `O` key is written at all, which
    /// spares the store a tombstone per unlink (a third of what rm -rf wrote).
    fn destroy(&self, g: &mut Gate<'_>, st: &mut InodeState, orphan: bool) -> Result<()> {
        let ino = st.attr.ino;
        let ver = st.attr.version;
        st.dirty_epoch = g.epoch;
        st.destroyed = true;
        g.del(schema::inode_key(ino), ver);
        if orphan {
            g.del(schema::orphan_key(ino), ver);
        }
        if st.attr.kind == Kind::File && st.attr.size > INLINE_MAX {
            self.delete_blocks_from(g, st, 0)?;
        }
        let freed: usize = st.blocks.values().map(|b| b.len()).sum();
        self.cached_data.add(-(freed as i64));
        st.blocks.clear();
        Ok(())
    }

    /// Queue deletes for every data block >= `from` (cached or stored) and drop them from the cache.
    fn delete_blocks_from(&self, g: &mut Gate<'_>, st: &mut InodeState, from: u64) -> Result<()> {
        st.holes_from = st.holes_from.min(from);
        let ino = st.attr.ino;
        let ver = st.attr.version;
        let cached: Vec<u64> = st.blocks.range(from..).map(|(b, _)| *b).collect();
        for b in &cached {
            g.del(schema::data_key(ino, *b), ver);
            if let Some(v) = st.blocks.remove(b) {
                self.cached_data.add(-(v.len() as i64));
            }
        }
        if !st.blocks_complete && !self.store.is_null() {
            let (mut lo, hi) = schema::data_range(ino, from);
            loop {
                let got = self.store.scan(&lo, &hi, 1024)?;
                for (k, _) in &got {
                    g.del(k.clone(), ver);
                }
                match got.last() {
                    Some((k, _)) if got.len() == 1024 => {
                        lo = k.clone();
                        lo.push(0);
                    }
                    _ => break,
                }
            }
        }
        Ok(())
    }

    pub fn rmdir(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        self.throttle();
        let _t = self.stats.start(Op::Rmdir);
        self.writable()?;
        if name == b"." {
            return Err(Error::Invalid);
        }
        if name == b".." {
            return Err(Error::NotEmpty);
        }
        check_name(name)?;
        let p = self.dir_ref(parent)?;
        let _n = self.names.lock(&p, name);
        let (ino, kind, _) = self.find(&p, name)?.ok_or(Error::NotFound)?;
        if kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        let c = self.inode(ino)?;
        self.check_delete(ctx, &p, &c)?;
        let mut g = self.committer.enter()?;
        let t = now();
        Self::dir_kill_if_empty(&c)?;
        self.put_entry(&mut g, &p, name, 0, None, kind, false, false);
        self.dir_update(&mut g, &p, -1, -1, t)?;
        self.drop_link(&mut g, &c, t)?;
        self.leave(g)
    }

    pub fn link(&self, ctx: &Ctx, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        self.throttle();
        let _t = self.stats.start(Op::Link);
        self.writable()?;
        if is_dot(newname) {
            return Err(Error::Exists);
        }
        check_name(newname)?;
        self.room(RECORD_ROOM + newname.len() as u64)?;
        let np = self.dir_ref(newparent)?;
        if ctx.check_perms {
            check_access(ctx, &np.st.lock().attr, W_OK | X_OK)?;
        }
        let c = self.inode(ino)?;
        // Before the name lock (unshare takes the old name's). A no-op for
        // directories, which are never sole.
        self.unshare(&c)?;
        let _n = self.names.lock(&np, newname);
        if self.find(&np, newname)?.is_some() {
            return Err(Error::Exists);
        }
        if c.kind == Kind::Dir {
            return Err(Error::NotPermitted);
        }
        let mut g = self.committer.enter()?;
        let t = now();
        // Check and take the new link in one critical section, so a racing
        // unlink of the last other name cannot destroy the inode in between.
        let attr = {
            let mut cs = c.st.lock();
            if cs.attr.nlink == 0 {
                return Err(Error::NotFound);
            }
            if cs.attr.nlink >= LINK_MAX {
                return Err(Error::TooManyLinks);
            }
            // Only create sets `primary`, and unshare cleared it above.
            debug_assert!(cs.primary.is_none());
            cs.attr.nlink += 1;
            cs.attr.ctime = t;
            Self::bump(&mut cs);
            self.emit_inode(&mut g, &mut cs);
            cs.attr
        };
        if let Err(e) = self.dir_update(&mut g, &np, 1, 0, t) {
            // The new parent was removed meanwhile: give the link back, in the
            // same epoch, so the store never sees the extra link.
            let mut cs = c.st.lock();
            cs.attr.nlink -= 1;
            Self::bump(&mut cs);
            self.emit_inode(&mut g, &mut cs);
            return Err(e);
        }
        self.put_entry(&mut g, &np, newname, ino, Some(&c), c.kind, false, true);
        self.leave(g)?;
        Ok(attr)
    }

    /// Is `anc` an ancestor of (or equal to) directory `d`? Walks parent
    /// pointers; the caller holds the rename mutex so the tree cannot change shape.
    fn is_ancestor(&self, anc: Ino, mut d: Ino) -> Result<bool> {
        let mut steps = 0u64;
        loop {
            if d == anc {
                return Ok(true);
            }
            if d == ROOT_INO || d == 0 {
                return Ok(false);
            }
            d = self.inode(d)?.st.lock().parent();
            steps += 1;
            if steps > 1 << 20 {
                return Err(Error::Corrupted("directory parent chain does not reach the root".into()));
            }
        }
    }

    pub fn rename(&self, ctx: &Ctx, parent: Ino, name: &[u8], newparent: Ino, newname: &[u8], flags: u32) -> Result<()> {
        self.throttle();
        let _t = self.stats.start(Op::Rename);
        self.writable()?;
        if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE) != 0
            || flags == RENAME_NOREPLACE | RENAME_EXCHANGE
        {
            return Err(Error::Invalid);
        }
        if is_dot(name) || is_dot(newname) {
            return Err(Error::Invalid);
        }
        check_name(name)?;
        check_name(newname)?;
        let p = self.dir_ref(parent)?;
        let np = self.dir_ref(newparent)?;
        let cross = parent != newparent;
        let _r = if cross { Some(self.rename_lock.lock()) } else { None };
        let _n = self.names.lock2(&p, name, &np, newname);
        let (sino, skind, ssole) = self.find(&p, name)?.ok_or(Error::NotFound)?;
        let dst = self.find(&np, newname)?;
        let s = self.inode(sino)?;
        self.check_delete(ctx, &p, &s)?;
        if ctx.check_perms {
            check_access(ctx, &np.st.lock().attr, W_OK | X_OK)?;
        }
        if let Some((dino, _, _)) = dst {
            if dino == sino {
                return Ok(());
            }
        }
        let exchange = flags & RENAME_EXCHANGE != 0;
        if flags & RENAME_NOREPLACE != 0 && dst.is_some() {
            return Err(Error::Exists);
        }
        if exchange && dst.is_none() {
            return Err(Error::NotFound);
        }
        let d = match dst {
            Some((dino, _, _)) => Some(self.inode(dino)?),
            None => None,
        };
        let dsole = dst.is_some_and(|x| x.2);
        // The flag and the inode's pointer change together (create, unshare, rename).
        debug_assert_eq!(ssole, s.st.lock().primary == Some((parent, name_hash(name))));
        debug_assert!(d.as_ref().is_none_or(|d| dsole == (d.st.lock().primary == Some((newparent, name_hash(newname))))));
        if let Some(d) = &d {
            self.check_delete(ctx, &np, d)?;
        }
        // A directory may not move under itself.
        if cross && skind == Kind::Dir && self.is_ancestor(sino, newparent)? {
            return Err(Error::Invalid);
        }
        if exchange {
            if let Some(d) = &d {
                if cross && d.kind == Kind::Dir && self.is_ancestor(d.ino, parent)? {
                    return Err(Error::Invalid);
                }
            }
        } else if let Some(d) = &d {
            // The target is an ancestor of the source (Linux's "trap"): ENOTEMPTY.
            if cross && d.kind == Kind::Dir && self.is_ancestor(d.ino, parent)? {
                return Err(Error::NotEmpty);
            }
            match (skind == Kind::Dir, d.kind == Kind::Dir) {
                (true, false) => return Err(Error::NotDir),
                (false, true) => return Err(Error::IsDir),
                _ => {}
            }
        }
        let mut g = self.committer.enter()?;
        let t = now();
        let sdir = skind == Kind::Dir;
        let replaced_dir = !exchange && d.as_ref().is_some_and(|d| d.kind == Kind::Dir);
        if replaced_dir {
            // Before any change: a non-empty target directory fails the rename.
            Self::dir_kill_if_empty(d.as_ref().expect("target"))?;
        }
        if cross && !exchange {
            // The new parent first: if it was removed meanwhile, nothing is
            // changed yet (it cannot be if it holds the replaced target).
            self.dir_update(&mut g, &np, d.is_none() as i64, sdir as i64 - replaced_dir as i64, t)?;
        }
        if exchange {
            let d = d.expect("exchange has a target");
            // Each entry keeps its flag; a sole one's inode follows its name.
            self.put_entry(&mut g, &p, name, d.ino, Some(&d), d.kind, dsole, false);
            self.put_entry(&mut g, &np, newname, sino, Some(&s), skind, ssole, false);
            let ddir = (d.kind == Kind::Dir) as i64;
            if cross {
                self.dir_update(&mut g, &p, 0, ddir - sdir as i64, t)?;
                self.dir_update(&mut g, &np, 0, sdir as i64 - ddir, t)?;
            } else {
                self.dir_update(&mut g, &p, 0, 0, t)?;
            }
            for (node, newp, newh) in [(&s, newparent, name_hash(newname)), (&d, parent, name_hash(name))] {
                let mut st = node.st.lock();
                if node.kind == Kind::Dir {
                    st.set_parent(newp);
                }
                if st.primary.is_some() {
                    st.primary = Some((newp, newh));
                }
                st.attr.ctime = t;
                Self::bump(&mut st);
                self.emit_inode(&mut g, &mut st);
            }
        } else {
            self.put_entry(&mut g, &p, name, 0, None, skind, false, false);
            self.put_entry(&mut g, &np, newname, sino, Some(&s), skind, ssole, d.is_none());
            if cross {
                self.dir_update(&mut g, &p, -1, -(sdir as i64), t)?;
            } else {
                self.dir_update(&mut g, &p, -(d.is_some() as i64), -(replaced_dir as i64), t)?;
            }
            {
                let mut ss = s.st.lock();
                if sdir {
                    ss.set_parent(newparent);
                }
                if ss.primary.is_some() {
                    ss.primary = Some((newparent, name_hash(newname)));
                }
                ss.attr.ctime = t;
                Self::bump(&mut ss);
                self.emit_inode(&mut g, &mut ss);
            }
            if let Some(d) = &d {
                self.drop_link(&mut g, d, t)?;
            }
        }
        self.leave(g)
    }

    // ---------------------------------------------------------------- attributes

    pub fn setattr(&self, ctx: &Ctx, ino: Ino, sa: &SetAttr) -> Result<Attr> {
        self.throttle();
        let _t = self.stats.start(Op::Setattr);
        self.writable()?;
        let i = self.inode(ino)?;
        if sa.size.is_some() {
            match i.kind {
                Kind::Dir => return Err(Error::IsDir),
                Kind::File => {}
                _ => return Err(Error::Invalid),
            }
        }
        if let Some(sz) = sa.size {
            if sz > MAX_FILE_SIZE {
                return Err(Error::FileTooBig);
            }
            if sz > INLINE_MAX {
                self.unshare(&i)?;
            }
        }
        // After `unshare`, which takes and releases a name lock of its own.
        let _bkl = self.names.bkl();
        let mut g = self.committer.enter()?;
        let t = now();
        let mut st = i.st.lock();
        if st.destroyed {
            // Its last name and last handle are gone (the kernel may still
            // send a SETATTR, e.g. the writeback cache flushing times after
            // an unlink): nothing is left to change.
            return Ok(st.attr);
        }
        // A directory's pending stripe deltas first, so the record is whole.
        Self::dir_fold(&i, &mut st);
        if ctx.check_perms {
            let a = st.attr;
            let owner = ctx.uid == 0 || ctx.uid == a.uid;
            if sa.mode.is_some() && !owner {
                return Err(Error::NotPermitted);
            }
            if let Some(u) = sa.uid {
                if ctx.uid != 0 && u != a.uid {
                    return Err(Error::NotPermitted);
                }
            }
            if let Some(gid) = sa.gid {
                if ctx.uid != 0 && (ctx.uid != a.uid || !ctx.in_group(gid)) && gid != a.gid {
                    return Err(Error::NotPermitted);
                }
            }
            if sa.size.is_some() && !sa.by_handle {
                check_access(ctx, &a, W_OK)?;
            }
            for ts in [sa.atime, sa.mtime].into_iter().flatten() {
                match ts {
                    TimeSet::At(_) if !owner => return Err(Error::NotPermitted),
                    TimeSet::Now if !owner => check_access(ctx, &a, W_OK)?,
                    _ => {}
                }
            }
        }
        if let Some(m) = sa.mode {
            st.attr.perm = (m & 0o7777) as u16;
            // chmod rewrites the access ACL's owner, mask and other entries.
            let perm = st.attr.perm;
            if let Some(x) = st.xattrs.iter_mut().find(|(n, _)| n == acl::ACCESS) {
                let mut a = acl::Acl::decode(&x.1)?;
                a.chmod(perm);
                x.1 = a.encode();
            }
        }
        let chown = sa.uid.is_some_and(|u| u != st.attr.uid) || sa.gid.is_some_and(|x| x != st.attr.gid);
        if let Some(u) = sa.uid {
            st.attr.uid = u;
        }
        if let Some(x) = sa.gid {
            st.attr.gid = x;
        }
        if chown && sa.mode.is_none() && ctx.check_perms && ctx.uid != 0 && st.attr.kind != Kind::Dir {
            st.attr.perm &= !0o6000;
        }
        if let Some(sz) = sa.size {
            // truncate(2) updates mtime and ctime even when the size is unchanged.
            self.resize(&mut g, &mut st, sz)?;
            st.attr.mtime = t;
        }
        match sa.atime {
            Some(TimeSet::Now) => st.attr.atime = t,
            Some(TimeSet::At(x)) => st.attr.atime = x,
            None => {}
        }
        match sa.mtime {
            Some(TimeSet::Now) => st.attr.mtime = t,
            Some(TimeSet::At(x)) => st.attr.mtime = x,
            None => {}
        }
        st.attr.ctime = sa.ctime.unwrap_or(t);
        Self::bump(&mut st);
        self.emit_inode(&mut g, &mut st);
        let a = st.attr;
        if let Some(dir) = &i.dir {
            dir.gid.store(a.gid, Ordering::Relaxed);
            dir.sgid.store(a.perm & 0o2000 != 0, Ordering::Relaxed);
        }
        drop(st);
        self.leave(g)?;
        Ok(a)
    }

    /// Change a file's size: drop blocks past the end, zero the tail of the
    /// last block, and move data between inline and block records across INLINE_MAX.
    fn resize(&self, g: &mut Gate<'_>, st: &mut InodeState, new: u64) -> Result<()> {
        let old = st.attr.size;
        Self::bump(st);
        if new < old {
            let keep_blocks = new.div_ceil(BLOCK);
            if old > INLINE_MAX {
                if new <= INLINE_MAX {
                    // Going inline: keep block 0's bytes cached (they become the
                    // inline data) only if the new size keeps any of them, then
                    // delete every block record.
                    let b0 = if keep_blocks > 0 {
                        self.load_block(st, 0)?;
                        st.blocks.remove(&0)
                    } else {
                        None
                    };
                    self.delete_blocks_from(g, st, 0)?;
                    // Block 0 may have been taken out of the cache above, so delete its record here.
                    g.del(schema::data_key(st.attr.ino, 0), st.attr.version);
                    if let Some(b) = b0 {
                        st.blocks.insert(0, b);
                    }
                } else {
                    self.delete_blocks_from(g, st, keep_blocks)?;
                }
            }
            // No cached block past the new end may survive: a later growth
            // would write its old bytes back (truncate to 0, then extend).
            let gone: Vec<u64> = st.blocks.range(keep_blocks..).map(|(b, _)| *b).collect();
            for b in gone {
                if let Some(v) = st.blocks.remove(&b) {
                    self.cached_data.add(-(v.len() as i64));
                }
            }
            // Zero the tail of the new last block.
            if new % BLOCK != 0 {
                let lb = new / BLOCK;
                self.load_block(st, lb)?;
                if let Some(b) = st.blocks.get_mut(&lb) {
                    b.truncate((new % BLOCK) as usize);
                }
                if new > INLINE_MAX {
                    if let Some(b) = st.blocks.get(&lb) {
                        g.put(schema::data_key(st.attr.ino, lb), st.attr.version, schema::encode_data(b));
                    }
                }
            }
            st.attr.size = new;
        } else if new > old {
            // Growing: the bytes past the old size must read as zero.
            if old % BLOCK != 0 {
                let lb = old / BLOCK;
                self.load_block(st, lb)?;
                if let Some(b) = st.blocks.get_mut(&lb) {
                    b.truncate((old % BLOCK) as usize);
                }
            }
            if old <= INLINE_MAX && new > INLINE_MAX {
                if let Some(b) = st.blocks.get(&0) {
                    g.put(schema::data_key(st.attr.ino, 0), st.attr.version, schema::encode_data(b));
                }
            } else if new > INLINE_MAX && old % BLOCK != 0 {
                let lb = old / BLOCK;
                if let Some(b) = st.blocks.get(&lb) {
                    g.put(schema::data_key(st.attr.ino, lb), st.attr.version, schema::encode_data(b));
                }
            }
            st.attr.size = new;
        }
        Ok(())
    }

    /// Make block `b` cached if it exists in the store.
    fn load_block(&self, st: &mut InodeState, b: u64) -> Result<()> {
        if st.blocks.contains_key(&b) || st.blocks_complete || b >= st.holes_from || self.store.is_null() {
            return Ok(());
        }
        if let Some(v) = self.store.get(&schema::data_key(st.attr.ino, b)).map_err(|e| e.about(format_args!("inode {} data block {b}", st.attr.ino)))? {
            let d = schema::decode_data(&v)?.to_vec();
            self.cached_data.add(d.len() as i64);
            st.blocks.insert(b, d);
        }
        Ok(())
    }

    // ---------------------------------------------------------------- files

    /// Open a file for I/O: the inode stays alive (even unlinked) until `release`.
    pub fn open_file(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<Attr> {
        let _t = self.stats.start(Op::Open);
        let i = self.inode(ino)?;
        let a = i.st.lock().attr;
        if ctx.check_perms {
            check_access(ctx, &a, mask)?;
        }
        i.opens.fetch_add(1, Ordering::AcqRel);
        Ok(a)
    }

    /// Open a directory for listing: a permission check only (handles carry no state).
    pub fn open_dir(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<()> {
        let i = self.inode(ino)?;
        if i.kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        let a = i.st.lock().attr;
        check_access(ctx, &a, mask)
    }

    /// Close a handle. The last close of an unlinked file reclaims it.
    pub fn release(&self, ino: Ino) -> Result<()> {
        let _t = self.stats.start(Op::Release);
        let i = self.inode(ino)?;
        let prev = i.opens.fetch_sub(1, Ordering::AcqRel);
        if prev == 1 {
            let needs = {
                let st = i.st.lock();
                st.attr.nlink == 0 && !st.destroyed
            };
            if needs {
                let mut g = self.committer.enter()?;
                let mut st = i.st.lock();
                if st.attr.nlink == 0 && !st.destroyed && i.opens.load(Ordering::Acquire) == 0 {
                    Self::bump(&mut st);
                    self.destroy(&mut g, &mut st, true)?;
                }
                drop(st);
                drop(g);
                if i.lookups.load(Ordering::Relaxed) == 0 {
                    self.inodes.remove_if(ino, |x| x.opens.load(Ordering::Relaxed) == 0 && x.lookups.load(Ordering::Relaxed) == 0);
                }
            }
        }
        Ok(())
    }

    pub fn read(&self, ino: Ino, off: u64, size: u32) -> Result<Vec<u8>> {
        let _t = self.stats.start(Op::Read);
        let i = self.inode(ino)?;
        if i.kind == Kind::Dir {
            return Err(Error::IsDir);
        }
        let st = i.st.lock();
        let fsize = st.attr.size;
        if off >= fsize {
            return Ok(Vec::new());
        }
        let end = fsize.min(off + size as u64);
        let mut out = vec![0u8; (end - off) as usize];
        // A block not cached may be in the store (else it is a hole). Read
        // through without caching: the page cache above keeps it.
        let stored = |b: u64| !st.blocks.contains_key(&b) && !st.blocks_complete && b < st.holes_from && !self.store.is_null();
        let (first, last) = (off / BLOCK, (end - 1) / BLOCK);
        // Two or more: one range scan from the first to the last, instead of
        // a point read each (a 128 KiB READ was 32 point reads, each with its
        // own filter probes and index seek; docs/BENCHMARKS.md, run 10).
        // Found blocks come back in block order; the cursor walks them.
        let wanted = ((first..=last).find(|&b| stored(b)), (first..=last).rev().find(|&b| stored(b)));
        let scanned = match wanted {
            (Some(a), Some(z)) if a != z => {
                Some(self.store.scan(&schema::data_key(ino, a), &schema::data_key(ino, z + 1), (z - a + 1) as usize).map_err(|e| e.about(format_args!("inode {ino} data blocks {a}-{z}")))?)
            }
            _ => None,
        };
        let mut cursor = 0;
        let mut pos = off;
        while pos < end {
            let b = pos / BLOCK;
            let boff = (pos % BLOCK) as usize;
            let n = ((BLOCK as usize - boff) as u64).min(end - pos) as usize;
            let dst = &mut out[(pos - off) as usize..(pos - off) as usize + n];
            if let Some(blk) = st.blocks.get(&b) {
                copy_from_block(blk, boff, dst);
            } else if stored(b) {
                let v = match &scanned {
                    Some(found) => {
                        while cursor < found.len() && schema::parse_data_key(&found[cursor].0)?.1 < b {
                            cursor += 1;
                        }
                        match found.get(cursor) {
                            Some((k, v)) if schema::parse_data_key(k)?.1 == b => Some(std::borrow::Cow::Borrowed(v.as_slice())),
                            _ => None,
                        }
                    }
                    None => self.store.get(&schema::data_key(ino, b)).map_err(|e| e.about(format_args!("inode {ino} data block {b}")))?.map(std::borrow::Cow::Owned),
                };
                if let Some(v) = v {
                    copy_from_block(schema::decode_data(&v)?, boff, dst);
                }
            }
            pos += n as u64;
        }
        drop(st);
        self.touch_atime(&i)?;
        Ok(out)
    }

    /// The access time after a read or a listing, per `Config::atime`.
    fn touch_atime(&self, i: &Inode) -> Result<()> {
        if self.cfg.atime == Atime::Never || self.cfg.read_only {
            return Ok(());
        }
        let t = now();
        let due = |a: &Attr| match self.cfg.atime {
            Atime::Strict => a.atime != t,
            Atime::Relative => a.atime <= a.mtime || a.atime <= a.ctime || t.sec - a.atime.sec >= 24 * 3600,
            Atime::Never => false,
        };
        if !due(&i.st.lock().attr) {
            return Ok(());
        }
        let mut g = self.committer.enter()?;
        let mut st = i.st.lock();
        if st.destroyed || !due(&st.attr) {
            return Ok(());
        }
        Self::dir_fold(i, &mut st);
        st.attr.atime = t;
        Self::bump(&mut st);
        self.emit_inode(&mut g, &mut st);
        Ok(())
    }

    pub fn write(&self, ino: Ino, off: u64, data: &[u8]) -> Result<u32> {
        self.throttle();
        let _t = self.stats.start(Op::Write);
        self.writable()?;
        let i = self.inode(ino)?;
        if i.kind == Kind::Dir {
            return Err(Error::IsDir);
        }
        if data.is_empty() {
            return Ok(0);
        }
        let end = off.checked_add(data.len() as u64).ok_or(Error::FileTooBig)?;
        if end > MAX_FILE_SIZE {
            return Err(Error::FileTooBig);
        }
        self.room(RECORD_ROOM + data.len() as u64)?;
        if end > INLINE_MAX {
            self.unshare(&i)?;
        }
        // After `unshare`, which takes and releases a name lock of its own.
        let _bkl = self.names.bkl();
        let mut g = self.committer.enter()?;
        let t = now();
        let mut st = i.st.lock();
        if st.destroyed {
            // Writeback of a file whose last name and handle are gone: its
            // records are deleted, so the data has nowhere to go.
            return Ok(data.len() as u32);
        }
        let old = st.attr.size;
        if end > old {
            self.resize(&mut g, &mut st, end)?;
        }
        Self::bump(&mut st);
        let mut pos = off;
        let mut touched = Vec::new();
        while pos < end {
            let b = pos / BLOCK;
            let boff = (pos % BLOCK) as usize;
            let n = ((BLOCK as usize - boff) as u64).min(end - pos) as usize;
            self.load_block(&mut st, b)?;
            let src = &data[(pos - off) as usize..(pos - off) as usize + n];
            let blk = st.blocks.entry(b).or_default();
            let before = blk.len();
            if blk.len() < boff + n {
                blk.resize(boff + n, 0);
            }
            blk[boff..boff + n].copy_from_slice(src);
            let grew = blk.len() - before;
            self.cached_data.add(grew as i64);
            touched.push(b);
            pos += n as u64;
        }
        st.attr.mtime = t;
        st.attr.ctime = t;
        if st.attr.size > INLINE_MAX {
            for b in touched {
                let v = schema::encode_data(&st.blocks[&b]);
                g.put(schema::data_key(ino, b), st.attr.version, v);
            }
        }
        self.emit_inode(&mut g, &mut st);
        drop(st);
        self.leave(g)?;
        Ok(data.len() as u32)
    }

    /// Clear setuid and setgid before a caller modifies a regular file's
    /// data, as Linux does for every filesystem (`setattr_should_drop_suidgid`):
    /// setuid always, setgid when the file is group-executable or the caller
    /// is not in its group; root (standing in for CAP_FSETID) keeps both.
    /// `groups` gives the caller's supplementary groups and is called only
    /// when the answer depends on them (the FUSE adapter reads them from
    /// /proc). The kernel clears the bits itself only when setgid comes with
    /// group exec (fuse_setattr), so the adapter calls this before writes and
    /// fallocate. Returns whether the mode changed.
    pub fn drop_privileges(&self, uid: u32, gid: u32, groups: impl FnOnce() -> Vec<u32>, ino: Ino) -> Result<bool> {
        if uid == 0 {
            return Ok(false);
        }
        let i = self.inode(ino)?;
        if i.kind != Kind::File {
            return Ok(false);
        }
        let (perm, fgid) = {
            let st = i.st.lock();
            (st.attr.perm, st.attr.gid)
        };
        if perm & 0o6000 == 0 {
            return Ok(false);
        }
        let in_group = fgid == gid || (perm & 0o2010 == 0o2000 && groups().contains(&fgid));
        let kill = |perm: u16| {
            let mut k = perm & 0o4000;
            if perm & 0o2000 != 0 && (perm & 0o010 != 0 || !in_group) {
                k |= 0o2000;
            }
            k
        };
        if kill(perm) == 0 {
            return Ok(false);
        }
        self.writable()?;
        let _bkl = self.names.bkl();
        let g = self.committer.enter()?;
        let mut st = i.st.lock();
        let k = kill(st.attr.perm);
        if st.destroyed || k == 0 || st.attr.gid != fgid {
            return Ok(false);
        }
        st.attr.perm &= !k;
        st.attr.ctime = now();
        self.finish_inode_change(g, st)?;
        Ok(true)
    }

    pub fn fallocate(&self, ino: Ino, off: u64, len: u64, mode: u32) -> Result<()> {
        self.writable()?;
        let end = off.checked_add(len).ok_or(Error::FileTooBig)?;
        if len == 0 {
            return Err(Error::Invalid);
        }
        if end > MAX_FILE_SIZE {
            return Err(Error::FileTooBig);
        }
        let i = self.inode(ino)?;
        if i.kind != Kind::File {
            return Err(if i.kind == Kind::Dir { Error::IsDir } else { Error::NotSupported });
        }
        let size = i.st.lock().attr.size;
        let keep = mode & FALLOC_KEEP_SIZE != 0;
        match mode & !FALLOC_KEEP_SIZE {
            0 => {
                // Blocks are not reserved ahead (they are written when data
                // is), but a request the disk cannot hold fails now, as on
                // ext4: a program that preallocates relies on ENOSPC here.
                let (_, free) = self.store.space();
                if end.saturating_sub(if keep { 0 } else { size }) > free {
                    return Err(Error::NoSpace);
                }
                if !keep && end > size {
                    self.setattr(&Ctx::root(), ino, &SetAttr { size: Some(end), ..Default::default() })?;
                }
                Ok(())
            }
            FALLOC_PUNCH_HOLE if keep => self.zero_range(&i, off, end.min(size)),
            FALLOC_ZERO_RANGE => {
                self.zero_range(&i, off, end.min(size))?;
                if !keep && end > size {
                    self.setattr(&Ctx::root(), ino, &SetAttr { size: Some(end), ..Default::default() })?;
                }
                Ok(())
            }
            _ => Err(Error::NotSupported),
        }
    }

    /// Make `off..end` (within the size) read as zeros: whole blocks are
    /// deleted (they become holes and free their space), partial ones
    /// are written with zeros.
    fn zero_range(&self, i: &Inode, off: u64, end: u64) -> Result<()> {
        if off >= end {
            return Ok(());
        }
        let (first_whole, end_whole) = (off.div_ceil(BLOCK), end / BLOCK);
        let inline = i.st.lock().attr.size <= INLINE_MAX;
        if inline || first_whole >= end_whole {
            return self.write(i.ino, off, &vec![0u8; (end - off) as usize]).map(|_| ());
        }
        if off < first_whole * BLOCK {
            self.write(i.ino, off, &vec![0u8; (first_whole * BLOCK - off) as usize])?;
        }
        if end > end_whole * BLOCK {
            self.write(i.ino, end_whole * BLOCK, &vec![0u8; (end - end_whole * BLOCK) as usize])?;
        }
        let _bkl = self.names.bkl();
        let mut g = self.committer.enter()?;
        let mut st = i.st.lock();
        if st.destroyed || st.attr.size <= INLINE_MAX {
            return Ok(());
        }
        Self::bump(&mut st);
        let ver = st.attr.version;
        for b in first_whole..end_whole {
            g.del(schema::data_key(i.ino, b), ver);
            // An empty cached block is a hole the store must not be asked
            // about until this delete is committed (reclaim drops it then).
            if let Some(v) = st.blocks.insert(b, Vec::new()) {
                self.cached_data.add(-(v.len() as i64));
            }
        }
        let t = now();
        st.attr.mtime = t;
        st.attr.ctime = t;
        self.emit_inode(&mut g, &mut st);
        drop(st);
        self.leave(g)
    }

    /// Wait until every change to `ino`, and every operation acknowledged
    /// before this call, is durable. fsync is a barrier for the whole history
    /// before it (a stronger promise than POSIX's, and free with group commit:
    /// it is the same commit).
    pub fn fsync(&self, ino: Ino) -> Result<()> {
        let _t = self.stats.start(Op::Fsync);
        let _ = ino;
        self.committer.sync_all()
    }

    /// syncfs / sync: everything so far.
    pub fn sync(&self) -> Result<()> {
        self.committer.sync_all()
    }

    // ---------------------------------------------------------------- directories

    /// Up to `max` entries after `cookie` (0 = from the start), in name-hash
    /// order; each entry's `cookie` resumes after it. An entry present for the
    /// whole listing is returned exactly once, whatever else changes.
    pub fn readdir(&self, ino: Ino, cookie: u64, max: usize) -> Result<Vec<DirEntry>> {
        let _t = self.stats.start(Op::Readdir);
        let _bkl = self.names.bkl();
        let d = self.dir_inode(ino)?;
        let dir = d.dir.as_ref().expect("dir");
        if d.st.lock().dead {
            return Ok(Vec::new());
        }
        if cookie == 0 {
            self.touch_atime(&d)?;
        }
        let max = max.max(1);
        let mut from = cookie.saturating_add(1).max(3);
        loop {
            let complete = dir.listing_complete() || self.store.is_null();
            if complete {
                let got = dir.range(from, u64::MAX, max);
                // Eviction clears `complete` before removing entries: if it ran
                // meanwhile, this listing may have holes; merge with the store.
                if !dir.listing_complete() && !self.store.is_null() {
                    continue;
                }
                return Ok(got
                    .into_iter()
                    .filter(|(_, _, d)| d.ino != 0)
                    .take(max)
                    .map(|(h, n, d)| DirEntry { name: n.into_vec(), ino: d.ino, kind: d.kind, cookie: h })
                    .collect());
            }
            // Merge the store's range with the cache, which shadows it. The
            // cache is read *before* the store: an entry missing from the
            // store scan was not yet committed, so it was dirty (and not
            // evictable) when the cache was read. Reading the cache after the
            // scan would lose an entry committed and evicted in between.
            let limit = max + 16;
            let cached = dir.range(from, u64::MAX, limit);
            let cached_bound = if cached.iter().filter(|(_, _, d)| d.ino != 0).count() >= limit {
                cached.last().map_or(u64::MAX, |c| c.0)
            } else {
                u64::MAX
            };
            // Shared `reclaim` from the scan to the fills below (rule 5): no
            // eviction can drop a newer negative entry in between.
            let reclaim = self.reclaim.read();
            let (lo, hi) = schema::entry_range(ino, from);
            let stored = self.store.scan(&lo, &hi, limit)?;
            let store_truncated = stored.len() == limit;
            let store_bound = if store_truncated {
                schema::parse_entry_key(&stored.last().unwrap().0)?.1
            } else {
                u64::MAX
            };
            let bound = store_bound.min(cached_bound);
            let truncated = bound != u64::MAX;
            let mut merged: BTreeMap<(u64, Vec<u8>), Option<(Ino, Kind)>> = BTreeMap::new();
            for (k, v) in &stored {
                let (_, h, name) = schema::parse_entry_key(k)?;
                if h > bound {
                    continue;
                }
                let (eino, kind, sole) = schema::decode_entry(v)?;
                merged.insert((h, name.to_vec()), Some((eino, kind)));
                // Prime the cache with what the scan read: rm -rf unlinks
                // every listed name next, and a cached entry saves each
                // unlink a store read. Fills never replace a cached entry.
                if self.cfg.name_cache != NameCache::Off {
                    let dent = Dent { ino: eino, kind, sole, ver: 0, dirty_epoch: 0 };
                    if dir.fill(h, name, dent).1 {
                        self.cached_dents.add(1);
                    }
                }
            }
            drop(reclaim);
            for (h, n, dd) in cached.into_iter().filter(|c| c.0 <= bound) {
                merged.insert((h, n.into_vec()), if dd.ino == 0 { None } else { Some((dd.ino, dd.kind)) });
            }
            let out: Vec<DirEntry> = merged
                .into_iter()
                .filter_map(|((h, name), v)| v.map(|(ino, kind)| DirEntry { name, ino, kind, cookie: h }))
                .take(max)
                .collect();
            if !out.is_empty() || !truncated {
                return Ok(out);
            }
            from = bound.saturating_add(1);
        }
    }

    /// The parent of a directory (for "..").
    pub fn parent_of(&self, ino: Ino) -> Result<Ino> {
        let d = self.dir_inode(ino)?;
        let p = d.st.lock().parent();
        Ok(p)
    }

    // ---------------------------------------------------------------- xattrs

    pub fn setxattr(&self, ctx: &Ctx, ino: Ino, name: &[u8], value: &[u8], flags: u32) -> Result<()> {
        let _t = self.stats.start(Op::Xattr);
        self.writable()?;
        check_xattr_name(ctx, name)?;
        if value.len() > XATTR_SIZE_MAX {
            return Err(Error::Range);
        }
        self.room(RECORD_ROOM + (name.len() + value.len()) as u64)?;
        let i = self.inode(ino)?;
        let is_default = name == acl::DEFAULT;
        let acl = if name == acl::ACCESS || is_default { Some(acl::Acl::decode(value)?) } else { None };
        if is_default && i.kind != Kind::Dir {
            // Only directories have default ACLs (ext4: EACCES, or nothing to do for an empty one).
            return if acl.as_ref().is_some_and(|a| a.is_empty()) { Ok(()) } else { Err(Error::PermissionDenied) };
        }
        let g = self.committer.enter()?;
        let mut st = i.st.lock();
        if st.destroyed {
            return Ok(());
        }
        // An access ACL sets the mode's permission bits; one the mode alone
        // expresses is not stored, and an empty default ACL removes it.
        let mut remove = false;
        if let Some(a) = &acl {
            if is_default {
                remove = a.is_empty();
            } else {
                let (bits, equiv) = a.mode();
                st.attr.perm = (st.attr.perm & !0o777) | bits;
                if !(ctx.uid == 0 || ctx.in_group(st.attr.gid)) {
                    st.attr.perm &= !0o2000;
                }
                remove = equiv;
            }
        }
        let pos = st.xattrs.iter().position(|(n, _)| n == name);
        match (pos, flags) {
            (Some(_), XATTR_CREATE) => return Err(Error::Exists),
            (None, XATTR_REPLACE) => return Err(Error::NoAttr),
            (Some(p), _) if remove => {
                st.xattrs.remove(p);
            }
            (None, _) if remove => {}
            (Some(p), _) => st.xattrs[p].1 = value.to_vec(),
            (None, _) => {
                let total: usize = st.xattrs.iter().map(|(n, v)| n.len() + v.len()).sum();
                if total + name.len() + value.len() > 4 * XATTR_SIZE_MAX {
                    return Err(Error::NoSpace);
                }
                st.xattrs.push((name.to_vec(), value.to_vec()))
            }
        }
        if let (true, Some(d)) = (is_default, &i.dir) {
            d.default_acl.store(!remove, Ordering::Relaxed);
        }
        st.attr.ctime = now();
        self.finish_inode_change(g, st)
    }

    pub fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        let _t = self.stats.start(Op::Xattr);
        check_xattr_name(&Ctx::root(), name)?;
        let i = self.inode(ino)?;
        let st = i.st.lock();
        st.xattrs.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).ok_or(Error::NoAttr)
    }

    pub fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        let _t = self.stats.start(Op::Xattr);
        let i = self.inode(ino)?;
        let st = i.st.lock();
        Ok(st.xattrs.iter().map(|(n, _)| n.clone()).collect())
    }

    pub fn removexattr(&self, ctx: &Ctx, ino: Ino, name: &[u8]) -> Result<()> {
        let _t = self.stats.start(Op::Xattr);
        self.writable()?;
        check_xattr_name(ctx, name)?;
        let i = self.inode(ino)?;
        let g = self.committer.enter()?;
        let mut st = i.st.lock();
        if st.destroyed {
            return Err(Error::NoAttr);
        }
        let pos = st.xattrs.iter().position(|(n, _)| n == name).ok_or(Error::NoAttr)?;
        st.xattrs.remove(pos);
        if let (true, Some(d)) = (name == acl::DEFAULT, &i.dir) {
            d.default_acl.store(false, Ordering::Relaxed);
        }
        st.attr.ctime = now();
        self.finish_inode_change(g, st)
    }

    pub fn statfs(&self) -> Result<StatFs> {
        let _t = self.stats.start(Op::Statfs);
        let (total, free) = self.store.space();
        let bsize = BLOCK as u32;
        let used_ags: u64 = self.ag_next.iter().map(|a| a.load(Ordering::Relaxed)).sum();
        Ok(StatFs {
            blocks: total / BLOCK,
            bfree: free / BLOCK,
            bavail: free / BLOCK,
            files: (1u64 << 32) + used_ags,
            ffree: 1u64 << 32,
            bsize,
            namelen: NAME_MAX as u32,
        })
    }

    // ---------------------------------------------------------------- recovery and reclaim

    /// Reclaim inodes that were unlinked while open when the last daemon died.
    fn recover_orphans(&self) -> Result<()> {
        let (lo, hi) = (vec![schema::K_ORPHAN], vec![schema::K_ORPHAN + 1]);
        let orphans = self.store.scan(&lo, &hi, usize::MAX)?;
        if orphans.is_empty() {
            return Ok(());
        }
        for (k, _) in &orphans {
            let ino = schema::parse_orphan_key(k)?;
            let mut g = self.committer.enter()?;
            match self.inode(ino) {
                Ok(i) => {
                    let mut st = i.st.lock();
                    Self::bump(&mut st);
                    self.destroy(&mut g, &mut st, true)?;
                    drop(st);
                    self.inodes.remove_if(ino, |_| true);
                }
                Err(Error::NotFound) => g.del(k.clone(), u64::MAX),
                Err(e) => return Err(e),
            }
        }
        tracing::info!("reclaimed {} orphan inodes", orphans.len());
        self.committer.commit_once()
    }

    /// Estimated bytes held by the caches.
    pub fn cache_usage(&self) -> u64 {
        let inodes = self.inodes.len() as u64;
        let dents = self.cached_dents.get().max(0) as u64;
        let data = self.cached_data.get().max(0) as u64;
        // Per inode: the in-memory inode, plus its Arc header, table slot and
        // allocator rounding. Calibrated against RSS when the inode was padded
        // to 384 bytes (300K files at 16 vs 64 MiB budgets, and 270K cached
        // inodes through a mount: about 800 bytes each in all), as
        // `size_of + 400`. Of that 400, the padded layout's `Arc` took 128
        // bytes (a 128-aligned header: 512 a block); the unpadded one takes
        // 24 (312 bytes in mimalloc's 320 class), so 104 fewer.
        // Per entry: a 64-byte slot and a tag byte at the index's load of
        // 3/8 to 3/4 (86-172 bytes), and a long name's heap copy: 192 was
        // calibrated on the bucket array before it and stays an upper bound
        // for names of up to 20 bytes.
        let per_inode = (std::mem::size_of::<Inode>() + 296) as u64;
        // Evicted names: the bytes of their directories' filters.
        let filters = self.evicted_filter_bytes.load(Ordering::Relaxed).max(0) as u64;
        inodes * per_inode + dents * 192 + data + filters
    }

    /// Change the cache budget (bytes) of a running engine; reclaim brings
    /// the cache under it in batches after the next commits. Under a memory
    /// bound the next sample recomputes it.
    pub fn set_budget(&self, bytes: u64) {
        self.budget.store(bytes, Ordering::Relaxed);
    }

    /// The cache budget in force (bytes).
    pub fn budget(&self) -> u64 {
        self.budget.load(Ordering::Relaxed)
    }

    /// Under a process memory bound, at most every 50 ms: measure resident
    /// memory, take what is not the cache (the store's block cache and
    /// memtables, allocator slack, stacks, the estimate's error) as overhead,
    /// and give the cache what is left of 70% of the bound (throttling lets
    /// the cache run a quarter over its budget, and the estimate runs ahead
    /// of a shrinking budget: measured, 3M creates under a 700 MiB bound
    /// peaked at 767 MiB with 80% and at 603 MiB with 70%). Feedback rather
    /// than a model of the store's memory, which we do not own. Above 80% of
    /// the bound the budget is cut below the current estimate; above 85%
    /// writers stall (`throttle`). For 300 ms after a reclaim pass that freed more than
    /// 5% of the bound, the overhead is not re-measured: the allocator has
    /// not yet returned the freed memory, and taking that lag for overhead
    /// emptied the cache (measured: the budget swung between 16 MiB and
    /// 600 MiB).
    fn adapt_budget(&self) {
        let bound = self.cfg.memory_bytes;
        if bound == 0 {
            return;
        }
        let ms = unix_ms();
        let last = self.budget_sampled.load(Ordering::Relaxed);
        if ms < last + 50 || self.budget_sampled.compare_exchange(last, ms, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            return;
        }
        let Some(rss) = resident_bytes() else { return };
        // Over 85%: every writer waits for a commit and reclaims before its
        // next operation, until a sample finds the process back under.
        self.over_bound.store(rss > bound / 100 * 85, Ordering::Relaxed);
        if ms < self.big_reclaim_at.load(Ordering::Relaxed) + 300 {
            return;
        }
        let usage = self.cache_usage();
        let overhead = rss.saturating_sub(usage);
        let mut b = cache_share(bound).saturating_sub(overhead);
        if rss > bound / 100 * 80 {
            // Near the bound whatever the estimate says: shrink from here.
            b = b.min(usage / 10 * 8);
        }
        self.budget.store(b.clamp(16 << 20, self.cfg.cache_bytes.max(16 << 20)), Ordering::Relaxed);
    }

    pub fn cached_inodes(&self) -> usize {
        self.inodes.len()
    }

    /// Dirty throttling, like the kernel's balance_dirty_pages: a writer that
    /// finds the cache a quarter over budget waits for the open epoch to
    /// commit (dirty objects become evictable) and reclaims itself, so memory
    /// stays bounded when operations outrun the committer's reclaim. Called
    /// before an operation takes any lock; the estimate is read every 64th
    /// operation of a thread (it sums the inode-table shards).
    fn throttle(&self) {
        thread_local!(static OPS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) });
        let over_bound = self.over_bound.load(Ordering::Relaxed);
        if !over_bound {
            if self.store.is_null() || OPS.with(|n| { n.set(n.get().wrapping_add(1)); n.get() % 64 != 0 }) {
                return;
            }
            if self.committer.open_records() > Committer::MAX_OPEN {
                // The open epoch is full: wait for it to commit (bounded batches).
                self.throttled.fetch_add(1, Ordering::Relaxed);
                let _ = self.committer.wait(self.committer.epoch());
                return;
            }
            let budget = self.budget();
            if self.cache_usage() <= budget + budget / 4 {
                return;
            }
        }
        self.throttled.fetch_add(1, Ordering::Relaxed);
        // A failed commit shows up in the operation's own `enter`.
        let _ = self.committer.wait(self.committer.epoch());
        self.maybe_reclaim();
    }

    /// Evict a directory's clean entries, one `RECLAIM_CHUNK` under each
    /// exclusive hold of the `reclaim` lock.
    fn evict_dents(&self, d: &crate::cache::Dir, durable: u64) {
        for ds in 0..crate::cache::DIR_SHARDS {
            let mut from = 0;
            loop {
                let r = self.reclaim.write();
                let (ev, _, next) = d.evict_clean_chunk(ds, durable, from, RECLAIM_CHUNK);
                drop(r);
                if ev > 0 {
                    self.cached_dents.add(-(ev as i64));
                    self.evicted_dents.fetch_add(ev as u64, Ordering::Relaxed);
                }
                match next {
                    Some(h) => from = h,
                    None => break,
                }
            }
        }
    }

    /// Drop the cached data blocks of the clean files (not inline ones)
    /// among `inodes` whose lock is free, holding `reclaim` exclusively for
    /// one `RECLAIM_CHUNK` at a time.
    fn drop_clean_data(&self, inodes: &[Arc<Inode>], durable: u64) {
        for chunk in inodes.chunks(RECLAIM_CHUNK) {
            let _r = self.reclaim.write();
            for i in chunk {
                let Some(mut st) = i.st.try_lock() else { continue };
                if st.dirty_epoch <= durable && st.attr.kind == Kind::File && st.attr.size > INLINE_MAX && !st.blocks.is_empty() {
                    let freed: usize = st.blocks.values().map(|b| b.len()).sum();
                    st.blocks.clear();
                    st.blocks_complete = false;
                    // Clean: every queued delete is in the store now.
                    st.holes_from = u64::MAX;
                    self.cached_data.add(-(freed as i64));
                }
            }
        }
    }

    /// Batched reclaim (seed 003): when over budget, walk inode-table shards
    /// from a cursor and evict clean, unreferenced objects a shard at a time,
    /// until under 90% of the budget. Dirty objects are never evicted.
    pub fn maybe_reclaim(&self) {
        if self.store.is_null() {
            return;
        }
        self.adapt_budget();
        let budget = self.budget();
        let off = self.cfg.name_cache == NameCache::Off;
        let before = self.cache_usage();
        if before <= budget && !off {
            return;
        }
        let target = budget / 10 * 9;
        let configured = match self.cfg.memory_bytes {
            0 => self.cfg.cache_bytes,
            m => self.cfg.cache_bytes.min(cache_share(m)),
        };
        let demote_at = configured / 4;
        let _big = (self.cfg.memory_bytes > 0).then_some(BigReclaim { e: self, before });
        let n = self.inodes.shard_count();
        // Clean file data first. A data block is 4 KiB that the kernel's page
        // cache holds too, and a read takes it back from the store in one
        // range scan; a name or an inode is a hundred bytes that a lookup,
        // a stat or a listing must read back one at a time. Before this, a
        // pass took entries, data and inodes together, shard by shard: after
        // untarring a kernel tree (1.3 GB of data into a 256 MiB budget),
        // the tar walk that followed read 42K records back from the store
        // (docs/BENCHMARKS.md, run 10). Only worth a walk when data is a
        // good part of the cache.
        if !off && self.cached_data.get().max(0) as u64 > budget / 8 {
            for _ in 0..n {
                if self.cache_usage() <= target {
                    return;
                }
                let si = self.reclaim_cursor.fetch_add(1, Ordering::Relaxed) % n;
                self.drop_clean_data(&self.inodes.shard_snapshot(si), self.committer.durable_epoch());
                self.reclaim_batches.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Up to two rounds of the shards: a cached entry pins its inode
        // (`cache::Slot::inode`), so an inode whose entry this pass evicted
        // after visiting the inode's shard is evictable only on the next round.
        for k in 0..2 * n {
            if (self.cache_usage() <= target && !off) || (off && k >= n) {
                break;
            }
            let si = self.reclaim_cursor.fetch_add(1, Ordering::Relaxed) % n;
            let durable = self.committer.durable_epoch();
            let snapshot = self.inodes.shard_snapshot(si);
            // Directory entries first: a directory's clean entries can go even
            // if the directory stays. The exclusive `reclaim` lock is held for
            // one bounded chunk at a time (RECLAIM_CHUNK entries or inodes):
            // one hold per 156K-entry directory shard stalled lookups that
            // needed a store fill for about 107 ms each.
            for i in &snapshot {
                if let Some(d) = &i.dir {
                    self.evict_dents(d, durable);
                    // Evicted-name filters past a quarter of the configured
                    // budget: large directories give up "complete" (see
                    // `Dir::demote`). Not the budget in force: that one
                    // shrinks fast while the RSS is near the memory bound
                    // (`adapt_budget`), and demotion cannot be undone, so a
                    // moment's squeeze made every later create read the
                    // store (37.7M of 50M in one run, docs/BENCHMARKS.md
                    // run 7). The filters stay in `cache_usage`, so under a
                    // squeeze reclaim evicts entries and inodes instead.
                    let filter_bytes = self.evicted_filter_bytes.load(Ordering::Relaxed).max(0) as u64;
                    if filter_bytes > demote_at && d.evicted.load(Ordering::Relaxed) >= 4096 {
                        let n = d.demote();
                        self.demoted_hashes.fetch_add(n, Ordering::Relaxed);
                    }
                }
            }
            self.drop_clean_data(&snapshot, durable);
            // The snapshot's references would keep every inode from eviction.
            let inos: Vec<Ino> = snapshot.iter().map(|i| i.ino).collect();
            drop(snapshot);
            if off {
                continue;
            }
            let mut freed_data = 0i64;
            let mut ev = 0;
            for chunk in inos.chunks(RECLAIM_CHUNK) {
                let _r = self.reclaim.write();
                ev += self.inodes.evict_listed(si, chunk, |i| {
                    if i.ino == ROOT_INO || i.lookups.load(Ordering::Relaxed) > 0 || i.opens.load(Ordering::Relaxed) > 0 {
                        return false;
                    }
                    // Used since the last pass: a second chance (CLOCK).
                    if i.referenced.swap(false, Ordering::Relaxed) {
                        return false;
                    }
                    if let Some(d) = &i.dir {
                        if d.cached() > 0 {
                            return false;
                        }
                        // Unfolded stripe deltas live only here: keep the directory.
                        let stripes_clean = d.stripes.iter().all(|s| {
                            s.try_lock().is_some_and(|s| s.dirty_epoch <= durable && s.entries == 0 && s.subdirs == 0)
                        });
                        if !stripes_clean {
                            return false;
                        }
                    }
                    match i.st.try_lock() {
                        Some(st) if st.dirty_epoch <= durable => {
                            freed_data += st.blocks.values().map(|b| b.len() as i64).sum::<i64>();
                            true
                        }
                        _ => false,
                    }
                });
            }
            self.cached_data.add(-freed_data);
            self.evicted_inodes.fetch_add(ev as u64, Ordering::Relaxed);
            self.reclaim_batches.fetch_add(1, Ordering::Relaxed);
        }
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
        if let Some(h) = self.commit_thread.lock().take() {
            let _ = h.join();
        }
    }
}
