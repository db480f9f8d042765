//! The FUSE adapter core, one for both modes (issue 45, point 4): kernel
//! request -> `shoal_core::Namespace` call -> reply, with the caller's
//! `Ctx` (`Caller`: squash, daemon permissions, groups), entry and
//! attribute replies with each mode's lifetimes, errno in one place
//! (`reply::errno`), init negotiation and mount setup.
//!
//! What each mode does its own way it answers through [`Mode`], beside it:
//! the embedded mount (`crate::embedded`) its data path (FUSE passthrough,
//! the open-file table, hour-long kernel caches kept true by
//! notifications, the entry pruner); the etcd mount (`crate::shared`) its
//! data through the object store, its change-stream invalidations, file
//! locks across mounts and per-mount TTL. The namespace handlers (lookup,
//! getattr, statx, setattr, mknod, mkdir, symlink, link, unlink, rmdir,
//! rename, readlink, the four xattr calls, access, statfs, create and
//! tmpfile's replies, the chattr ioctls, fallocate, lseek) are written
//! here once.
//!
//! Kernel contract (virtiofsd's "Lookup Count" rule): every reply that
//! hands the kernel an inode (lookup, create, mknod, mkdir, symlink, link,
//! and each readdirplus entry other than "." and "..") takes one reference
//! where the mode keeps them (the embedded engine: `Caller::kernel_ref`);
//! FORGET drops them.

mod caller;
pub(crate) mod reply;
pub(crate) mod requests;

pub use caller::Caller;
use reply::{
    errno, falloc_mode, flags_ioctl, negative_attr, reply_empty, reply_xattr_names,
    reply_xattr_value, seek_args, time,
};
use requests::req;

use fuser::{
    CopyFileRangeFlags, Errno, FileAttr, FileHandle, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, IoctlFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyLock,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use shoal_core::{Attr, Ctx, Error, Namespace, SetAttr, StatFs, Ts};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

/// The kernel forgets these (directory, name) entries, on a thread of its
/// own, not waited for: for a request that holds the directories' locks
/// until its answer (`Mode::forget_names` of both modes). `counted` runs
/// once per invalidation sent.
pub(crate) fn forget_later(
    notifier: &OnceLock<fuser::Notifier>,
    names: Vec<(u64, Vec<u8>)>,
    counted: impl Fn() + Send + 'static,
) {
    let Some(n) = notifier.get().cloned() else {
        return;
    };
    std::thread::spawn(move || {
        for (parent, name) in names {
            let _ = n.inval_entry(INodeNo(parent), OsStr::from_bytes(&name));
            counted();
        }
    });
}

/// A directory's entries a page at a time, for `forget_below`: each call
/// the next page of (name, inode), empty or None at the end.
pub(crate) type Pages = Box<dyn FnMut() -> Option<Vec<(Vec<u8>, u64)>> + Send>;

/// After a chmod that took search away from some of `dir`'s callers
/// (daemon-checked permissions; `Mode::forget_names_below` of both modes):
/// the kernel forgets the directory's name in `parent`, found in
/// `parent_pages`, and with it every name it kept below (its
/// `d_invalidate`), so the next walk asks the daemon. The root (`parent ==
/// dir`) has no name: its names one by one, which wait for the chmod's
/// answer (the root's lock). On a thread of its own: the kernel holds the
/// directory's lock for the chmod until its answer, and an invalidation
/// in it would take that lock. Waited for a second at most before the
/// chmod is answered. `counted` runs once per invalidation sent.
pub(crate) fn forget_below(
    notifier: &OnceLock<fuser::Notifier>,
    dir: u64,
    parent: u64,
    mut parent_pages: Pages,
    counted: impl Fn() + Send + 'static,
) {
    let Some(n) = notifier.get().cloned() else {
        return;
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        'pages: while let Some(page) = parent_pages() {
            if page.is_empty() {
                break;
            }
            for (name, ino) in &page {
                if parent == dir || *ino == dir {
                    let _ = n.inval_entry(INodeNo(parent), OsStr::from_bytes(name));
                    counted();
                    if parent != dir {
                        break 'pages;
                    }
                }
            }
        }
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(Duration::from_secs(1));
}

/// What the core reads of a mount's options (each mode's own options
/// struct gives them: `FuseOptions`, `ClusterOptions`).
#[derive(Clone, Debug)]
pub struct CoreOptions {
    /// How long the kernel keeps an entry, its attributes, a negative
    /// entry (zero: a miss is an error, not cached).
    pub entry_ttl: Duration,
    pub attr_ttl: Duration,
    pub negative_ttl: Duration,
    pub threads: usize,
    pub clone_fd: bool,
    /// FUSE over io_uring where the kernel offers it.
    pub uring: bool,
    /// Off (`noxattr`): xattr requests answered ENOSYS (the kernel stops
    /// sending them).
    pub xattr: bool,
    pub caller: Caller,
}

/// Which request handed the kernel an entry (`Mode::handed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Made {
    Lookup,
    /// mknod, mkdir, symlink.
    New,
    /// create (the inode is opened by the same request).
    Create,
    Link,
}

/// Background threads a mode runs while mounted (`Mode::background`),
/// started once the session's notifier exists; joined at unmount (after
/// `stop` is set) when they give a handle.
pub type Background =
    Box<dyn FnOnce(fuser::Notifier, Arc<AtomicBool>) -> std::io::Result<Vec<JoinHandle<()>>>>;

/// A mode's own part: its namespace, data path and kernel-cache sources.
/// The core calls it; each method says what differs.
pub trait Mode: Send + Sync + 'static {
    type Ns: Namespace + ?Sized;
    /// Counts or times one request while alive.
    type Timer<'a>
    where
        Self: 'a;

    fn ns(&self) -> &Self::Ns;
    /// Start accounting request `r` (`requests::req`).
    fn start(&self, r: usize) -> Self::Timer<'_>;
    /// Where the session's notifier will be once mounted (the core sets it).
    fn notifier(&self) -> &Arc<OnceLock<fuser::Notifier>>;

    /// The capabilities this mode asks for beyond the core's (parallel
    /// directory operations, export support, io_uring).
    fn wants(&mut self, have: InitFlags) -> InitFlags;
    /// After the core's capabilities are added: what the mode negotiates
    /// on its own (the embedded mount's KILLPRIV_V2, passthrough).
    fn init(&mut self, _have: InitFlags, _config: &mut KernelConfig) {}
    fn destroy(&mut self);
    fn background(&self) -> Background;

    /// Attributes as the kernel gets them (st_blocks from the disk or the
    /// size).
    fn fattr(&self, a: &Attr) -> FileAttr;
    /// Bring an inode's attributes up to date before they are answered;
    /// true when they must not be cached (the embedded mount's passthrough
    /// handles).
    fn refresh(&self, _ino: u64) -> bool {
        false
    }
    /// True when an inode's attributes must not be cached, without a
    /// refresh.
    fn uncached(&self, _ino: u64) -> bool {
        false
    }
    /// The kernel is handed `a` as `name` in `parent`: note it; the
    /// attributes to answer and their lifetime (`attr_ttl` the default).
    fn handed(
        &self,
        made: Made,
        parent: u64,
        name: &[u8],
        a: Attr,
        attr_ttl: Duration,
    ) -> shoal_core::Result<(Attr, Duration)>;
    /// GETATTR's attributes and their lifetime.
    fn getattr(&self, ino: u64, attr_ttl: Duration) -> shoal_core::Result<(Attr, Duration)> {
        let ttl = if self.refresh(ino) {
            Duration::ZERO
        } else {
            attr_ttl
        };
        Ok((self.ns().getattr(&Ctx::root(), ino)?, ttl))
    }
    /// The kernel's lifetime for a name in directory `parent` (`ttl` the
    /// mount's): the embedded mount gives none in a directory not everyone
    /// may search when the daemon checks.
    fn name_ttl(&self, _parent: u64, ttl: Duration) -> Duration {
        ttl
    }
    /// After an unlink that succeeded (what the mode remembers of the
    /// kernel's names).
    fn unlinked(&self, _parent: u64, _name: &[u8]) {}
    /// After a rename that succeeded, before its answer: the names the
    /// kernel must forget once answered (`forget_names`).
    fn renamed(
        &self,
        _parent: u64,
        _name: &[u8],
        _newparent: u64,
        _newname: &[u8],
        _flags: u32,
    ) -> Vec<(u64, Vec<u8>)> {
        Vec::new()
    }
    /// The kernel forgets these (directory, name) entries, not waited for:
    /// for a request that holds the directories' locks until its answer.
    fn forget_names(&self, _names: Vec<(u64, Vec<u8>)>) {}
    /// Before a setattr: whether it takes search away from some callers of
    /// a directory whose names the kernel keeps (`name_ttl`); then
    /// `forget_names_below` runs before its answer.
    fn closes_search(&self, _ino: u64, _mode: Option<u32>) -> bool {
        false
    }
    fn forget_names_below(&self, _dir: u64) {}

    /// Whether a truncate without a mode clears setuid/setgid here (under
    /// KILLPRIV_V2 the kernel leaves it to the daemon).
    fn truncate_kills_privs(&self) -> bool {
        false
    }
    /// Whether a write clears setuid/setgid here (else the kernel does).
    fn write_kills_privs(&self) -> bool {
        false
    }
    /// Clear setuid/setgid before a change of `ino`'s data by `uid`
    /// (`rules::privs::write_kills`): whether the mode changed.
    fn drop_privileges(
        &self,
        uid: u32,
        gid: u32,
        groups: &dyn Fn() -> Vec<u32>,
        ino: u64,
    ) -> shoal_core::Result<bool>;

    fn flags(&self, ino: u64) -> shoal_core::Result<u32>;
    fn set_flags(&self, ctx: &Ctx, ino: u64, flags: u32) -> shoal_core::Result<()>;
    fn statfs(&self) -> shoal_core::Result<StatFs>;
    fn seek(&self, ino: u64, off: u64, data: bool) -> shoal_core::Result<u64>;
    fn fallocate(&self, ino: u64, off: u64, len: u64, mode: u32) -> shoal_core::Result<()>;

    /// A new regular file, open (CREATE).
    fn create(&self, ctx: &Ctx, parent: u64, name: &[u8], mode: u32) -> shoal_core::Result<Attr>;
    /// An unnamed file, open, nlink 0 (O_TMPFILE).
    fn tmpfile(&self, ctx: &Ctx, parent: u64, mode: u32) -> shoal_core::Result<Attr>;
    /// The handle and open flags of a file CREATE or TMPFILE made, and the
    /// backing file's id when the handle is a passthrough one.
    fn created(
        &self,
        a: &Attr,
        flags: i32,
        reply: &ReplyCreate,
    ) -> (FileHandle, FopenFlags, Option<Arc<fuser::BackingId>>);
    /// Open the regular file `ino` that a CREATE without O_EXCL found
    /// already named (`Adapter::create_found`) as OPEN would for `flags`:
    /// counted open, chattr's rules, and `ctx`'s permission checks, on
    /// whatever the mount's permission mode (the kernel checked nothing).
    /// `created` then gives its handle.
    fn open_existing(&self, ctx: &Ctx, ino: u64, flags: i32) -> shoal_core::Result<()>;
    /// Undo `open_existing` when the CREATE fails after it.
    fn close_existing(&self, ino: u64);

    fn open(&self, ctx: &Ctx, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen);
    fn write(&self, ino: u64, off: u64, data: &[u8], cached: bool) -> shoal_core::Result<u32>;
    fn flush(&self, ino: INodeNo, fh: FileHandle, owner: LockOwner, reply: ReplyEmpty);
    fn release(&self, ino: INodeNo, fh: FileHandle, flock: Option<LockOwner>, reply: ReplyEmpty);
    fn fsync(&self, ino: u64, datasync: bool) -> shoal_core::Result<()>;
    fn forget(&self, _ino: u64, _nlookup: u64) {}
    /// copy_file_range's answer (the kernel copies itself on EOPNOTSUPP
    /// and ENOSYS).
    fn copy_file_range(&self, _ino_out: u64) -> Errno {
        Errno::ENOSYS
    }

    fn opendir(&self, ctx: &Ctx, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen);
    fn readdir(&self, ino: INodeNo, fh: FileHandle, offset: u64, reply: ReplyDirectory);
    fn readdirplus(&self, _ino: INodeNo, _fh: FileHandle, _off: u64, reply: ReplyDirectoryPlus) {
        reply.error(Errno::ENOSYS);
    }
    fn releasedir(&self, ino: INodeNo, fh: FileHandle, reply: ReplyEmpty);
    fn fsyncdir(&self, ino: u64) -> shoal_core::Result<()>;

    /// File locks (FUSE_POSIX_LOCKS, FUSE_FLOCK_LOCKS): only a mode that
    /// negotiates them gets these.
    fn locks(&self) -> Option<&dyn Locks> {
        None
    }
}

/// fcntl and flock locks kept by the daemon (the etcd mount's, across
/// mounts): fuser's three lock requests as they come.
pub trait Locks {
    #[allow(clippy::too_many_arguments)]
    fn getlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    );
    #[allow(clippy::too_many_arguments)]
    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    );
    #[allow(clippy::too_many_arguments)]
    fn flock(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    );
}

/// One FUSE filesystem over a [`Mode`].
pub struct Adapter<M: Mode> {
    mode: M,
    opts: CoreOptions,
}

impl<M: Mode> Adapter<M> {
    pub fn with_mode(mode: M, opts: CoreOptions) -> Self {
        Adapter { mode, opts }
    }

    /// The mode's own part (its counters, notifier...).
    pub fn mode(&self) -> &M {
        &self.mode
    }

    fn ns(&self) -> &M::Ns {
        self.mode.ns()
    }

    fn ctx(&self, req: &Request) -> Ctx {
        self.opts.caller.ctx(req)
    }

    /// An entry reply (lookup, mknod, mkdir, symlink, link): the mode notes
    /// what the kernel is handed.
    fn entry(
        &self,
        made: Made,
        parent: INodeNo,
        name: &OsStr,
        reply: ReplyEntry,
        r: shoal_core::Result<Attr>,
    ) {
        let r = r.and_then(|a| {
            self.mode
                .handed(made, parent.0, name.as_bytes(), a, self.opts.attr_ttl)
        });
        match r {
            // fuser's order: the attributes' lifetime first.
            Ok((a, attr_ttl)) => reply.entry_with_ttls(
                &attr_ttl,
                &self.mode.name_ttl(parent.0, self.opts.entry_ttl),
                &self.mode.fattr(&a),
                Generation(0),
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// CREATE's and TMPFILE's reply: the new inode, open.
    fn created(&self, parent: u64, a: &Attr, flags: i32, reply: ReplyCreate) {
        let (fh, fopen, backing) = self.mode.created(a, flags, &reply);
        let ttl = self.mode.name_ttl(parent, self.opts.entry_ttl);
        match backing {
            Some(id) => {
                reply.created_passthrough(&ttl, &self.mode.fattr(a), Generation(0), fh, fopen, &id)
            }
            None => reply.created(&ttl, &self.mode.fattr(a), Generation(0), fh, fopen),
        }
    }

    /// open(2) with O_CREAT|O_TRUNC... and without O_EXCL whose name was
    /// made after the kernel's lookup missed it: by another mount of the
    /// namespace, or a client of the daemon's socket. Linux opens the file
    /// that is there (as NFS's unchecked create does), so this does too; it
    /// answered EEXIST until 2026-11-28 (`exec 9>F` on one etcd mount right
    /// after `touch F` on another, tests/scripts/etcd-mounts.sh). The kernel
    /// believes it made the file, so it checks no permission and truncates
    /// nothing (fs/namei.c, FMODE_CREATED): both are done here, as OPEN and
    /// its SETATTR would. A directory answers EISDIR, as open(2) does; any
    /// other kind EEXIST (open would follow a symlink or open a device: the
    /// kernel can be asked again, with a fresh lookup).
    fn create_found(
        &self,
        req: &Request,
        ctx: &Ctx,
        parent: u64,
        name: &[u8],
        flags: i32,
    ) -> shoal_core::Result<Attr> {
        // The lookup takes the kernel's reference (`Ctx::kernel_ref`):
        // given back below if the open fails.
        let a = self.ns().lookup(ctx, parent, name)?;
        let r = self.open_found(req, ctx, &a, flags).and_then(|_| {
            let r = self
                .mode
                .handed(Made::Lookup, parent, name, a, self.opts.attr_ttl);
            if r.is_err() {
                self.mode.close_existing(a.ino);
            }
            r
        });
        match r {
            Ok((a, _)) => Ok(a),
            Err(e) => {
                if ctx.kernel_ref {
                    self.mode.forget(a.ino, 1);
                }
                Err(e)
            }
        }
    }

    /// `create_found`'s open of `a`, and its truncation for O_TRUNC.
    fn open_found(&self, req: &Request, ctx: &Ctx, a: &Attr, flags: i32) -> shoal_core::Result<()> {
        match a.kind {
            shoal_core::Kind::File => {}
            shoal_core::Kind::Dir => return Err(Error::IsDir),
            _ => return Err(Error::Exists),
        }
        self.mode
            .open_existing(&shoal_core::surface::checking(ctx), a.ino, flags)?;
        if flags & libc::O_TRUNC == 0 || a.size == 0 {
            return Ok(());
        }
        let sa = SetAttr {
            size: Some(0),
            by_handle: true,
            ..SetAttr::default()
        };
        let r = self
            .drop_privileges(req, a.ino)
            .and_then(|_| self.ns().setattr(ctx, a.ino, &sa).map(drop));
        if r.is_err() {
            self.mode.close_existing(a.ino);
        }
        r
    }

    /// Before a non-root caller changes a file's data: clear setuid and
    /// setgid as Linux does, and make the kernel drop the mode it caches.
    /// The kernel's FUSE code clears setgid only with group exec, so a
    /// world-writable setgid file stayed setgid after another user's write
    /// or fallocate (xfstests generic/683-685). The invalidation is sent
    /// before the reply, so a stat after the call sees the new mode; it
    /// takes no inode lock in the kernel (offset -1: attributes only), so it
    /// is safe while the caller's request is in flight.
    fn drop_privileges(&self, req: &Request, ino: u64) -> shoal_core::Result<()> {
        let (uid, gid, _) = self.opts.caller.who(req);
        if uid == 0 {
            return Ok(());
        }
        if self
            .mode
            .drop_privileges(uid, gid, &|| self.opts.caller.groups_as(req), ino)?
        {
            self.inval_attrs(ino);
        }
        Ok(())
    }

    /// The kernel drops what it caches of `ino`'s attributes.
    fn inval_attrs(&self, ino: u64) {
        if let Some(n) = self.mode.notifier().get() {
            let _ = n.inval_inode(INodeNo(ino), -1, 0);
        }
    }

    /// Mount and serve until unmounted, with the mode's background threads.
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
        let background = self.mode.background();
        let notifier = self.mode.notifier().clone();
        let session = fuser::Session::new(self, mountpoint, &cfg)?;
        let _ = notifier.set(session.notifier());
        let stop = Arc::new(AtomicBool::new(false));
        let threads = background(session.notifier(), stop.clone())?;
        let r = session.run();
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            let _ = t.join();
        }
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

impl<M: Mode> Filesystem for Adapter<M> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let have = config.capabilities();
        let mut want = InitFlags::FUSE_PARALLEL_DIROPS | self.mode.wants(have);
        // LOOKUP of "." and ".." for any inode: file handles (open_by_handle_at,
        // NFS export) stay valid across the kernel's inode cache.
        want |= InitFlags::FUSE_EXPORT_SUPPORT;
        if self.opts.uring {
            want |= InitFlags::FUSE_OVER_IO_URING;
        }
        let _ = config.add_capabilities(want & have);
        self.mode.init(have, config);
        if self.opts.uring && !have.contains(InitFlags::FUSE_OVER_IO_URING) {
            tracing::info!(
                "FUSE over io_uring not offered by the kernel (Linux 6.14+ with \
                 `echo Y > /sys/module/fuse/parameters/enable_uring`): serving /dev/fuse"
            );
        }
        Ok(())
    }

    fn destroy(&mut self) {
        self.mode.destroy();
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _t = self.mode.start(req::LOOKUP);
        match self.ns().lookup(&self.ctx(req), parent.0, name.as_bytes()) {
            Err(Error::NotFound) if !self.opts.negative_ttl.is_zero() => {
                // A negative entry: the kernel caches the miss. fuser's
                // order is (attributes, entry): this sent the negative
                // lifetime as the attributes' and 0 as the entry's until
                // 2026-11-28, so the kernel kept no miss at all.
                let ttl = self.mode.name_ttl(parent.0, self.opts.negative_ttl);
                reply.entry_with_ttls(&Duration::ZERO, &ttl, &negative_attr(), Generation(0));
            }
            r => self.entry(Made::Lookup, parent, name, reply, r),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let _t = self.mode.start(req::FORGET);
        self.mode.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _t = self.mode.start(req::GETATTR);
        match self.mode.getattr(ino.0, self.opts.attr_ttl) {
            Ok((a, ttl)) => reply.attr(&ttl, &self.mode.fattr(&a)),
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
        use shoal_core::rules::flags;
        let _t = self.mode.start(req::GETATTR);
        let ttl = if self.mode.refresh(ino.0) {
            Duration::ZERO
        } else {
            self.opts.attr_ttl
        };
        // STATX_ATTR_IMMUTABLE, _APPEND, _NODUMP: the same bits as the flags'.
        let known = (flags::IMMUTABLE | flags::APPEND | flags::NODUMP) as u64;
        match self
            .ns()
            .getattr(&Ctx::root(), ino.0)
            .and_then(|a| Ok((a, self.mode.flags(ino.0)?)))
        {
            Ok((a, f)) => reply.statx(&ttl, &self.mode.fattr(&a), f as u64 & known, known),
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
        let _t = self.mode.start(req::SETATTR);
        if self.mode.truncate_kills_privs() && mode.is_none() && size.is_some() {
            // What the kernel leaves to the daemon under KILLPRIV_V2 (a
            // chown's: the namespace, `rules::privs::chown_perm`).
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
        // kernel keeps (`Mode::name_ttl`): their names forgotten before the
        // answer.
        let closing = self.mode.closes_search(ino.0, mode);
        // A chown without a mode clears setgid by the caller's groups
        // (`rules::privs::chown_perm`).
        let ctx = if uid.is_some() || gid.is_some() {
            self.opts.caller.ctx_with_groups(req)
        } else {
            self.ctx(req)
        };
        // No lifetime while the mode says the attributes change behind it.
        let ttl = if self.mode.uncached(ino.0) {
            Duration::ZERO
        } else {
            self.opts.attr_ttl
        };
        match self.ns().setattr(&ctx, ino.0, &sa) {
            Ok(a) => {
                if closing {
                    self.mode.forget_names_below(ino.0);
                }
                reply.attr(&ttl, &self.mode.fattr(&a))
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _t = self.mode.start(req::READLINK);
        match self.ns().readlink(&Ctx::root(), ino.0) {
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
        let _t = self.mode.start(req::MKNOD);
        let ctx = self.opts.caller.ctx_umask(req, umask);
        let r = self.ns().mknod(&ctx, parent.0, name.as_bytes(), mode, rdev);
        self.entry(Made::New, parent, name, reply, r);
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
        let _t = self.mode.start(req::MKDIR);
        let ctx = self.opts.caller.ctx_umask(req, umask);
        let r = self.ns().mkdir(&ctx, parent.0, name.as_bytes(), mode);
        self.entry(Made::New, parent, name, reply, r);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _t = self.mode.start(req::UNLINK);
        let r = self.ns().unlink(&self.ctx(req), parent.0, name.as_bytes());
        if r.is_ok() {
            self.mode.unlinked(parent.0, name.as_bytes());
        }
        reply_empty(reply, r);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _t = self.mode.start(req::RMDIR);
        reply_empty(
            reply,
            self.ns().rmdir(&self.ctx(req), parent.0, name.as_bytes()),
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
        let _t = self.mode.start(req::SYMLINK);
        let r = self.ns().symlink(
            &self.ctx(req),
            parent.0,
            link_name.as_bytes(),
            target.as_os_str().as_bytes(),
        );
        self.entry(Made::New, parent, link_name, reply, r);
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
        let _t = self.mode.start(req::RENAME);
        let (name, newname, flags) = (name.as_bytes(), newname.as_bytes(), flags.bits());
        let r = self
            .ns()
            .rename(&self.ctx(req), parent.0, name, newparent.0, newname, flags);
        let forget = match r {
            Ok(()) => self
                .mode
                .renamed(parent.0, name, newparent.0, newname, flags),
            Err(_) => Vec::new(),
        };
        reply_empty(reply, r);
        if !forget.is_empty() {
            self.mode.forget_names(forget);
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
        let _t = self.mode.start(req::LINK);
        let r = self
            .ns()
            .link(&self.ctx(req), ino.0, newparent.0, newname.as_bytes());
        self.entry(Made::Link, newparent, newname, reply, r);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _t = self.mode.start(req::OPEN);
        self.mode.open(&self.ctx(req), ino, flags, reply);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _t = self.mode.start(req::READ);
        match self.ns().read(&Ctx::root(), ino.0, offset, size) {
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
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _t = self.mode.start(req::WRITE);
        if self.mode.write_kills_privs() {
            if let Err(e) = self.drop_privileges(req, ino.0) {
                return reply.error(errno(&e));
            }
        }
        let cached = wf.contains(WriteFlags::FUSE_WRITE_CACHE);
        match self.mode.write(ino.0, offset, data, cached) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let _t = self.mode.start(req::FLUSH);
        self.mode.flush(ino, fh, lock_owner, reply);
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        flock: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _t = self.mode.start(req::RELEASE);
        self.mode.release(ino, fh, flock, reply);
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _t = self.mode.start(req::FSYNC);
        reply_empty(reply, self.mode.fsync(ino.0, datasync));
    }

    fn opendir(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _t = self.mode.start(req::OPENDIR);
        self.mode.opendir(&self.ctx(req), ino, flags, reply);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        let _t = self.mode.start(req::READDIR);
        self.mode.readdir(ino, fh, offset, reply);
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        let _t = self.mode.start(req::READDIRPLUS);
        self.mode.readdirplus(ino, fh, offset, reply);
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let _t = self.mode.start(req::RELEASEDIR);
        self.mode.releasedir(ino, fh, reply);
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _t = self.mode.start(req::FSYNCDIR);
        reply_empty(reply, self.mode.fsyncdir(ino.0));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _t = self.mode.start(req::STATFS);
        match self.mode.statfs() {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.bsize,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: fuser::AccessFlags, reply: ReplyEmpty) {
        let _t = self.mode.start(req::ACCESS);
        // Sent only without default_permissions (daemon_permissions,
        // all_squash): access(2), chdir, exec.
        let mask = mask.bits() as u32 & 7;
        reply_empty(reply, self.ns().access(&self.ctx(req), ino.0, mask));
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
        let _t = self.mode.start(req::SETXATTR);
        if !self.opts.xattr {
            return reply.error(Errno::ENOSYS);
        }
        let f = flags as u32 & (shoal_core::XATTR_CREATE | shoal_core::XATTR_REPLACE);
        // The caller's groups: an access ACL clears setgid unless the
        // caller is in the file's group.
        let ctx = self.opts.caller.ctx_with_groups(req);
        reply_empty(
            reply,
            self.ns().setxattr(&ctx, ino.0, name.as_bytes(), value, f),
        );
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _t = self.mode.start(req::GETXATTR);
        if !self.opts.xattr {
            return reply.error(Errno::ENOSYS);
        }
        let r = self.ns().getxattr(&self.ctx(req), ino.0, name.as_bytes());
        reply_xattr_value(reply, r, size);
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _t = self.mode.start(req::LISTXATTR);
        if !self.opts.xattr {
            return reply.error(Errno::ENOSYS);
        }
        reply_xattr_names(reply, self.ns().listxattr(&Ctx::root(), ino.0), size);
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _t = self.mode.start(req::REMOVEXATTR);
        if !self.opts.xattr {
            return reply.error(Errno::ENOSYS);
        }
        let r = self
            .ns()
            .removexattr(&self.ctx(req), ino.0, name.as_bytes());
        reply_empty(reply, r);
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
        let _t = self.mode.start(req::CREATE);
        let ctx = self.opts.caller.ctx_umask(req, umask);
        let n = name.as_bytes();
        let r = self.mode.create(&ctx, parent.0, n, mode).and_then(|a| {
            self.mode
                .handed(Made::Create, parent.0, n, a, self.opts.attr_ttl)
        });
        match r {
            Ok((a, _)) => self.created(parent.0, &a, flags, reply),
            Err(Error::Exists) if flags & libc::O_EXCL == 0 => {
                match self.create_found(req, &ctx, parent.0, n, flags) {
                    Ok(a) => self.created(parent.0, &a, flags, reply),
                    Err(e) => reply.error(errno(&e)),
                }
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
        let _t = self.mode.start(req::CREATE);
        let ctx = self.opts.caller.ctx_umask(req, umask);
        match self.mode.tmpfile(&ctx, parent.0, mode) {
            Ok(a) => self.created(parent.0, &a, flags, reply),
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
        let _t = self.mode.start(req::LSEEK);
        let (offset, data) = match seek_args(offset, whence) {
            Ok(a) => a,
            Err(e) => return reply.error(e),
        };
        match self.mode.seek(ino.0, offset, data) {
            Ok(o) => reply.offset(o as i64),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// fallocate(2), setuid and setgid cleared first as Linux does
    /// (`rules::privs`).
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
        let _t = self.mode.start(req::FALLOCATE);
        let Some(m) = falloc_mode(mode) else {
            return reply.error(Errno::from_i32(libc::EOPNOTSUPP));
        };
        if let Err(e) = self.drop_privileges(req, ino.0) {
            return reply.error(errno(&e));
        }
        reply_empty(reply, self.mode.fallocate(ino.0, offset, length, m));
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
        reply.error(self.mode.copy_file_range(ino_out.0));
    }

    /// File flags (chattr, lsattr, xfs_io chattr): the kernel turns
    /// `FS_IOC_GETFLAGS`/`SETFLAGS` and `FS_IOC_FSGETXATTR`/`FSSETXATTR` into
    /// these requests (after its own checks of who may change which flag),
    /// on a handle it opens for them (`reply::flags_ioctl`). Any other
    /// ioctl: ENOTTY, as for a file that has none.
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
        let _t = self.mode.start(req::IOCTL);
        let set = |f: u32| {
            self.mode.set_flags(&self.ctx(req), ino.0, f)?;
            // The new ctime: the kernel keeps attributes for attr_ttl
            // (generic/277 saw the old one).
            self.inval_attrs(ino.0);
            Ok(())
        };
        flags_ioctl(
            cmd,
            in_data,
            out_size,
            reply,
            || self.mode.flags(ino.0),
            set,
        )
    }

    fn getlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        match self.mode.locks() {
            Some(l) => l.getlk(req, ino, fh, lock_owner, start, end, typ, pid, reply),
            None => reply.error(Errno::ENOSYS),
        }
    }

    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        match self.mode.locks() {
            Some(l) => l.setlk(req, ino, fh, lock_owner, start, end, typ, pid, sleep, reply),
            None => reply.error(Errno::ENOSYS),
        }
    }

    fn flock(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        match self.mode.locks() {
            Some(l) => l.flock(req, ino, fh, lock_owner, typ, pid, sleep, reply),
            None => reply.error(Errno::ENOSYS),
        }
    }
}
