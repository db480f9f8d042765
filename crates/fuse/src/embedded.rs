//! The embedded mount's own part (`Mode` for the adapter core,
//! `crate::adapter`): an `Engine` on a local store, the daemon its only
//! writer. File data through FUSE passthrough where the kernel takes it
//! (the open-file table `Opened`), hour-long kernel caches kept true by
//! notifications (`CACHE_TTL`), and the pruner that asks the kernel to
//! drop old entries when the engine's cache is over budget (`Handed`).
//!
//! Round trips avoided: FLUSH is not implemented (the kernel stops sending it
//! after one ENOSYS: one round trip less per close); negative lookups are
//! cached by the kernel (entry with inode 0); readdirplus answers listing and
//! stat in one trip.

use crate::adapter::reply::{errno, file_attr_on_disk, kind};
use crate::adapter::requests::Requests;
use crate::adapter::{Adapter, Background, Caller, CoreOptions, Made, Mode};
use crate::Squash;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyOpen,
};
use shoal_core::{rules, Attr, Ctx, Engine, Error, Kind, StatFs};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

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
    /// A file created read-write (O_RDWR: a database's files and journals,
    /// mkstemp's) gets a passthrough handle from its create, its (empty)
    /// bytes put in a data object first as a client's open does
    /// (`Engine::pin_object`); `nordwr_passthrough` turns it off. A handle
    /// keeps its mode while open, and a file created small would otherwise
    /// be written through the daemon however large it grows: `pgbench -i`
    /// sent 36,529 WRITEs and ran at 0.25x ext4 (docs/BENCHMARKS.md, "Real
    /// programs"). Write-only creates (tar, cp) keep their direct handles.
    pub rdwr_passthrough: bool,
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
            rdwr_passthrough: true,
            squash: Squash::None,
        }
    }
}

/// The embedded mount's state beside the core.
pub struct Embedded {
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
    notifier: Arc<OnceLock<fuser::Notifier>>,
    /// Files the daemon's clients hold open for writing (`ClientWriters`).
    client_writers: Arc<ClientWriters>,
}

/// Files that programs reaching the daemon without FUSE (docs/client.md)
/// hold open for writing, through their data objects' descriptors: the
/// kernel sees none of those writes, so while such a file is held its
/// attributes are answered with no cache time and taken from the object
/// first (`Engine::refresh_from_data`), as for the mount's own passthrough
/// handles. Kept by the client server, read by the adapter's GETATTR.
pub struct ClientWriters {
    held: Vec<shoal_core::sync::PlainMutex<std::collections::HashMap<u64, Held>>>,
}

#[derive(Default)]
struct Held {
    handles: u32,
    /// The object's time when last looked at (`refresh_from_data`).
    seen: Option<shoal_core::Ts>,
}

impl ClientWriters {
    fn shard(
        &self,
        ino: u64,
    ) -> &shoal_core::sync::PlainMutex<std::collections::HashMap<u64, Held>> {
        &self.held[ino as usize % self.held.len()]
    }

    pub fn new() -> ClientWriters {
        ClientWriters {
            held: (0..16).map(|_| Default::default()).collect(),
        }
    }
}

impl Default for ClientWriters {
    /// Sharded as `new` makes it (a derived default had no shards, and the
    /// first lookup divided by zero).
    fn default() -> ClientWriters {
        ClientWriters::new()
    }
}

impl ClientWriters {
    /// A client opened `ino` for writing; `seen`: the object's time then
    /// (a write after the open changes it, and a GETATTR takes it in).
    pub fn opened(&self, ino: u64, seen: Option<shoal_core::Ts>) {
        self.shard(ino)
            .lock()
            .entry(ino)
            .or_insert(Held { handles: 0, seen })
            .handles += 1;
    }

    /// A client's handle of `ino` for writing closed.
    pub fn closed(&self, ino: u64) {
        let mut s = self.shard(ino).lock();
        if let Some(h) = s.get_mut(&ino) {
            h.handles -= 1;
            if h.handles == 0 {
                s.remove(&ino);
            }
        }
    }

    /// Whether clients hold `ino` for writing, after taking in what they
    /// wrote.
    pub fn refresh(&self, engine: &Engine, ino: u64) -> bool {
        let mut s = self.shard(ino).lock();
        let Some(h) = s.get_mut(&ino) else {
            return false;
        };
        if let Err(e) = engine.refresh_from_data(ino, &mut h.seen, true) {
            tracing::warn!("inode {ino}: {e}");
        }
        true
    }

    fn holds(&self, ino: u64) -> bool {
        self.shard(ino).lock().contains_key(&ino)
    }
}

/// The FUSE filesystem of an embedded mount.
pub type ShoalFs = Adapter<Embedded>;

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

/// The engine's open mask: the access an open asks for
/// (`rules::perm::open_access`), with `OPEN_TRUNC` and `OPEN_APPEND` for
/// the engine's flag checks.
fn open_mask(flags: i32) -> u32 {
    let mut m = shoal_core::rules::perm::open_access(flags);
    if flags & libc::O_TRUNC != 0 {
        m |= shoal_core::engine::OPEN_TRUNC;
    }
    if flags & libc::O_APPEND != 0 {
        m |= shoal_core::engine::OPEN_APPEND;
    }
    m
}

impl Embedded {
    /// A new handle of a file `open_file` accepted: the backing id to open
    /// it in passthrough mode with, or None for a handle the daemon serves.
    /// Passthrough when the kernel took it, the file's bytes are in a data
    /// object and no plain handle is open; not for a setuid or setgid file
    /// (its bits must drop on another user's write, which the daemon does:
    /// `drop_privileges`) unless passthrough handles are open already.
    fn open_handle(
        &self,
        a: &Attr,
        flags: i32,
        reply: &ReplyOpen,
    ) -> Option<Arc<fuser::BackingId>> {
        let writable = writable_open(flags);
        let mut shard = self.opened[a.ino as usize % 16].lock();
        let o = shard.entry(a.ino).or_default();
        // Read-write, a small file too (`FuseOptions::rdwr_passthrough`):
        // its bytes are put in its object first.
        let small_rdwr = self.rdwr_passthrough(flags) && a.size <= shoal_core::INLINE_MAX;
        let eligible = self.passthrough
            && a.kind == Kind::File
            && o.plain == 0
            && (o.passthrough > 0
                || ((a.size > shoal_core::INLINE_MAX || small_rdwr) && a.perm & 0o6000 == 0));
        if !eligible {
            o.plain += 1;
            return None;
        }
        // Each passthrough handle pins the bytes in the data object.
        let pinned = if small_rdwr {
            self.engine.pin_object(a.ino)
        } else {
            self.engine.pin_data(a.ino)
        };
        let file = match pinned {
            Ok(Some(f)) => f,
            _ => {
                o.plain += 1;
                return None;
            }
        };
        let Some(id) =
            self.passthrough_handle(o, a.ino, &file, writable, |f| reply.open_backing(f))
        else {
            o.plain += 1;
            return None;
        };
        // The kernel's cached attributes came with no passthrough handle
        // open and would be kept for attr_ttl: drop them, so the next stat
        // asks (and gets what the kernel wrote through the object).
        if let Some(n) = self.notifier.get() {
            let _ = n.inval_inode(INodeNo(a.ino), -1, 0);
        }
        Some(id)
    }

    /// A passthrough handle of `ino`, whose object `file` the caller has
    /// pinned: the inode's backing id (registered with `open_backing` if
    /// it has none yet, the object's time noted then: writes through it
    /// change it), and the handle counted. None: the kernel refused the
    /// backing file; the pin is undone and nothing counted.
    fn passthrough_handle(
        &self,
        o: &mut Opened,
        ino: u64,
        file: &std::fs::File,
        writable: bool,
        open_backing: impl FnOnce(&std::fs::File) -> std::io::Result<fuser::BackingId>,
    ) -> Option<Arc<fuser::BackingId>> {
        if o.backing.is_none() {
            match open_backing(file) {
                Ok(id) => {
                    o.backing = Some(Arc::new(id));
                    let mut seen = None;
                    let _ = self.engine.refresh_from_data(ino, &mut seen, false);
                    o.seen = seen;
                }
                Err(e) => {
                    tracing::warn!("passthrough refused for inode {ino}: {e}");
                    let _ = self.engine.unpin_data(ino);
                    return None;
                }
            }
        }
        o.passthrough += 1;
        if writable {
            o.writers += 1;
        }
        o.backing.clone()
    }

    /// Whether an open or create with `flags` gets a passthrough handle
    /// however small the file (`FuseOptions::rdwr_passthrough`): read-write.
    fn rdwr_passthrough(&self, flags: i32) -> bool {
        self.opts.rdwr_passthrough && flags & libc::O_ACCMODE == libc::O_RDWR
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

    /// The handle of a file CREATE or TMPFILE made: open in the kernel's
    /// cached mode (counted first: `created_handle`). Opened write-only, a
    /// direct handle (`FuseOptions::direct_create`).
    fn created_fh(&self, a: &Attr, flags: i32) -> (FileHandle, FopenFlags) {
        self.created_handle(a.ino);
        let mut fopen = self.fopen();
        if self.opts.direct_create
            && !self.opts.writeback_cache
            && flags & libc::O_ACCMODE == libc::O_WRONLY
        {
            fopen |= FopenFlags::FOPEN_DIRECT_IO;
        }
        (FileHandle(a.ino), fopen)
    }

    /// A create's handle in passthrough mode (`FuseOptions::rdwr_passthrough`):
    /// for a regular file created O_RDWR, not setuid or setgid, when the
    /// kernel took passthrough and no plain handle is open. Its bytes are
    /// put in its data object first and pinned there (`pin_object`, as a
    /// client's open); counted as `open_handle`'s passthrough handles, and
    /// closed by `close_handle` the same way. None: a plain handle.
    fn created_passthrough(
        &self,
        a: &Attr,
        flags: i32,
        reply: &fuser::ReplyCreate,
    ) -> Option<Arc<fuser::BackingId>> {
        if !(self.passthrough
            && self.rdwr_passthrough(flags)
            && a.kind == Kind::File
            && a.perm & 0o6000 == 0)
        {
            return None;
        }
        let mut shard = self.opened[a.ino as usize % 16].lock();
        let o = shard.entry(a.ino).or_default();
        if o.plain > 0 {
            return None;
        }
        let file = match self.engine.pin_object(a.ino) {
            Ok(Some(f)) => f,
            _ => return None,
        };
        self.passthrough_handle(o, a.ino, &file, true, |f| reply.open_backing(f))
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
    fn refresh_passthrough(&self, ino: u64) -> bool {
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

    fn fopen(&self) -> FopenFlags {
        if self.opts.keep_cache {
            FopenFlags::FOPEN_KEEP_CACHE
        } else {
            FopenFlags::empty()
        }
    }

    /// READDIRPLUS: each entry with its attributes, taking the kernel's
    /// reference as a lookup does.
    fn readdir_plus(&self, ino: INodeNo, offset: u64, mut reply: ReplyDirectoryPlus) {
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
}

impl ShoalFs {
    pub fn new(engine: Arc<Engine>, opts: FuseOptions) -> ShoalFs {
        let core = CoreOptions {
            entry_ttl: opts.entry_ttl,
            attr_ttl: opts.attr_ttl,
            negative_ttl: opts.negative_ttl,
            threads: opts.threads,
            clone_fd: opts.clone_fd,
            uring: opts.uring,
            xattr: opts.xattr,
            caller: Caller {
                squash: opts.squash,
                daemon_permissions: opts.daemon_permissions,
                // Entry replies (lookup, create, mkdir, link...) hand inodes
                // to the kernel: the engine takes its reference inside the
                // operation.
                kernel_ref: true,
            },
        };
        let mode = Embedded {
            engine,
            opts,
            passthrough: false,
            killpriv: false,
            opened: (0..16).map(|_| Default::default()).collect(),
            requests: Arc::default(),
            handed: Arc::default(),
            notifier: Arc::default(),
            client_writers: Arc::new(ClientWriters::new()),
        };
        Adapter::with_mode(mode, core)
    }

    /// Where the session's notifier will be once mounted: for the daemon's
    /// other paths into the engine (the client server, docs/client.md),
    /// which drop what the kernel cached of what they change.
    pub fn notifier(&self) -> Arc<OnceLock<fuser::Notifier>> {
        self.mode().notifier.clone()
    }

    /// The files the daemon's clients hold open for writing, which the
    /// client server keeps and GETATTR reads (`ClientWriters`).
    pub fn client_writers(&self) -> Arc<ClientWriters> {
        self.mode().client_writers.clone()
    }

    /// The request counters (shared with the stats socket).
    pub fn requests(&self) -> Arc<Requests> {
        self.mode().requests.clone()
    }
}

impl Mode for Embedded {
    type Ns = Engine;
    type Timer<'a> = ();

    fn ns(&self) -> &Engine {
        &self.engine
    }

    #[inline]
    fn start(&self, r: usize) {
        self.requests.count(r);
    }

    fn notifier(&self) -> &Arc<OnceLock<fuser::Notifier>> {
        &self.notifier
    }

    fn wants(&mut self, _have: InitFlags) -> InitFlags {
        let mut want = InitFlags::empty();
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
        want
    }

    fn init(&mut self, have: InitFlags, config: &mut KernelConfig) {
        self.killpriv = config
            .add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2)
            .is_ok();
        let _ = config.set_max_write(1 << 20);
        if self.opts.passthrough && !self.opts.writeback_cache {
            // One level: the backing files are on an ordinary filesystem.
            self.passthrough = have.contains(InitFlags::FUSE_PASSTHROUGH)
                && config.set_max_stack_depth(1).is_ok()
                && config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok();
        }
    }

    fn destroy(&mut self) {
        if let Err(e) = self.engine.shutdown() {
            tracing::error!("final commit failed: {e}");
        }
    }

    /// The pruner (`prune`).
    fn background(&self) -> Background {
        let engine = self.engine.clone();
        let handed = self.handed.clone();
        let requests = self.requests.clone();
        Box::new(move |notifier, stop| {
            let pruner = std::thread::Builder::new()
                .name("shoal-pruner".into())
                .spawn(move || prune(&engine, &handed, &requests, &notifier, &stop))?;
            Ok(vec![pruner])
        })
    }

    /// st_blocks from what the file takes on disk (holes do not count).
    fn fattr(&self, a: &Attr) -> FileAttr {
        file_attr_on_disk(a, self.engine.allocated(a))
    }

    fn refresh(&self, ino: u64) -> bool {
        // Both: a file may be open through the mount and a client at once.
        let mount = self.refresh_passthrough(ino);
        self.client_writers.refresh(&self.engine, ino) || mount
    }

    fn uncached(&self, ino: u64) -> bool {
        self.has_passthrough(ino) || self.client_writers.holds(ino)
    }

    /// `ttl`, or none when the daemon checks permissions and not everyone
    /// may search `parent`. Without `default_permissions` the kernel checks
    /// nothing on a path walk (`fuse_permission`), so a name it kept would
    /// let any caller through a directory only some may search; given no
    /// lifetime, each walk through it asks the daemon, which checks search
    /// for that caller (`Engine::lookup`). ext4's answer, at the cost of a
    /// LOOKUP per walk through such a directory (docs/design.md, "Who
    /// checks").
    fn name_ttl(&self, parent: u64, ttl: Duration) -> Duration {
        if !self.opts.daemon_permissions {
            return ttl;
        }
        match self.engine.getattr(parent) {
            Ok(p) if rules::perm::all_may_search(&p) => ttl,
            _ => Duration::ZERO,
        }
    }

    /// The kernel moves its entry with the lifetime it had: in a directory
    /// not everyone may search (`name_ttl`) it must ask again. After the
    /// answer (the rename holds both directories' locks).
    fn renamed(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> Vec<(u64, Vec<u8>)> {
        let mut moved = Vec::new();
        if self.opts.daemon_permissions {
            if self.name_ttl(newparent, self.opts.entry_ttl).is_zero() {
                moved.push((newparent, newname.to_vec()));
            }
            let exchange = flags & shoal_core::RENAME_EXCHANGE != 0;
            if exchange && self.name_ttl(parent, self.opts.entry_ttl).is_zero() {
                moved.push((parent, name.to_vec()));
            }
        }
        moved
    }

    /// On a thread of its own, not waited for.
    fn forget_names(&self, names: Vec<(u64, Vec<u8>)>) {
        let requests = self.requests.clone();
        crate::adapter::forget_later(&self.notifier, names, move || {
            requests.invalidations.fetch_add(1, Ordering::Relaxed);
        });
    }

    fn closes_search(&self, ino: u64, mode: Option<u32>) -> bool {
        self.opts.daemon_permissions
            && mode.is_some_and(|m| m & 0o111 != 0o111)
            && self
                .engine
                .getattr(ino)
                .is_ok_and(|a| a.kind == Kind::Dir && rules::perm::all_may_search(&a))
    }

    /// `adapter::forget_below`, the directory's name found in its parent's
    /// listing.
    fn forget_names_below(&self, dir: u64) {
        let Ok(parent) = self.engine.parent_of(dir) else {
            return;
        };
        let engine = self.engine.clone();
        let mut cookie = 0;
        let pages: crate::adapter::Pages = Box::new(move || {
            let page = engine.readdir(parent, cookie, 1024).ok()?;
            cookie = page.last().map_or(cookie, |e| e.cookie);
            Some(page.into_iter().map(|e| (e.name, e.ino)).collect())
        });
        let requests = self.requests.clone();
        crate::adapter::forget_below(&self.notifier, dir, parent, pages, move || {
            requests.invalidations.fetch_add(1, Ordering::Relaxed);
        });
    }

    /// Every entry is remembered for the pruner. A file with passthrough
    /// handles: its size and times as the kernel wrote them, not as the
    /// inode had them, and not kept by the kernel (as GETATTR's: the
    /// kernel changes the object through a mapping without a request).
    fn handed(
        &self,
        made: Made,
        parent: u64,
        name: &[u8],
        a: Attr,
        attr_ttl: Duration,
    ) -> shoal_core::Result<(Attr, Duration)> {
        // A create's inode is new: no handle of it is open yet.
        let (a, ttl) = match made != Made::Create && self.refresh_passthrough(a.ino) {
            true => (self.engine.getattr(a.ino).unwrap_or(a), Duration::ZERO),
            false => (a, attr_ttl),
        };
        self.handed.push(parent, name);
        Ok((a, ttl))
    }

    fn truncate_kills_privs(&self) -> bool {
        self.killpriv
    }

    fn write_kills_privs(&self) -> bool {
        true
    }

    fn drop_privileges(
        &self,
        uid: u32,
        gid: u32,
        groups: &dyn Fn() -> Vec<u32>,
        ino: u64,
    ) -> shoal_core::Result<bool> {
        self.engine.drop_privileges(uid, gid, groups, ino)
    }

    fn flags(&self, ino: u64) -> shoal_core::Result<u32> {
        self.engine.flags(ino)
    }

    fn set_flags(&self, ctx: &Ctx, ino: u64, flags: u32) -> shoal_core::Result<()> {
        self.engine.set_flags(ctx, ino, flags)
    }

    fn statfs(&self) -> shoal_core::Result<StatFs> {
        self.engine.statfs()
    }

    /// From the size the kernel's writes through passthrough reached
    /// (`refresh`): from the inode's alone, a file written since its
    /// create looks empty (xfstests' probe for SEEK_DATA/SEEK_HOLE).
    fn seek(&self, ino: u64, off: u64, data: bool) -> shoal_core::Result<u64> {
        self.refresh(ino);
        self.engine.seek(ino, off, data)
    }

    /// From the size the kernel's writes reached, as `seek`.
    fn fallocate(&self, ino: u64, off: u64, len: u64, mode: u32) -> shoal_core::Result<()> {
        self.refresh(ino);
        self.engine.fallocate(ino, off, len, mode)
    }

    fn create(&self, ctx: &Ctx, parent: u64, name: &[u8], mode: u32) -> shoal_core::Result<Attr> {
        self.engine.create_open(ctx, parent, name, mode)
    }

    fn tmpfile(&self, ctx: &Ctx, parent: u64, mode: u32) -> shoal_core::Result<Attr> {
        self.engine.tmpfile(ctx, parent, mode)
    }

    fn created(
        &self,
        a: &Attr,
        flags: i32,
        reply: &fuser::ReplyCreate,
    ) -> (FileHandle, FopenFlags, Option<Arc<fuser::BackingId>>) {
        if let Some(id) = self.created_passthrough(a, flags, reply) {
            let fh = a.ino | PASSTHROUGH_FH | WRITABLE_FH;
            return (FileHandle(fh), self.fopen(), Some(id));
        }
        let (fh, fopen) = self.created_fh(a, flags);
        (fh, fopen, None)
    }

    /// Its handle is `created_fh`'s, a cached one: a file that another
    /// process holds open through passthrough at that moment makes the
    /// kernel refuse it (EIO), a race of a race (the name made through the
    /// client socket between the kernel's lookup and its create).
    fn open_existing(&self, ctx: &Ctx, ino: u64, flags: i32) -> shoal_core::Result<()> {
        self.engine.open_file(ctx, ino, open_mask(flags)).map(drop)
    }

    fn close_existing(&self, ino: u64) {
        let _ = self.engine.release(ino);
    }

    fn open(&self, ctx: &Ctx, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let writable = writable_open(flags.0);
        match self.engine.open_file(ctx, ino.0, open_mask(flags.0)) {
            Ok(a) => match self.open_handle(&a, flags.0, &reply) {
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

    fn write(&self, ino: u64, off: u64, data: &[u8], cached: bool) -> shoal_core::Result<u32> {
        if cached {
            self.engine.write_back(ino, off, data)
        } else {
            self.engine.write(ino, off, data)
        }
    }

    /// Nothing to flush (writes go to the engine at once); ENOSYS makes the
    /// kernel stop sending FLUSH on every close of this mount.
    fn flush(&self, _ino: INodeNo, _fh: FileHandle, _owner: LockOwner, reply: ReplyEmpty) {
        reply.error(Errno::ENOSYS);
    }

    fn release(&self, ino: INodeNo, fh: FileHandle, _flock: Option<LockOwner>, reply: ReplyEmpty) {
        self.close_handle(ino.0, fh.0 & PASSTHROUGH_FH != 0, fh.0 & WRITABLE_FH != 0);
        crate::adapter::reply::reply_empty(reply, self.engine.release(ino.0));
    }

    fn fsync(&self, ino: u64, datasync: bool) -> shoal_core::Result<()> {
        self.refresh_passthrough(ino);
        if datasync {
            self.engine.fdatasync(ino)
        } else {
            self.engine.fsync(ino)
        }
    }

    fn forget(&self, ino: u64, nlookup: u64) {
        self.engine.forget(ino, nlookup);
    }

    /// The copy_file_range request's one answer of shoal's own: EPERM into
    /// an immutable file. Any other copy the kernel makes itself (it splices
    /// through read and write on EOPNOTSUPP, as when the request was not
    /// implemented), because its writes may go through a passthrough handle
    /// opened before chattr +i, where the engine never sees them.
    fn copy_file_range(&self, ino_out: u64) -> Errno {
        match self.engine.flags(ino_out) {
            Ok(f) if f & shoal_core::engine::flags::IMMUTABLE != 0 => Errno::from_i32(libc::EPERM),
            Ok(_) => Errno::from_i32(libc::EOPNOTSUPP),
            Err(e) => errno(&e),
        }
    }

    fn opendir(&self, ctx: &Ctx, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if self.opts.daemon_permissions {
            // The daemon checks: OPENDIR stays on so listing needs read permission.
            match self.engine.open_dir(ctx, ino.0, open_mask(flags.0)) {
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

    fn readdir(&self, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
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

    fn readdirplus(&self, ino: INodeNo, _fh: FileHandle, offset: u64, reply: ReplyDirectoryPlus) {
        self.readdir_plus(ino, offset, reply)
    }

    fn releasedir(&self, _ino: INodeNo, _fh: FileHandle, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fsyncdir(&self, ino: u64) -> shoal_core::Result<()> {
        self.engine.fsync(ino)
    }
}
