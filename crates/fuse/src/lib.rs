//! The FUSE frontend on `fuser`.
//!
//! Kernel contract kept here (virtiofsd's "Lookup Count" rule): every reply
//! that hands the kernel an inode (lookup, create, mknod, mkdir, symlink,
//! link, and each readdirplus entry other than "." and "..") takes one
//! reference in the engine; FORGET drops them. An inode the kernel holds is
//! never evicted. Errors become errno in exactly one function, [`errno`].
//!
//! Round trips avoided: FLUSH is not implemented (the kernel stops sending it
//! after one ENOSYS: one round trip less per close); negative lookups are
//! cached by the kernel (entry with inode 0); readdirplus answers listing and
//! stat in one trip.

pub mod shared;
mod squash;
pub use squash::{Squash, NOBODY};

use fuser::{
    CopyFileRangeFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, IoctlFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use shoal_core::{rules, Attr, Ctx, Engine, Error, Kind, SetAttr, TimeSet, Ts};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub use fuser;

/// Mount-time knobs (the levers of the speed issue).
#[derive(Clone, Debug)]
pub struct FuseOptions {
    pub entry_ttl: Duration,
    pub attr_ttl: Duration,
    pub negative_ttl: Duration,
    pub threads: usize,
    pub clone_fd: bool,
    pub writeback_cache: bool,
    pub readdirplus: bool,
    /// Let the kernel choose between READDIR and READDIRPLUS per directory
    /// (FUSE_READDIRPLUS_AUTO: plus only once names get looked up). Off
    /// (`readdirplus_always`): every listing returns attributes, so a
    /// `find | xargs stat` costs no LOOKUP per file while entries are cached.
    pub readdirplus_auto: bool,
    pub no_opendir: bool,
    /// Check permissions in the daemon instead of the kernel (no
    /// `default_permissions`). The kernel then does not refresh a directory's
    /// attributes before each create or unlink in it: two GETATTR round trips
    /// less per create+unlink. The daemon checks every operation with the
    /// caller's uid, gid and supplementary groups (from /proc/PID/status).
    pub daemon_permissions: bool,
    /// Keep the kernel's cached pages of a file across opens (FOPEN_KEEP_CACHE).
    /// Safe because every change to file data comes through this mount's
    /// kernel (one client): the page cache cannot go stale behind its back.
    /// Off by default: measured on the tree workload it did not help (tar and
    /// diff -r within 10% either way, docs/BENCHMARKS.md).
    pub keep_cache: bool,
    /// Extended attributes. Off (`noxattr`): every xattr request is answered
    /// ENOSYS once and the kernel stops sending them, which saves the two
    /// GETXATTR round trips `ls -l` makes per entry (security.selinux and
    /// system.posix_acl_access; FUSE caches neither). Users then get
    /// EOPNOTSUPP for xattrs.
    pub xattr: bool,
    /// FUSE over io_uring (on by default; `nouring` turns it off; Linux
    /// 6.14+ with `fuse.enable_uring=Y`, which `scripts/setup.sh` sets):
    /// the kernel queues each request on the CPU its caller runs on, and a
    /// daemon thread pinned to that CPU serves it, so requests do not wake
    /// a thread on the other vCPU (vendor/fuser/PATCHED.md). Where the
    /// kernel does not offer it, the mount serves /dev/fuse and says so in
    /// its log. Measured as a lever: docs/BENCHMARKS.md, "Levers".
    pub uring: bool,
    /// FUSE passthrough (`nopassthrough` turns it off): an open of a file
    /// whose bytes are in a data object hands the kernel that object's
    /// file, and reads and writes go to it without a round trip through
    /// the daemon (Linux 6.9+, CONFIG_FUSE_PASSTHROUGH; the daemon needs
    /// CAP_SYS_ADMIN). Not with `writeback_cache` (the kernel does not
    /// combine the two); with `uring` it works as on /dev/fuse. Where the
    /// kernel refuses, opens are served by the daemon as before.
    pub passthrough: bool,
    /// A create opened write-only (tar, cp, a compiler's output) gets a
    /// direct handle (FOPEN_DIRECT_IO; `nodirect_create` turns it off, and
    /// `writeback_cache` does): its writes go to the daemon as they would
    /// anyway, but without a copy in the FUSE file's page cache, since the
    /// daemon's data object holds the bytes in the page cache already. The
    /// kernel drops cached pages of the range a direct write covers, so
    /// other handles of the file read what it wrote. Measured: two untars
    /// of the kernel tree into one mount 1.6-2.1x faster (io_uring), the second no
    /// longer slower than the first by as much
    /// (docs/perf-log/25-direct-creates-second-untar.md).
    pub direct_create: bool,
    /// `root_squash` / `all_squash=UID:GID` (squash.rs): requests act as
    /// another uid and gid; the daemon then checks permissions
    /// (`daemon_permissions`), since the kernel would check the caller's own.
    pub squash: Squash,
}

/// How long the kernel keeps entries, attributes and negative entries of
/// an embedded mount by default (`entry_ttl_ms`, `attr_ttl_ms`,
/// `negative_ttl_ms`): one hour. The daemon is the only writer of an
/// embedded store and every change reaches it through this mount's kernel
/// (a bind mount shares the superblock), which updates or drops what it
/// caches for each request it sends; what the daemon changes on its own it
/// tells the kernel (FUSE_NOTIFY_INVAL_INODE: `drop_privileges`, `ioctl`,
/// `open_handle`, `close_handle`). So the lifetime is not what keeps the
/// caches true; it only bounds how long a missed case could show an old
/// answer. With the old 1 s, a warm `git status` of the Linux tree sent
/// about 86,600 LOOKUPs (issue 46; docs/design.md, "The kernel's caches").
/// Mounts of a shared namespace keep their own `ttl_ms` (1 s): other mounts
/// write there.
pub const CACHE_TTL: Duration = Duration::from_secs(3600);

impl Default for FuseOptions {
    fn default() -> Self {
        FuseOptions {
            entry_ttl: CACHE_TTL,
            attr_ttl: CACHE_TTL,
            negative_ttl: CACHE_TTL,
            // Four, on this 2-vCPU machine: crunl through the mount, one
            // worker, alternated three times: 4.9-7.9K pairs/s with two
            // threads, 7.4-9.8K with four (docs/perf-log/08-shared-lines-threads-commits.md). The
            // floor did not change with four. A guess, not verified: RELEASE
            // runs in the background beside UNLINK, so with two threads the
            // next LOOKUP sometimes finds neither free.
            threads: 4,
            clone_fd: true,
            xattr: true,
            readdirplus_auto: true,
            writeback_cache: false,
            readdirplus: true,
            no_opendir: true,
            daemon_permissions: false,
            keep_cache: false,
            uring: true,
            passthrough: true,
            direct_create: true,
            squash: Squash::None,
        }
    }
}

pub struct ShoalFs {
    engine: Arc<Engine>,
    opts: FuseOptions,
    /// The kernel took FUSE_PASSTHROUGH at init.
    passthrough: bool,
    /// The kernel took FUSE_HANDLE_KILLPRIV_V2 at init: the daemon clears
    /// setuid and setgid on chown and truncate (it always did on write),
    /// and in return the kernel marks checked inodes S_NOSEC, so a write no
    /// longer costs a GETXATTR of security.capability first (it did on
    /// every write: two round trips per write).
    killpriv: bool,
    /// Open handles per inode, sharded by number (`Opened`).
    opened: Vec<shoal_core::sync::PlainMutex<std::collections::HashMap<u64, Opened>>>,
    requests: Arc<Requests>,
    handed: Arc<Handed>,
    /// Set once the session exists: attribute invalidations the daemon
    /// starts (see `drop_privileges`).
    notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
}

/// A file handle's bit saying the kernel reads and writes it through the
/// backing file (passthrough).
const PASSTHROUGH_FH: u64 = 1 << 63;
/// With `PASSTHROUGH_FH`: the handle was opened for writing.
const WRITABLE_FH: u64 = 1 << 62;

/// An open that can write (O_WRONLY or O_RDWR).
fn writable_open(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY
}

/// An inode's open handles. The kernel keeps an inode either in cached mode
/// (handles served by the daemon) or in passthrough mode, not both at once
/// (fs/fuse/iomode.c): so while a plain handle is open every open is plain,
/// and while a passthrough handle is open every open is passthrough, on the
/// one backing id the kernel wants per inode.
#[derive(Default)]
struct Opened {
    plain: u32,
    passthrough: u32,
    /// Passthrough handles open for writing: while there are any (and when
    /// the last closes), the object may hold bytes the daemon has not
    /// synced, even if its time did not change.
    writers: u32,
    backing: Option<Arc<fuser::BackingId>>,
    /// The data object's modification time when last looked at (writes
    /// through the backing file change it; see `Engine::refresh_from_data`).
    seen: Option<shoal_core::Ts>,
}

/// Entries handed to the kernel (lookup, create, mkdir, readdirplus...),
/// oldest first. Each gives the kernel a lookup reference that pins the
/// inode in shoal's cache until the kernel sends FORGET, which it does only
/// under its own memory pressure: with a million files created through a
/// mount, 750K inodes stayed pinned and reclaim could evict none of them.
/// When the cache is over budget, the pruner thread asks the kernel to drop
/// the oldest of these entries (FUSE_NOTIFY_INVAL_ENTRY); the kernel then
/// forgets the inodes nobody uses, and reclaim can evict them. Invalidating
/// an entry is always safe: the kernel looks the name up again if needed.
/// About 60 bytes per entry, against about 800 for a pinned cached inode.
/// Striped by the FUSE thread that hands an entry out (`sync::thread_slot`),
/// so replies on different threads take different locks: each stripe is
/// oldest-first, and the pruner drains the stripes in turn.
pub struct Handed {
    stripes: Vec<crossbeam_utils::CachePadded<shoal_core::sync::PlainMutex<Stripe>>>,
}

/// One stripe of `Handed`: (parent, name) of each entry, oldest first.
type Stripe = std::collections::VecDeque<(u64, Box<[u8]>)>;

impl Default for Handed {
    fn default() -> Handed {
        Handed {
            stripes: (0..Self::STRIPES).map(|_| Default::default()).collect(),
        }
    }
}

impl Handed {
    /// At most this many remembered entries (older ones are dropped unsent).
    const CAP: usize = 1 << 21;
    const STRIPES: usize = 16;

    fn lock(
        &self,
        i: usize,
    ) -> shoal_core::sync::PlainMutexGuard<'_, std::collections::VecDeque<(u64, Box<[u8]>)>> {
        self.stripes[i].lock()
    }

    fn push(&self, parent: u64, name: &[u8]) {
        let mut q = self.lock(shoal_core::sync::thread_slot() % Self::STRIPES);
        if q.len() >= Self::CAP / Self::STRIPES {
            q.pop_front();
        }
        q.push_back((parent, name.into()));
    }

    /// About `n` of the oldest entries, an even share from each stripe.
    fn pop(&self, n: usize) -> Vec<(u64, Box<[u8]>)> {
        let share = n.div_ceil(Self::STRIPES);
        let mut out = Vec::with_capacity(n);
        for i in 0..Self::STRIPES {
            let mut q = self.lock(i);
            let k = share.min(q.len());
            out.extend(q.drain(..k));
        }
        out
    }

    fn len(&self) -> usize {
        (0..Self::STRIPES).map(|i| self.lock(i).len()).sum()
    }
}

/// FUSE requests received, by type: round trips are the cost through a
/// mount, so `shoal stats` shows them next to the engine's operations.
/// One relaxed atomic add per request (a round trip costs microseconds).
pub struct Requests {
    counts: [AtomicU64; REQUEST_NAMES.len()],
    /// Entry invalidations the pruner sent to the kernel (see `Handed`).
    pub invalidations: AtomicU64,
}

/// The request types counted, in `Requests` order. `forget` counts inodes
/// forgotten (the kernel batches them), not requests.
pub const REQUEST_NAMES: [&str; 33] = [
    "lookup",
    "forget",
    "getattr",
    "setattr",
    "readlink",
    "mknod",
    "mkdir",
    "unlink",
    "rmdir",
    "symlink",
    "rename",
    "link",
    "open",
    "read",
    "write",
    "flush",
    "release",
    "fsync",
    "opendir",
    "readdir",
    "readdirplus",
    "releasedir",
    "fsyncdir",
    "statfs",
    "access",
    "setxattr",
    "getxattr",
    "listxattr",
    "removexattr",
    "create",
    "fallocate",
    "lseek",
    "ioctl",
];

/// Indexes into `REQUEST_NAMES`.
mod req {
    pub const LOOKUP: usize = 0;
    pub const FORGET: usize = 1;
    pub const GETATTR: usize = 2;
    pub const SETATTR: usize = 3;
    pub const READLINK: usize = 4;
    pub const MKNOD: usize = 5;
    pub const MKDIR: usize = 6;
    pub const UNLINK: usize = 7;
    pub const RMDIR: usize = 8;
    pub const SYMLINK: usize = 9;
    pub const RENAME: usize = 10;
    pub const LINK: usize = 11;
    pub const OPEN: usize = 12;
    pub const READ: usize = 13;
    pub const WRITE: usize = 14;
    pub const FLUSH: usize = 15;
    pub const RELEASE: usize = 16;
    pub const FSYNC: usize = 17;
    pub const OPENDIR: usize = 18;
    pub const READDIR: usize = 19;
    pub const READDIRPLUS: usize = 20;
    pub const RELEASEDIR: usize = 21;
    pub const FSYNCDIR: usize = 22;
    pub const STATFS: usize = 23;
    pub const ACCESS: usize = 24;
    pub const SETXATTR: usize = 25;
    pub const GETXATTR: usize = 26;
    pub const LISTXATTR: usize = 27;
    pub const REMOVEXATTR: usize = 28;
    pub const CREATE: usize = 29;
    pub const FALLOCATE: usize = 30;
    pub const LSEEK: usize = 31;
    pub const IOCTL: usize = 32;
}

impl Default for Requests {
    fn default() -> Self {
        Requests {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            invalidations: AtomicU64::new(0),
        }
    }
}

impl Requests {
    #[inline]
    fn count(&self, i: usize) {
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }
    /// (name, count) for every request type.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        REQUEST_NAMES
            .iter()
            .zip(&self.counts)
            .map(|(n, c)| (*n, c.load(Ordering::Relaxed)))
            .collect()
    }
}

/// The one place an engine error becomes an errno.
/// Answer getxattr with a value: its size when the caller asked (size 0),
/// ERANGE when it does not fit, else the bytes. Both adapters answer so.
pub(crate) fn reply_xattr_value(reply: ReplyXattr, r: shoal_core::Result<Vec<u8>>, size: u32) {
    match r {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) if v.len() > size as usize => reply.error(Errno::from_i32(libc::ERANGE)),
        Ok(v) => reply.data(&v),
        Err(e) => reply.error(errno(&e)),
    }
}

/// Answer listxattr with names, each NUL-terminated, as `reply_xattr_value`.
pub(crate) fn reply_xattr_names(reply: ReplyXattr, r: shoal_core::Result<Vec<Vec<u8>>>, size: u32) {
    reply_xattr_value(
        reply,
        r.map(|names| {
            names
                .into_iter()
                .flat_map(|mut n| {
                    n.push(0);
                    n
                })
                .collect()
        }),
        size,
    )
}

pub fn errno(e: &Error) -> Errno {
    let code = match e {
        Error::NotFound => libc::ENOENT,
        Error::Exists => libc::EEXIST,
        Error::NotEmpty => libc::ENOTEMPTY,
        Error::NotDir => libc::ENOTDIR,
        Error::IsDir => libc::EISDIR,
        Error::NameTooLong => libc::ENAMETOOLONG,
        Error::NoSpace => libc::ENOSPC,
        Error::Invalid => libc::EINVAL,
        Error::PermissionDenied => libc::EACCES,
        Error::NotPermitted => libc::EPERM,
        Error::TooManyLinks => libc::EMLINK,
        Error::NoAttr => libc::ENODATA,
        Error::Range => libc::ERANGE,
        Error::FileTooBig => libc::EFBIG,
        Error::ReadOnly => libc::EROFS,
        Error::PastEnd => libc::ENXIO,
        Error::NotSupported => libc::EOPNOTSUPP,
        Error::Corrupted(m) => {
            tracing::error!("corrupted store: {m}; the file being read gets EIO; unmount and run `shoal fsck` (what is damaged) then `shoal fsck --repair` (save what can be read)");
            libc::EIO
        }
        Error::Io(m) => {
            tracing::error!("I/O error: {m}");
            libc::EIO
        }
        #[allow(unreachable_patterns)]
        _ => libc::EIO,
    };
    Errno::from_i32(code)
}

pub(crate) fn kind(k: Kind) -> FileType {
    match k {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::Socket => FileType::Socket,
        Kind::CharDev => FileType::CharDevice,
        Kind::BlockDev => FileType::BlockDevice,
    }
}

/// Attributes for the kernel; `allocated` is the bytes the file takes on
/// disk (`Engine::allocated`).
pub fn file_attr_on_disk(a: &Attr, allocated: u64) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: allocated.div_ceil(512),
        atime: a.atime.to_system(),
        mtime: a.mtime.to_system(),
        ctime: a.ctime.to_system(),
        crtime: a.crtime.to_system(),
        kind: kind(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: 4096,
        flags: 0,
    }
}

/// Attributes for the kernel, with blocks from the size (the root's at
/// init, and what needs no engine).
pub fn file_attr(a: &Attr) -> FileAttr {
    file_attr_on_disk(a, a.blocks() * 512)
}

/// The supplementary groups of a request's caller, read only when they can
/// matter: never for root (who is in every group for these rules).
pub(crate) fn caller_groups(req: &Request) -> Vec<u32> {
    if req.uid() == 0 {
        vec![]
    } else {
        groups_of(req.pid())
    }
}

/// The caller's supplementary groups, from /proc (FUSE requests carry only
/// uid, gid and pid). Read only for non-root callers when the daemon checks.
fn groups_of(pid: u32) -> Vec<u32> {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return vec![];
    };
    s.lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The pruner (see `Handed`): every 100 ms, while the cache is over its
/// budget, ask the kernel to drop the oldest eighth (at least 1024) of the
/// entries it was handed. Runs on its own thread, never a FUSE worker: the
/// kernel takes the parent directory's lock for an invalidation, and a
/// request holding that lock may be waiting for a worker.
fn prune(
    engine: &Engine,
    handed: &Handed,
    requests: &Requests,
    notifier: &fuser::Notifier,
    stop: &std::sync::atomic::AtomicBool,
) {
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if engine.cache_usage() <= engine.budget() {
            continue;
        }
        let n = (handed.len() / 8).max(1024);
        for (parent, name) in handed.pop(n) {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            // ENOENT (already gone from the kernel's cache) is not an error.
            let _ = notifier.inval_entry(INodeNo(parent), OsStr::from_bytes(&name));
            requests.invalidations.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The access an open asks for (O_TRUNC needs write too).
fn open_mask(flags: i32) -> u32 {
    let m = match flags & libc::O_ACCMODE {
        libc::O_RDONLY => 4,
        libc::O_WRONLY => 2,
        _ => 6,
    };
    let mut m = m;
    if flags & libc::O_TRUNC != 0 {
        m |= 2 | shoal_core::engine::OPEN_TRUNC;
    }
    if flags & libc::O_APPEND != 0 {
        m |= shoal_core::engine::OPEN_APPEND;
    }
    m
}

pub(crate) fn time(t: TimeOrNow) -> TimeSet {
    match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(s) => TimeSet::At(Ts::from_system(s)),
    }
}

impl ShoalFs {
    /// A new handle of a file `open_file` accepted: the backing id to open
    /// it in passthrough mode with, or None for a handle the daemon serves.
    /// Passthrough when the kernel took it, the file's bytes are in a data
    /// object and no plain handle is open; not for a setuid or setgid file
    /// (its bits must drop on another user's write, which the daemon does:
    /// `drop_privileges`) unless passthrough handles are open already.
    fn open_handle(
        &self,
        a: &Attr,
        writable: bool,
        reply: &ReplyOpen,
    ) -> Option<Arc<fuser::BackingId>> {
        let mut shard = self.opened[a.ino as usize % 16].lock();
        let o = shard.entry(a.ino).or_default();
        let eligible = self.passthrough
            && a.kind == Kind::File
            && o.plain == 0
            && (o.passthrough > 0 || (a.size > shoal_core::INLINE_MAX && a.perm & 0o6000 == 0));
        if !eligible {
            o.plain += 1;
            return None;
        }
        // Each passthrough handle pins the bytes in the data object.
        let file = match self.engine.pin_data(a.ino) {
            Ok(Some(f)) => f,
            _ => {
                o.plain += 1;
                return None;
            }
        };
        if o.backing.is_none() {
            match reply.open_backing(&*file) {
                Ok(id) => {
                    o.backing = Some(Arc::new(id));
                    // The object's time now: writes through it change it.
                    let mut seen = None;
                    let _ = self.engine.refresh_from_data(a.ino, &mut seen, false);
                    o.seen = seen;
                }
                Err(e) => {
                    tracing::warn!("passthrough refused for inode {}: {e}", a.ino);
                    let _ = self.engine.unpin_data(a.ino);
                    o.plain += 1;
                    return None;
                }
            }
        }
        o.passthrough += 1;
        if writable {
            o.writers += 1;
        }
        // The kernel's cached attributes came with no passthrough handle
        // open and would be kept for attr_ttl: drop them, so the next stat
        // asks (and gets what the kernel wrote through the object).
        if let Some(n) = self.notifier.get() {
            let _ = n.inval_inode(INodeNo(a.ino), -1, 0);
        }
        o.backing.clone()
    }

    /// A handle the kernel holds in its cached mode from a create (CREATE,
    /// TMPFILE): counted as `open_handle`'s plain ones are. The kernel
    /// refuses (EIO) a passthrough open of an inode that has a cached one,
    /// so a second open of a file still open from its create, once past
    /// INLINE_MAX, must be plain too (xfstests generic/464 found it).
    fn created_handle(&self, ino: u64) {
        let mut shard = self.opened[ino as usize % 16].lock();
        shard.entry(ino).or_default().plain += 1;
    }

    /// The answer to CREATE and TMPFILE: the new inode, open in the
    /// kernel's cached mode (counted first: `created_handle`).
    /// Opened write-only, a direct handle (`FuseOptions::direct_create`).
    /// `parent`: the directory the name is in (`name_ttl`).
    fn reply_created(&self, parent: u64, a: &Attr, flags: i32, reply: ReplyCreate) {
        self.created_handle(a.ino);
        let mut fopen = self.fopen();
        if self.opts.direct_create
            && !self.opts.writeback_cache
            && flags & libc::O_ACCMODE == libc::O_WRONLY
        {
            fopen |= FopenFlags::FOPEN_DIRECT_IO;
        }
        reply.created(
            &self.name_ttl(parent, self.opts.entry_ttl),
            &self.fattr(a),
            Generation(0),
            FileHandle(a.ino),
            fopen,
        );
    }

    /// A handle closed: take what the kernel wrote through the backing
    /// file into the inode when it was the last passthrough one.
    fn close_handle(&self, ino: u64, passthrough: bool, writable: bool) {
        let mut shard = self.opened[ino as usize % 16].lock();
        let Some(o) = shard.get_mut(&ino) else {
            return;
        };
        let mut last = false;
        if passthrough {
            o.passthrough = o.passthrough.saturating_sub(1);
            let writer = writable || o.writers > 0;
            if writable {
                o.writers = o.writers.saturating_sub(1);
            }
            if let Err(e) = self
                .engine
                .refresh_from_data(ino, &mut o.seen, writer)
                .and_then(|()| self.engine.unpin_data(ino))
            {
                tracing::warn!("inode {ino}: {e}");
            }
            last = o.passthrough == 0;
            if last {
                o.backing = None;
            }
        } else {
            o.plain = o.plain.saturating_sub(1);
        }
        if o.plain == 0 && o.passthrough == 0 {
            shard.remove(&ino);
        }
        drop(shard);
        if last {
            // The refresh may have taken a size or time the kernel never
            // saw (a write through a mapping), and `unpin_data` may have
            // moved the bytes inline (st_blocks): the kernel keeps
            // attributes for attr_ttl, so it drops them now.
            if let Some(n) = self.notifier.get() {
                let _ = n.inval_inode(INodeNo(ino), -1, 0);
            }
        }
    }

    /// Whether the inode has passthrough handles open (see `refresh`).
    fn has_passthrough(&self, ino: u64) -> bool {
        let shard = self.opened[ino as usize % 16].lock();
        shard.get(&ino).is_some_and(|o| o.passthrough > 0)
    }

    /// Before attributes are answered: what passthrough handles wrote.
    /// Returns whether the inode has passthrough handles: its attributes
    /// are then answered with no cache time, since the kernel changes the
    /// object (a write through a mapping) without telling the daemon.
    fn refresh(&self, ino: u64) -> bool {
        let mut shard = self.opened[ino as usize % 16].lock();
        if let Some(o) = shard.get_mut(&ino) {
            if o.passthrough > 0 {
                if let Err(e) = self
                    .engine
                    .refresh_from_data(ino, &mut o.seen, o.writers > 0)
                {
                    tracing::warn!("inode {ino}: {e}");
                }
                return true;
            }
        }
        false
    }

    /// Attributes for the kernel, st_blocks from what the file takes on
    /// disk (holes do not count).
    fn fattr(&self, a: &Attr) -> FileAttr {
        file_attr_on_disk(a, self.engine.allocated(a))
    }

    pub fn new(engine: Arc<Engine>, opts: FuseOptions) -> ShoalFs {
        ShoalFs {
            engine,
            opts,
            passthrough: false,
            killpriv: false,
            opened: (0..16).map(|_| Default::default()).collect(),
            requests: Arc::default(),
            handed: Arc::default(),
            notifier: Arc::default(),
        }
    }

    /// Where the session's notifier will be once mounted: for the daemon's
    /// other paths into the engine (the client server, docs/client.md),
    /// which drop what the kernel cached of what they change.
    pub fn notifier(&self) -> Arc<std::sync::OnceLock<fuser::Notifier>> {
        self.notifier.clone()
    }

    /// The request counters (shared with the stats socket).
    pub fn requests(&self) -> Arc<Requests> {
        self.requests.clone()
    }

    fn fopen(&self) -> FopenFlags {
        if self.opts.keep_cache {
            FopenFlags::FOPEN_KEEP_CACHE
        } else {
            FopenFlags::empty()
        }
    }

    /// Who is asking. With kernel permission checks the engine checks nothing.
    fn ctx(&self, req: &Request) -> Ctx {
        let check = self.opts.daemon_permissions;
        let (uid, gid, squashed) = self.who(req);
        let groups = if check && !squashed {
            caller_groups(req)
        } else {
            vec![]
        };
        Ctx {
            uid,
            gid,
            groups,
            check_perms: check,
            umask: 0,
            // Entry replies (lookup, create, mkdir, link...) hand inodes to
            // the kernel: the engine takes its reference inside the operation.
            kernel_ref: true,
        }
    }

    /// `ctx` with the caller's supplementary groups even when the kernel
    /// checks permissions: setting an access ACL clears the setgid bit
    /// unless the caller is in the file's group (or root).
    fn ctx_with_groups(&self, req: &Request) -> Ctx {
        let mut c = self.ctx(req);
        if c.groups.is_empty() && !self.who(req).2 {
            c.groups = caller_groups(req);
        }
        c
    }

    /// The uid and gid `req` acts as (`squash`), and whether squashed (no
    /// supplementary groups then).
    fn who(&self, req: &Request) -> (u32, u32, bool) {
        self.opts.squash.map(req.uid(), req.gid())
    }

    /// The supplementary groups of who `req` acts as.
    fn groups_as(&self, req: &Request) -> Vec<u32> {
        if self.who(req).2 {
            vec![]
        } else {
            groups_of(req.pid())
        }
    }

    /// `ctx` for a create: the engine applies the umask unless the
    /// directory's default ACL replaces it.
    fn ctx_umask(&self, req: &Request, umask: u32) -> Ctx {
        Ctx {
            umask,
            ..self.ctx(req)
        }
    }

    /// The kernel's lifetime for a name in directory `parent`: `ttl`, or
    /// none when the daemon checks permissions and not everyone may search
    /// `parent`. Without `default_permissions` the kernel checks nothing on
    /// a path walk (`fuse_permission`), so a name it kept would let any
    /// caller through a directory only some may search; given no lifetime,
    /// each walk through it asks the daemon, which checks search for that
    /// caller (`Engine::lookup`). ext4's answer, at the cost of a LOOKUP per
    /// walk through such a directory (docs/design.md, "Who checks").
    fn name_ttl(&self, parent: u64, ttl: Duration) -> Duration {
        if !self.opts.daemon_permissions {
            return ttl;
        }
        match self.engine.getattr(parent) {
            Ok(p) if rules::perm::all_may_search(&p) => ttl,
            _ => Duration::ZERO,
        }
    }

    /// After a chmod that took search away from some of a directory's
    /// callers (daemon-checked permissions): the kernel forgets the
    /// directory's name, and with it every name it kept below (its
    /// `d_invalidate`), so the next walk asks the daemon. On a thread of its
    /// own and not on the directory itself: the kernel holds the
    /// directory's lock for the chmod until its answer, and an
    /// invalidation in it would take that lock. Waited for a second at most
    /// before the chmod is answered.
    /// The kernel forgets these (directory, name) entries, on a thread of
    /// its own, not waited for: for a request that holds the directories'
    /// locks until its answer.
    fn forget_names(&self, names: Vec<(u64, Vec<u8>)>) {
        let Some(n) = self.notifier.get().cloned() else {
            return;
        };
        let requests = self.requests.clone();
        std::thread::spawn(move || {
            for (parent, name) in names {
                let _ = n.inval_entry(INodeNo(parent), OsStr::from_bytes(&name));
                requests.invalidations.fetch_add(1, Ordering::Relaxed);
            }
        });
    }

    fn forget_names_below(&self, dir: u64) {
        let Some(n) = self.notifier.get().cloned() else {
            return;
        };
        let Ok(parent) = self.engine.parent_of(dir) else {
            return;
        };
        // The root has no name: its names one by one, which wait for the
        // chmod's answer (the root's lock), so past the second below.
        let engine = self.engine.clone();
        let requests = self.requests.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut cookie = 0;
            'pages: while let Ok(page) = engine.readdir(parent, cookie, 1024) {
                if page.is_empty() {
                    break;
                }
                for e in &page {
                    cookie = e.cookie;
                    if e.ino == dir && parent != dir {
                        let _ = n.inval_entry(INodeNo(parent), OsStr::from_bytes(&e.name));
                        requests.invalidations.fetch_add(1, Ordering::Relaxed);
                        break 'pages;
                    }
                    if parent == dir {
                        let _ = n.inval_entry(INodeNo(dir), OsStr::from_bytes(&e.name));
                        requests.invalidations.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(Duration::from_secs(1));
    }

    fn entry(&self, parent: INodeNo, name: &OsStr, reply: ReplyEntry, r: shoal_core::Result<Attr>) {
        // A file with passthrough handles: its size and times as the kernel
        // wrote them, not as the inode had them.
        // Those attributes are not kept by the kernel (as GETATTR's: the
        // kernel changes the object through a mapping without a request).
        let mut attr_ttl = self.opts.attr_ttl;
        let r = r.map(|a| match self.refresh(a.ino) {
            true => {
                attr_ttl = Duration::ZERO;
                self.engine.getattr(a.ino).unwrap_or(a)
            }
            false => a,
        });
        match r {
            Ok(a) => {
                self.handed.push(parent.0, name.as_bytes());
                // fuser's order: the attributes' lifetime first.
                reply.entry_with_ttls(
                    &attr_ttl,
                    &self.name_ttl(parent.0, self.opts.entry_ttl),
                    &self.fattr(&a),
                    Generation(0),
                );
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// Before a non-root caller changes a file's data: clear setuid/setgid
    /// as Linux does, and make the kernel drop the mode it caches. The
    /// kernel's FUSE code clears setgid only with group exec, so a
    /// world-writable setgid file stayed setgid after another user's write
    /// or fallocate (xfstests generic/683-685). The invalidation is sent
    /// before the reply, so a stat after the call sees the new mode; it
    /// takes no inode lock in the kernel (offset -1: attributes only), so it
    /// is safe while the caller's request is in flight.
    fn drop_privileges(&self, req: &Request, ino: u64) -> shoal_core::Result<()> {
        let (uid, gid, _) = self.who(req);
        if uid == 0 {
            return Ok(());
        }
        if self
            .engine
            .drop_privileges(uid, gid, || self.groups_as(req), ino)?
        {
            if let Some(n) = self.notifier.get() {
                let _ = n.inval_inode(INodeNo(ino), -1, 0);
            }
        }
        Ok(())
    }

    fn empty(reply: ReplyEmpty, r: shoal_core::Result<()>) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// Mount and serve until unmounted.
    pub fn mount(
        self,
        mountpoint: &Path,
        options: Vec<fuser::MountOption>,
        allow_other: bool,
    ) -> std::io::Result<()> {
        let mut cfg = fuser::Config::default();
        cfg.mount_options = kernel_subtype(options);
        cfg.n_threads = Some(self.opts.threads.max(1));
        cfg.clone_fd = self.opts.clone_fd;
        if allow_other {
            cfg.acl = fuser::SessionACL::All;
        }
        let engine = self.engine.clone();
        let handed = self.handed.clone();
        let requests = self.requests.clone();
        let notifier = self.notifier.clone();
        let session = fuser::Session::new(self, mountpoint, &cfg)?;
        let _ = notifier.set(session.notifier());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let pruner = {
            let (notifier, stop) = (session.notifier(), stop.clone());
            std::thread::Builder::new()
                .name("shoal-pruner".into())
                .spawn(move || prune(&engine, &handed, &requests, &notifier, &stop))?
        };
        let r = session.run();
        stop.store(true, Ordering::Relaxed);
        let _ = pruner.join();
        r
    }
}

/// The mount options with FUSE's subtype handed to the kernel as well, so
/// that the mount's type is `fuse.NAME` (`findmnt -t fuse.shoal`, `df -t`,
/// `umount -a -t`, and a plain `mount -o remount,ro MNT`, which finds
/// `/sbin/mount.fuse.shoal` by that type). fuser mounts as root with mount(2)
/// and type `fuse`, and keeps `MountOption::Subtype` for fusermount only;
/// the kernel's own `subtype=` option (fs/fuse/inode.c) reaches the same
/// superblock field, and fusermount3 accepts it too, so the subtype is sent
/// that way once.
pub fn kernel_subtype(options: Vec<fuser::MountOption>) -> Vec<fuser::MountOption> {
    options
        .into_iter()
        .map(|o| match o {
            fuser::MountOption::Subtype(s) => fuser::MountOption::CUSTOM(format!("subtype={s}")),
            o => o,
        })
        .collect()
}

impl Filesystem for ShoalFs {
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.requests.count(req::FLUSH);
        // Nothing to flush (writes go to the engine at once); ENOSYS makes the
        // kernel stop sending FLUSH on every close of this mount.
        reply.error(Errno::ENOSYS);
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.requests.count(req::RELEASEDIR);
        reply.ok();
    }

    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let mut want = InitFlags::FUSE_PARALLEL_DIROPS;
        if self.opts.readdirplus {
            want |= InitFlags::FUSE_DO_READDIRPLUS;
            if self.opts.readdirplus_auto {
                want |= InitFlags::FUSE_READDIRPLUS_AUTO;
            }
        }
        if self.opts.writeback_cache {
            want |= InitFlags::FUSE_WRITEBACK_CACHE;
        }
        if !self.opts.daemon_permissions && self.opts.xattr {
            // The kernel checks permissions with ACLs (POSIX_ACL implies
            // default_permissions); the daemon applies the umask itself
            // (DONT_MASK), since a directory's default ACL replaces it.
            want |= InitFlags::FUSE_POSIX_ACL | InitFlags::FUSE_DONT_MASK;
        }
        // LOOKUP of "." and ".." for any inode: file handles (open_by_handle_at,
        // NFS export) stay valid across the kernel's inode cache.
        want |= InitFlags::FUSE_EXPORT_SUPPORT;
        if self.opts.uring {
            want |= InitFlags::FUSE_OVER_IO_URING;
        }
        let have = config.capabilities();
        let _ = config.add_capabilities(want & have);
        self.killpriv = config
            .add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2)
            .is_ok();
        let _ = config.set_max_write(1 << 20);
        if self.opts.uring && !have.contains(InitFlags::FUSE_OVER_IO_URING) {
            tracing::info!(
                "FUSE over io_uring not offered by the kernel (Linux 6.14+ with \
                 `echo Y > /sys/module/fuse/parameters/enable_uring`): serving /dev/fuse"
            );
        }
        if self.opts.passthrough && !self.opts.writeback_cache {
            // One level: the backing files are on an ordinary filesystem.
            self.passthrough = have.contains(InitFlags::FUSE_PASSTHROUGH)
                && config.set_max_stack_depth(1).is_ok()
                && config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok();
        }
        Ok(())
    }

    fn destroy(&mut self) {
        if let Err(e) = self.engine.shutdown() {
            tracing::error!("final commit failed: {e}");
        }
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.requests.count(req::LOOKUP);
        match self
            .engine
            .lookup(&self.ctx(req), parent.0, name.as_bytes())
        {
            Err(Error::NotFound) if !self.opts.negative_ttl.is_zero() => {
                // A negative entry: the kernel caches the miss (seed 001's negative cache, one level up).
                let mut a = file_attr(&Attr {
                    ino: 0,
                    kind: Kind::File,
                    perm: 0,
                    nlink: 0,
                    uid: 0,
                    gid: 0,
                    rdev: 0,
                    size: 0,
                    atime: Ts::default(),
                    mtime: Ts::default(),
                    ctime: Ts::default(),
                    crtime: Ts::default(),
                    version: 0,
                });
                a.ino = INodeNo(0);
                // fuser's order is (attributes, entry): this sent the
                // negative lifetime as the attributes' and 0 as the entry's
                // until 2026-11-28, so the kernel kept no miss at all.
                let ttl = self.name_ttl(parent.0, self.opts.negative_ttl);
                reply.entry_with_ttls(&Duration::ZERO, &ttl, &a, Generation(0));
            }
            r => self.entry(parent, name, reply, r),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.requests.count(req::FORGET);
        self.engine.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.requests.count(req::GETATTR);
        let ttl = if self.refresh(ino.0) {
            Duration::ZERO
        } else {
            self.opts.attr_ttl
        };
        match self.engine.getattr(ino.0) {
            Ok(a) => reply.attr(&ttl, &self.fattr(&a)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// statx asking for the creation time or file attributes: getattr's
    /// answer with the inode's crtime and the chattr flags statx shows
    /// (immutable, append-only, nodump; the kernel fills these from the
    /// reply only here, never from GETATTR).
    fn statx(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: Option<FileHandle>,
        _flags: u32,
        _mask: u32,
        reply: fuser::ReplyStatx,
    ) {
        use shoal_core::engine::flags;
        self.requests.count(req::GETATTR);
        let ttl = if self.refresh(ino.0) {
            Duration::ZERO
        } else {
            self.opts.attr_ttl
        };
        // STATX_ATTR_IMMUTABLE, _APPEND, _NODUMP: the same bits as the flags'.
        let known = (flags::IMMUTABLE | flags::APPEND | flags::NODUMP) as u64;
        match self
            .engine
            .getattr(ino.0)
            .and_then(|a| Ok((a, self.engine.flags(ino.0)?)))
        {
            Ok((a, f)) => reply.statx(&ttl, &self.fattr(&a), f as u64 & known, known),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        self.requests.count(req::SETATTR);
        if self.killpriv && mode.is_none() && size.is_some() {
            // What the kernel leaves to the daemon under KILLPRIV_V2 (a
            // chown's: the engine, `rules::privs::chown_perm`).
            if let Err(e) = self.drop_privileges(req, ino.0) {
                return reply.error(errno(&e));
            }
        }
        let sa = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(time),
            mtime: mtime.map(time),
            ctime: ctime.map(Ts::from_system),
            by_handle: fh.is_some(),
        };
        // Search taken from some callers of a directory whose names the
        // kernel keeps (`name_ttl`): their names forgotten before the
        // answer.
        let closing = self.opts.daemon_permissions
            && mode.is_some_and(|m| m & 0o111 != 0o111)
            && self
                .engine
                .getattr(ino.0)
                .is_ok_and(|a| a.kind == Kind::Dir && rules::perm::all_may_search(&a));
        // A chown without a mode clears setgid by the caller's groups.
        let ctx = if uid.is_some() || gid.is_some() {
            self.ctx_with_groups(req)
        } else {
            self.ctx(req)
        };
        // No lifetime while passthrough handles are open (as GETATTR's).
        let ttl = if self.has_passthrough(ino.0) {
            Duration::ZERO
        } else {
            self.opts.attr_ttl
        };
        match self.engine.setattr(&ctx, ino.0, &sa) {
            Ok(a) => {
                if closing {
                    self.forget_names_below(ino.0);
                }
                reply.attr(&ttl, &self.fattr(&a))
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        self.requests.count(req::READLINK);
        match self.engine.readlink(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.requests.count(req::MKNOD);
        let r = self.engine.mknod(
            &self.ctx_umask(req, umask),
            parent.0,
            name.as_bytes(),
            mode,
            rdev,
        );
        self.entry(parent, name, reply, r);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.requests.count(req::MKDIR);
        let r = self
            .engine
            .mkdir(&self.ctx_umask(req, umask), parent.0, name.as_bytes(), mode);
        self.entry(parent, name, reply, r);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.requests.count(req::UNLINK);
        Self::empty(
            reply,
            self.engine
                .unlink(&self.ctx(req), parent.0, name.as_bytes()),
        );
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.requests.count(req::RMDIR);
        Self::empty(
            reply,
            self.engine.rmdir(&self.ctx(req), parent.0, name.as_bytes()),
        );
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.requests.count(req::SYMLINK);
        let r = self.engine.symlink(
            &self.ctx(req),
            parent.0,
            link_name.as_bytes(),
            target.as_os_str().as_bytes(),
        );
        self.entry(parent, link_name, reply, r);
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.requests.count(req::RENAME);
        let r = self.engine.rename(
            &self.ctx(req),
            parent.0,
            name.as_bytes(),
            newparent.0,
            newname.as_bytes(),
            flags.bits(),
        );
        // The kernel moves its entry with the lifetime it had: in a
        // directory not everyone may search (`name_ttl`) it must ask again.
        // After the answer (the rename holds both directories' locks).
        let mut moved = Vec::new();
        if r.is_ok() && self.opts.daemon_permissions {
            if self.name_ttl(newparent.0, self.opts.entry_ttl).is_zero() {
                moved.push((newparent.0, newname.as_bytes().to_vec()));
            }
            let exchange = flags.bits() & shoal_core::RENAME_EXCHANGE != 0;
            if exchange && self.name_ttl(parent.0, self.opts.entry_ttl).is_zero() {
                moved.push((parent.0, name.as_bytes().to_vec()));
            }
        }
        Self::empty(reply, r);
        if !moved.is_empty() {
            self.forget_names(moved);
        }
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.requests.count(req::LINK);
        let r = self
            .engine
            .link(&self.ctx(req), ino.0, newparent.0, newname.as_bytes());
        self.entry(newparent, newname, reply, r);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.requests.count(req::OPEN);
        let writable = writable_open(flags.0);
        match self
            .engine
            .open_file(&self.ctx(req), ino.0, open_mask(flags.0))
        {
            Ok(a) => match self.open_handle(&a, writable, &reply) {
                Some(id) => {
                    let mut fh = ino.0 | PASSTHROUGH_FH;
                    if writable {
                        fh |= WRITABLE_FH;
                    }
                    reply.opened_passthrough(FileHandle(fh), self.fopen(), &id)
                }
                None => reply.opened(FileHandle(ino.0), self.fopen()),
            },
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        self.requests.count(req::READ);
        match self.engine.read(ino.0, offset, size) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        wf: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        self.requests.count(req::WRITE);
        if let Err(e) = self.drop_privileges(req, ino.0) {
            return reply.error(errno(&e));
        }
        let r = if wf.contains(WriteFlags::FUSE_WRITE_CACHE) {
            self.engine.write_back(ino.0, offset, data)
        } else {
            self.engine.write(ino.0, offset, data)
        };
        match r {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.requests.count(req::RELEASE);
        self.close_handle(ino.0, _fh.0 & PASSTHROUGH_FH != 0, _fh.0 & WRITABLE_FH != 0);
        Self::empty(reply, self.engine.release(ino.0));
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.requests.count(req::FSYNC);
        self.refresh(ino.0);
        Self::empty(
            reply,
            if datasync {
                self.engine.fdatasync(ino.0)
            } else {
                self.engine.fsync(ino.0)
            },
        );
    }

    fn opendir(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.requests.count(req::OPENDIR);
        if self.opts.daemon_permissions {
            // The daemon checks: OPENDIR stays on so listing needs read permission.
            match self
                .engine
                .open_dir(&self.ctx(req), ino.0, open_mask(flags.0))
            {
                Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
                Err(e) => reply.error(errno(&e)),
            }
        } else if self.opts.no_opendir {
            // FUSE_NO_OPENDIR_SUPPORT: the kernel stops sending OPENDIR/RELEASEDIR. Directory
            // handles carry no state here (cookies are name hashes), so nothing is lost.
            reply.error(Errno::ENOSYS);
        } else {
            reply.opened(FileHandle(0), FopenFlags::empty());
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        self.requests.count(req::READDIR);
        if offset == 0 && reply.add(ino, 1, FileType::Directory, ".") {
            return reply.ok();
        }
        if offset <= 1 {
            let parent = match self.engine.parent_of(ino.0) {
                Ok(p) if p != 0 => p,
                Ok(_) => ino.0,
                Err(e) => return reply.error(errno(&e)),
            };
            if reply.add(INodeNo(parent), 2, FileType::Directory, "..") {
                return reply.ok();
            }
        }
        let mut cookie = if offset <= 2 { 0 } else { offset };
        loop {
            let ents = match self.engine.readdir(ino.0, cookie, 128) {
                Ok(v) => v,
                Err(e) => return reply.error(errno(&e)),
            };
            if ents.is_empty() {
                return reply.ok();
            }
            for e in ents {
                if reply.add(
                    INodeNo(e.ino),
                    e.cookie,
                    kind(e.kind),
                    OsStr::from_bytes(&e.name),
                ) {
                    return reply.ok();
                }
                cookie = e.cookie;
            }
        }
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        self.requests.count(req::READDIRPLUS);
        let zero = Duration::ZERO;
        let names_ttl = self.name_ttl(ino.0, self.opts.entry_ttl.min(self.opts.attr_ttl));
        // No permission check (the directory's open made it): the context
        // only says the entries go to the kernel.
        let kernel = Ctx {
            kernel_ref: true,
            ..Ctx::root()
        };
        if offset == 0 {
            match self.engine.getattr(ino.0) {
                Ok(a) => {
                    if reply.add(ino, 1, ".", &zero, &self.fattr(&a), Generation(0)) {
                        return reply.ok();
                    }
                }
                Err(e) => return reply.error(errno(&e)),
            }
        }
        if offset <= 1 {
            let parent = self.engine.parent_of(ino.0).unwrap_or(ino.0);
            let parent = if parent == 0 { ino.0 } else { parent };
            match self.engine.getattr(parent) {
                Ok(a) => {
                    if reply.add(
                        INodeNo(parent),
                        2,
                        "..",
                        &zero,
                        &self.fattr(&a),
                        Generation(0),
                    ) {
                        return reply.ok();
                    }
                }
                Err(e) => return reply.error(errno(&e)),
            }
        }
        let mut cookie = if offset <= 2 { 0 } else { offset };
        loop {
            let ents = match self.engine.readdir(ino.0, cookie, 64) {
                Ok(v) => v,
                Err(e) => return reply.error(errno(&e)),
            };
            if ents.is_empty() {
                return reply.ok();
            }
            for e in ents {
                // Takes the kernel's reference; given back if the entry does not fit.
                let a = match self.engine.getattr_entry(&kernel, e.ino) {
                    Ok(a) => a,
                    Err(Error::NotFound) => {
                        cookie = e.cookie;
                        continue;
                    }
                    Err(err) => return reply.error(errno(&err)),
                };
                // One lifetime for the entry and its attributes (fuser's
                // `add`): the shorter, and none for a file with passthrough
                // handles (as `entry`).
                let ttl = if self.has_passthrough(e.ino) {
                    zero
                } else {
                    names_ttl
                };
                if reply.add(
                    INodeNo(e.ino),
                    e.cookie,
                    OsStr::from_bytes(&e.name),
                    &ttl,
                    &self.fattr(&a),
                    Generation(0),
                ) {
                    self.engine.forget(a.ino, 1);
                    return reply.ok();
                }
                self.handed.push(ino.0, &e.name);
                cookie = e.cookie;
            }
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.requests.count(req::FSYNCDIR);
        Self::empty(reply, self.engine.fsync(ino.0));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.requests.count(req::STATFS);
        match self.engine.statfs() {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.bsize,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: fuser::AccessFlags, reply: ReplyEmpty) {
        self.requests.count(req::ACCESS);
        // Sent only without default_permissions (access(2), chdir, exec).
        Self::empty(
            reply,
            self.engine
                .access(&self.ctx(req), ino.0, mask.bits() as u32),
        );
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _pos: u32,
        reply: ReplyEmpty,
    ) {
        self.requests.count(req::SETXATTR);
        if !self.opts.xattr {
            return reply.error(Errno::ENOSYS);
        }
        let f = flags as u32 & (shoal_core::XATTR_CREATE | shoal_core::XATTR_REPLACE);
        Self::empty(
            reply,
            self.engine
                .setxattr(&self.ctx_with_groups(req), ino.0, name.as_bytes(), value, f),
        );
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        self.requests.count(req::GETXATTR);
        if !self.opts.xattr {
            return reply.error(Errno::ENOSYS);
        }
        reply_xattr_value(
            reply,
            self.engine.getxattr(&self.ctx(req), ino.0, name.as_bytes()),
            size,
        );
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.requests.count(req::LISTXATTR);
        if !self.opts.xattr {
            return reply.error(Errno::ENOSYS);
        }
        reply_xattr_names(reply, self.engine.listxattr(ino.0), size);
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.requests.count(req::REMOVEXATTR);
        if !self.opts.xattr {
            return reply.error(Errno::ENOSYS);
        }
        Self::empty(
            reply,
            self.engine
                .removexattr(&self.ctx(req), ino.0, name.as_bytes()),
        );
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        self.requests.count(req::CREATE);
        let c = self.ctx_umask(req, umask);
        match self.engine.create_open(&c, parent.0, name.as_bytes(), mode) {
            Ok(a) => {
                self.handed.push(parent.0, name.as_bytes());
                self.reply_created(parent.0, &a, flags, reply);
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// open(2) with O_TMPFILE: an unnamed file, open, with nlink 0 (as ext4
    /// shows it); linkat(AT_EMPTY_PATH) names it through `link`.
    fn tmpfile(
        &self,
        req: &Request,
        parent: INodeNo,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        self.requests.count(req::CREATE);
        let c = self.ctx_umask(req, umask);
        match self.engine.tmpfile(&c, parent.0, mode) {
            Ok(a) => self.reply_created(parent.0, &a, flags, reply),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// SEEK_DATA and SEEK_HOLE (the kernel does SEEK_SET, SEEK_CUR and
    /// SEEK_END itself).
    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: fuser::ReplyLseek,
    ) {
        self.requests.count(req::LSEEK);
        let (offset, data) = match seek_args(offset, whence) {
            Ok(a) => a,
            Err(e) => return reply.error(e),
        };
        match self.engine.seek(ino.0, offset, data) {
            Ok(o) => reply.offset(o as i64),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.requests.count(req::FALLOCATE);
        let Some(em) = falloc_mode(mode) else {
            return reply.error(Errno::from_i32(libc::EOPNOTSUPP));
        };
        if let Err(e) = self.drop_privileges(req, ino.0) {
            return reply.error(errno(&e));
        }
        Self::empty(reply, self.engine.fallocate(ino.0, offset, length, em));
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        _ino_in: INodeNo,
        _fh_in: FileHandle,
        _offset_in: u64,
        ino_out: INodeNo,
        _fh_out: FileHandle,
        _offset_out: u64,
        _len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        reply.error(self.copy_file_range_answer(ino_out.0));
    }

    /// File flags (chattr, lsattr, xfs_io chattr): the kernel turns
    /// `FS_IOC_GETFLAGS`/`SETFLAGS` and `FS_IOC_FSGETXATTR`/`FSSETXATTR` into
    /// these requests (after its own checks of who may change which flag),
    /// on a handle it opens for them. Any other ioctl: ENOTTY, as for a
    /// file that has none.
    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: ReplyIoctl,
    ) {
        self.requests.count(req::IOCTL);
        let set = |f: u32| {
            let r = self.engine.set_flags(&self.ctx(req), ino.0, f);
            if r.is_ok() {
                // The new ctime: the kernel keeps attributes for attr_ttl.
                if let Some(n) = self.notifier.get() {
                    let _ = n.inval_inode(ino, -1, 0);
                }
            }
            r
        };
        flags_ioctl(
            cmd,
            in_data,
            out_size,
            reply,
            || self.engine.flags(ino.0),
            set,
        )
    }
}

/// fallocate(2)'s mode as shoal's (`FALLOC_*`), for both modes; None for
/// a mode shoal does not take (EOPNOTSUPP).
fn falloc_mode(mode: i32) -> Option<u32> {
    let m = mode as u32;
    let mut em = 0;
    if m & libc::FALLOC_FL_KEEP_SIZE as u32 != 0 {
        em |= shoal_core::engine::FALLOC_KEEP_SIZE;
    }
    if m & libc::FALLOC_FL_PUNCH_HOLE as u32 != 0 {
        em |= shoal_core::engine::FALLOC_PUNCH_HOLE;
    }
    if m & libc::FALLOC_FL_ZERO_RANGE as u32 != 0 {
        em |= shoal_core::engine::FALLOC_ZERO_RANGE;
    }
    let known = (libc::FALLOC_FL_KEEP_SIZE
        | libc::FALLOC_FL_PUNCH_HOLE
        | libc::FALLOC_FL_ZERO_RANGE) as u32;
    (m & !known == 0).then_some(em)
}

/// The chattr ioctls, as both modes answer them: `FS_IOC_GETFLAGS` and
/// `SETFLAGS`, `FS_IOC_FSGETXATTR` and `FSSETXATTR` (xfs_io's; the flags
/// as `fsx_xflags`, `rules::flags::to_xflags`), with `get` reading an
/// inode's flags and `set` setting them all at once. Any other ioctl:
/// ENOTTY, as for a file that has none.
fn flags_ioctl(
    cmd: u32,
    in_data: &[u8],
    out_size: u32,
    reply: ReplyIoctl,
    get: impl Fn() -> shoal_core::Result<u32>,
    set: impl Fn(u32) -> shoal_core::Result<()>,
) {
    use shoal_core::rules::flags;
    let word = |b: &[u8], at: usize| {
        b.get(at..at + 4)
            .map(|w| u32::from_ne_bytes(w.try_into().unwrap()))
    };
    match cmd as libc::c_ulong {
        libc::FS_IOC_GETFLAGS => match get() {
            Ok(f) => {
                let b = f.to_ne_bytes();
                reply.ioctl(0, &b[..b.len().min(out_size as usize)])
            }
            Err(e) => reply.error(errno(&e)),
        },
        libc::FS_IOC_SETFLAGS => match word(in_data, 0) {
            Some(f) => match set(f) {
                Ok(()) => reply.ioctl(0, &[]),
                Err(e) => reply.error(errno(&e)),
            },
            None => reply.error(Errno::from_i32(libc::EINVAL)),
        },
        FS_IOC_FSGETXATTR => match get() {
            Ok(f) => {
                // struct fsxattr: xflags, extsize, nextents, projid,
                // cowextsize, 8 bytes of padding.
                let mut b = [0u8; FSXATTR_SIZE];
                b[..4].copy_from_slice(&flags::to_xflags(f).to_ne_bytes());
                reply.ioctl(0, &b[..b.len().min(out_size as usize)])
            }
            Err(e) => reply.error(errno(&e)),
        },
        FS_IOC_FSSETXATTR => {
            let (Some(x), Some(ext), Some(proj), Some(cow)) = (
                word(in_data, 0),
                word(in_data, 4),
                word(in_data, 12),
                word(in_data, 16),
            ) else {
                return reply.error(Errno::from_i32(libc::EINVAL));
            };
            // No extent size hints or project ids to keep.
            if ext != 0 || proj != 0 || cow != 0 {
                return reply.error(Errno::from_i32(libc::EOPNOTSUPP));
            }
            match get()
                .and_then(|old| flags::from_xflags(x, old))
                .and_then(set)
            {
                Ok(()) => reply.ioctl(0, &[]),
                Err(e) => reply.error(errno(&e)),
            }
        }
        _ => reply.error(Errno::from_i32(libc::ENOTTY)),
    }
}

impl ShoalFs {
    /// The copy_file_range request's one answer of shoal's own: EPERM into
    /// an immutable file. Any other copy the kernel makes itself (it splices
    /// through read and write on EOPNOTSUPP, as when the request was not
    /// implemented), because its writes may go through a passthrough handle
    /// opened before chattr +i, where the engine never sees them.
    fn copy_file_range_answer(&self, ino_out: u64) -> Errno {
        match self.engine.flags(ino_out) {
            Ok(f) if f & shoal_core::engine::flags::IMMUTABLE != 0 => Errno::from_i32(libc::EPERM),
            Ok(_) => Errno::from_i32(libc::EOPNOTSUPP),
            Err(e) => errno(&e),
        }
    }
}

/// `FS_IOC_FSGETXATTR`, `_IOR('X', 31, struct fsxattr)` (not in `libc`).
const FS_IOC_FSGETXATTR: libc::c_ulong = 0x801c_581f;
/// `FS_IOC_FSSETXATTR`, `_IOW('X', 32, struct fsxattr)`.
const FS_IOC_FSSETXATTR: libc::c_ulong = 0x401c_5820;
/// `sizeof(struct fsxattr)`.
const FSXATTR_SIZE: usize = 28;

/// An lseek request's offset and whether it asks for data (SEEK_DATA) or a
/// hole (SEEK_HOLE): the kernel answers SEEK_SET, SEEK_CUR and SEEK_END
/// itself, anything else is EINVAL, a negative offset ENXIO (both adapters).
pub(crate) fn seek_args(offset: i64, whence: i32) -> std::result::Result<(u64, bool), Errno> {
    let data = match whence {
        libc::SEEK_DATA => true,
        libc::SEEK_HOLE => false,
        _ => return Err(Errno::from_i32(libc::EINVAL)),
    };
    if offset < 0 {
        return Err(Errno::from_i32(libc::ENXIO));
    }
    Ok((offset as u64, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every engine error maps to a specific errno, and the table stays explicit.
    #[test]
    fn errno_table() {
        let table = [
            (Error::NotFound, libc::ENOENT),
            (Error::Exists, libc::EEXIST),
            (Error::NotEmpty, libc::ENOTEMPTY),
            (Error::NotDir, libc::ENOTDIR),
            (Error::IsDir, libc::EISDIR),
            (Error::NameTooLong, libc::ENAMETOOLONG),
            (Error::NoSpace, libc::ENOSPC),
            (Error::Invalid, libc::EINVAL),
            (Error::PermissionDenied, libc::EACCES),
            (Error::NotPermitted, libc::EPERM),
            (Error::TooManyLinks, libc::EMLINK),
            (Error::NoAttr, libc::ENODATA),
            (Error::Range, libc::ERANGE),
            (Error::FileTooBig, libc::EFBIG),
            (Error::ReadOnly, libc::EROFS),
            (Error::PastEnd, libc::ENXIO),
            (Error::NotSupported, libc::EOPNOTSUPP),
            (Error::Corrupted("x".into()), libc::EIO),
            (Error::Io("x".into()), libc::EIO),
        ];
        for (e, code) in table {
            assert_eq!(errno(&e).code(), code, "{e:?}");
        }
    }
}
