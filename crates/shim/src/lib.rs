//! The preload shim (`shoal run MNT -- CMD`, docs/client.md "The preload
//! shim"): libc's calls on absolute paths under the mount served by the
//! client, one round trip each instead of FUSE's requests; every other
//! call goes to libc (the kernel mount: correct, slower).
//!
//! What it serves today: open, open64, openat, openat64 (AT_FDCWD or an
//! absolute path), creat, creat64, mkdir, mkdirat, unlink, unlinkat, rmdir,
//! rename, renameat, renameat2; and on the descriptors it made, close,
//! fstat, fstat64, fstatat/fstatat64 with AT_EMPTY_PATH, fsync, fdatasync,
//! dup, dup2, dup3, fcntl's F_DUPFD.
//! Not yet: the stat family by path, readdir, xattrs (they fall through to
//! the mount). A descriptor passed to another process (`sendmsg`'s
//! SCM_RIGHTS) is first replaced by one opened on the mount (`hand_on`).
//! A descriptor it made is the file's
//! data object: reads, writes, mmap and poll are the kernel's own; a raw
//! fstat system call sees the object's attributes.
//!
//! Descriptors handed on: a dup (dup, dup2, dup3, fcntl F_DUPFD) shares
//! the daemon's handle, closed with the last of them. The connections'
//! sockets are not close-on-exec and a forked child keeps its copies
//! (`shoal_client::set_inheritable`, `forget_connections`): the daemon
//! closes a connection's handles, unpinning their objects, only when
//! every process holding the socket is gone, so a shell's `cmd > file`
//! (open, fork, dup2, close, exec) writes the file, not an unpinned
//! object. The table of descriptors is locked across fork
//! (pthread_atfork); the child forgets the parent's handles without a
//! word (its descriptors stay valid) and connects as its own peer.
//!
//! Written by hand: Rust cannot define a C variadic function, so open's
//! and openat's `mode` is taken as a third (fourth) integer argument,
//! where the x86-64 and aarch64 calling conventions put it.

// Each exported function is libc's of the same name, with its contract.
#![allow(clippy::missing_safety_doc)]

use shoal_client::{Client, File};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, CStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

/// The mount point (SHOAL_SHIM_MNT, absolute, no trailing slash).
fn mount() -> Option<&'static [u8]> {
    static M: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    M.get_or_init(|| {
        let m = std::env::var_os("SHOAL_SHIM_MNT")?;
        let b = m.as_bytes().to_vec();
        (b.first() == Some(&b'/') && b.len() > 1).then(|| b.trim_ascii_end().to_vec())
    })
    .as_deref()
}

fn client() -> Option<&'static Client> {
    static C: OnceLock<Option<Client>> = OnceLock::new();
    C.get_or_init(|| {
        let s = std::env::var_os("SHOAL_CLIENT_SOCK")?;
        Some(Client::new(std::path::PathBuf::from(s)))
    })
    .as_ref()
}

/// The debug log (`SHOAL_SHIM_LOG=FILE`): one line per call on a path
/// under the mount, saying whether the daemon served it or why it fell
/// through. Opened, written and closed per line with raw system calls
/// (never through the shim's own functions), appending: a descriptor kept
/// open would be the program's to close (close_range, a loop of close) and
/// its number the program's next file's, which the log then wrote into.
fn log(what: std::fmt::Arguments) {
    static PATH: OnceLock<Option<std::ffi::CString>> = OnceLock::new();
    let Some(p) = PATH.get_or_init(|| {
        let p = std::env::var_os("SHOAL_SHIM_LOG")?;
        std::ffi::CString::new(p.as_bytes()).ok()
    }) else {
        return;
    };
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, p.as_ptr(), flags, 0o644) };
    if fd < 0 {
        return;
    }
    let line = format!("shoal-shim[{}] {what}\n", std::process::id());
    // SAFETY: a buffer of its length; one write: O_APPEND keeps lines whole;
    // the descriptor is this function's.
    unsafe {
        libc::syscall(libc::SYS_write, fd, line.as_ptr(), line.len());
        libc::syscall(libc::SYS_close, fd);
    }
}

fn logging() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SHOAL_SHIM_LOG").is_some())
}

/// A path argument, copied out of the caller's memory without reading it
/// in place: None (the call falls through, and the kernel answers) when it
/// is not readable up to its NUL (EFAULT) or has no NUL within PATH_MAX
/// bytes (ENAMETOOLONG). A bad pointer crashed the program in the shim
/// before (pjdfstest's efault tests: SIGSEGV in strlen), and a path past
/// PATH_MAX went to the daemon (ENOENT). One process_vm_readv of this
/// process, split at the 4 KiB boundary, since it copies whole iovecs: a
/// string that ends before an unmapped page is still read.
unsafe fn user_path(p: *const c_char) -> Option<Vec<u8>> {
    const MAX: usize = libc::PATH_MAX as usize;
    if p.is_null() {
        return None;
    }
    let mut buf = vec![0u8; MAX];
    let start = p as usize;
    let first = (4096 - start % 4096).min(MAX);
    let remote = [
        libc::iovec {
            iov_base: p as *mut libc::c_void,
            iov_len: first,
        },
        libc::iovec {
            iov_base: start.wrapping_add(first) as *mut libc::c_void,
            iov_len: MAX - first,
        },
    ];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: MAX,
    };
    let parts = if first < MAX { 2 } else { 1 };
    // SAFETY: `local` is `buf`, MAX bytes; the kernel checks `remote`.
    let n = libc::process_vm_readv(libc::getpid(), &local, 1, remote.as_ptr(), parts, 0);
    if n < 0 && *libc::__errno_location() != libc::EFAULT {
        // Refused (a seccomp profile): read it in place, as before.
        let b = CStr::from_ptr(p).to_bytes();
        return (b.len() < MAX).then(|| b.to_vec());
    }
    if n <= 0 {
        return None;
    }
    let end = buf[..n as usize].iter().position(|&c| c == 0)?;
    buf.truncate(end);
    Some(buf)
}

/// The path of `p` under the mount, as `call` (an `*at` call with
/// directory descriptor `d`, or AT_FDCWD) names it: an absolute path under
/// the mount point; a relative one from the working directory or from `d`
/// when that is under the mount (`/proc/self/fd`: the kernel's name of
/// it). A relative path with `..` falls through (the daemon's walk would
/// not leave the mount where the kernel's does), as does an empty one.
unsafe fn under_at(call: &str, d: c_int, p: *const c_char) -> Option<std::path::PathBuf> {
    let b = user_path(p)?;
    let b = &b[..];
    let m = mount()?;
    let rel = if b.first() == Some(&b'/') {
        let rest = b.strip_prefix(m)?;
        if !(rest.is_empty() || rest[0] == b'/') {
            return None;
        }
        rest.to_vec()
    } else {
        if b.is_empty() {
            return None;
        }
        let base = if d == libc::AT_FDCWD {
            std::env::current_dir().ok()?
        } else {
            if opened(d).is_some() {
                return None;
            }
            std::fs::read_link(format!("/proc/self/fd/{d}")).ok()?
        };
        let base = base.as_os_str().as_bytes();
        let rest = base.strip_prefix(m)?;
        if !(rest.is_empty() || rest[0] == b'/') {
            return None;
        }
        if b.split(|c| *c == b'/').any(|c| c == b"..") {
            if logging() && !call.is_empty() {
                log(format_args!(
                    "{call} {}: falls through (..)",
                    String::from_utf8_lossy(b)
                ));
            }
            return None;
        }
        let mut r = rest.to_vec();
        r.push(b'/');
        r.extend_from_slice(b);
        r
    };
    if logging() && !call.is_empty() {
        log(format_args!(
            "{call} {}: to the daemon",
            String::from_utf8_lossy(&rel)
        ));
    }
    Some(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(&rel)))
}

/// A file the shim opened: the daemon's handle, shared by the descriptor
/// the open returned and its dups (dup, dup2, dup3, fcntl F_DUPFD), and
/// closed when the last of them is.
type Opened = std::sync::Arc<OpenedFile>;

pub struct OpenedFile {
    file: parking_lot::Mutex<Option<File>>,
    /// The path the open named, under the mount: where a descriptor handed
    /// to another process is opened again on the mount (`hand_on`).
    path: std::path::PathBuf,
}

impl std::ops::Deref for OpenedFile {
    type Target = parking_lot::Mutex<Option<File>>;
    fn deref(&self) -> &Self::Target {
        &self.file
    }
}

/// Files the shim opened, by descriptor (each dup its own entry).
static FILES: parking_lot::Mutex<Option<HashMap<c_int, Opened>>> = parking_lot::Mutex::new(None);

/// A number out of the table: the daemon's handle closes when no other
/// number (a dup) shares it. Not under the table's lock (closing there
/// deadlocked git init).
fn close_if_last(o: Opened) {
    if std::sync::Arc::strong_count(&o) == 1 {
        if let Some(f) = o.lock().take() {
            let _ = f.close_handle();
        }
    }
}

fn opened(fd: c_int) -> Option<Opened> {
    FILES.lock().as_ref()?.get(&fd).cloned()
}

fn set_errno(e: c_int) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

/// What a served call answers, or None: the daemon cannot be reached
/// (no socket, refused): fall through to the mount.
fn serve<T>(r: std::io::Result<T>, ok: impl FnOnce(T) -> c_int) -> Option<c_int> {
    match r {
        Ok(v) => Some(ok(v)),
        Err(e) => {
            let code = if let Some(p) = shoal_client::Outside::of(&e) {
                // A symlink out of the mount, or a file whose data the
                // mount serves (etcd): the kernel goes on.
                if logging() {
                    log(format_args!(
                        "  falls through: continues at {}",
                        p.display()
                    ));
                }
                return None;
            } else {
                e.raw_os_error().unwrap_or(libc::EIO)
            };
            if code == libc::ECONNREFUSED || code == libc::ENOENT && client_down() {
                if logging() {
                    log(format_args!("  falls through: the daemon serves no client"));
                }
                return None;
            }
            set_errno(code);
            Some(-1)
        }
    }
}

/// The socket is missing: the daemon is not serving clients.
fn client_down() -> bool {
    std::env::var_os("SHOAL_CLIENT_SOCK").is_none_or(|s| !Path::new(&s).exists())
}

macro_rules! real {
    ($name:literal, $t:ty) => {{
        static F: OnceLock<usize> = OnceLock::new();
        let p = *F.get_or_init(|| {
            // SAFETY: a NUL-terminated name; RTLD_NEXT finds libc's.
            unsafe { libc::dlsym(libc::RTLD_NEXT, concat!($name, "\0").as_ptr().cast()) as usize }
        });
        // SAFETY: libc's function of this name has this type.
        unsafe { std::mem::transmute::<usize, $t>(p) }
    }};
}

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, libc::mode_t) -> c_int;
type OpenatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, libc::mode_t) -> c_int;

unsafe fn shim_open(d: c_int, p: *const c_char, flags: c_int, mode: libc::mode_t) -> Option<c_int> {
    let rel = under_at("open", d, p)?;
    // O_PATH, O_DIRECTORY, O_TMPFILE and directories: the mount.
    if flags & (libc::O_PATH | libc::O_DIRECTORY | libc::O_TMPFILE) != 0 {
        return None;
    }
    let c = client()?;
    match c.open(&rel, flags & !libc::O_CLOEXEC, mode) {
        Ok(f) => {
            let fd = f.fd();
            if flags & libc::O_CLOEXEC == 0 {
                // The client's descriptors are close-on-exec; open's are
                // not unless asked.
                libc::fcntl(fd, libc::F_SETFD, 0);
            }
            let stale = FILES.lock().get_or_insert_with(HashMap::new).insert(
                fd,
                std::sync::Arc::new(OpenedFile {
                    file: parking_lot::Mutex::new(Some(f)),
                    path: rel,
                }),
            );
            // A number still in the table was closed behind the shim's
            // back (glibc's fclose calls its internal close, not `close`;
            // close_range; a raw system call): that descriptor is gone and
            // the number is this file's now. Its handle closes (if no dup
            // shares it), its number is not closed again, and not under
            // the table's lock (dropping it there deadlocked git init).
            if let Some(p) = stale {
                close_if_last(p);
            }
            Some(fd)
        }
        // A directory, or a fifo, device or socket (the daemon hands out
        // regular files only): the kernel opens it.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EISDIR | libc::EOPNOTSUPP)) => None,
        Err(e) => serve::<()>(Err(e), |_| 0),
    }
}

#[no_mangle]
pub unsafe extern "C" fn open(p: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
    shim_open(libc::AT_FDCWD, p, flags, mode)
        .unwrap_or_else(|| real!("open", OpenFn)(p, flags, mode))
}
#[no_mangle]
pub unsafe extern "C" fn open64(p: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
    shim_open(libc::AT_FDCWD, p, flags, mode)
        .unwrap_or_else(|| real!("open64", OpenFn)(p, flags, mode))
}
#[no_mangle]
pub unsafe extern "C" fn openat(
    d: c_int,
    p: *const c_char,
    flags: c_int,
    mode: libc::mode_t,
) -> c_int {
    shim_open(d, p, flags, mode).unwrap_or_else(|| real!("openat", OpenatFn)(d, p, flags, mode))
}
#[no_mangle]
pub unsafe extern "C" fn openat64(
    d: c_int,
    p: *const c_char,
    flags: c_int,
    mode: libc::mode_t,
) -> c_int {
    shim_open(d, p, flags, mode).unwrap_or_else(|| real!("openat64", OpenatFn)(d, p, flags, mode))
}
#[no_mangle]
pub unsafe extern "C" fn creat(p: *const c_char, mode: libc::mode_t) -> c_int {
    open(p, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, mode)
}
#[no_mangle]
pub unsafe extern "C" fn creat64(p: *const c_char, mode: libc::mode_t) -> c_int {
    open64(p, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, mode)
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    let real = real!("close", unsafe extern "C" fn(c_int) -> c_int);
    // Out of the table first, the lock released: nothing below may wait
    // for it.
    let Some(o) = FILES.lock().as_mut().and_then(|m| m.remove(&fd)) else {
        return real(fd);
    };
    // The last of the descriptor and its dups: the daemon's handle closes
    // (it takes the size and time). The descriptor number is closed here
    // in every case, never by the `File`.
    let last = std::sync::Arc::strong_count(&o) == 1;
    let f = if last { o.lock().take() } else { None };
    let r = real(fd);
    match f {
        Some(f) => serve(f.close_handle(), |_| r).unwrap_or(-1),
        None => r,
    }
}

/// Hand descriptor `fd` to another process (`sendmsg`'s SCM_RIGHTS): a
/// descriptor the shim made is the data object's, which the daemon unpins
/// when this process closes its handle, and the receiver's bytes would
/// then go to an object that is no longer the file's. So the file is
/// opened again on the mount (the kernel's open: the daemon pins the same
/// object for it), with the same access mode, status flags and offset, and
/// put on the same number (`dup3`, keeping close-on-exec); then the
/// handle of that number closes as `close` closes it. Raw system calls
/// throughout: the shim's own open and dup3 would take the call back.
/// Left as it is (the object's) when the path no longer names the file
/// (renamed since the open) or the mount refuses the open.
unsafe fn hand_on(fd: c_int) {
    let Some(o) = opened(fd) else {
        return;
    };
    let (Some(m), Some(ino)) = (mount(), o.lock().as_ref().map(|f| f.stat.ino)) else {
        return;
    };
    let mut full = m.to_vec();
    full.extend_from_slice(o.path.as_os_str().as_bytes());
    let Ok(full) = std::ffi::CString::new(full) else {
        return;
    };
    let fl = libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFL) as c_int;
    let fdfl = libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFD) as c_int;
    if fl < 0 || fdfl < 0 {
        return;
    }
    let keep = libc::O_ACCMODE | libc::O_APPEND | libc::O_NONBLOCK | libc::O_DSYNC | libc::O_SYNC;
    let flags = (fl & keep) | libc::O_CLOEXEC | libc::O_NOFOLLOW;
    let new = libc::syscall(libc::SYS_openat, libc::AT_FDCWD, full.as_ptr(), flags, 0) as c_int;
    if new < 0 {
        if logging() {
            log(format_args!(
                "sendmsg {}: kept the object's descriptor (open on the mount: errno {})",
                o.path.display(),
                *libc::__errno_location()
            ));
        }
        return;
    }
    let mut st: libc::stat = std::mem::zeroed();
    let off = libc::syscall(libc::SYS_lseek, fd, 0, libc::SEEK_CUR);
    let same =
        libc::syscall(libc::SYS_fstat, new, &mut st as *mut libc::stat) == 0 && st.st_ino == ino;
    let cloexec = if fdfl & libc::FD_CLOEXEC != 0 {
        libc::O_CLOEXEC
    } else {
        0
    };
    if !same
        || off < 0
        || libc::syscall(libc::SYS_lseek, new, off, libc::SEEK_SET) < 0
        || libc::syscall(libc::SYS_dup3, new, fd, cloexec) < 0
    {
        libc::syscall(libc::SYS_close, new);
        if logging() {
            log(format_args!(
                "sendmsg {}: kept the object's descriptor ({})",
                o.path.display(),
                if same {
                    "offset or dup3 refused"
                } else {
                    "the path names another file now"
                }
            ));
        }
        return;
    }
    libc::syscall(libc::SYS_close, new);
    if logging() {
        log(format_args!(
            "sendmsg {}: handed on a descriptor of the mount",
            o.path.display()
        ));
    }
    drop(o);
    // The number is the mount's file now: out of the table, its handle
    // closed if it was the last of its dups.
    let Some(o) = FILES.lock().as_mut().and_then(|m| m.remove(&fd)) else {
        return;
    };
    close_if_last(o);
}

/// sendmsg(2): the descriptors it passes (SCM_RIGHTS) that the shim made
/// are handed on as descriptors of the mount first (`hand_on`).
#[no_mangle]
pub unsafe extern "C" fn sendmsg(s: c_int, msg: *const libc::msghdr, flags: c_int) -> isize {
    let real = real!(
        "sendmsg",
        unsafe extern "C" fn(c_int, *const libc::msghdr, c_int) -> isize
    );
    let any = FILES.lock().as_ref().is_some_and(|m| !m.is_empty());
    if any && !msg.is_null() && !(*msg).msg_control.is_null() {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let n = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<c_int>();
                let fds = libc::CMSG_DATA(c) as *const c_int;
                for i in 0..n {
                    hand_on(fds.add(i).read_unaligned());
                }
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    real(s, msg, flags)
}

/// The set*id calls: the process's credentials change, so the client's
/// connections, whose credentials the daemon read at connect, are dropped
/// and the next call connects again (`shoal_client::credentials_changed`).
/// Without it a process that dropped root kept root's rights through the
/// shim (pjdfstest's tests as another user found it). A raw system call
/// that changes them is not seen (docs/client.md).
macro_rules! setid {
    ($name:ident, $sym:literal, $($arg:ident: $t:ty),*) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $t),*) -> c_int {
            let real = real!($sym, unsafe extern "C" fn($($t),*) -> c_int);
            let r = real($($arg),*);
            shoal_client::credentials_changed();
            r
        }
    };
}
setid!(setuid, "setuid", u: libc::uid_t);
setid!(seteuid, "seteuid", u: libc::uid_t);
setid!(setreuid, "setreuid", r: libc::uid_t, e: libc::uid_t);
setid!(setresuid, "setresuid", r: libc::uid_t, e: libc::uid_t, s: libc::uid_t);
setid!(setgid, "setgid", g: libc::gid_t);
setid!(setegid, "setegid", g: libc::gid_t);
setid!(setregid, "setregid", r: libc::gid_t, e: libc::gid_t);
setid!(setresgid, "setresgid", r: libc::gid_t, e: libc::gid_t, s: libc::gid_t);
setid!(setgroups, "setgroups", n: libc::size_t, list: *const libc::gid_t);
setid!(setfsuid, "setfsuid", u: libc::uid_t);
setid!(setfsgid, "setfsgid", g: libc::gid_t);

/// Whether directory `p` (from `d`) is a mount point (another filesystem,
/// or a bind mount of this one, on it): its rmdir is the kernel's (EBUSY),
/// which the daemon cannot see. One raw statx through the mount (its
/// attributes are cached), not the shim's: STATX_ATTR_MOUNT_ROOT.
unsafe fn mounted_on(d: c_int, p: *const c_char) -> bool {
    let mut st: libc::statx = std::mem::zeroed();
    let r = libc::syscall(
        libc::SYS_statx,
        d,
        p,
        libc::AT_SYMLINK_NOFOLLOW,
        libc::STATX_TYPE,
        &mut st as *mut libc::statx,
    );
    let root = libc::STATX_ATTR_MOUNT_ROOT as u64;
    r == 0 && st.stx_attributes_mask & root != 0 && st.stx_attributes & root != 0
}

/// umask(2): the client's creates take the process's umask, as the
/// kernel's do (they kept the one the process had when the shim started).
#[no_mangle]
pub unsafe extern "C" fn umask(mask: libc::mode_t) -> libc::mode_t {
    let old = real!("umask", unsafe extern "C" fn(libc::mode_t) -> libc::mode_t)(mask);
    if let Some(c) = client() {
        c.set_umask(mask);
    }
    old
}

/// close_range(2): the descriptors the shim made in the range close as
/// `close` closes them (their handles too), the shim's own sockets to the
/// daemon stay open, and the rest close (or turn close-on-exec) as asked.
/// Closed behind the shim's back, a socket's number went to the program's
/// next open, and the dead connection then waited on that file, or closed
/// it when dropped.
#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    close_range_keeping(first, last, flags)
}

/// closefrom(3): glibc's calls close_range inside itself, where no preload
/// reaches, so it is served here the same way.
#[no_mangle]
pub unsafe extern "C" fn closefrom(low: c_int) {
    close_range_keeping(low.max(0) as c_uint, c_uint::MAX, 0);
}

unsafe fn close_range_keeping(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    let real = real!(
        "close_range",
        unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int
    );
    if first > last {
        return real(first, last, flags); // EINVAL, as the kernel says
    }
    let within = |fd: c_int| fd >= 0 && (first..=last).contains(&(fd as c_uint));
    if flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0 {
        let mine: Vec<c_int> = FILES
            .lock()
            .as_ref()
            .map(|m| m.keys().copied().filter(|&fd| within(fd)).collect())
            .unwrap_or_default();
        for fd in mine {
            close(fd);
        }
    }
    let mut keep: Vec<c_uint> = shoal_client::sockets()
        .into_iter()
        .filter(|&fd| within(fd))
        .map(|fd| fd as c_uint)
        .collect();
    keep.sort_unstable();
    keep.dedup();
    // The range less the sockets, piece by piece.
    let (mut from, mut r) = (first, 0);
    for k in keep {
        if k > from && real(from, k - 1, flags) != 0 {
            r = -1;
        }
        match k.checked_add(1) {
            Some(n) => from = n,
            None => return r,
        }
    }
    if from <= last && real(from, last, flags) != 0 {
        r = -1;
    }
    r
}

/// A dup of a shim descriptor shares its handle.
fn dup_of(old: c_int, new: c_int) -> c_int {
    if new >= 0 {
        let mut t = FILES.lock();
        if let Some(m) = t.as_mut() {
            // dup2 onto a shim descriptor closed that one first.
            let prev = m.remove(&new);
            if let Some(o) = m.get(&old).cloned() {
                m.insert(new, o);
            }
            drop(t);
            if let Some(p) = prev {
                close_if_last(p);
            }
        }
    }
    new
}

#[no_mangle]
pub unsafe extern "C" fn dup(old: c_int) -> c_int {
    dup_of(old, real!("dup", unsafe extern "C" fn(c_int) -> c_int)(old))
}
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if old == new {
        return real!("dup2", unsafe extern "C" fn(c_int, c_int) -> c_int)(old, new);
    }
    dup_of(
        old,
        real!("dup2", unsafe extern "C" fn(c_int, c_int) -> c_int)(old, new),
    )
}
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    dup_of(
        old,
        real!("dup3", unsafe extern "C" fn(c_int, c_int, c_int) -> c_int)(old, new, flags),
    )
}
/// fcntl: F_DUPFD and F_DUPFD_CLOEXEC of a shim descriptor share its
/// handle; the rest is libc's. Its third argument is read as an integer
/// (variadic: see the crate's doc), which is what every command passes.
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: libc::c_long) -> c_int {
    let r = real!(
        "fcntl",
        unsafe extern "C" fn(c_int, c_int, libc::c_long) -> c_int
    )(fd, cmd, arg);
    if cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC {
        return dup_of(fd, r);
    }
    r
}
#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: libc::c_long) -> c_int {
    let r = real!(
        "fcntl64",
        unsafe extern "C" fn(c_int, c_int, libc::c_long) -> c_int
    )(fd, cmd, arg);
    if cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC {
        return dup_of(fd, r);
    }
    r
}

unsafe fn shim_fstat(fd: c_int, st: *mut libc::stat) -> Option<c_int> {
    let o = opened(fd)?;
    let r = o.lock().as_ref()?.fstat();
    serve(r, |s| {
        shoal_client::capi::fill_stat(&s, st);
        (*st).st_dev = mount_dev();
        0
    })
}

/// The mount's device number, as the kernel reports it in a stat through
/// the mount (a raw system call, once): a file's stat from the daemon
/// carries it, or a program comparing a path's stat with its descriptor's
/// (cp: "replaced while being copied") sees two files.
fn mount_dev() -> libc::dev_t {
    static DEV: OnceLock<libc::dev_t> = OnceLock::new();
    *DEV.get_or_init(|| {
        let Some(m) = mount().and_then(|m| std::ffi::CString::new(m).ok()) else {
            return 0;
        };
        // SAFETY: a zeroed stat buffer the kernel fills; a C string.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            let r = libc::syscall(libc::SYS_newfstatat, libc::AT_FDCWD, m.as_ptr(), &mut st, 0);
            if r == 0 {
                st.st_dev
            } else {
                0
            }
        }
    })
}

type FstatFn = unsafe extern "C" fn(c_int, *mut libc::stat) -> c_int;
type FstatatFn = unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int;

#[no_mangle]
pub unsafe extern "C" fn fstat(fd: c_int, st: *mut libc::stat) -> c_int {
    shim_fstat(fd, st).unwrap_or_else(|| real!("fstat", FstatFn)(fd, st))
}
#[no_mangle]
pub unsafe extern "C" fn fstat64(fd: c_int, st: *mut libc::stat) -> c_int {
    shim_fstat(fd, st).unwrap_or_else(|| real!("fstat64", FstatFn)(fd, st))
}
unsafe fn shim_fstatat(
    fd: c_int,
    p: *const c_char,
    st: *mut libc::stat,
    flags: c_int,
) -> Option<c_int> {
    if flags & libc::AT_EMPTY_PATH == 0 || p.is_null() || *p != 0 {
        return None;
    }
    shim_fstat(fd, st)
}
#[no_mangle]
pub unsafe extern "C" fn fstatat(
    fd: c_int,
    p: *const c_char,
    st: *mut libc::stat,
    flags: c_int,
) -> c_int {
    shim_fstatat(fd, p, st, flags).unwrap_or_else(|| real!("fstatat", FstatatFn)(fd, p, st, flags))
}
#[no_mangle]
pub unsafe extern "C" fn fstatat64(
    fd: c_int,
    p: *const c_char,
    st: *mut libc::stat,
    flags: c_int,
) -> c_int {
    shim_fstatat(fd, p, st, flags)
        .unwrap_or_else(|| real!("fstatat64", FstatatFn)(fd, p, st, flags))
}

unsafe fn shim_sync(fd: c_int, data: bool) -> Option<c_int> {
    let o = opened(fd)?;
    let g = o.lock();
    let f = g.as_ref()?;
    let r = if data { f.sync_data() } else { f.sync_all() };
    serve(r, |_| 0)
}
/// After a size change through a shim descriptor (ftruncate, fallocate):
/// the daemon takes the object's size in at once (an fstat does), so that
/// stat through the mount shows it, as it would a truncate on the mount.
/// Writes are taken in at close and fsync (docs/client.md).
fn size_changed(fd: c_int) {
    if let Some(o) = opened(fd) {
        if let Some(f) = o.lock().as_ref() {
            let _ = f.fstat();
        }
    }
}

macro_rules! sized {
    ($name:ident, $sym:literal, $fd:ident $(, $arg:ident: $t:ty)*) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name($fd: c_int $(, $arg: $t)*) -> c_int {
            let real = real!($sym, unsafe extern "C" fn(c_int $(, $t)*) -> c_int);
            let r = real($fd $(, $arg)*);
            if r == 0 {
                size_changed($fd);
            }
            r
        }
    };
}
sized!(ftruncate, "ftruncate", fd, len: libc::off_t);
sized!(ftruncate64, "ftruncate64", fd, len: libc::off64_t);
sized!(fallocate, "fallocate", fd, mode: c_int, off: libc::off_t, len: libc::off_t);
sized!(fallocate64, "fallocate64", fd, mode: c_int, off: libc::off64_t, len: libc::off64_t);
// posix_fallocate answers its error (0: done), not -1 and errno.
sized!(posix_fallocate, "posix_fallocate", fd, off: libc::off_t, len: libc::off_t);
sized!(posix_fallocate64, "posix_fallocate64", fd, off: libc::off64_t, len: libc::off64_t);

#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    shim_sync(fd, false).unwrap_or_else(|| real!("fsync", unsafe extern "C" fn(c_int) -> c_int)(fd))
}
#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    shim_sync(fd, true)
        .unwrap_or_else(|| real!("fdatasync", unsafe extern "C" fn(c_int) -> c_int)(fd))
}

type PathFn = unsafe extern "C" fn(*const c_char) -> c_int;

#[no_mangle]
pub unsafe extern "C" fn mkdir(p: *const c_char, mode: libc::mode_t) -> c_int {
    under_at("mkdir", libc::AT_FDCWD, p)
        .and_then(|r| serve(client()?.mkdir(r, mode), |_| 0))
        .unwrap_or_else(|| {
            real!(
                "mkdir",
                unsafe extern "C" fn(*const c_char, libc::mode_t) -> c_int
            )(p, mode)
        })
}
#[no_mangle]
pub unsafe extern "C" fn mkdirat(d: c_int, p: *const c_char, mode: libc::mode_t) -> c_int {
    under_at("mkdirat", d, p)
        .and_then(|r| serve(client()?.mkdir(r, mode), |_| 0))
        .unwrap_or_else(|| {
            real!(
                "mkdirat",
                unsafe extern "C" fn(c_int, *const c_char, libc::mode_t) -> c_int
            )(d, p, mode)
        })
}
#[no_mangle]
pub unsafe extern "C" fn unlink(p: *const c_char) -> c_int {
    under_at("unlink", libc::AT_FDCWD, p)
        .and_then(|r| serve(client()?.unlink(r), |_| 0))
        .unwrap_or_else(|| real!("unlink", PathFn)(p))
}
#[no_mangle]
pub unsafe extern "C" fn rmdir(p: *const c_char) -> c_int {
    under_at("rmdir", libc::AT_FDCWD, p)
        .filter(|_| !mounted_on(libc::AT_FDCWD, p))
        .and_then(|r| serve(client()?.rmdir(r), |_| 0))
        .unwrap_or_else(|| real!("rmdir", PathFn)(p))
}
#[no_mangle]
pub unsafe extern "C" fn unlinkat(d: c_int, p: *const c_char, flags: c_int) -> c_int {
    under_at("unlinkat", d, p)
        .filter(|_| flags & libc::AT_REMOVEDIR == 0 || !mounted_on(d, p))
        .and_then(|r| {
            let c = client()?;
            serve(
                if flags & libc::AT_REMOVEDIR != 0 {
                    c.rmdir(r)
                } else {
                    c.unlink(r)
                },
                |_| 0,
            )
        })
        .unwrap_or_else(|| {
            real!(
                "unlinkat",
                unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int
            )(d, p, flags)
        })
}

unsafe fn shim_rename(
    da: c_int,
    a: *const c_char,
    db: c_int,
    b: *const c_char,
    flags: u32,
) -> Option<c_int> {
    let (ra, rb) = (under_at("rename", da, a)?, under_at("rename to", db, b)?);
    serve(client()?.rename(ra, rb, flags), |_| 0)
}
#[no_mangle]
pub unsafe extern "C" fn rename(a: *const c_char, b: *const c_char) -> c_int {
    shim_rename(libc::AT_FDCWD, a, libc::AT_FDCWD, b, 0).unwrap_or_else(|| {
        real!(
            "rename",
            unsafe extern "C" fn(*const c_char, *const c_char) -> c_int
        )(a, b)
    })
}
type RenameatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char) -> c_int;
#[no_mangle]
pub unsafe extern "C" fn renameat(
    da: c_int,
    a: *const c_char,
    db: c_int,
    b: *const c_char,
) -> c_int {
    shim_rename(da, a, db, b, 0).unwrap_or_else(|| real!("renameat", RenameatFn)(da, a, db, b))
}
type Renameat2Fn = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, u32) -> c_int;
#[no_mangle]
pub unsafe extern "C" fn renameat2(
    da: c_int,
    a: *const c_char,
    db: c_int,
    b: *const c_char,
    flags: u32,
) -> c_int {
    shim_rename(da, a, db, b, flags)
        .unwrap_or_else(|| real!("renameat2", Renameat2Fn)(da, a, db, b, flags))
}

/// Files mapped by the program: their handles stay open until the
/// process ends (the daemon closes them at the hang-up). A close would
/// unpin a small file's object, its bytes going back to its record, and
/// the mapping would fault (git maps its config, closes the descriptor,
/// then reads the map: SIGBUS).
static MAPPED: parking_lot::Mutex<Vec<Opened>> = parking_lot::Mutex::new(Vec::new());

type MmapFn = unsafe extern "C" fn(
    *mut libc::c_void,
    libc::size_t,
    c_int,
    c_int,
    c_int,
    libc::off_t,
) -> *mut libc::c_void;

unsafe fn keep_mapped(fd: c_int, r: *mut libc::c_void) -> *mut libc::c_void {
    if r != libc::MAP_FAILED && fd >= 0 {
        if let Some(o) = opened(fd) {
            if logging() {
                log(format_args!(
                    "mmap of descriptor {fd}: its handle kept until exit"
                ));
            }
            MAPPED.lock().push(o);
        }
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn mmap(
    a: *mut libc::c_void,
    len: libc::size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: libc::off_t,
) -> *mut libc::c_void {
    keep_mapped(fd, real!("mmap", MmapFn)(a, len, prot, flags, fd, off))
}
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    a: *mut libc::c_void,
    len: libc::size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: libc::off_t,
) -> *mut libc::c_void {
    keep_mapped(fd, real!("mmap64", MmapFn)(a, len, prot, flags, fd, off))
}

extern "C" fn before_fork() {
    std::mem::forget(FILES.lock());
}
extern "C" fn after_fork_parent() {
    // SAFETY: locked by `before_fork` on this thread.
    unsafe { FILES.force_unlock() };
}
extern "C" fn after_fork_child() {
    // SAFETY: locked by `before_fork` on this thread, copied locked.
    unsafe { FILES.force_unlock() };
    if let Some(m) = FILES.lock().take() {
        for (_, o) in m {
            if let Some(f) = o.lock().take() {
                f.forget();
            }
        }
    }
    for o in std::mem::take(&mut *MAPPED.lock()) {
        if let Some(f) = o.lock().take() {
            f.forget();
        }
    }
    shoal_client::forget_connections();
}

extern "C" fn init() {
    // A descriptor handed to another process (fork, exec) keeps its
    // file's bytes pinned while any holder of the connection lives.
    shoal_client::set_inheritable(true);
    // SAFETY: three plain functions.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_parent),
            Some(after_fork_child),
        );
    }
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
