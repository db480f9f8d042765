//! The C ABI (`include/shoal.h`): the client's calls as C functions that
//! answer as system calls do, 0 (or a count, or a descriptor) on success
//! and -1 with `errno` set on failure. A path leading out of the mount is
//! EXDEV (the C caller then uses the path through the kernel).
//!
//! Files opened here are real descriptors (the data object's); the daemon's
//! handle is kept beside each, by descriptor number, until `shoal_close`.
//! A descriptor closed with close(2) instead leaves the handle, and the
//! file's size and time are taken when the process exits (the daemon sees
//! the connection end).

use crate::{Client, File};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, OsStr};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;

/// Files open through the C ABI, by descriptor.
static FILES: Mutex<Option<HashMap<c_int, File>>> = Mutex::new(None);

fn set_errno(e: &io::Error) {
    let code = if crate::Outside::of(e).is_some() {
        libc::EXDEV
    } else {
        e.raw_os_error().unwrap_or(libc::EIO)
    };
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = code };
}

fn ret<T>(r: io::Result<T>, ok: impl FnOnce(T) -> isize) -> isize {
    match r {
        Ok(v) => ok(v),
        Err(e) => {
            set_errno(&e);
            -1
        }
    }
}

/// A C string as a path; None (EFAULT) for NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn path<'a>(p: *const c_char) -> Option<&'a Path> {
    if p.is_null() {
        return None;
    }
    Some(Path::new(OsStr::from_bytes(CStr::from_ptr(p).to_bytes())))
}

fn efault() -> isize {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = libc::EFAULT };
    -1
}

macro_rules! with_path {
    ($c:expr, $p:expr, |$cl:ident, $pp:ident| $body:expr) => {{
        // SAFETY: the caller passes a client from shoal_connect and C strings.
        match (unsafe { $c.as_ref() }, unsafe { path($p) }) {
            (Some($cl), Some($pp)) => $body,
            _ => efault(),
        }
    }};
}

/// A client of the mount at `mnt` (or of `SHOAL_CLIENT_SOCK`); NULL with
/// errno on failure. Connections are made per thread on first use.
///
/// # Safety
/// `mnt` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn shoal_connect(mnt: *const c_char) -> *mut Client {
    let Some(m) = path(mnt) else {
        efault();
        return std::ptr::null_mut();
    };
    match Client::for_mount(m) {
        Ok(c) => Box::into_raw(Box::new(c)),
        Err(e) => {
            set_errno(&e);
            std::ptr::null_mut()
        }
    }
}

/// Free a client from `shoal_connect` (files it opened stay open).
///
/// # Safety
/// `c` comes from `shoal_connect` and is not used after.
#[no_mangle]
pub unsafe extern "C" fn shoal_free(c: *mut Client) {
    if !c.is_null() {
        drop(Box::from_raw(c));
    }
}

/// `s` written into a C `struct stat` (zeroed first): the C ABI's and the
/// preload shim's answer to stat(2).
///
/// # Safety
/// `out` points to a writable `struct stat`.
pub unsafe fn fill_stat(s: &crate::Stat, out: *mut libc::stat) {
    // SAFETY: the caller's stat buffer; zeroed, then the fields set.
    unsafe {
        std::ptr::write_bytes(out, 0, 1);
        let o = &mut *out;
        o.st_ino = s.ino;
        o.st_mode = s.mode;
        o.st_nlink = s.nlink as _;
        o.st_uid = s.uid;
        o.st_gid = s.gid;
        o.st_rdev = s.rdev as _;
        o.st_size = s.size as _;
        o.st_blocks = s.blocks as _;
        o.st_blksize = s.blksize as _;
        o.st_atime = s.atime.0;
        o.st_atime_nsec = s.atime.1 as _;
        o.st_mtime = s.mtime.0;
        o.st_mtime_nsec = s.mtime.1 as _;
        o.st_ctime = s.ctime.0;
        o.st_ctime_nsec = s.ctime.1 as _;
    }
}

/// stat(2) (`follow` 1) or lstat(2) (0).
///
/// # Safety
/// `c` from shoal_connect, `p` a C string, `st` a writable struct stat.
#[no_mangle]
pub unsafe extern "C" fn shoal_stat(
    c: *const Client,
    p: *const c_char,
    st: *mut libc::stat,
    follow: c_int,
) -> c_int {
    if st.is_null() {
        return efault() as c_int;
    }
    with_path!(c, p, |cl, pp| ret(cl.stat_at(0, pp, follow != 0), |s| {
        fill_stat(&s, st);
        0
    })) as c_int
}

/// mkdir(2).
///
/// # Safety
/// As `shoal_stat`.
#[no_mangle]
pub unsafe extern "C" fn shoal_mkdir(c: *const Client, p: *const c_char, mode: u32) -> c_int {
    with_path!(c, p, |cl, pp| ret(cl.mkdir(pp, mode), |_| 0)) as c_int
}

/// A new empty file, not opened (creat(2) and close(2) in one call).
///
/// # Safety
/// As `shoal_stat`.
#[no_mangle]
pub unsafe extern "C" fn shoal_create(c: *const Client, p: *const c_char, mode: u32) -> c_int {
    with_path!(c, p, |cl, pp| ret(cl.create(pp, mode), |_| 0)) as c_int
}

/// unlink(2).
///
/// # Safety
/// As `shoal_stat`.
#[no_mangle]
pub unsafe extern "C" fn shoal_unlink(c: *const Client, p: *const c_char) -> c_int {
    with_path!(c, p, |cl, pp| ret(cl.unlink(pp), |_| 0)) as c_int
}

/// rmdir(2).
///
/// # Safety
/// As `shoal_stat`.
#[no_mangle]
pub unsafe extern "C" fn shoal_rmdir(c: *const Client, p: *const c_char) -> c_int {
    with_path!(c, p, |cl, pp| ret(cl.rmdir(pp), |_| 0)) as c_int
}

/// renameat2(2)'s flags: RENAME_NOREPLACE, RENAME_EXCHANGE.
///
/// # Safety
/// As `shoal_stat`, and `to` a C string.
#[no_mangle]
pub unsafe extern "C" fn shoal_rename(
    c: *const Client,
    from: *const c_char,
    to: *const c_char,
    flags: u32,
) -> c_int {
    let Some(t) = path(to) else {
        return efault() as c_int;
    };
    with_path!(c, from, |cl, f| ret(cl.rename(f, t, flags), |_| 0)) as c_int
}

/// symlink(2): a link at `p` to `target`.
///
/// # Safety
/// As `shoal_rename`.
#[no_mangle]
pub unsafe extern "C" fn shoal_symlink(
    c: *const Client,
    target: *const c_char,
    p: *const c_char,
) -> c_int {
    let Some(t) = path(target) else {
        return efault() as c_int;
    };
    with_path!(c, p, |cl, pp| ret(cl.symlink(t, pp), |_| 0)) as c_int
}

/// link(2).
///
/// # Safety
/// As `shoal_rename`.
#[no_mangle]
pub unsafe extern "C" fn shoal_link(
    c: *const Client,
    from: *const c_char,
    to: *const c_char,
) -> c_int {
    let Some(t) = path(to) else {
        return efault() as c_int;
    };
    with_path!(c, from, |cl, f| ret(cl.link(f, t), |_| 0)) as c_int
}

/// readlink(2): at most `size` bytes, no NUL added; the length.
///
/// # Safety
/// As `shoal_stat`, `buf` writable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_readlink(
    c: *const Client,
    p: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> isize {
    with_path!(c, p, |cl, pp| ret(cl.readlink(pp), |t| {
        let b = t.as_os_str().as_bytes();
        let n = b.len().min(size);
        std::ptr::copy_nonoverlapping(b.as_ptr(), buf.cast(), n);
        n as isize
    }))
}

/// A regular file's bytes whole, in one call (no descriptor): the file's
/// length, its first `size` bytes copied into `buf` (a longer file is cut
/// there: call again with its length); EFBIG past about 1 MiB (open it).
///
/// # Safety
/// As `shoal_stat`, `buf` writable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_read_file(
    c: *const Client,
    p: *const c_char,
    buf: *mut c_void,
    size: usize,
) -> isize {
    with_path!(c, p, |cl, pp| ret(cl.read_file(pp), |v| {
        std::ptr::copy_nonoverlapping(v.as_ptr(), buf.cast(), v.len().min(size));
        v.len() as isize
    }))
}

/// chmod(2).
///
/// # Safety
/// As `shoal_stat`.
#[no_mangle]
pub unsafe extern "C" fn shoal_chmod(c: *const Client, p: *const c_char, mode: u32) -> c_int {
    with_path!(c, p, |cl, pp| ret(cl.chmod(pp, mode), |_| 0)) as c_int
}

/// truncate(2).
///
/// # Safety
/// As `shoal_stat`.
#[no_mangle]
pub unsafe extern "C" fn shoal_truncate(c: *const Client, p: *const c_char, size: u64) -> c_int {
    with_path!(c, p, |cl, pp| ret(cl.truncate(pp, size), |_| 0)) as c_int
}

/// open(2) of a regular file: a real descriptor on the file's bytes (read,
/// write, mmap, poll, dup as any); close it with `shoal_close`.
///
/// # Safety
/// As `shoal_stat`.
#[no_mangle]
pub unsafe extern "C" fn shoal_open(
    c: *const Client,
    p: *const c_char,
    flags: c_int,
    mode: u32,
) -> c_int {
    with_path!(c, p, |cl, pp| ret(cl.open(pp, flags, mode), |f| {
        let fd = f.as_raw_fd();
        FILES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashMap::new)
            .insert(fd, f);
        fd as isize
    })) as c_int
}

fn take(fd: c_int) -> Option<File> {
    FILES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()?
        .remove(&fd)
}

/// Close a descriptor from `shoal_open`: the daemon takes the file's size
/// and time. EBADF for another descriptor.
#[no_mangle]
pub extern "C" fn shoal_close(fd: c_int) -> c_int {
    match take(fd) {
        Some(f) => ret(f.close(), |_| 0) as c_int,
        None => ret::<()>(Err(io::Error::from_raw_os_error(libc::EBADF)), |_| 0) as c_int,
    }
}

/// fsync(2) (`datasync` 0) or fdatasync(2) of a descriptor from `shoal_open`.
#[no_mangle]
pub extern "C" fn shoal_fsync(fd: c_int, datasync: c_int) -> c_int {
    let files = FILES.lock().unwrap_or_else(|e| e.into_inner());
    match files.as_ref().and_then(|m| m.get(&fd)) {
        Some(f) => {
            let r = if datasync != 0 {
                f.sync_data()
            } else {
                f.sync_all()
            };
            ret(r, |_| 0) as c_int
        }
        None => ret::<()>(Err(io::Error::from_raw_os_error(libc::EBADF)), |_| 0) as c_int,
    }
}

/// Call `cb(arg, name, ino, type)` for each entry of a directory but `.`
/// and `..` (`type` as dirent's d_type); a non-zero answer stops the walk
/// and is returned.
///
/// # Safety
/// As `shoal_stat`; `cb` a valid function.
#[no_mangle]
pub unsafe extern "C" fn shoal_readdir(
    c: *const Client,
    p: *const c_char,
    cb: extern "C" fn(*mut c_void, *const c_char, u64, u8) -> c_int,
    arg: *mut c_void,
) -> c_int {
    with_path!(c, p, |cl, pp| ret(cl.readdir(pp), |v| {
        for e in v {
            let Ok(name) = std::ffi::CString::new(e.name) else {
                continue;
            };
            let r = cb(arg, name.as_ptr(), e.ino, e.kind);
            if r != 0 {
                return r as isize;
            }
        }
        0
    })) as c_int
}

/// getxattr(2): the value's length; with `size` 0, only the length.
///
/// # Safety
/// As `shoal_stat`, `name` a C string, `buf` writable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_getxattr(
    c: *const Client,
    p: *const c_char,
    name: *const c_char,
    buf: *mut c_void,
    size: usize,
) -> isize {
    if name.is_null() {
        return efault();
    }
    let n = CStr::from_ptr(name).to_bytes();
    with_path!(c, p, |cl, pp| match cl.getxattr(pp, n) {
        Ok(v) if size == 0 => v.len() as isize,
        Ok(v) if v.len() > size =>
            ret::<()>(Err(io::Error::from_raw_os_error(libc::ERANGE)), |_| 0),
        Ok(v) => {
            std::ptr::copy_nonoverlapping(v.as_ptr(), buf.cast(), v.len());
            v.len() as isize
        }
        Err(e) => ret::<()>(Err(e), |_| 0),
    })
}

/// setxattr(2).
///
/// # Safety
/// As `shoal_getxattr`, `value` readable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn shoal_setxattr(
    c: *const Client,
    p: *const c_char,
    name: *const c_char,
    value: *const c_void,
    size: usize,
    flags: c_int,
) -> c_int {
    if name.is_null() || (value.is_null() && size > 0) {
        return efault() as c_int;
    }
    let n = CStr::from_ptr(name).to_bytes();
    let v: &[u8] = if size == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(value.cast(), size)
    };
    with_path!(c, p, |cl, pp| ret(
        cl.setxattr(pp, n, v, flags as u32),
        |_| 0
    )) as c_int
}
