//! A client of a shoal mount's daemon that does not go through FUSE
//! (docs/client.md): each call is one trip over shared memory and a
//! futex, the daemon checks it with the caller's credentials (taken by the
//! kernel from the socket), changes the namespace, drops what the kernel
//! cached of what changed, and answers. An open file is a real kernel
//! descriptor on the file's data object.
//!
//! One connection per thread, made on the thread's first call to a mount
//! and kept in a thread-local; one call in flight on it. Files and
//! directory handles keep their connection (they are the daemon's handles
//! on it), so they may be used and dropped on any thread.
//!
//! Paths are relative to the mount's root (a leading `/` is the root too)
//! or, with `*_at`, to a directory handle; the daemon walks them with the
//! caller's credentials.
//!
//! ```no_run
//! let c = shoal_client::Client::for_mount("/mnt/shoal")?;
//! c.mkdir("d", 0o755)?;
//! let mut f = c.open("d/f", libc::O_CREAT | libc::O_WRONLY, 0o644)?;
//! std::io::Write::write_all(&mut *f, b"hello")?;
//! f.close()?;
//! assert_eq!(c.stat("d/f")?.size, 5);
//! # Ok::<(), std::io::Error>(())
//! ```

pub mod capi;
pub mod proto;
pub mod region;

use proto::*;
use region::Region;
use std::cell::RefCell;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use proto::{DirEntry, Stat};

/// The socket's name in a mount's run directory.
pub const SOCKET: &str = "client.sock";

/// A mount's daemon, reached over `client.sock`.
#[derive(Debug)]
pub struct Client {
    sock: PathBuf,
    umask: std::sync::atomic::AtomicU32,
}

impl Clone for Client {
    fn clone(&self) -> Client {
        let umask = self.umask.load(std::sync::atomic::Ordering::Relaxed);
        Client {
            sock: self.sock.clone(),
            umask: std::sync::atomic::AtomicU32::new(umask),
        }
    }
}

/// One connection: a socket and its region.
struct Conn {
    sock: UnixStream,
    region: Region,
    dead: bool,
    /// `CREDENTIALS` when it connected: the daemon took the process's
    /// credentials then (SO_PEERCRED, SO_PEERGROUPS).
    creds: u64,
}

/// Bumped by `credentials_changed`: connections made before it speak with
/// credentials the process no longer has.
static CREDENTIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The process changed its user or groups (setuid, seteuid, setgroups...):
/// every thread's next call connects again, so the daemon checks it as it
/// is now (it reads a connection's credentials once, at connect). Files
/// already open keep their connection, as a descriptor keeps the rights it
/// was opened with.
pub fn credentials_changed() {
    CREDENTIALS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

type Shared = Arc<Mutex<Conn>>;

/// Every connection's socket in this process, whatever thread made it (a
/// forgotten one too: it stays open, `forget_connections`): the preload
/// shim keeps them open through a program's close_range and closefrom
/// (`sockets`).
static SOCKETS: Mutex<Vec<std::os::fd::RawFd>> = Mutex::new(Vec::new());

/// `SOCKETS`, taken back from a thread that panicked holding it.
fn sockets_list() -> std::sync::MutexGuard<'static, Vec<std::os::fd::RawFd>> {
    SOCKETS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The descriptors of this process's connections to daemons: a program's
/// close_range or closefrom must leave them open (the shim's), or the
/// connection's number would be reused by the program's next open and
/// closed again when the dead connection goes.
pub fn sockets() -> Vec<std::os::fd::RawFd> {
    sockets_list().clone()
}

impl Drop for Conn {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        let fd = self.sock.as_raw_fd();
        sockets_list().retain(|&s| s != fd);
    }
}

thread_local! {
    /// This thread's connections, by socket path.
    static CONNS: RefCell<Vec<(PathBuf, Shared)>> = const { RefCell::new(Vec::new()) };
}

fn enotconn() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOTCONN)
}

/// Turn an answer's errno into the call's error.
fn check(a: &Answer) -> io::Result<()> {
    match a.errno {
        0 => Ok(()),
        OUTSIDE => Err(io::Error::other(Outside(PathBuf::from(
            std::ffi::OsStr::from_bytes(&a.data),
        )))),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Forget this thread's connections without a word to the daemon: in a
/// child after `fork`, which shares them with its parent (the child
/// connects again, as its own peer, on its next call). Files and
/// directories the child inherited must be forgotten too (`File::forget`):
/// a close would speak on the parent's connection. The connections' sockets
/// stay open in the child (leaked, one per forgotten connection): with
/// `set_inheritable(true)` the daemon keeps their handles, and so the data
/// objects pinned, until every process holding them has closed them.
pub fn forget_connections() {
    CONNS.with(|c| {
        for conn in c.borrow_mut().drain(..) {
            std::mem::forget(conn);
        }
    });
}

static INHERITABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Make the connections made from now on survive exec (not close-on-exec).
/// The daemon closes a connection's handles when its socket hangs up, that
/// is when the last process holding the socket closes it; the preload shim
/// sets this so that a descriptor handed over fork and exec (a shell's
/// `cmd > file`) keeps its file's bytes pinned in the object until the
/// last holder is gone.
pub fn set_inheritable(on: bool) {
    INHERITABLE.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// The error of a path that leads out of the mount (an absolute symlink
/// elsewhere): where to continue, outside (`Outside::of`).
#[derive(Debug)]
pub struct Outside(pub PathBuf);

impl std::fmt::Display for Outside {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the path leads out of the mount, to {}",
            self.0.display()
        )
    }
}
impl std::error::Error for Outside {}

impl Outside {
    /// The path outside the mount an error names, if it is this one.
    pub fn of(e: &io::Error) -> Option<&Path> {
        e.get_ref()
            .and_then(|x| x.downcast_ref::<Outside>())
            .map(|o| o.0.as_path())
    }
}

/// The caller's umask, read without changing it (umask(2) would, for an
/// instant, for every thread).
fn current_umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

impl Conn {
    fn connect(path: &Path) -> io::Result<Conn> {
        let sock = UnixStream::connect(path)?;
        let mut hello = [0u8; HELLO];
        let (n, fd) = region::recv_fd(&sock, &mut hello)?;
        // The daemon closes at once a connection it refuses (too many, or
        // a user the mount would refuse).
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::ECONNREFUSED));
        }
        let version = u32::from_ne_bytes(hello[..4].try_into().unwrap());
        let size = u64::from_ne_bytes(hello[4..12].try_into().unwrap());
        let fd = fd.ok_or_else(|| io::Error::from_raw_os_error(libc::EPROTO))?;
        if n != HELLO || version != VERSION || size != REGION as u64 {
            return Err(io::Error::from_raw_os_error(libc::EPROTO));
        }
        let region = Region::map(&fd)?;
        if INHERITABLE.load(std::sync::atomic::Ordering::Relaxed) {
            use std::os::fd::AsFd;
            rustix::io::fcntl_setfd(sock.as_fd(), rustix::io::FdFlags::empty())?;
        }
        {
            use std::os::fd::AsRawFd;
            sockets_list().push(sock.as_raw_fd());
        }
        Ok(Conn {
            sock,
            region,
            dead: false,
            creds: CREDENTIALS.load(std::sync::atomic::Ordering::SeqCst),
        })
    }

    /// Write `len` bytes already in the slot as a request, wait for the
    /// answer: the answer and the descriptor it carries.
    fn round_trip(&mut self) -> io::Result<(Answer, Option<std::os::fd::OwnedFd>)> {
        if self.dead {
            return Err(enotconn());
        }
        self.region.post(REQUEST, SERVER_SLEEPS);
        let sock = &self.sock;
        let spin = spin_env(false).unwrap_or(match self.region.spin_hint() {
            0 => CLIENT_SPIN_NS,
            ns => ns as u64,
        });
        let ok = self.region.wait_for(
            ANSWER,
            CLIENT_SLEEPS,
            spin,
            Duration::from_millis(CLIENT_POLL_MS),
            || region::peer_alive(sock),
        );
        if !ok {
            self.dead = true;
            return Err(enotconn());
        }
        // SAFETY: the state word is ANSWER: the slot is ours until the next
        // request.
        let a = Answer::decode(unsafe { self.region.slot() })
            .map_err(|_| io::Error::from_raw_os_error(libc::EPROTO))?;
        let mut fd = None;
        if a.fd {
            let mut b = [0u8; 1];
            let (n, f) = region::recv_fd(&self.sock, &mut b)?;
            if n == 0 {
                self.dead = true;
                return Err(enotconn());
            }
            fd = f;
        }
        Ok((a, fd))
    }

    fn call(
        &mut self,
        op: Op,
        flags: u32,
        dir: u64,
        dir2: u64,
        a: [u64; ARGS],
        s: [&[u8]; 3],
    ) -> io::Result<(Answer, Option<std::os::fd::OwnedFd>)> {
        if request_len(s) > SLOT {
            return Err(io::Error::from_raw_os_error(libc::E2BIG));
        }
        if self.dead {
            return Err(enotconn());
        }
        // SAFETY: no request is in flight (one at a time, under the mutex).
        encode_request(
            unsafe { self.region.slot() },
            op as u32,
            flags,
            dir,
            dir2,
            &a,
            s,
        );
        self.round_trip()
    }
}

/// A path's bytes.
fn b(p: &Path) -> &[u8] {
    p.as_os_str().as_bytes()
}

impl Client {
    /// A client of the daemon listening on `sock`. Nothing is connected
    /// until the first call (one connection per thread).
    pub fn new(sock: impl Into<PathBuf>) -> Client {
        Client {
            sock: sock.into(),
            umask: std::sync::atomic::AtomicU32::new(current_umask()),
        }
    }

    /// A client of the daemon serving the mount at `mnt`: `SHOAL_CLIENT_SOCK`
    /// when set (`shoal run` sets it), else `client.sock` in the store the
    /// mount serves (its source in /proc/self/mountinfo; a writable
    /// embedded mount keeps its sockets in its store).
    pub fn for_mount(mnt: impl AsRef<Path>) -> io::Result<Client> {
        if let Some(s) = std::env::var_os("SHOAL_CLIENT_SOCK") {
            return Ok(Client::new(PathBuf::from(s)));
        }
        let mnt = std::fs::canonicalize(mnt)?;
        let info = std::fs::read_to_string("/proc/self/mountinfo")?;
        for l in info.lines() {
            let f: Vec<&str> = l.split(' ').collect();
            let Some(sep) = f.iter().position(|x| *x == "-") else {
                continue;
            };
            if f.get(4).map(|m| unescape(m)) == Some(mnt.clone())
                && f.get(sep + 1) == Some(&"fuse.shoal")
            {
                if let Some(src) = f.get(sep + 2) {
                    let src = unescape(src);
                    let src = src
                        .strip_prefix("shoal:")
                        .map(Path::to_path_buf)
                        .unwrap_or(src);
                    return Ok(Client::new(src.join(SOCKET)));
                }
            }
        }
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} is not a shoal mount", mnt.display()),
        ))
    }

    /// The daemon's socket.
    pub fn socket(&self) -> &Path {
        &self.sock
    }

    /// The umask applied to what this client creates (the process's when
    /// the client was made; the preload shim passes on each umask(2)).
    pub fn set_umask(&self, umask: u32) {
        self.umask
            .store(umask & 0o777, std::sync::atomic::Ordering::Relaxed);
    }

    /// This thread's connection, made if there is none or it is dead.
    fn conn(&self) -> io::Result<Shared> {
        CONNS.with(|c| {
            let mut c = c.borrow_mut();
            if let Some(i) = c.iter().position(|(p, _)| *p == self.sock) {
                let now = CREDENTIALS.load(std::sync::atomic::Ordering::SeqCst);
                let conn = c[i].1.lock().unwrap_or_else(|e| e.into_inner());
                if !conn.dead && conn.creds == now {
                    drop(conn);
                    return Ok(c[i].1.clone());
                }
                drop(conn);
                c.swap_remove(i);
            }
            let conn = Arc::new(Mutex::new(Conn::connect(&self.sock)?));
            c.push((self.sock.clone(), conn.clone()));
            Ok(conn)
        })
    }

    fn call(
        &self,
        op: Op,
        flags: u32,
        dirs: (u64, u64),
        a: [u64; ARGS],
        s: [&[u8]; 3],
    ) -> io::Result<(Answer, Option<std::os::fd::OwnedFd>, Shared)> {
        let conn = self.conn()?;
        let (ans, fd) = conn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .call(op, flags, dirs.0, dirs.1, a, s)?;
        check(&ans)?;
        Ok((ans, fd, conn))
    }

    fn simple(&self, op: Op, flags: u32, a: [u64; ARGS], s: [&[u8]; 3]) -> io::Result<Answer> {
        self.call(op, flags, (0, 0), a, s).map(|x| x.0)
    }

    /// One round trip, no engine call (the protocol's own cost).
    pub fn ping(&self) -> io::Result<()> {
        self.simple(Op::Ping, 0, [0; ARGS], [b"", b"", b""])
            .map(drop)
    }

    /// Send `raw` as the request's bytes (tests: a malformed request).
    #[doc(hidden)]
    pub fn raw_call(&self, raw: &[u8]) -> io::Result<()> {
        let conn = self.conn()?;
        let mut c = conn.lock().unwrap_or_else(|e| e.into_inner());
        let n = raw.len().min(SLOT);
        // SAFETY: no request in flight (under the mutex).
        unsafe { c.region.slot()[..n].copy_from_slice(&raw[..n]) };
        let (a, _) = c.round_trip()?;
        check(&a)
    }

    pub fn stat(&self, p: impl AsRef<Path>) -> io::Result<Stat> {
        self.stat_at(0, p, true)
    }
    pub fn lstat(&self, p: impl AsRef<Path>) -> io::Result<Stat> {
        self.stat_at(0, p, false)
    }
    pub fn stat_at(&self, dir: u64, p: impl AsRef<Path>, follow: bool) -> io::Result<Stat> {
        let f = if follow { FOLLOW } else { 0 };
        self.call(Op::Stat, f, (dir, 0), [0; ARGS], [b(p.as_ref()), b"", b""])
            .map(|x| x.0.stat)
    }

    fn mode_args(&self, mode: u32) -> [u64; ARGS] {
        let mut a = [0; ARGS];
        a[0] = mode as u64;
        a[1] = self.umask.load(std::sync::atomic::Ordering::Relaxed) as u64;
        a
    }

    pub fn mkdir(&self, p: impl AsRef<Path>, mode: u32) -> io::Result<Stat> {
        let a = self.mode_args(mode);
        Ok(self
            .simple(Op::Mkdir, 0, a, [b(p.as_ref()), b"", b""])?
            .stat)
    }

    /// A new, empty regular file, not opened (creat and close in one
    /// trip). EEXIST if the name is taken.
    pub fn create(&self, p: impl AsRef<Path>, mode: u32) -> io::Result<Stat> {
        let a = self.mode_args(mode);
        Ok(self
            .simple(Op::Create, 0, a, [b(p.as_ref()), b"", b""])?
            .stat)
    }

    /// open(2): `flags` as open's (O_CREAT, O_EXCL, O_TRUNC, O_APPEND,
    /// O_NOFOLLOW and the access mode are honoured). A regular file only
    /// (a directory: `opendir`).
    pub fn open(&self, p: impl AsRef<Path>, flags: i32, mode: u32) -> io::Result<File> {
        self.open_at(0, p, flags, mode)
    }

    pub fn open_at(
        &self,
        dir: u64,
        p: impl AsRef<Path>,
        flags: i32,
        mode: u32,
    ) -> io::Result<File> {
        let a = self.mode_args(mode);
        let (ans, fd, conn) = self.call(
            Op::Open,
            flags as u32,
            (dir, 0),
            a,
            [b(p.as_ref()), b"", b""],
        )?;
        let mut f = File {
            conn,
            handle: ans.a[0],
            file: None,
            stat: ans.stat,
        };
        match fd {
            Some(fd) => {
                f.file = Some(std::fs::File::from(fd));
                Ok(f)
            }
            // The daemon sent the descriptor and the kernel could not give
            // it to this process: its table is full (the kernel drops a
            // passed descriptor it cannot install). The open's answer is
            // the kernel's for that, and the daemon's handle closes.
            None => {
                let _ = f.call(Op::Close, 0);
                Err(io::Error::from_raw_os_error(libc::EMFILE))
            }
        }
    }

    pub fn unlink(&self, p: impl AsRef<Path>) -> io::Result<()> {
        self.simple(Op::Unlink, 0, [0; ARGS], [b(p.as_ref()), b"", b""])
            .map(drop)
    }
    pub fn rmdir(&self, p: impl AsRef<Path>) -> io::Result<()> {
        self.simple(Op::Rmdir, 0, [0; ARGS], [b(p.as_ref()), b"", b""])
            .map(drop)
    }
    /// renameat2: `flags` RENAME_NOREPLACE, RENAME_EXCHANGE.
    pub fn rename(
        &self,
        from: impl AsRef<Path>,
        to: impl AsRef<Path>,
        flags: u32,
    ) -> io::Result<()> {
        self.simple(
            Op::Rename,
            flags,
            [0; ARGS],
            [b(from.as_ref()), b(to.as_ref()), b""],
        )
        .map(drop)
    }
    pub fn link(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<Stat> {
        Ok(self
            .simple(
                Op::Link,
                0,
                [0; ARGS],
                [b(from.as_ref()), b(to.as_ref()), b""],
            )?
            .stat)
    }
    pub fn symlink(&self, target: impl AsRef<Path>, p: impl AsRef<Path>) -> io::Result<Stat> {
        Ok(self
            .simple(
                Op::Symlink,
                0,
                [0; ARGS],
                [b(p.as_ref()), b(target.as_ref()), b""],
            )?
            .stat)
    }
    /// A regular file's bytes, whole, in one call (no descriptor, no
    /// data object pinned): EFBIG for a file past `proto::ANSWER_MAX`
    /// bytes, which `open` reads instead.
    pub fn read_file(&self, p: impl AsRef<Path>) -> io::Result<Vec<u8>> {
        Ok(self
            .simple(Op::ReadFile, FOLLOW, [0; ARGS], [b(p.as_ref()), b"", b""])?
            .data)
    }

    pub fn readlink(&self, p: impl AsRef<Path>) -> io::Result<PathBuf> {
        let a = self.simple(Op::Readlink, 0, [0; ARGS], [b(p.as_ref()), b"", b""])?;
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&a.data)))
    }

    /// A directory handle: list it (`Dir::read`), or resolve paths from
    /// it (`*_at` with `Dir::handle`).
    pub fn opendir(&self, p: impl AsRef<Path>) -> io::Result<Dir> {
        let (a, _, conn) = self.call(
            Op::Opendir,
            FOLLOW,
            (0, 0),
            [0; ARGS],
            [b(p.as_ref()), b"", b""],
        )?;
        Ok(Dir {
            conn,
            handle: a.a[0],
            stat: a.stat,
            open: true,
        })
    }

    /// Every entry of a directory but `.` and `..`.
    pub fn readdir(&self, p: impl AsRef<Path>) -> io::Result<Vec<DirEntry>> {
        let d = self.opendir(p)?;
        let r = d.read_all();
        d.close()?;
        r
    }

    fn setattr(&self, p: &Path, follow: bool, a: [u64; ARGS]) -> io::Result<Stat> {
        let f = if follow { FOLLOW } else { 0 };
        Ok(self.simple(Op::Setattr, f, a, [b(p), b"", b""])?.stat)
    }
    pub fn chmod(&self, p: impl AsRef<Path>, mode: u32) -> io::Result<Stat> {
        let mut a = [0; ARGS];
        a[0] = SET_MODE;
        a[1] = mode as u64;
        self.setattr(p.as_ref(), true, a)
    }
    /// chown; None leaves that id as it is.
    pub fn chown(
        &self,
        p: impl AsRef<Path>,
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> io::Result<Stat> {
        let mut a = [0; ARGS];
        if let Some(u) = uid {
            a[0] |= SET_UID;
            a[2] = u as u64;
        }
        if let Some(g) = gid {
            a[0] |= SET_GID;
            a[3] = g as u64;
        }
        self.setattr(p.as_ref(), true, a)
    }
    pub fn truncate(&self, p: impl AsRef<Path>, size: u64) -> io::Result<Stat> {
        let mut a = [0; ARGS];
        a[0] = SET_SIZE;
        a[4] = size;
        self.setattr(p.as_ref(), true, a)
    }
    /// utimensat: (sec, nsec) each, nsec `proto::TIME_NOW` for now; None
    /// leaves that time.
    pub fn utimens(
        &self,
        p: impl AsRef<Path>,
        atime: Option<(i64, u32)>,
        mtime: Option<(i64, u32)>,
    ) -> io::Result<Stat> {
        let mut a = [0; ARGS];
        if let Some((s, n)) = atime {
            a[0] |= SET_ATIME;
            a[5] = s as u64;
            a[6] = n as u64;
        }
        if let Some((s, n)) = mtime {
            a[0] |= SET_MTIME;
            a[7] = s as u64;
            a[8] = n as u64;
        }
        self.setattr(p.as_ref(), true, a)
    }

    pub fn getxattr(&self, p: impl AsRef<Path>, name: &[u8]) -> io::Result<Vec<u8>> {
        Ok(self
            .simple(Op::Getxattr, FOLLOW, [0; ARGS], [b(p.as_ref()), name, b""])?
            .data)
    }
    /// `flags`: 0, XATTR_CREATE or XATTR_REPLACE.
    pub fn setxattr(
        &self,
        p: impl AsRef<Path>,
        name: &[u8],
        value: &[u8],
        flags: u32,
    ) -> io::Result<()> {
        let mut a = [0; ARGS];
        a[0] = flags as u64;
        self.simple(Op::Setxattr, FOLLOW, a, [b(p.as_ref()), name, value])
            .map(drop)
    }
    pub fn listxattr(&self, p: impl AsRef<Path>) -> io::Result<Vec<Vec<u8>>> {
        let a = self.simple(Op::Listxattr, FOLLOW, [0; ARGS], [b(p.as_ref()), b"", b""])?;
        Ok(a.data
            .split(|c| *c == 0)
            .filter(|n| !n.is_empty())
            .map(<[u8]>::to_vec)
            .collect())
    }
    pub fn removexattr(&self, p: impl AsRef<Path>, name: &[u8]) -> io::Result<()> {
        self.simple(
            Op::Removexattr,
            FOLLOW,
            [0; ARGS],
            [b(p.as_ref()), name, b""],
        )
        .map(drop)
    }
}

/// `open`'s answer: the data object's descriptor (`std::fs::File` through
/// `Deref`: read, write, seek, mmap, poll are the kernel's own) and the
/// daemon's handle, which pins the file's bytes in the object until
/// `close` (or the drop) reports the size and time back.
pub struct File {
    conn: Shared,
    handle: u64,
    file: Option<std::fs::File>,
    /// The attributes at open.
    pub stat: Stat,
}

impl File {
    fn call(&self, op: Op, flags: u32) -> io::Result<()> {
        let mut a = [0; ARGS];
        a[0] = self.handle;
        let (ans, _) = self.conn.lock().unwrap_or_else(|e| e.into_inner()).call(
            op,
            flags,
            0,
            0,
            a,
            [b"", b"", b""],
        )?;
        check(&ans)
    }
    /// The daemon takes the object's size and time and commits them with
    /// the object synced.
    pub fn sync_all(&self) -> io::Result<()> {
        self.call(Op::Fsync, 0)
    }
    pub fn sync_data(&self) -> io::Result<()> {
        self.call(Op::Fsync, 1)
    }
    /// fstat: the file's attributes, with what was written through the
    /// descriptor taken in first.
    pub fn fstat(&self) -> io::Result<Stat> {
        let mut a = [0; ARGS];
        a[0] = self.handle;
        let (ans, _) = self.conn.lock().unwrap_or_else(|e| e.into_inner()).call(
            Op::Fstat,
            0,
            0,
            0,
            a,
            [b"", b"", b""],
        )?;
        check(&ans)?;
        Ok(ans.stat)
    }
    /// Drop this value without closing the daemon's handle or the
    /// descriptor (a child after `fork`: see `forget_connections`).
    pub fn forget(self) {
        std::mem::forget(self)
    }
    /// Close the daemon's handle but not the descriptor, whose number the
    /// caller closes (the shim, which tracks dups of it).
    pub fn close_handle(mut self) -> io::Result<()> {
        if let Some(f) = self.file.take() {
            use std::os::fd::IntoRawFd;
            let _ = f.into_raw_fd();
        }
        self.call(Op::Close, 0)
    }
    /// Close, with the daemon's answer (the drop closes too, silently).
    pub fn close(mut self) -> io::Result<()> {
        self.file.take();
        self.call(Op::Close, 0)
    }
    /// The daemon's handle (the C ABI keeps it beside the descriptor).
    pub fn handle(&self) -> u64 {
        self.handle
    }
    /// The descriptor's number (it stays this `File`'s: closed by `close`).
    pub fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.as_raw_fd()
    }
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File")
            .field("handle", &self.handle)
            .field("file", &self.file)
            .field("stat", &self.stat)
            .finish()
    }
}

impl std::ops::Deref for File {
    type Target = std::fs::File;
    fn deref(&self) -> &std::fs::File {
        self.file.as_ref().expect("open until closed")
    }
}
impl std::ops::DerefMut for File {
    fn deref_mut(&mut self) -> &mut std::fs::File {
        self.file.as_mut().expect("open until closed")
    }
}

impl Drop for File {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = self.call(Op::Close, 0);
        }
    }
}

/// `opendir`'s answer.
pub struct Dir {
    conn: Shared,
    handle: u64,
    pub stat: Stat,
    open: bool,
}

impl std::fmt::Debug for Dir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dir")
            .field("handle", &self.handle)
            .field("stat", &self.stat)
            .finish()
    }
}

impl Dir {
    /// The handle to resolve paths from (`Client::*_at`).
    pub fn handle(&self) -> u64 {
        self.handle
    }
    /// The entries after `cookie` that fit one answer; none at the end.
    pub fn read(&self, cookie: u64) -> io::Result<Vec<DirEntry>> {
        let mut a = [0; ARGS];
        a[0] = self.handle;
        a[1] = cookie;
        let (ans, _) = self.conn.lock().unwrap_or_else(|e| e.into_inner()).call(
            Op::Readdir,
            0,
            0,
            0,
            a,
            [b"", b"", b""],
        )?;
        check(&ans)?;
        decode_entries(&ans.data).map_err(|_| io::Error::from_raw_os_error(libc::EPROTO))
    }
    pub fn read_all(&self) -> io::Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        let mut cookie = 0;
        loop {
            let v = self.read(cookie)?;
            let Some(last) = v.last() else {
                return Ok(out);
            };
            cookie = last.cookie;
            out.extend(v);
        }
    }
    pub fn close(mut self) -> io::Result<()> {
        self.open = false;
        let mut a = [0; ARGS];
        a[0] = self.handle;
        let (ans, _) = self.conn.lock().unwrap_or_else(|e| e.into_inner()).call(
            Op::Close,
            0,
            0,
            0,
            a,
            [b"", b"", b""],
        )?;
        check(&ans)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        if self.open {
            let mut a = [0; ARGS];
            a[0] = self.handle;
            let _ = self.conn.lock().unwrap_or_else(|e| e.into_inner()).call(
                Op::Close,
                0,
                0,
                0,
                a,
                [b"", b"", b""],
            );
        }
    }
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape(s: &str) -> PathBuf {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push(
                b[i + 1..i + 4]
                    .iter()
                    .fold(0u8, |v, c| v.wrapping_mul(8) + (c - b'0')),
            );
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    PathBuf::from(std::ffi::OsStr::from_bytes(&out))
}
