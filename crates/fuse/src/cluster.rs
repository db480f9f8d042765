//! The etcd mount's own part (`Mode` for the adapter core,
//! `crate::adapter`): a namespace shared by several daemons
//! (`shoal_cluster::ns::ClusterFs`, issue 24), `shoal mount etcd://...`.
//!
//! By default the kernel checks permissions
//! (default_permissions and FUSE_POSIX_ACL: mode bits and POSIX ACLs, kept
//! in step with the mode by `ClusterFs`), every change is one transaction on the shared
//! store, and a stat or lookup is answered by the daemon's record cache or
//! one read (`ClusterFs::getattr`). The kernel's entries and attributes live
//! `ClusterOptions::ttl` (1 s, JuiceFS's default) and are dropped sooner by
//! the change stream: a thread takes the daemon's stream
//! (`ClusterFs::subscribe`) and invalidates the kernel's entry for every
//! name another daemon changed and the attributes and pages of every inode
//! it changed. File data up to
//! `SHARED_INLINE_MAX` lives in the inode record, larger files' chunks in
//! the object store behind the data seam (`shoal_cluster::filedata`).

use crate::adapter::reply::{errno, file_attr, kind, reply_empty};
use crate::adapter::requests::req;
use crate::adapter::{Adapter, Background, Caller, CoreOptions, Locks, Made, Mode};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, FopenFlags, INodeNo, InitFlags, KernelConfig, LockOwner,
    OpenFlags, ReplyDirectory, ReplyEmpty, ReplyLock, ReplyOpen, Request,
};
use shoal_cluster::filelocks::{Lock, Want};
use shoal_cluster::ns::{ClusterFs, NewNode};
use shoal_core::stats::Op;
use shoal_core::sync::PlainMutex as Mutex;
use shoal_core::{Attr, Ctx, Error, Kind, StatFs};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// How long the kernel may keep entries and attributes without asking
    /// (the change stream usually drops them sooner).
    pub ttl: Duration,
    pub threads: usize,
    /// FUSE over io_uring where the kernel offers it (`nouring` turns it
    /// off), as on an embedded mount (docs/design.md, "FUSE transport").
    pub uring: bool,
    /// `root_squash` / `all_squash=UID:GID` (`crate::Squash`).
    pub squash: crate::Squash,
    /// The daemon checks every request's permissions (`-o
    /// daemon_permissions`; the mount is then without the kernel's
    /// `default_permissions`), with the rules of `shoal_core::rules`.
    pub daemon_permissions: bool,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            ttl: Duration::from_secs(1),
            threads: 4,
            uring: true,
            squash: crate::Squash::None,
            daemon_permissions: false,
        }
    }
}

/// A directory's entries as one listing: (name, inode, kind).
type Listing = Vec<(Vec<u8>, u64, Kind)>;

/// The etcd mount's state beside the core.
pub struct Cluster {
    fs: Arc<ClusterFs>,
    opts: ClusterOptions,
    /// Directory handles: the listing taken at offset 0, served by index
    /// (stable cookies within one listing).
    dirs: Mutex<HashMap<u64, Listing>>,
    /// Directories open on this mount: how many handles, and their
    /// attributes at the open. One removed while open (rmdir, or a rename
    /// over it, here or on another mount) still answers fstat, with no
    /// links, as a local filesystem does.
    open_dirs: Mutex<HashMap<u64, (u32, Attr)>>,
    next_fh: AtomicU64,
    /// Invalidations sent for other daemons' (and this one's) changes.
    pub invalidations: Arc<AtomicU64>,
    /// Requests come over FUSE over io_uring (set at init).
    uring_on: bool,
    /// The kernel took FUSE_HANDLE_KILLPRIV_V2 at init: the daemon clears
    /// setuid/setgid on a write, truncate and chown by Linux's rule
    /// (`rules::privs`), where the kernel's FUSE code would keep setgid
    /// without group exec (docs/rules.md).
    killpriv: bool,
    /// Lock requests waiting for another owner's lock, per FUSE queue
    /// (`take_lock`).
    lock_waits: Mutex<HashMap<i32, usize>>,
    /// Open files that took locks, by handle (`HandleLocks`).
    handle_locks: Mutex<HashMap<u64, HandleLocks>>,
    /// Releases begun and ended (`after_releases`).
    releases: (AtomicU64, AtomicU64),
    /// The name each file (not directory) was last handed to the kernel
    /// under, and the way to drop a stale one from it (`fresh_name`).
    handed: Arc<Mutex<Handed>>,
    drop_name: Mutex<Option<std::sync::mpsc::Sender<DropName>>>,
    /// The session's notifier (set at mount): a change the kernel cannot
    /// see in its reply (chattr's new ctime) drops its cached attributes.
    notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
}

/// Files' names as the kernel was last told them: by inode, and by
/// directory and a hash of the name. Each name is kept once (in `by_ino`;
/// at a million files the second copy was about 40 MB), and `by_name`
/// answers are checked against it: two names of one directory with one
/// hash only lose `fresh_name`'s check for one of them.
#[derive(Default)]
struct Handed {
    by_ino: HashMap<u64, (u64, Box<[u8]>)>,
    by_name: HashMap<(u64, u64), u64>,
}

/// The `by_name` key of `name` in `parent`.
fn name_key(parent: u64, name: &[u8]) -> (u64, u64) {
    use std::hash::Hasher;
    // Fixed keys (`new`): the key must be the same on every call.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    h.write(name);
    (parent, h.finish())
}

impl Handed {
    fn insert(&mut self, ino: u64, parent: u64, name: &[u8]) {
        if self.by_ino.len() >= HANDED_MAX {
            self.by_ino.clear();
            self.by_name.clear();
        }
        if let Some((p, n)) = self.by_ino.insert(ino, (parent, name.into())) {
            let k = name_key(p, &n);
            if self.by_name.get(&k) == Some(&ino) {
                self.by_name.remove(&k);
            }
        }
        self.by_name.insert(name_key(parent, name), ino);
    }
    /// The file the kernel knows as `name` in `parent`, if remembered.
    fn ino_of(&self, parent: u64, name: &[u8]) -> Option<u64> {
        let ino = *self.by_name.get(&name_key(parent, name))?;
        self.by_ino
            .get(&ino)
            .is_some_and(|(p, n)| *p == parent && &n[..] == name)
            .then_some(ino)
    }
    /// The kernel no longer has `name` in `parent` (dropped, or told).
    fn forget_name(&mut self, parent: u64, name: &[u8]) {
        if let Some(ino) = self.ino_of(parent, name) {
            self.by_ino.remove(&ino);
            self.by_name.remove(&name_key(parent, name));
        }
    }
}

/// A name to drop from the kernel's cache, and whom to tell once dropped.
type DropName = (u64, Vec<u8>, std::sync::mpsc::SyncSender<()>);

/// At most this many names remembered in `handed` (then it starts again:
/// a name forgotten only loses `fresh_name`'s check for that file).
const HANDED_MAX: usize = 1 << 20;

/// How long a lookup waits for the kernel to drop a file's stale name
/// (`fresh_name`) before it answers that the new name is not there yet.
const DROP_WAIT: Duration = Duration::from_millis(20);

/// What a mount knows of the locks taken through one open file.
struct HandleLocks {
    ino: u64,
    /// Owners that took a POSIX-style lock through this handle and have
    /// not closed the file since. What is left at its release is an
    /// open-file-description lock's owner (`release`).
    owners: Vec<u64>,
    /// When a descriptor of it was last closed (its flush): its release,
    /// and with it its flock and OFD locks' end, may be on its way.
    closed: Option<std::time::Instant>,
}

/// How long after a close of an open file that holds a flock or OFD lock
/// a lock test meeting a lock waits for that file's release
/// (`after_releases`).
const RELEASE_GRACE: Duration = Duration::from_millis(50);

impl Cluster {
    fn new(fs: Arc<ClusterFs>, opts: ClusterOptions) -> Cluster {
        Cluster {
            fs,
            opts,
            dirs: Mutex::new(HashMap::new()),
            open_dirs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            handle_locks: Mutex::default(),
            releases: Default::default(),
            invalidations: Arc::default(),
            uring_on: false,
            killpriv: false,
            lock_waits: Mutex::new(HashMap::new()),
            handed: Arc::default(),
            drop_name: Mutex::default(),
            notifier: Arc::default(),
        }
    }

    /// Note that the kernel now knows file `a` as `name` in `parent`.
    fn hand(&self, parent: u64, name: &[u8], a: &Attr) {
        if a.kind == Kind::Dir {
            return;
        }
        self.handed.lock().insert(a.ino, parent, name);
    }

    /// A lookup found file `a` as `name` in `parent`, with one link. If
    /// the kernel may still know it under another name (another mount
    /// renamed it, and the change stream's invalidation of the old name
    /// has not reached this kernel yet), that name is dropped first: else
    /// a rename of the old name onto this one would find one inode under
    /// both and succeed in the kernel without asking anyone (vfs_rename's
    /// "same file, nothing to do"), and two mounts would both win one
    /// rename (issue 43). The kernel holds both directories' locks across
    /// a rename's lookups, so the drop may wait for the rename to end:
    /// after `DROP_WAIT` the lookup answers ENOENT, the namespace as it was
    /// before the other mount's rename, which the kernel still shows (the
    /// rename then reaches this daemon, which finds no source: ENOENT).
    fn fresh_name(&self, parent: u64, name: &[u8], a: &Attr) -> shoal_core::Result<()> {
        if a.kind == Kind::Dir || a.nlink != 1 {
            return Ok(());
        }
        let old = match self.handed.lock().by_ino.get(&a.ino) {
            Some((p, n)) if (*p, &n[..]) != (parent, name) => (*p, n.to_vec()),
            _ => return Ok(()),
        };
        let Some(tx) = self.drop_name.lock().clone() else {
            return Ok(());
        };
        let same_dir = old.0 == parent;
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        if tx.send((old.0, old.1, done)).is_err() {
            return Ok(());
        }
        if same_dir {
            // This lookup holds the directory's lock (shared), which the
            // drop needs: it ends after this answer.
            return Err(Error::NotFound);
        }
        match wait.recv_timeout(DROP_WAIT) {
            Ok(()) => Ok(()),
            Err(_) => Err(Error::NotFound),
        }
    }

    /// A lock request: set once, or (F_SETLKW, flock without LOCK_NB)
    /// poll until no other owner's lock stops it.
    ///
    /// A waiting request keeps its daemon thread (a FUSE-over-io_uring
    /// thread answers its request before taking the next: the vendored
    /// fuser's PATCHED.md). So at most one request waits per io_uring queue
    /// (each has two threads) and all but one of the /dev/fuse threads;
    /// a further waiter gets ENOLCK at once rather than leave a queue with
    /// no thread, whose requests (the unlock that would free it among
    /// them) would wait behind it. A wait ends with EINTR when the waiting
    /// thread has a signal pending: the kernel does not interrupt a FUSE
    /// request the daemon is serving (fuser answers FUSE_INTERRUPT with
    /// ENOSYS), so the daemon looks in /proc, as `kill` and Ctrl-C expect.
    fn lock(
        &self,
        req: &Request,
        ino: INodeNo,
        lk: Lock,
        typ: i32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        match self.take_lock(req, ino, lk, want(typ), sleep) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    /// A handle for an open file or directory, unique in this mount (an
    /// open file's locks are found by it at its release).
    fn new_fh(&self) -> FileHandle {
        FileHandle(self.next_fh.fetch_add(1, Ordering::Relaxed))
    }

    /// Note a lock request through handle `fh` (`HandleLocks`).
    fn note_lock(&self, fh: FileHandle, ino: INodeNo, owner: Option<u64>) {
        let mut hs = self.handle_locks.lock();
        let h = hs.entry(fh.0).or_insert(HandleLocks {
            ino: ino.0,
            owners: Vec::new(),
            closed: None,
        });
        if let Some(o) = owner.filter(|o| !h.owners.contains(o)) {
            h.owners.push(o);
        }
    }

    /// `look`'s answer (a lock in the way, or none). If it met a lock
    /// while an open file of the inode that holds locks here was closed
    /// in the last `RELEASE_GRACE`, or while a release was being served,
    /// its answer again once those releases are done (at most 1 s): the
    /// kernel sends an open file's release after close(2) returns, in
    /// the background, so a lock test right after another process's last
    /// close would otherwise still meet the flock or OFD lock that close
    /// let go. A lock test that meets a lock pays the wait only then.
    fn after_releases<T>(
        &self,
        ino: INodeNo,
        look: impl Fn() -> Result<Option<T>, Errno>,
    ) -> Result<Option<T>, Errno> {
        let ended = self.releases.1.load(Ordering::Acquire);
        let found = look()?;
        // A release under way, or one that ended during the look (it may
        // have freed the lock after the look read it), or a close just now.
        let pending = || {
            self.releases.0.load(Ordering::Acquire) != self.releases.1.load(Ordering::Acquire)
                || self.handle_locks.lock().values().any(|h| {
                    h.ino == ino.0 && h.closed.is_some_and(|t| t.elapsed() < RELEASE_GRACE)
                })
        };
        if found.is_none() || (!pending() && self.releases.1.load(Ordering::Acquire) == ended) {
            return Ok(found);
        }
        let until = std::time::Instant::now() + Duration::from_secs(1);
        while pending() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        look()
    }

    /// `lock`'s work, its answer as a result.
    fn take_lock(
        &self,
        req: &Request,
        ino: INodeNo,
        lk: Lock,
        want: Want,
        sleep: bool,
    ) -> Result<(), Errno> {
        let once = |fs: &ClusterFs| fs.setlk(ino.0, &lk, want).map_err(|e| errno(&e));
        if self.after_releases(ino, || once(&self.fs))?.is_none() {
            return Ok(());
        }
        if !sleep {
            return Err(Errno::EAGAIN);
        }
        // SAFETY: sched_getcpu reads the calling thread's CPU.
        let queue = if self.uring_on {
            unsafe { libc::sched_getcpu() }
        } else {
            -1
        };
        let room = if self.uring_on {
            1
        } else {
            self.opts.threads.saturating_sub(1).max(1)
        };
        {
            let mut w = self.lock_waits.lock();
            let n = w.entry(queue).or_insert(0);
            if *n >= room {
                tracing::warn!(
                    "a lock wait on inode {} refused with ENOLCK: {} already wait on this FUSE queue \
                     (each holds a daemon thread); retry when a lock is released",
                    ino.0, n
                );
                return Err(Errno::ENOLCK);
            }
            *n += 1;
        }
        let mut pause = std::time::Duration::from_millis(2);
        let r = loop {
            if signal_pending(req.pid()) {
                break Err(Errno::EINTR);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(50));
            match once(&self.fs) {
                Ok(None) => break Ok(()),
                Ok(Some(_)) => {}
                Err(e) => break Err(e),
            }
        };
        *self.lock_waits.lock().get_mut(&queue).unwrap() -= 1;
        r
    }

    /// The timer of request `r` (`req`), for the operation statistics;
    /// None for the requests not timed.
    fn op(r: usize) -> Option<Op> {
        Some(match r {
            req::LOOKUP => Op::Lookup,
            req::GETATTR => Op::Getattr,
            req::SETATTR | req::IOCTL => Op::Setattr,
            req::SETXATTR | req::GETXATTR | req::LISTXATTR | req::REMOVEXATTR => Op::Xattr,
            req::READLINK => Op::Readlink,
            req::MKNOD | req::CREATE => Op::Create,
            req::MKDIR => Op::Mkdir,
            req::SYMLINK => Op::Symlink,
            req::UNLINK => Op::Unlink,
            req::RMDIR => Op::Rmdir,
            req::RENAME => Op::Rename,
            req::LINK => Op::Link,
            req::OPEN => Op::Open,
            req::READ => Op::Read,
            req::WRITE | req::FALLOCATE => Op::Write,
            req::RELEASE => Op::Release,
            req::FSYNC | req::FSYNCDIR => Op::Fsync,
            req::READDIR => Op::Readdir,
            req::STATFS => Op::Statfs,
            _ => return None,
        })
    }
}

/// The FUSE filesystem of an etcd (or TiKV) mount.
pub type ClusterFuse = Adapter<Cluster>;

impl ClusterFuse {
    pub fn new(fs: Arc<ClusterFs>, opts: ClusterOptions) -> ClusterFuse {
        let core = CoreOptions {
            entry_ttl: opts.ttl,
            attr_ttl: opts.ttl,
            // A miss is answered as an error: another mount may create
            // the name at any time.
            negative_ttl: Duration::ZERO,
            threads: opts.threads,
            clone_fd: false,
            uring: opts.uring,
            xattr: true,
            caller: Caller {
                squash: opts.squash,
                daemon_permissions: opts.daemon_permissions,
                kernel_ref: false,
            },
        };
        Adapter::with_mode(Cluster::new(fs, opts), core)
    }

    /// Invalidations sent for other daemons' (and this one's) changes.
    pub fn invalidations(&self) -> Arc<AtomicU64> {
        self.mode().invalidations.clone()
    }

    /// The session's notifier, once mounted: the client server
    /// (crates/cli/src/clients.rs) invalidates what its changes touch.
    pub fn notifier(&self) -> Arc<std::sync::OnceLock<fuser::Notifier>> {
        self.mode().notifier.clone()
    }

    /// What to call once the kernel was told to drop `name` in `parent`
    /// by someone else than this adapter (the client server's changes):
    /// the name the kernel had for the file is forgotten, or the next
    /// lookup of the file's new name would wait for its drop
    /// (`fresh_name`) and answer ENOENT once.
    pub fn name_dropped(&self) -> impl Fn(u64, &[u8]) + Send + Sync + 'static {
        let handed = self.mode().handed.clone();
        move |p, n| handed.lock().forget_name(p, n)
    }
}

/// Drop from the kernel what the change stream says others changed: an
/// entry's name (`inval_entry`), an inode's attributes and pages
/// (`inval_inode`); this daemon's own changes were told by its replies.
/// Runs on its own thread, never a FUSE worker nor the stream's
/// (`shoal_cluster::ClusterFs::subscribe`): the kernel takes the
/// directory's lock for `inval_entry`, and a create holding it may wait
/// for the stream. While the stream is broken nothing comes; the kernel's
/// TTL bounds what was missed.
fn invalidate(
    fs: &ClusterFs,
    changes: &std::sync::mpsc::Receiver<Vec<shoal_cluster::Event>>,
    notifier: &fuser::Notifier,
    counter: &AtomicU64,
    handed: &Mutex<Handed>,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Relaxed) {
        let evs = match changes.recv_timeout(Duration::from_millis(200)) {
            Ok(evs) => evs,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
        };
        for e in evs {
            if fs.is_own(e.rev) {
                continue;
            }
            let k = &e.key;
            let ino_at = |i: usize| u64::from_be_bytes(k[i..i + 8].try_into().unwrap());
            let r = match k.first() {
                Some(b'E') if k.len() > 9 => {
                    let r = notifier.inval_entry(INodeNo(ino_at(1)), OsStr::from_bytes(&k[9..]));
                    handed.lock().forget_name(ino_at(1), &k[9..]);
                    r
                }
                Some(b'I') | Some(b'T') if k.len() == 9 => {
                    notifier.inval_inode(INodeNo(ino_at(1)), 0, 0)
                }
                _ => continue,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            // ENOENT: the kernel did not have it cached; nothing to drop.
            if let Err(err) = r {
                if err.raw_os_error() != Some(libc::ENOENT) {
                    tracing::debug!("invalidation: {err}");
                }
            }
        }
    }
}

impl Cluster {
    /// Whether the daemon checks some callers' permissions: all with
    /// daemon_permissions, a squashed one under root_squash or all_squash.
    fn daemon_checks(&self) -> bool {
        self.opts.daemon_permissions || self.opts.squash != crate::Squash::None
    }
}

impl Mode for Cluster {
    type Ns = ClusterFs;
    type Timer<'a> = Option<shoal_core::stats::Timer<'a>>;

    fn ns(&self) -> &ClusterFs {
        &self.fs
    }

    fn start(&self, r: usize) -> Self::Timer<'_> {
        Cluster::op(r).map(|op| self.fs.stats.op_stats.start(op))
    }

    fn notifier(&self) -> &Arc<OnceLock<fuser::Notifier>> {
        &self.notifier
    }

    fn wants(&mut self, have: InitFlags) -> InitFlags {
        // POSIX ACLs checked by the kernel (its ACL cache is dropped with
        // the attributes when another mount changes the inode), a create's
        // umask applied here unless a default ACL replaces it.
        let mut want = InitFlags::FUSE_POSIX_ACL | InitFlags::FUSE_DONT_MASK;
        if self.opts.daemon_permissions || matches!(self.opts.squash, crate::Squash::All(..)) {
            // FUSE_POSIX_ACL turns the kernel's default_permissions on,
            // which would check each caller's own uid: when the daemon
            // checks them all (daemon_permissions, all_squash as the
            // squashed one), on mode bits, it is off.
            want.remove(InitFlags::FUSE_POSIX_ACL);
        }
        // fcntl and flock locks come here and are kept in the shared
        // store, so they hold across mounts (`shoal_cluster::filelocks`);
        // without these the kernel keeps them per mount.
        want |= InitFlags::FUSE_POSIX_LOCKS | InitFlags::FUSE_FLOCK_LOCKS;
        self.uring_on = self.opts.uring && have.contains(InitFlags::FUSE_OVER_IO_URING);
        want
    }

    fn init(&mut self, _have: InitFlags, config: &mut KernelConfig) {
        self.killpriv = config
            .add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2)
            .is_ok();
    }

    fn truncate_kills_privs(&self) -> bool {
        self.killpriv
    }

    /// A non-root write reads the inode's record (the record cache's
    /// when it holds it) and commits only when a bit must go.
    fn write_kills_privs(&self) -> bool {
        self.killpriv
    }

    fn destroy(&mut self) {
        if let Err(e) = self.fs.close() {
            tracing::error!("ending the session: {e}");
        }
    }

    /// Drops from the kernel's caches what the change stream says others
    /// changed (`invalidate`), and stale names for lookups (`fresh_name`).
    fn background(&self) -> Background {
        let fs = self.fs.clone();
        let counter = self.invalidations.clone();
        let handed = self.handed.clone();
        let changes = fs.subscribe();
        let (drop_tx, drop_rx) = std::sync::mpsc::channel::<DropName>();
        *self.drop_name.lock() = Some(drop_tx);
        Box::new(move |notifier, stop| {
            // Stale names dropped for lookups (`fresh_name`), on a thread of
            // their own: each may wait for a rename's directory locks.
            {
                let notifier = notifier.clone();
                let handed = handed.clone();
                std::thread::Builder::new()
                    .name("shoal-drop-name".into())
                    .spawn(move || {
                        for (p, n, done) in drop_rx {
                            let _ = notifier.inval_entry(INodeNo(p), OsStr::from_bytes(&n));
                            handed.lock().forget_name(p, &n);
                            let _ = done.try_send(());
                        }
                    })?;
            }
            let follower = std::thread::Builder::new()
                .name("shoal-invalidate".into())
                .spawn(move || invalidate(&fs, &changes, &notifier, &counter, &handed, &stop))?;
            Ok(vec![follower])
        })
    }

    fn fattr(&self, a: &Attr) -> FileAttr {
        file_attr(a)
    }

    /// A lookup's file whose old name the kernel may still show is dropped
    /// first (`fresh_name`); each file's name is remembered (`hand`), but
    /// a link's (the file keeps the name it had).
    fn handed(
        &self,
        made: Made,
        parent: u64,
        name: &[u8],
        a: Attr,
        attr_ttl: Duration,
    ) -> shoal_core::Result<(Attr, Duration)> {
        if made == Made::Lookup {
            self.fresh_name(parent, name, &a)?;
        }
        if made != Made::Link {
            self.hand(parent, name, &a);
        }
        Ok((a, attr_ttl))
    }

    /// A directory removed while open here still answers fstat, with no
    /// links, as a local filesystem does.
    fn getattr(&self, ino: u64, attr_ttl: Duration) -> shoal_core::Result<(Attr, Duration)> {
        match self.fs.getattr(ino) {
            Ok(a) => Ok((a, attr_ttl)),
            Err(Error::NotFound) => match self.open_dirs.lock().get(&ino).copied() {
                Some((_, mut a)) => {
                    a.nlink = 0;
                    Ok((a, Duration::ZERO))
                }
                None => Err(Error::NotFound),
            },
            Err(e) => Err(e),
        }
    }

    fn unlinked(&self, parent: u64, name: &[u8]) {
        self.handed.lock().forget_name(parent, name);
    }

    /// The kernel moves its entries: so does `handed` (an exchange swaps
    /// the two; a whiteout is a new inode at the old name).
    fn renamed(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> Vec<(u64, Vec<u8>)> {
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let mut h = self.handed.lock();
        let (old, new) = (h.ino_of(parent, name), h.ino_of(newparent, newname));
        h.forget_name(newparent, newname);
        h.forget_name(parent, name);
        if let Some(ino) = old {
            h.insert(ino, newparent, newname);
        }
        if let Some(ino) = new.filter(|_| exchange) {
            h.insert(ino, parent, name);
        }
        drop(h);
        // The kernel moves its entry with the lifetime it had: in a
        // directory not everyone may search (`name_ttl`) it must ask again.
        let mut moved = Vec::new();
        if self.daemon_checks() {
            if self.name_ttl(newparent, self.opts.ttl).is_zero() {
                moved.push((newparent, newname.to_vec()));
            }
            if exchange && self.name_ttl(parent, self.opts.ttl).is_zero() {
                moved.push((parent, name.to_vec()));
            }
        }
        moved
    }

    /// A name's lifetime in the kernel: none in a directory not everyone
    /// may search when the daemon checks some callers (daemon_permissions,
    /// a squash), as on an embedded mount: the kernel checks nothing, or
    /// checks the caller's own uid, on a walk through names it keeps, so a
    /// name kept for one caller would let a checked one through
    /// (docs/design.md, "Who checks"). The parent's record is the record
    /// cache's when it holds it (a lookup by a checked caller just read it).
    fn name_ttl(&self, parent: u64, ttl: Duration) -> Duration {
        if !self.daemon_checks() {
            return ttl;
        }
        match self.fs.getattr(parent) {
            Ok(p) if shoal_core::rules::perm::all_may_search(&p) => ttl,
            _ => Duration::ZERO,
        }
    }

    fn closes_search(&self, ino: u64, mode: Option<u32>) -> bool {
        self.daemon_checks()
            && mode.is_some_and(|m| m & 0o111 != 0o111)
            && self
                .fs
                .getattr(ino)
                .is_ok_and(|a| a.kind == Kind::Dir && shoal_core::rules::perm::all_may_search(&a))
    }

    /// `adapter::forget_below`, the directory's name found in its parent's
    /// listing (its record names the parent). Until 2026-11-28 an etcd
    /// mount left the names for their lifetime (1 s): squashed root read a
    /// file in another's directory just made 0700 (etcd-secure.sh in CI).
    fn forget_names_below(&self, dir: u64) {
        let parent = match self.fs.parent_of(dir) {
            Ok(0) => dir,
            Ok(p) => p,
            Err(_) => return,
        };
        let fs = self.fs.clone();
        let mut after: Option<Vec<u8>> = None;
        let pages: crate::adapter::Pages = Box::new(move || {
            let page = fs.readdir(parent, after.as_deref(), 1024).ok()?;
            after = page.last().map(|(name, _, _)| name.clone());
            Some(page.into_iter().map(|(name, ino, _)| (name, ino)).collect())
        });
        let counter = self.invalidations.clone();
        crate::adapter::forget_below(&self.notifier, dir, parent, pages, move || {
            counter.fetch_add(1, Ordering::Relaxed);
        });
    }

    fn forget_names(&self, names: Vec<(u64, Vec<u8>)>) {
        let counter = self.invalidations.clone();
        crate::adapter::forget_later(&self.notifier, names, move || {
            counter.fetch_add(1, Ordering::Relaxed);
        });
    }

    fn drop_privileges(
        &self,
        uid: u32,
        gid: u32,
        groups: &dyn Fn() -> Vec<u32>,
        ino: u64,
    ) -> shoal_core::Result<bool> {
        self.fs.drop_privileges(uid, gid, groups, ino)
    }

    fn flags(&self, ino: u64) -> shoal_core::Result<u32> {
        self.fs.flags(ino)
    }

    /// Kept in the inode record, so a flag set on one mount holds on every
    /// other.
    fn set_flags(&self, ctx: &Ctx, ino: u64, flags: u32) -> shoal_core::Result<()> {
        self.fs.set_flags(ctx, ino, flags).map(drop)
    }

    /// The stores' own figures (`shoal_cluster::space`).
    fn statfs(&self) -> shoal_core::Result<StatFs> {
        self.fs.statfs()
    }

    fn seek(&self, ino: u64, off: u64, data: bool) -> shoal_core::Result<u64> {
        self.fs.seek(ino, off, data)
    }

    fn fallocate(&self, ino: u64, off: u64, len: u64, mode: u32) -> shoal_core::Result<()> {
        self.fs.fallocate(ino, off, len, mode)
    }

    fn create(&self, ctx: &Ctx, parent: u64, name: &[u8], mode: u32) -> shoal_core::Result<Attr> {
        let new = NewNode {
            kind: Kind::File,
            perm: (mode & 0o7777) as u16,
            rdev: 0,
            target: b"",
        };
        let a = self.fs.mknod(ctx, parent, name, &new)?;
        self.fs.open_new(a.ino);
        Ok(a)
    }

    /// `shoal_cluster::ClusterFs::tmpfile`: linkat may name it.
    fn tmpfile(&self, ctx: &Ctx, parent: u64, mode: u32) -> shoal_core::Result<Attr> {
        self.fs.tmpfile(ctx, parent, (mode & 0o7777) as u16)
    }

    fn created(
        &self,
        _a: &Attr,
        _flags: i32,
        _reply: &fuser::ReplyCreate,
    ) -> (FileHandle, FopenFlags, Option<Arc<fuser::BackingId>>) {
        (self.new_fh(), FopenFlags::empty(), None)
    }

    fn open_existing(&self, ctx: &Ctx, ino: u64, flags: i32) -> shoal_core::Result<()> {
        let mask = shoal_core::rules::perm::open_access(flags);
        let (append, trunc) = (flags & libc::O_APPEND != 0, flags & libc::O_TRUNC != 0);
        self.fs.open_for(ctx, ino, mask, append, trunc).map(drop)
    }

    fn close_existing(&self, ino: u64) {
        let _ = self.fs.release(ino);
    }

    fn open(&self, ctx: &Ctx, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mask = shoal_core::rules::perm::open_access(flags.0);
        // chattr's immutable and append-only (`rules::flags::may_open`).
        let (append, trunc) = (flags.0 & libc::O_APPEND != 0, flags.0 & libc::O_TRUNC != 0);
        match self.fs.open_for(ctx, ino.0, mask, append, trunc) {
            Ok(_) => reply.opened(self.new_fh(), FopenFlags::empty()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn write(&self, ino: u64, off: u64, data: &[u8], _cached: bool) -> shoal_core::Result<u32> {
        let r = self.fs.write(ino, off, data);
        if let Err(Error::FileTooBig) = r {
            tracing::warn!(
                "inode {}: a write past {} bytes, and this filesystem has no object store for file data (make one with `shoal mkfs etcd://... --data s3://BUCKET?endpoint=...`)",
                ino,
                shoal_cluster::ns::SHARED_INLINE_MAX
            );
        }
        r
    }

    /// close(2): the file's buffered writes are uploaded and committed, so
    /// that close reports their failure and another mount's next open sees
    /// them (close-to-open).
    fn flush(&self, ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty) {
        // A close by a POSIX lock's owner releases its locks on the file.
        let unlocked = self.fs.unlock_owner(ino.0, lock_owner.0, false);
        {
            let mut hs = self.handle_locks.lock();
            for (h_fh, h) in hs.iter_mut().filter(|(_, h)| h.ino == ino.0) {
                h.owners.retain(|&o| o != lock_owner.0);
                if *h_fh == fh.0 {
                    h.closed = Some(std::time::Instant::now());
                }
            }
        }
        reply_empty(reply, unlocked.and(self.fs.flush(ino.0)))
    }

    fn release(&self, ino: INodeNo, fh: FileHandle, flock: Option<LockOwner>, reply: ReplyEmpty) {
        self.releases.0.fetch_add(1, Ordering::AcqRel);
        // The open file's last close releases its flock.
        let mut unlocked = match flock {
            Some(o) => self.fs.unlock_owner(ino.0, o.0, true),
            None => Ok(()),
        };
        // And its open-file-description locks (F_OFD_SETLK). The kernel
        // sends them as POSIX locks owned by the open file and says
        // nothing at its last close, but an owner that locked through this
        // handle and never closed the file since (every close flushes with
        // the closing process's owner, and that flush forgets it) is one.
        let ofd = self.handle_locks.lock().remove(&fh.0);
        for o in ofd.map(|h| h.owners).unwrap_or_default() {
            unlocked = unlocked.and(self.fs.unlock_owner(ino.0, o, false));
        }
        self.releases.1.fetch_add(1, Ordering::AcqRel);
        // The handle goes whatever the flush says (its count keeps an
        // unlinked file alive); the flush's error, if any, is the answer.
        let flushed = unlocked.and(self.fs.flush(ino.0));
        let released = self.fs.release(ino.0);
        reply_empty(reply, flushed.and(released))
    }

    /// A file's buffered writes are uploaded and committed now, and every
    /// create acknowledged from memory in a leased directory before.
    fn fsync(&self, ino: u64, _datasync: bool) -> shoal_core::Result<()> {
        self.fs.fsync(ino)
    }

    fn opendir(&self, ctx: &Ctx, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // Listing needs read permission (checked here when the daemon checks).
        let r = self.fs.getattr(ino.0).and_then(|a| {
            shoal_core::rules::perm::access(ctx, &a, shoal_core::rules::perm::R_OK)?;
            Ok(a)
        });
        match r {
            Ok(a) if a.kind == Kind::Dir => {
                let mut open = self.open_dirs.lock();
                let e = open.entry(ino.0).or_insert((0, a));
                *e = (e.0 + 1, a);
                drop(open);
                let fh = self.new_fh().0;
                reply.opened(FileHandle(fh), FopenFlags::empty())
            }
            Ok(_) => reply.error(errno(&Error::NotDir)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(&self, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let mut dirs = self.dirs.lock();
        if offset == 0 || !dirs.contains_key(&fh.0) {
            // The listing, whole, at the first call (a directory read from
            // the start sees one snapshot).
            let mut all = Vec::new();
            let mut after: Option<Vec<u8>> = None;
            loop {
                match self.fs.readdir(ino.0, after.as_deref(), 1000) {
                    Ok(v) => {
                        let done = v.len() < 1000;
                        after = v.last().map(|e| e.0.clone());
                        all.extend(v);
                        if done {
                            break;
                        }
                    }
                    Err(e) => return reply.error(errno(&e)),
                }
            }
            dirs.insert(fh.0, all);
        }
        let list = &dirs[&fh.0];
        // ".." with the directory's own number: the kernel answers ".." itself.
        let parent = ino.0;
        let mut i = offset;
        loop {
            let full = match i {
                0 => reply.add(ino, 1, FileType::Directory, "."),
                1 => reply.add(INodeNo(parent), 2, FileType::Directory, ".."),
                n => match list.get(n as usize - 2) {
                    Some((name, child, k)) => {
                        reply.add(INodeNo(*child), n + 1, kind(*k), OsStr::from_bytes(name))
                    }
                    None => break,
                },
            };
            if full {
                break;
            }
            i += 1;
        }
        reply.ok()
    }

    fn releasedir(&self, ino: INodeNo, fh: FileHandle, reply: ReplyEmpty) {
        self.dirs.lock().remove(&fh.0);
        let mut open = self.open_dirs.lock();
        if let Some(e) = open.get_mut(&ino.0) {
            e.0 -= 1;
            if e.0 == 0 {
                open.remove(&ino.0);
            }
        }
        drop(open);
        reply.ok()
    }

    /// Every create acknowledged from memory is committed (other
    /// operations were committed before they answered).
    fn fsyncdir(&self, _ino: u64) -> shoal_core::Result<()> {
        self.fs.fsyncdir()
    }

    fn locks(&self) -> Option<&dyn Locks> {
        Some(self)
    }
}

/// fcntl and flock locks across mounts (`shoal_cluster::filelocks`).
impl Locks for Cluster {
    fn getlk(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        let lk = fuse_lock(lock_owner, false, typ, start, end, pid);
        match self.after_releases(ino, || self.fs.getlk(ino.0, &lk).map_err(|e| errno(&e))) {
            Ok(Some(l)) => reply.locked(
                l.start,
                l.end,
                if l.write {
                    libc::F_WRLCK
                } else {
                    libc::F_RDLCK
                },
                l.pid,
            ),
            Ok(None) => reply.locked(start, end, libc::F_UNLCK, 0),
            Err(e) => reply.error(e),
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
        let lk = fuse_lock(lock_owner, false, typ, start, end, pid);
        if typ != libc::F_UNLCK {
            self.note_lock(fh, ino, Some(lock_owner.0));
        }
        self.lock(req, ino, lk, typ, sleep, reply)
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
        if typ != libc::F_UNLCK {
            self.note_lock(fh, ino, None);
        }
        let lk = fuse_lock(lock_owner, true, typ, 0, i64::MAX as u64, pid);
        self.lock(req, ino, lk, typ, sleep, reply)
    }
}

/// A FUSE lock request's lock (flock: the whole file, owned by the open
/// file; else a POSIX range owned by the process's file table).
fn fuse_lock(owner: LockOwner, flock: bool, typ: i32, start: u64, end: u64, pid: u32) -> Lock {
    Lock {
        owner: owner.0,
        flock,
        write: typ == libc::F_WRLCK,
        start,
        end,
        pid,
    }
}

fn want(typ: i32) -> Want {
    match typ {
        libc::F_RDLCK => Want::Read,
        libc::F_WRLCK => Want::Write,
        _ => Want::Unlock,
    }
}

/// Whether thread `tid` has a signal pending that it does not block
/// (`/proc/TID/status`: SigPnd, the thread's own, and ShdPnd, its
/// process's). A thread that is gone counts as signalled.
fn signal_pending(tid: u32) -> bool {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return true;
    };
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    (field("SigPnd:") | field("ShdPnd:")) & !field("SigBlk:") != 0
}
