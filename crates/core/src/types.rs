//! Plain data: inode attributes, file kinds, timestamps, caller context and
//! the engine's configuration (including the switches that turn each seed's
//! cure off).

use std::time::{SystemTime, UNIX_EPOCH};

pub type Ino = u64;
pub const ROOT_INO: Ino = 1;
pub const NAME_MAX: usize = 255;
pub const BLOCK: u64 = 4096;
/// Files up to this size keep their data inside the inode record (TableFS).
pub const INLINE_MAX: u64 = BLOCK;
pub const MAX_FILE_SIZE: u64 = 1 << 50;
pub const LINK_MAX: u32 = 65000;
pub const XATTR_SIZE_MAX: usize = 65536;
/// Linux's XATTR_LIST_MAX: the most listxattr(2) can return (each name and
/// its NUL). An inode whose names would pass it could not be listed any
/// more (`getfattr -d`, `cp -a`, `rsync -X` fail with E2BIG).
pub const XATTR_LIST_MAX: usize = 65536;

/// Whether `names` and one more, `new`, still fit one listxattr(2) answer.
/// A name past it is refused with ENOSPC, as ext4 refuses one past its
/// space (both stores: one rule).
pub fn xattr_list_fits<'a>(names: impl Iterator<Item = &'a [u8]>, new: &[u8]) -> bool {
    names.map(|n| n.len() + 1).sum::<usize>() + new.len() < XATTR_LIST_MAX
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    File = 1,
    Dir = 2,
    Symlink = 3,
    Fifo = 4,
    Socket = 5,
    CharDev = 6,
    BlockDev = 7,
}

impl Kind {
    pub fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::File,
            2 => Kind::Dir,
            3 => Kind::Symlink,
            4 => Kind::Fifo,
            5 => Kind::Socket,
            6 => Kind::CharDev,
            7 => Kind::BlockDev,
            _ => return None,
        })
    }
    /// From the S_IFMT bits of a mode.
    pub fn from_mode(mode: u32) -> Option<Kind> {
        Some(match mode & 0o170000 {
            0o100000 | 0 => Kind::File,
            0o040000 => Kind::Dir,
            0o120000 => Kind::Symlink,
            0o010000 => Kind::Fifo,
            0o140000 => Kind::Socket,
            0o020000 => Kind::CharDev,
            0o060000 => Kind::BlockDev,
            _ => return None,
        })
    }
    pub fn mode_bits(self) -> u32 {
        match self {
            Kind::File => 0o100000,
            Kind::Dir => 0o040000,
            Kind::Symlink => 0o120000,
            Kind::Fifo => 0o010000,
            Kind::Socket => 0o140000,
            Kind::CharDev => 0o020000,
            Kind::BlockDev => 0o060000,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Ts {
    pub sec: i64,
    pub nsec: u32,
}

impl Ts {
    pub fn now() -> Ts {
        Ts::from_system(SystemTime::now())
    }
    pub fn to_system(self) -> SystemTime {
        if self.sec >= 0 {
            UNIX_EPOCH + std::time::Duration::new(self.sec as u64, self.nsec)
        } else {
            UNIX_EPOCH - std::time::Duration::new((-self.sec) as u64, 0)
                + std::time::Duration::new(0, self.nsec)
        }
    }
    pub fn from_system(t: SystemTime) -> Ts {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Ts {
                sec: d.as_secs() as i64,
                nsec: d.subsec_nanos(),
            },
            Err(e) => {
                let d = e.duration();
                let mut sec = -(d.as_secs() as i64);
                let mut nsec = d.subsec_nanos();
                if nsec > 0 {
                    sec -= 1;
                    nsec = 1_000_000_000 - nsec;
                }
                Ts { sec, nsec }
            }
        }
    }
}

/// Inode attributes as the engine keeps and persists them.
///
/// `repr(C)` with the fields a directory operation changes (size, version,
/// times, nlink) first, so that with the state's other hot fields they share
/// the cache lines right after the inode's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Attr {
    pub size: u64,
    /// Bumped on every change; persisted, so a commit can keep the newest.
    pub version: u64,
    pub mtime: Ts,
    pub ctime: Ts,
    pub nlink: u32,
    /// Permission bits (07777).
    pub perm: u16,
    pub kind: Kind,
    pub ino: Ino,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub atime: Ts,
    pub crtime: Ts,
}

impl Attr {
    pub fn mode(&self) -> u32 {
        self.kind.mode_bits() | self.perm as u32
    }
    /// A new root directory's attributes: mode 0755, owned by root, made at `t`.
    pub fn root(t: Ts) -> Attr {
        Attr {
            ino: ROOT_INO,
            kind: Kind::Dir,
            perm: 0o755,
            nlink: 2,
            uid: 0,
            gid: 0,
            rdev: 0,
            size: 0,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            version: 1,
        }
    }
    /// 512-byte blocks, counting only whole blocks of data (sparse-unaware but bounded).
    pub fn blocks(&self) -> u64 {
        self.size.div_ceil(512)
    }
}

/// Who is asking. Library callers that want POSIX permission checks set
/// `check_perms`; the FUSE adapter leaves it off and mounts with
/// `default_permissions`, so the kernel checks with the same rules.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub check_perms: bool,
    /// The caller's umask, applied to a new inode's mode unless its
    /// directory has a default ACL (which then replaces it, as in ext4).
    pub umask: u32,
    /// The caller hands the inode an entry reply names to the kernel (FUSE):
    /// the operation takes the kernel's lookup reference itself, on the
    /// inode it holds, before the name can change again (`Engine::hand_out`).
    pub kernel_ref: bool,
}

impl Ctx {
    pub fn root() -> Ctx {
        Ctx {
            uid: 0,
            gid: 0,
            groups: vec![],
            check_perms: false,
            umask: 0,
            kernel_ref: false,
        }
    }
    pub fn user(uid: u32, gid: u32) -> Ctx {
        Ctx {
            uid,
            gid,
            groups: vec![],
            check_perms: true,
            umask: 0,
            kernel_ref: false,
        }
    }
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// The most allocation groups a store may have. Each costs a counter in
/// memory and a record; past the core count they only spread placement,
/// and XFS stops being helped by more well before this.
pub const MAX_AGS: u32 = 1024;

/// Lock scope switch (seed 000 and 002).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockScope {
    /// One lock for the whole namespace (the big kernel lock): namespace
    /// changes, and also lookup, readdir, setattr (truncate included) and
    /// write, as seed 002's BKL covered them (2.4's ext2 allocated blocks
    /// under it).
    Global,
    /// One lock per directory (i_sem / i_rwsem).
    Dir,
    /// One lock per (directory, name): pdirops. The default.
    Name,
}

/// Directory index switch (seed 001).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirIndex {
    /// Every lookup scans the directory's entries (FFS/ext2 without htree).
    Linear,
    /// Hashed, ordered index. The default.
    Indexed,
}

/// Name cache switch (seed 001).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameCache {
    /// Clean entries are dropped after commit; every lookup asks the store.
    Off,
    /// Entries are cached when looked up; misses are cached (negative entries).
    On,
    /// As On, and new entries are cached at create; directories created in this
    /// session are known complete, so a miss needs no store read. The default.
    Primed,
}

/// Placement switch (seed 004).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// New directories go to the next allocation group round-robin (ext2's old Orlov-less policy).
    Spread,
    /// New directories and files go to the parent's allocation group. The default.
    Near,
}

/// Durability (commit) setting. What each one promises is in docs/design.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Every mutating operation returns only after its batch is synced.
    SyncEach,
    /// Batches are merged and synced every `interval_ms`; fsync waits for the
    /// commit that covers the inode. The default.
    Group,
    /// Batches are written to the store without sync; the store flushes on its
    /// own; fsync still syncs.
    Buffered,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub lock_scope: LockScope,
    pub dir_index: DirIndex,
    pub name_cache: NameCache,
    pub placement: Placement,
    pub durability: Durability,
    /// Group commit interval: an operation not followed by fsync is durable
    /// at most this much later (ext4 waits 5 s, XFS up to 30 s). 20 ms, not
    /// the 5 ms it was: through a mount under fsmark the commit thread's CPU
    /// fell from about 1.05 s to 0.6 s (fewer fsyncs, bigger batches), on a
    /// 2-vCPU machine where that CPU is taken from the FUSE threads
    /// (docs/perf-log/08-shared-lines-threads-commits.md).
    pub commit_interval_ms: u64,
    /// Cache budget in bytes (inodes, entries, cached data blocks).
    pub cache_bytes: u64,
    /// Bound on the whole process's resident memory (0: none). The store's
    /// own memory and allocator slack are outside the cache estimate; with a
    /// bound, reclaim measures resident memory and shrinks the cache budget
    /// so that the process stays under it (see `Engine::adapt_budget`).
    pub memory_bytes: u64,
    /// Number of allocation groups (1 to `MAX_AGS`).
    pub ags: u32,
    pub read_only: bool,
    /// Walk the data objects at open (`Engine::sweep_data`): remove those
    /// no inode uses and cut each to its file's size, what a crash can
    /// leave. The daemon turns it off for a store its last daemon closed
    /// cleanly, where neither can be: one open and read per object less.
    pub sweep_data: bool,
    /// When a read or a listing updates the access time (mount's
    /// `relatime`, `strictatime`, `noatime`).
    pub atime: Atime,
    /// What a store failure does to the mount (`-o errors=`).
    pub on_error: OnError,
}

/// What the filesystem does after its store failed (a write, sync, flush or
/// compaction error): mount option `errors=shutdown|ro`, after XFS's
/// shutdown and ext4's `errors=remount-ro`. Either way nothing changes any
/// more and reads go on; they differ in the errno a change gets. An fsync
/// of what was not durable gets EIO in both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnError {
    /// Every change gets EIO, as XFS after a shutdown (the default: a
    /// program sees an I/O error, not a filesystem it may think was
    /// mounted read-only on purpose).
    #[default]
    Shutdown,
    /// Every change gets EROFS, as ext4's `errors=remount-ro`.
    ReadOnly,
}

/// Access-time updates, as mount(8)'s options name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Atime {
    /// Only when the access time is not newer than the modification or
    /// change time, or is a day old (Linux's default).
    Relative,
    /// On every read.
    Strict,
    /// Never.
    Never,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            lock_scope: LockScope::Name,
            dir_index: DirIndex::Indexed,
            name_cache: NameCache::Primed,
            placement: Placement::Near,
            durability: Durability::Group,
            commit_interval_ms: 20,
            cache_bytes: 256 << 20,
            memory_bytes: 0,
            ags: 16,
            read_only: false,
            sweep_data: true,
            atime: Atime::Relative,
            on_error: OnError::Shutdown,
        }
    }
}

/// Filesystem statistics.
#[derive(Clone, Copy, Debug)]
pub struct StatFs {
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub bsize: u32,
    pub namelen: u32,
}

/// A directory entry as readdir returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub ino: Ino,
    pub kind: Kind,
    /// The cookie to resume after this entry.
    pub cookie: u64,
}
