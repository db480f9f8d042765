//! The client server: `client.sock` in the mount's run directory, where
//! programs reach the daemon without FUSE (docs/client.md; the client and
//! the protocol are `crates/client`).
//!
//! Each connection gets a sealed memfd region of its own and a thread of
//! its own (at most `max` at once), which serves its calls one at a time:
//! copy the request out of the region, decode it (anything malformed is
//! EINVAL), walk its path from the root or one of the connection's
//! directory handles, call the namespace with the connection's `Ctx`
//! (credentials from the kernel, `SO_PEERCRED` and `SO_PEERGROUPS`, squashed
//! as the mount squashes; `check_perms` on: nothing checked before the
//! daemon), tell the kernel to drop what it cached of what changed, answer.
//!
//! The invalidations are sent after the operation returned, so no engine
//! lock is held while the kernel takes the directory's inode lock for them:
//! a FUSE request that holds that lock and waits on the engine finishes
//! first (docs/client.md, "No deadlock").
//!
//! Handles (open files, directories) belong to their connection; a
//! connection's end (the client closed it, or died) closes them, as a
//! close would: the file's size and time taken from its data object, the
//! object unpinned.

use shoal_client::proto::{self, Answer, Op, Request, Stat};
use shoal_client::region::{self, Region};
use shoal_core::engine::{SetAttr, TimeSet, OPEN_APPEND, OPEN_TRUNC, R_OK, W_OK, X_OK};
use shoal_core::{Attr, Ctx, DirEntry, Engine, Error, Ino, Kind, Result, Ts, ROOT_INO};
use shoal_fuse::fuser::{self, INodeNo};
use shoal_fuse::Squash;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use shoal_client::SOCKET;

/// What the server needs beyond the namespace surface both modes answer
/// (`shoal_core::Namespace`): a directory's entries page by page, what a
/// stat says of blocks, and file data. The embedded engine hands the
/// client a file's data object (`data`); a namespace on etcd keeps file
/// data in an object store, so an open there answers "continue on the
/// mount at this path" and the caller opens the file through the kernel
/// (the shim falls through; docs/client.md, "etcd mounts").
pub trait Backend: shoal_core::Namespace + 'static {
    /// A page of `dir`'s entries after `cookie` (0: the first), `.` and
    /// `..` left out; each entry's cookie continues after it.
    fn entries(&self, ctx: &Ctx, dir: Ino, cookie: u64) -> Result<Vec<DirEntry>>;
    /// The bytes a file takes (a stat's blocks).
    fn allocated(&self, a: &Attr) -> u64;
    /// opendir(2): read permission on the directory.
    fn open_dir(&self, ctx: &Ctx, ino: Ino) -> Result<()>;
    /// syncfs.
    fn sync(&self) -> Result<()>;
    /// The engine whose data objects an open hands out; `None`: opens of
    /// files continue on the mount.
    fn data(&self) -> Option<&Engine>;
}

impl Backend for Engine {
    fn entries(&self, _ctx: &Ctx, dir: Ino, cookie: u64) -> Result<Vec<DirEntry>> {
        let mut cookie = cookie;
        loop {
            let page = self.readdir(dir, cookie, 1024)?;
            let Some(last) = page.last() else {
                return Ok(page);
            };
            cookie = last.cookie;
            let v: Vec<DirEntry> = page
                .into_iter()
                .filter(|d| d.name != b"." && d.name != b"..")
                .collect();
            if !v.is_empty() {
                return Ok(v);
            }
        }
    }
    fn allocated(&self, a: &Attr) -> u64 {
        Engine::allocated(self, a)
    }
    fn open_dir(&self, ctx: &Ctx, ino: Ino) -> Result<()> {
        Engine::open_dir(self, ctx, ino, R_OK).map(|_| ())
    }
    fn sync(&self) -> Result<()> {
        Engine::sync(self)
    }
    fn data(&self) -> Option<&Engine> {
        Some(self)
    }
}

impl Backend for shoal_cluster::ns::ClusterFs {
    /// The whole directory, sorted by name (`Namespace::list`), from the
    /// entry after the `cookie`th: a cookie is a position.
    fn entries(&self, ctx: &Ctx, dir: Ino, cookie: u64) -> Result<Vec<DirEntry>> {
        let all = shoal_core::Namespace::list(self, ctx, dir)?;
        Ok(all
            .into_iter()
            .enumerate()
            .skip(cookie as usize)
            .map(|(i, (name, ino, kind))| DirEntry {
                name,
                ino,
                kind,
                cookie: i as u64 + 1,
            })
            .collect())
    }
    fn allocated(&self, a: &Attr) -> u64 {
        a.size.div_ceil(4096) * 4096
    }
    fn open_dir(&self, ctx: &Ctx, ino: Ino) -> Result<()> {
        if shoal_core::Namespace::getattr(self, ctx, ino)?.kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        shoal_core::Namespace::access(self, ctx, ino, R_OK)
    }
    fn sync(&self) -> Result<()> {
        self.fsyncdir()
    }
    fn data(&self) -> Option<&Engine> {
        None
    }
}

/// Connections and calls, for `shoal stats` (`client` in its JSON).
#[derive(Default)]
pub struct Counters {
    pub connections: AtomicU64,
    pub refused: AtomicU64,
    /// Calls by op code (0: malformed or unknown).
    pub calls: [AtomicU64; 32],
}

impl Counters {
    pub fn json(&self, live: usize) -> serde_json::Value {
        let mut ops = serde_json::Map::new();
        for (i, n) in self.calls.iter().enumerate() {
            let n = n.load(Ordering::Relaxed);
            if n > 0 {
                let name = Op::from_u32(i as u32)
                    .map(|o| format!("{o:?}").to_lowercase())
                    .unwrap_or_else(|| "malformed".into());
                ops.insert(name, n.into());
            }
        }
        serde_json::json!({
            "connections": self.connections.load(Ordering::Relaxed),
            "live": live,
            "refused": self.refused.load(Ordering::Relaxed),
            "calls": ops,
        })
    }
}

/// A name the kernel was told to drop: (directory, name).
pub type Dropped = Box<dyn Fn(Ino, &[u8]) + Send + Sync>;

pub struct Server<N: Backend> {
    pub ns: Arc<N>,
    /// The FUSE session's notifier, once mounted.
    pub notifier: Arc<OnceLock<fuser::Notifier>>,
    pub squash: Squash,
    /// Anyone may connect (`allow_other`); else only the mounting user.
    pub allow_other: bool,
    /// Connections served at once; past it, `connect` is answered by a
    /// close (the client's ECONNREFUSED).
    pub max: usize,
    /// The mount point: an absolute symlink under it is followed inside.
    pub mountpoint: PathBuf,
    pub counters: Arc<Counters>,
    /// Told each name the server made the kernel drop (an etcd mount's
    /// adapter keeps the names it handed the kernel).
    pub dropped: Option<Dropped>,
    /// The mount's register of files clients hold open for writing (an
    /// embedded mount's: `shoal_fuse::embedded::ClientWriters`).
    pub writers: Option<Arc<shoal_fuse::embedded::ClientWriters>>,
    live: AtomicUsize,
    hangups: OnceLock<Arc<Hangups>>,
    spin: Spin,
}

/// A connection whose client has not called for this long after its last
/// answer no longer counts as busy (`Spin`).
const BUSY_MS: u64 = 1;

/// How long clients spin for their answers (`proto::SPIN_HINT`). A client
/// that sleeps costs a futex wake-up per call, the largest part of a call
/// in a VM (docs/client.md, "Spinning"); a client that spins takes a CPU.
/// So clients spin long only while every busy connection's client and
/// server thread can each have a CPU: busy connections (their client
/// called within BUSY_MS of its last answer) times two at most the CPUs.
/// C crunl under the shim, 1 process / 2 processes, on a 2-CPU VM: a 4 us
/// spin 6,923-8,848 / 13,969-16,278 pairs/s, 100 us 11,349-12,511 /
/// 6,813-8,498 (the store on ext4 with a journal, 2026-11-29).
struct Spin {
    /// Connections whose client called within BUSY_MS of its last answer.
    busy: AtomicUsize,
    cpus: usize,
}

struct SpinGuard<'a>(&'a AtomicUsize, bool);

impl Drop for SpinGuard<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0.fetch_sub(1, Ordering::Relaxed);
        } else {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Spin {
    fn new() -> Spin {
        Spin {
            busy: AtomicUsize::new(0),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// A connection's thread is busy until the guard drops.
    fn busy(&self) -> SpinGuard<'_> {
        self.busy.fetch_add(1, Ordering::Relaxed);
        SpinGuard(&self.busy, true)
    }

    /// ... and idle (asleep) until this one drops.
    fn idle(&self) -> SpinGuard<'_> {
        self.busy.fetch_sub(1, Ordering::Relaxed);
        SpinGuard(&self.busy, false)
    }

    fn hint(&self) -> u32 {
        if self.busy.load(Ordering::Relaxed) * 2 <= self.cpus {
            proto::CLIENT_SPIN_LONG_NS
        } else {
            0
        }
    }
}

/// The connections' sockets under one epoll, watched by a thread of its
/// own: a client's hang-up (its last holder gone: an exit, a kill) wakes
/// the connection's server thread at once, which closes its handles, so
/// what the client wrote through its descriptors reaches stat without
/// waiting for the thread's next poll.
struct Hangups {
    ep: std::os::fd::OwnedFd,
    regions: std::sync::Mutex<HashMap<u64, Arc<Region>>>,
    next: AtomicU64,
}

impl Hangups {
    fn start() -> std::io::Result<Arc<Hangups>> {
        use rustix::event::epoll;
        let h = Arc::new(Hangups {
            ep: epoll::create(epoll::CreateFlags::CLOEXEC)?,
            regions: Default::default(),
            next: AtomicU64::new(1),
        });
        let w = h.clone();
        std::thread::Builder::new()
            .name("shoal-client-hup".into())
            .spawn(move || {
                let mut buf = [std::mem::MaybeUninit::<epoll::Event>::uninit(); 64];
                loop {
                    let Ok((evs, _)) = epoll::wait(&w.ep, &mut buf, None) else {
                        continue;
                    };
                    let regions = w.regions.lock().unwrap_or_else(|e| e.into_inner());
                    for e in evs.iter() {
                        if let Some(r) = regions.get(&e.data.u64()) {
                            r.wake();
                        }
                    }
                }
            })?;
        Ok(h)
    }

    fn add(&self, sock: &UnixStream, region: Arc<Region>) -> Option<u64> {
        use rustix::event::epoll;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.regions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, region);
        // Level-triggered: until the thread has seen it and gone.
        let flags = epoll::EventFlags::RDHUP | epoll::EventFlags::HUP;
        match epoll::add(&self.ep, sock, epoll::EventData::new_u64(id), flags) {
            Ok(()) => Some(id),
            Err(_) => {
                self.remove(sock, id);
                None
            }
        }
    }

    fn remove(&self, sock: &UnixStream, id: u64) {
        let _ = rustix::event::epoll::delete(&self.ep, sock);
        self.regions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }
}

impl<N: Backend> Server<N> {
    pub fn new(
        ns: Arc<N>,
        notifier: Arc<OnceLock<fuser::Notifier>>,
        squash: Squash,
        allow_other: bool,
        mountpoint: PathBuf,
    ) -> Server<N> {
        Server {
            ns,
            notifier,
            squash,
            allow_other,
            max: 256,
            mountpoint,
            counters: Arc::default(),
            dropped: None,
            writers: None,
            live: AtomicUsize::new(0),
            hangups: OnceLock::new(),
            spin: Spin::new(),
        }
    }

    /// Listen on `dir/client.sock` (mode 0600, 0666 with `allow_other`)
    /// on a thread of its own.
    pub fn listen(self: Arc<Self>, dir: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(SOCKET);
        let _ = std::fs::remove_file(&path);
        let l = UnixListener::bind(&path)?;
        let _ = self.hangups.set(Hangups::start()?);
        let mode = if self.allow_other { 0o666 } else { 0o600 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        std::thread::Builder::new()
            .name("shoal-clients".into())
            .spawn(move || {
                for c in l.incoming() {
                    match c {
                        Ok(c) => self.clone().accept(c),
                        Err(e) => tracing::warn!("client socket: {e}"),
                    }
                }
            })?;
        Ok(())
    }

    fn accept(self: Arc<Self>, c: UnixStream) {
        let cred = match rustix::net::sockopt::socket_peercred(&c) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("client socket: SO_PEERCRED: {e}");
                return;
            }
        };
        let (uid, gid) = (cred.uid.as_raw(), cred.gid.as_raw());
        // The kernel refuses everyone but the mounting user on a mount
        // without allow_other (root too): so does this socket.
        if !self.allow_other && uid != rustix::process::geteuid().as_raw() {
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.live.fetch_add(1, Ordering::AcqRel) >= self.max {
            self.live.fetch_sub(1, Ordering::AcqRel);
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let groups = region::peer_groups(&c).unwrap_or_default();
        let (uid, gid, squashed) = self.squash.map(uid, gid);
        let ctx = Ctx {
            uid,
            gid,
            groups: if squashed { vec![] } else { groups },
            check_perms: true,
            umask: 0,
            kernel_ref: false,
        };
        self.counters.connections.fetch_add(1, Ordering::Relaxed);
        let s = self.clone();
        let r = std::thread::Builder::new()
            .name("shoal-client".into())
            .spawn(move || {
                if let Err(e) = s.serve(c, ctx) {
                    tracing::debug!("client connection: {e}");
                }
                s.live.fetch_sub(1, Ordering::AcqRel);
            });
        if r.is_err() {
            self.live.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// One connection, until its client hangs up.
    fn serve(&self, c: UnixStream, ctx: Ctx) -> std::io::Result<()> {
        let (region, memfd) = Region::create()?;
        let region = Arc::new(region);
        let mut hello = [0u8; proto::HELLO];
        hello[..4].copy_from_slice(&proto::VERSION.to_ne_bytes());
        hello[4..].copy_from_slice(&(proto::REGION as u64).to_ne_bytes());
        region::send_fd(&c, &hello, &memfd)?;
        drop(memfd);
        let watched = self
            .hangups
            .get()
            .and_then(|h| Some((h, h.add(&c, region.clone())?)));
        let mut conn = Conn {
            ctx,
            handles: HashMap::new(),
            next: 1,
        };
        let mut buf = Vec::new();
        let _busy = self.spin.busy();
        loop {
            // Busy while its client calls within BUSY_MS of the last
            // answer (spinning, then asleep); idle after (`Spin`).
            let alive = region.wait_for(
                proto::REQUEST,
                proto::SERVER_SLEEPS,
                proto::spin_ns(true),
                Duration::from_millis(BUSY_MS),
                || false,
            ) || {
                let _idle = self.spin.idle();
                region.wait_for(
                    proto::REQUEST,
                    proto::SERVER_SLEEPS,
                    0,
                    Duration::from_millis(proto::SERVER_POLL_MS),
                    || region::peer_alive(&c),
                )
            };
            if !alive {
                break;
            }
            // The request's own copy, first: the client may change the
            // region meanwhile. Its lengths say how much to copy (4 KiB
            // first: most requests); the decode checks every length
            // against what was copied. Copying the whole 1 MiB slot made
            // the ping 195-220 us, against 144-152 us with this
            // (back-to-back runs, docs/BENCHMARKS.md).
            let mut want = 4096;
            let size = loop {
                region.copy_out(want, &mut buf);
                match proto::request_size(&buf) {
                    // More than was copied: copy again, as far as needed
                    // (once: the lengths grow only if the client changes
                    // them meanwhile, and then twice at most per string).
                    Err(Some(n)) if n > buf.len() && n <= proto::SLOT => want = n,
                    Err(_) => break None,
                    Ok(n) => break Some(n),
                }
            };
            let decoded = size
                .ok_or(proto::Malformed)
                .and_then(|n| Request::decode(&buf[..n]));
            let (ans, fd) = match decoded {
                Ok(req) => self.call(&mut conn, &req),
                Err(proto::Malformed) => {
                    self.counters.calls[0].fetch_add(1, Ordering::Relaxed);
                    (Answer::err(libc::EINVAL), None)
                }
            };
            let ans = Answer {
                fd: fd.is_some(),
                ..ans
            };
            // SAFETY: the state word is REQUEST: the slot is the server's
            // until it says ANSWER.
            ans.encode(unsafe { region.slot() });
            region.set_spin_hint(self.spin.hint());
            if let Some(fd) = fd {
                // Before the state word: the client's receive never waits.
                if region::send_fd(&c, &[0], fd.as_fd()).is_err() {
                    break;
                }
            }
            region.post(proto::ANSWER, proto::CLIENT_SLEEPS);
        }
        if let Some((h, id)) = watched {
            h.remove(&c, id);
        }
        self.close_all(&mut conn);
        Ok(())
    }

    /// `shoal stats`'s `client` object.
    pub fn stats(&self) -> serde_json::Value {
        self.counters.json(self.live.load(Ordering::Relaxed))
    }

    /// The engine for an operation on a handed-out file (only the
    /// embedded engine hands them out).
    fn engine(&self) -> Result<&Engine> {
        self.ns.data().ok_or(Error::Invalid)
    }

    fn inval_entry(&self, parent: Ino, name: &[u8]) {
        if let Some(n) = self.notifier.get() {
            let _ = n.inval_entry(INodeNo(parent), OsStr::from_bytes(name));
        }
        if let Some(f) = &self.dropped {
            f(parent, name);
        }
    }

    /// Drop the kernel's attributes of `ino` (and with `pages`, its cached
    /// pages: the client wrote the data object behind them).
    fn inval_inode(&self, ino: Ino, pages: bool) {
        if let Some(n) = self.notifier.get() {
            let _ = n.inval_inode(INodeNo(ino), if pages { 0 } else { -1 }, 0);
        }
    }

    fn stat(&self, a: &Attr) -> Stat {
        let t = |t: Ts| (t.sec, t.nsec);
        Stat {
            ino: a.ino,
            mode: a.mode(),
            nlink: a.nlink,
            uid: a.uid,
            gid: a.gid,
            rdev: a.rdev,
            size: a.size,
            blocks: self.ns.allocated(a).div_ceil(512),
            atime: t(a.atime),
            mtime: t(a.mtime),
            ctime: t(a.ctime),
            blksize: 4096,
        }
    }

    /// The base directory of a request's path: the root, or a directory
    /// handle of this connection.
    fn base(&self, conn: &Conn, dir: u64, path: &[u8]) -> Result<Ino> {
        if dir == 0 || path.first() == Some(&b'/') {
            return Ok(ROOT_INO);
        }
        match conn.handles.get(&dir) {
            Some(Handle::Dir(ino, _)) => Ok(*ino),
            _ => Err(Error::Invalid),
        }
    }

    /// Walk `path` from `base` to its last component: (parent, name); the
    /// name is empty for the base itself (`""`, `"/"`, `"."`). Symlinks on
    /// the way are followed (inside the mount; an absolute one elsewhere is
    /// `Walk::Outside`), 40 at most, as Linux's ELOOP.
    fn walk(&self, ctx: &Ctx, base: Ino, path: &[u8]) -> std::result::Result<Walk, Fail> {
        let mut cur = base;
        let mut todo: Vec<u8> = path.to_vec();
        let mut links = 0;
        loop {
            let trimmed = todo.strip_prefix(b"/").map(<[u8]>::to_vec);
            if let Some(t) = trimmed {
                cur = ROOT_INO;
                todo = t;
                continue;
            }
            // Split off the first component.
            let (first, rest) = match todo.iter().position(|c| *c == b'/') {
                Some(i) => (todo[..i].to_vec(), todo[i + 1..].to_vec()),
                None => (todo.clone(), Vec::new()),
            };
            let rest_empty = rest.iter().all(|c| *c == b'/');
            if first.is_empty() || first == b"." {
                if rest_empty {
                    return Ok(Walk::At(cur, Vec::new()));
                }
                todo = rest;
                continue;
            }
            if rest_empty {
                return Ok(Walk::At(cur, first));
            }
            let a = self.ns.lookup(ctx, cur, &first)?;
            match a.kind {
                Kind::Dir => {
                    cur = a.ino;
                    todo = rest;
                }
                Kind::Symlink => {
                    links += 1;
                    if links > 40 {
                        return Err(Fail::Errno(libc::ELOOP));
                    }
                    let target = self.ns.readlink(ctx, a.ino)?;
                    let mut next = target.clone();
                    next.push(b'/');
                    next.extend_from_slice(&rest);
                    if target.first() == Some(&b'/') {
                        match self.inside(&next) {
                            Some(p) => {
                                cur = ROOT_INO;
                                todo = p;
                            }
                            None => return Ok(Walk::Outside(next)),
                        }
                    } else {
                        todo = next;
                    }
                }
                _ => return Err(Error::NotDir.into()),
            }
        }
    }

    /// An absolute path under the mount point, relative to it.
    fn inside(&self, p: &[u8]) -> Option<Vec<u8>> {
        let m = self.mountpoint.as_os_str().as_bytes();
        let rest = p.strip_prefix(m)?;
        (rest.is_empty() || rest[0] == b'/').then(|| rest.to_vec())
    }

    /// The inode a path names, following a symlink at the end if `follow`.
    fn resolve(
        &self,
        conn: &Conn,
        dir: u64,
        path: &[u8],
        follow: bool,
    ) -> std::result::Result<Resolved, Fail> {
        let mut base = self.base(conn, dir, path)?;
        let mut path = path.to_vec();
        for _ in 0..=40 {
            let (parent, name) = match self.walk(&conn.ctx, base, &path)? {
                Walk::At(p, n) => (p, n),
                Walk::Outside(p) => return Ok(Resolved::Outside(p)),
            };
            let a = if name.is_empty() {
                self.ns.getattr(&conn.ctx, parent)?
            } else {
                self.ns.lookup(&conn.ctx, parent, &name)?
            };
            if a.kind != Kind::Symlink || !follow {
                return Ok(Resolved::Inode(a, parent, name));
            }
            let target = self.ns.readlink(&conn.ctx, a.ino)?;
            if target.first() == Some(&b'/') {
                match self.inside(&target) {
                    Some(p) => {
                        base = ROOT_INO;
                        path = p;
                    }
                    None => return Ok(Resolved::Outside(target)),
                }
            } else {
                base = parent;
                path = target;
            }
        }
        Err(Fail::Errno(libc::ELOOP))
    }

    /// A request's path under the mount, from its root ("/a/b"): the
    /// directory handle's path joined with a relative one.
    fn path_of(&self, conn: &Conn, dir: u64, path: &[u8]) -> Vec<u8> {
        let mut at = match conn.handles.get(&dir) {
            Some(Handle::Dir(_, p)) if path.first() != Some(&b'/') => p.clone(),
            _ => Vec::new(),
        };
        if path.first() != Some(&b'/') {
            at.push(b'/');
        }
        at.extend_from_slice(path);
        at
    }

    /// (parent, name) for an operation on a name: the last component is
    /// never followed. The base itself has no name here: EINVAL... as
    /// Linux answers mkdir("/") EEXIST and unlink(".") EISDIR, the name
    /// rules do that with the name ".".
    fn parent(
        &self,
        conn: &Conn,
        dir: u64,
        path: &[u8],
    ) -> std::result::Result<(Ino, Vec<u8>), Fail> {
        let base = self.base(conn, dir, path)?;
        match self.walk(&conn.ctx, base, path)? {
            Walk::At(p, n) if n.is_empty() => Ok((p, b".".to_vec())),
            Walk::At(p, n) => Ok((p, n)),
            Walk::Outside(p) => Err(Fail::Outside(p)),
        }
    }

    fn call(&self, conn: &mut Conn, req: &Request) -> (Answer, Option<std::os::fd::OwnedFd>) {
        let op = Op::from_u32(req.op);
        let slot = op
            .map_or(0, |o| o as usize)
            .min(self.counters.calls.len() - 1);
        self.counters.calls[slot].fetch_add(1, Ordering::Relaxed);
        let Some(op) = op else {
            return (Answer::err(libc::EINVAL), None);
        };
        let mut fd = None;
        let r = self.op(conn, op, req, &mut fd);
        match r {
            Ok(a) => (a, fd),
            Err(Fail::Engine(e)) => (Answer::err(shoal_fuse::errno(&e).code()), None),
            Err(Fail::Errno(e)) => (Answer::err(e), None),
            Err(Fail::Outside(p)) => (
                Answer {
                    errno: proto::OUTSIDE,
                    data: p,
                    ..Default::default()
                },
                None,
            ),
        }
    }

    fn op(
        &self,
        conn: &mut Conn,
        op: Op,
        req: &Request,
        fd: &mut Option<std::os::fd::OwnedFd>,
    ) -> std::result::Result<Answer, Fail> {
        let e = &*self.ns;
        let path = &req.s[0];
        let follow = req.flags & proto::FOLLOW != 0;
        let umask = (req.a[1] as u32) & 0o777;
        let mut ans = Answer::default();
        match op {
            Op::Ping => {}
            Op::Stat => {
                let (mut a, _, _) = self.resolve(conn, req.dir, path, follow)?.inode()?;
                // A file a client holds for writing: what it wrote, as the
                // mount's GETATTR answers.
                if let (Some(w), Some(e)) = (&self.writers, self.ns.data()) {
                    if a.kind == Kind::File && w.refresh(e, a.ino) {
                        a = e.getattr(a.ino)?;
                    }
                }
                ans.stat = self.stat(&a);
            }
            Op::Mkdir | Op::Create => {
                let (p, name) = self.parent(conn, req.dir, path)?;
                let ctx = Ctx {
                    umask,
                    ..conn.ctx.clone()
                };
                let perm = (req.a[0] as u32) & 0o7777;
                let a = if op == Op::Mkdir {
                    e.mkdir(&ctx, p, &name, perm)?
                } else {
                    e.create(&ctx, p, &name, perm)?
                };
                self.inval_entry(p, &name);
                self.inval_inode(p, false);
                ans.stat = self.stat(&a);
            }
            Op::Open => return self.open(conn, req, fd),
            Op::Close => {
                let h = conn.handles.remove(&req.a[0]).ok_or(Error::Invalid)?;
                self.close(h)?;
            }
            Op::Fsync => match conn.handles.get_mut(&req.a[0]) {
                Some(Handle::File(f)) => {
                    let e = self.engine()?;
                    e.refresh_from_data(f.ino, &mut f.seen, f.writable)?;
                    if req.flags & 1 != 0 {
                        e.fdatasync(f.ino)?;
                    } else {
                        e.fsync(f.ino)?;
                    }
                    self.inval_inode(f.ino, false);
                }
                Some(Handle::Dir(..)) => e.sync()?,
                None => return Err(Error::Invalid.into()),
            },
            Op::ReadFile => {
                let (a, _, _) = self.resolve(conn, req.dir, path, follow)?.inode()?;
                match a.kind {
                    Kind::File => {}
                    Kind::Dir => return Err(Error::IsDir.into()),
                    _ => return Err(Error::Invalid.into()),
                }
                let Some(e) = self.ns.data() else {
                    // File data in an object store: the mount reads it.
                    return Err(self.on_the_mount(conn, req.dir, path));
                };
                // The open's check and count, so an unlink meanwhile keeps
                // the bytes until the read is done.
                e.open_file(&conn.ctx, a.ino, open_mask(libc::O_RDONLY))?;
                let r = (|| {
                    // What a client holding it for writing wrote.
                    if let Some(w) = &self.writers {
                        w.refresh(e, a.ino);
                    }
                    let a = e.getattr(a.ino)?;
                    if a.size > proto::ANSWER_MAX as u64 {
                        return Err(Error::FileTooBig);
                    }
                    Ok((e.read(a.ino, 0, a.size as u32)?, a))
                })();
                let r2 = e.release(a.ino);
                let (data, a) = r?;
                r2?;
                ans.data = data;
                ans.stat = self.stat(&a);
            }
            Op::Fstat => match conn.handles.get_mut(&req.a[0]) {
                Some(Handle::File(f)) => {
                    let e = self.engine()?;
                    let before = e.getattr(f.ino)?;
                    e.refresh_from_data(f.ino, &mut f.seen, f.writable)?;
                    let a = e.getattr(f.ino)?;
                    // What the descriptor changed (a size grown by
                    // ftruncate or fallocate, which the shim follows with
                    // an fstat) shows through the mount at once.
                    if (a.size, a.mtime, a.ctime) != (before.size, before.mtime, before.ctime) {
                        self.inval_inode(f.ino, false);
                    }
                    ans.stat = self.stat(&a);
                }
                Some(Handle::Dir(ino, _)) => ans.stat = self.stat(&e.getattr(&conn.ctx, *ino)?),
                None => return Err(Error::Invalid.into()),
            },
            Op::Unlink | Op::Rmdir => {
                let (p, name) = self.parent(conn, req.dir, path)?;
                // The inode, for its link count in the kernel's cache.
                let child = e.lookup(&conn.ctx, p, &name).ok();
                if op == Op::Unlink {
                    e.unlink(&conn.ctx, p, &name)?;
                } else {
                    e.rmdir(&conn.ctx, p, &name)?;
                }
                self.inval_entry(p, &name);
                self.inval_inode(p, false);
                if let Some(c) = child {
                    self.inval_inode(c.ino, false);
                }
            }
            Op::Rename => {
                let (p, name) = self.parent(conn, req.dir, path)?;
                let (np, nname) = self.parent(conn, req.dir2, &req.s[1])?;
                let replaced = e.lookup(&conn.ctx, np, &nname).ok();
                e.rename(&conn.ctx, p, &name, np, &nname, req.flags)?;
                self.inval_entry(p, &name);
                self.inval_entry(np, &nname);
                self.inval_inode(p, false);
                if np != p {
                    self.inval_inode(np, false);
                }
                if let Some(r) = replaced {
                    self.inval_inode(r.ino, false);
                }
            }
            Op::Link => {
                let (a, _, _) = self.resolve(conn, req.dir, path, false)?.inode()?;
                let (np, nname) = self.parent(conn, req.dir2, &req.s[1])?;
                let a = e.link(&conn.ctx, a.ino, np, &nname)?;
                self.inval_entry(np, &nname);
                self.inval_inode(np, false);
                self.inval_inode(a.ino, false);
                ans.stat = self.stat(&a);
            }
            Op::Symlink => {
                let (p, name) = self.parent(conn, req.dir, path)?;
                let a = e.symlink(&conn.ctx, p, &name, &req.s[1])?;
                self.inval_entry(p, &name);
                self.inval_inode(p, false);
                ans.stat = self.stat(&a);
            }
            Op::Readlink => {
                let (a, _, _) = self.resolve(conn, req.dir, path, false)?.inode()?;
                ans.data = e.readlink(&conn.ctx, a.ino)?;
            }
            Op::Opendir => {
                let (a, _, _) = self.resolve(conn, req.dir, path, follow)?.inode()?;
                if a.kind != Kind::Dir {
                    return Err(Error::NotDir.into());
                }
                e.open_dir(&conn.ctx, a.ino)?;
                let at = self.path_of(conn, req.dir, path);
                let h = conn.add(Handle::Dir(a.ino, at));
                ans.a[0] = h;
                ans.stat = self.stat(&a);
            }
            Op::Readdir => {
                let Some(Handle::Dir(ino, _)) = conn.handles.get(&req.a[0]) else {
                    return Err(Error::Invalid.into());
                };
                let mut out = Vec::new();
                let mut cookie = req.a[1];
                'fill: loop {
                    let v: Vec<DirEntry> = e.entries(&conn.ctx, *ino, cookie)?;
                    if v.is_empty() {
                        break;
                    }
                    for d in v {
                        cookie = d.cookie;
                        if d.name == b"." || d.name == b".." {
                            continue;
                        }
                        if out.len() + proto::entry_len(&d.name) > proto::ANSWER_MAX {
                            break 'fill;
                        }
                        proto::encode_entry(
                            &mut out,
                            &proto::DirEntry {
                                ino: d.ino,
                                cookie: d.cookie,
                                kind: (d.kind.mode_bits() >> 12) as u8,
                                name: d.name,
                            },
                        );
                    }
                    if out.len() > proto::ANSWER_MAX / 2 {
                        break;
                    }
                }
                ans.data = out;
            }
            Op::Setattr => {
                let (a, _, _) = self.resolve(conn, req.dir, path, follow)?.inode()?;
                let w = req.a[0];
                let time = |s: u64, n: u64| {
                    if n == proto::TIME_NOW {
                        TimeSet::Now
                    } else {
                        TimeSet::At(Ts {
                            sec: s as i64,
                            nsec: (n as u32).min(999_999_999),
                        })
                    }
                };
                let sa = SetAttr {
                    mode: (w & proto::SET_MODE != 0).then_some(req.a[1] as u32 & 0o7777),
                    uid: (w & proto::SET_UID != 0).then_some(req.a[2] as u32),
                    gid: (w & proto::SET_GID != 0).then_some(req.a[3] as u32),
                    size: (w & proto::SET_SIZE != 0).then_some(req.a[4]),
                    atime: (w & proto::SET_ATIME != 0).then(|| time(req.a[5], req.a[6])),
                    mtime: (w & proto::SET_MTIME != 0).then(|| time(req.a[7], req.a[8])),
                    ctime: None,
                    by_handle: false,
                };
                let a = e.setattr(&conn.ctx, a.ino, &sa)?;
                self.inval_inode(a.ino, sa.size.is_some());
                ans.stat = self.stat(&a);
            }
            Op::Getxattr | Op::Setxattr | Op::Removexattr | Op::Listxattr => {
                let (a, _, _) = self.resolve(conn, req.dir, path, follow)?.inode()?;
                let name = &req.s[1];
                let ctx = &conn.ctx;
                // Who may: the engine's own check (`rules::xattr::may_access`).
                match op {
                    Op::Getxattr => {
                        ans.data = e.getxattr(ctx, a.ino, name)?;
                    }
                    Op::Setxattr => {
                        e.setxattr(ctx, a.ino, name, &req.s[2], req.a[0] as u32)?;
                        self.inval_inode(a.ino, false);
                    }
                    Op::Removexattr => {
                        e.removexattr(ctx, a.ino, name)?;
                        self.inval_inode(a.ino, false);
                    }
                    _ => {
                        // As Linux lists them: trusted.* only to root.
                        for n in e.listxattr(ctx, a.ino)? {
                            if ctx.uid != 0 && n.starts_with(b"trusted.") {
                                continue;
                            }
                            ans.data.extend_from_slice(&n);
                            ans.data.push(0);
                        }
                    }
                }
            }
        }
        Ok(ans)
    }

    /// open(2) of a regular file: the data object's descriptor, pinned
    /// until the handle closes.
    fn open(
        &self,
        conn: &mut Conn,
        req: &Request,
        fd: &mut Option<std::os::fd::OwnedFd>,
    ) -> std::result::Result<Answer, Fail> {
        let flags = req.a_flags();
        let path = &req.s[0];
        let Some(e) = self.ns.data() else {
            // File data in an object store: the kernel mount opens it
            // (and creates, and checks the file's own mode), the caller
            // continues there, once this walk with its credentials
            // reached the name: the kernel may hold the names on the way
            // for longer than a chmod allows (docs/client.md).
            let (p, name) = self.parent(conn, req.dir, path)?;
            match self.ns.lookup(&conn.ctx, p, &name) {
                Err(Error::NotFound) if flags & libc::O_CREAT != 0 => {}
                r => {
                    r?;
                }
            }
            return Err(self.on_the_mount(conn, req.dir, path));
        };
        let mask = open_mask(flags);
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let mut created = None;
        // The inode, opened (counted) by create_open or open_file.
        let a = if flags & libc::O_CREAT != 0 {
            let (p, name) = self.parent(conn, req.dir, path)?;
            match e.lookup(&conn.ctx, p, &name) {
                Ok(_) if flags & libc::O_EXCL != 0 => return Err(Error::Exists.into()),
                Ok(_) => None,
                Err(Error::NotFound) => {
                    let ctx = Ctx {
                        umask: (req.a[1] as u32) & 0o777,
                        ..conn.ctx.clone()
                    };
                    let perm = (req.a[0] as u32) & 0o7777;
                    let a = e.create_open(&ctx, p, &name, libc::S_IFREG | perm)?;
                    created = Some((p, name));
                    Some(a)
                }
                Err(x) => return Err(x.into()),
            }
        } else {
            None
        };
        let a = match a {
            Some(a) => a,
            None => {
                let follow = flags & libc::O_NOFOLLOW == 0;
                let (a, _, _) = self.resolve(conn, req.dir, path, follow)?.inode()?;
                match a.kind {
                    Kind::File => {}
                    Kind::Dir => return Err(Error::IsDir.into()),
                    Kind::Symlink => return Err(Fail::Errno(libc::ELOOP)),
                    _ => return Err(Error::NotSupported.into()),
                }
                e.open_file(&conn.ctx, a.ino, mask)?
            }
        };
        // From here the inode is open: every failure releases it.
        let ino = a.ino;
        let r = (|| -> Result<(Attr, std::os::fd::OwnedFd, Option<Ts>)> {
            let mut a = a;
            if flags & libc::O_TRUNC != 0 && created.is_none() && a.size > 0 {
                let sa = SetAttr {
                    size: Some(0),
                    by_handle: true,
                    ..Default::default()
                };
                a = e.setattr(&conn.ctx, ino, &sa)?;
            }
            let obj = e.pin_object(ino)?.ok_or(Error::NotSupported)?;
            let f = match reopen(&obj, flags) {
                Ok(f) => f,
                Err(err) => {
                    let _ = e.unpin_data(ino);
                    return Err(Error::Io(format!("reopening a data object: {err}")));
                }
            };
            let mut seen = None;
            let _ = e.refresh_from_data(ino, &mut seen, false);
            Ok((a, f, seen))
        })();
        let (a, f, seen) = match r {
            Ok(x) => x,
            Err(x) => {
                let _ = e.release(ino);
                return Err(x.into());
            }
        };
        if let Some((p, name)) = &created {
            self.inval_entry(*p, name);
            self.inval_inode(*p, false);
        } else if flags & libc::O_TRUNC != 0 {
            self.inval_inode(ino, true);
        }
        if writable {
            // The mount's kernel sees none of this handle's writes: while
            // it is open the mount's GETATTR takes them in and the kernel
            // keeps no attributes (`ClientWriters`); what it kept from
            // before goes now.
            if let Some(w) = &self.writers {
                w.opened(ino, seen);
                if created.is_none() && flags & libc::O_TRUNC == 0 {
                    self.inval_inode(ino, false);
                }
            }
        }
        let h = conn.add(Handle::File(OpenFile {
            ino,
            writable,
            seen,
        }));
        *fd = Some(f);
        Ok(Answer {
            a: [h, 0, 0, 0],
            stat: self.stat(&a),
            ..Default::default()
        })
    }

    /// "Continue at MNT/PATH": the kernel mount serves what the request
    /// named (file data in an object store).
    fn on_the_mount(&self, conn: &Conn, dir: u64, path: &[u8]) -> Fail {
        let mut at = self.mountpoint.as_os_str().as_bytes().to_vec();
        at.extend_from_slice(&self.path_of(conn, dir, path));
        Fail::Outside(at)
    }

    /// Close a handle: for a file, its size and time taken from the
    /// object, the object unpinned, the open released; the kernel's cached
    /// attributes and pages of it dropped.
    fn close(&self, h: Handle) -> Result<()> {
        let Handle::File(mut f) = h else {
            return Ok(());
        };
        let e = self.engine()?;
        let r = e
            .refresh_from_data(f.ino, &mut f.seen, f.writable)
            .and_then(|()| e.unpin_data(f.ino));
        let r2 = e.release(f.ino);
        if f.writable {
            if let Some(w) = &self.writers {
                w.closed(f.ino);
            }
        }
        self.inval_inode(f.ino, f.writable);
        r.and(r2)
    }

    fn close_all(&self, conn: &mut Conn) {
        for (_, h) in conn.handles.drain() {
            if let Err(e) = self.close(h) {
                tracing::warn!("closing a client's handle: {e}");
            }
        }
    }
}

/// A new descriptor on the data object, with the open's access mode and
/// its own offset (`/proc/self/fd`, as a reopen).
fn reopen(obj: &std::fs::File, flags: i32) -> std::io::Result<std::os::fd::OwnedFd> {
    let p = format!("/proc/self/fd/{}", obj.as_raw_fd());
    let mut o = std::fs::OpenOptions::new();
    match flags & libc::O_ACCMODE {
        libc::O_WRONLY => o.write(true),
        libc::O_RDWR => o.read(true).write(true),
        _ => o.read(true),
    };
    if flags & libc::O_APPEND != 0 {
        o.append(true);
    }
    use std::os::unix::fs::OpenOptionsExt;
    o.custom_flags(libc::O_CLOEXEC);
    Ok(o.open(p)?.into())
}

/// The access an open asks for (O_TRUNC needs write too), as the FUSE
/// adapter's.
fn open_mask(flags: i32) -> u32 {
    let mut m = match flags & libc::O_ACCMODE {
        libc::O_RDONLY => R_OK,
        libc::O_WRONLY => W_OK,
        _ => R_OK | W_OK,
    };
    if flags & libc::O_TRUNC != 0 {
        m |= W_OK | OPEN_TRUNC;
    }
    if flags & libc::O_APPEND != 0 {
        m |= OPEN_APPEND;
    }
    let _ = X_OK;
    m
}

trait OpenFlags {
    fn a_flags(&self) -> i32;
}
impl OpenFlags for Request {
    /// An open's flags travel in `flags`.
    fn a_flags(&self) -> i32 {
        self.flags as i32
    }
}

enum Walk {
    /// The parent directory reached and the last name ("" for the base).
    At(Ino, Vec<u8>),
    /// The path continues outside the mount, here.
    Outside(Vec<u8>),
}

enum Resolved {
    /// The inode, its parent and name.
    Inode(Attr, Ino, Vec<u8>),
    Outside(Vec<u8>),
}

impl Resolved {
    fn inode(self) -> std::result::Result<(Attr, Ino, Vec<u8>), Fail> {
        match self {
            Resolved::Inode(a, p, n) => Ok((a, p, n)),
            Resolved::Outside(p) => Err(Fail::Outside(p)),
        }
    }
}

enum Fail {
    Engine(Error),
    /// An errno the engine has no error for (ELOOP).
    Errno(i32),
    Outside(Vec<u8>),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::Engine(e)
    }
}

struct OpenFile {
    ino: Ino,
    writable: bool,
    /// The object's time when last looked at (`Engine::refresh_from_data`).
    seen: Option<Ts>,
}

enum Handle {
    File(OpenFile),
    /// The directory and its path under the mount, as opened (for the
    /// paths an etcd mount's opens continue at).
    Dir(Ino, Vec<u8>),
}

struct Conn {
    ctx: Ctx,
    handles: HashMap<u64, Handle>,
    next: u64,
}

impl Conn {
    fn add(&mut self, h: Handle) -> u64 {
        let id = self.next;
        self.next += 1;
        self.handles.insert(id, h);
        id
    }
}

/// Where an etcd or TiKV mount's daemon puts `client.sock`: beside its
/// run directory (mode 0700: its log and control socket are the mounting
/// user's), in one of its own that anyone may pass through (0711), so
/// that with `allow_other` other users reach the socket (its own mode,
/// 0600 without `allow_other`, says who may connect). Made if `make`.
pub fn shared_socket_dir(run: &Path, make: bool) -> PathBuf {
    let mut d = run.as_os_str().to_owned();
    d.push(".clients");
    let d = PathBuf::from(d);
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    if make {
        let _ = std::fs::DirBuilder::new().mode(0o711).create(&d);
    }
    // Another user's directory (or a link) is not ours to use: the run
    // directory itself, then (only its owner reaches it).
    match std::fs::symlink_metadata(&d) {
        Ok(m) if m.is_dir() && m.uid() == rustix::process::geteuid().as_raw() => {
            if make {
                let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o711));
            }
            d
        }
        _ if !make && run.join(SOCKET).exists() => run.to_path_buf(),
        _ if make => run.to_path_buf(),
        _ => d,
    }
}

/// `shoal run MNT -- CMD`: CMD with the preload shim and the mount's
/// socket in its environment (docs/client.md, "The preload shim"). The
/// shim is `libshoal_shim.so` beside this binary, or in
/// /usr/local/lib/shoal.
pub fn cmd_run(a: &crate::args::RunArgs) -> std::result::Result<i32, String> {
    use std::os::unix::process::CommandExt;
    let mnt = std::fs::canonicalize(&a.mountpoint)
        .map_err(|e| format!("{}: {e}", a.mountpoint.display()))?;
    // An etcd or TiKV mount's sockets are in a run directory named by a
    // hash of its source and mount point (`control::shared_run_dir`),
    // which this binary computes as its daemon did.
    let shared = crate::mountinfo::at(&mnt)
        .filter(|m| m.source.contains("://"))
        .map(|m| {
            let dirs = crate::control::shared_run_dirs(&m.source, &mnt);
            dirs.iter()
                .map(|run| shared_socket_dir(run, false).join(SOCKET))
                .find(|s| s.exists())
                .unwrap_or_else(|| dirs[0].join(SOCKET))
        });
    let c = match shared {
        Some(sock) if std::env::var_os("SHOAL_CLIENT_SOCK").is_none() => {
            shoal_client::Client::new(sock)
        }
        _ => shoal_client::Client::for_mount(&mnt).map_err(|e| e.to_string())?,
    };
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let shim = [
        exe.with_file_name("libshoal_shim.so"),
        PathBuf::from("/usr/local/lib/shoal/libshoal_shim.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .ok_or("libshoal_shim.so is neither beside shoal nor in /usr/local/lib/shoal")?;
    let mut preload = shim.into_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let err = std::process::Command::new(&a.command[0])
        .args(&a.command[1..])
        .env("LD_PRELOAD", preload)
        .env("SHOAL_SHIM_MNT", &mnt)
        .env("SHOAL_CLIENT_SOCK", c.socket())
        .exec();
    Err(format!("{}: {err}", a.command[0].to_string_lossy()))
}
