//! The floor over FUSE-over-io_uring: an experiment for issue 5's last lever.
//!
//! The same minimal in-memory filesystem idea as [`crate::floor`], but with
//! its own FUSE transport instead of fuser's, because fuser (0.18) reads
//! requests from `/dev/fuse` only. With `io_uring` (kernel 6.14+, module
//! parameter `fuse.enable_uring`), the kernel keeps one request queue per CPU
//! and hands a request to the queue of the CPU its caller runs on; the
//! daemon's thread for that queue is pinned to the same CPU, so a request
//! and its reply never cross to another vCPU (run 5 measured that crossing
//! as costing more than the request itself on this VM). A reply and the
//! fetch of the next request are one submission (`COMMIT_AND_FETCH`).
//!
//! Written by hand (the wire structs of `<linux/fuse.h>` as byte offsets)
//! because no crate here speaks this transport; it is a measuring
//! instrument for the bench, not the product's mount. Without `uring` it
//! serves the same filesystem over classic `/dev/fuse` reads and writes on
//! as many threads, so the two transports are compared on one filesystem.
//!
//! Covered: what the bench workloads use (lookup, getattr, setattr, mknod,
//! mkdir, create, open, read, write, release, unlink, rmdir, rename, readdir,
//! statfs, fsync). Everything else answers ENOSYS, which also tells the
//! kernel to stop sending FLUSH, OPENDIR, ACCESS and xattr requests (as the
//! fuser floor does).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

// Opcodes (<linux/fuse.h>).
const LOOKUP: u32 = 1;
const FORGET: u32 = 2;
const GETATTR: u32 = 3;
const SETATTR: u32 = 4;
const MKNOD: u32 = 8;
const MKDIR: u32 = 9;
const UNLINK: u32 = 10;
const RMDIR: u32 = 11;
const RENAME: u32 = 12;
const OPEN: u32 = 14;
const READ: u32 = 15;
const WRITE: u32 = 16;
const STATFS: u32 = 17;
const RELEASE: u32 = 18;
const FSYNC: u32 = 20;
const INIT: u32 = 26;
const READDIR: u32 = 28;
const RELEASEDIR: u32 = 29;
const FSYNCDIR: u32 = 30;
const CREATE: u32 = 35;
const INTERRUPT: u32 = 36;
const DESTROY: u32 = 38;
const BATCH_FORGET: u32 = 42;
const RENAME2: u32 = 45;

// INIT flags.
const FUSE_ASYNC_READ: u64 = 1 << 0;
const FUSE_BIG_WRITES: u64 = 1 << 5;
const FUSE_PARALLEL_DIROPS: u64 = 1 << 18;
const FUSE_MAX_PAGES: u64 = 1 << 22;
const FUSE_INIT_EXT: u64 = 1 << 30;
const FUSE_OVER_IO_URING: u64 = 1 << 41;

// io_uring commands of /dev/fuse.
const CMD_REGISTER: u32 = 1;
const CMD_COMMIT_AND_FETCH: u32 = 2;

const IN_HEADER: usize = 40;
const MAX_WRITE: usize = 1 << 20;
/// `struct fuse_uring_req_header`: in_out[128], op_in[128], ring_ent_in_out (32).
const RING_HEADER: usize = 288;
const RING_ENT_IN_OUT: usize = 256;
const TTL_SECS: u64 = 1;

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
/// A NUL-terminated name at the start of `b`, and what follows it.
fn cstr(b: &[u8]) -> (&[u8], &[u8]) {
    match b.iter().position(|&c| c == 0) {
        Some(i) => (&b[..i], &b[i + 1..]),
        None => (b, &[]),
    }
}

/// Bytes of an opcode's fixed argument, before its names or data (the
/// classic transport sends them concatenated; io_uring splits them).
fn op_header_len(op: u32) -> usize {
    match op {
        GETATTR | MKNOD | CREATE | RENAME2 | FSYNC | FSYNCDIR => 16,
        MKDIR | RENAME | OPEN => 8,
        SETATTR => 88,
        READ | WRITE | READDIR => 40,
        RELEASE | RELEASEDIR => 24,
        _ => 0,
    }
}

struct Node {
    mode: u32,
    nlink: u32,
    uid: u32,
    gid: u32,
    rdev: u32,
    time: (u64, u32),
    data: Vec<u8>,
    /// Directories: name -> (inode, cookie), and cookie -> name for readdir.
    names: HashMap<Vec<u8>, (u64, u64)>,
    cookies: BTreeMap<u64, (Vec<u8>, u64)>,
    next_cookie: u64,
}

impl Node {
    fn new(mode: u32, uid: u32, gid: u32, rdev: u32) -> Node {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Node {
            mode, nlink: if mode & libc::S_IFMT == libc::S_IFDIR { 2 } else { 1 }, uid, gid, rdev,
            time: (t.as_secs(), t.subsec_nanos()), data: Vec::new(), names: HashMap::new(), cookies: BTreeMap::new(),
            next_cookie: 3,
        }
    }
    fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }
    /// `struct fuse_attr` (88 bytes).
    fn attr(&self, ino: u64, out: &mut Vec<u8>) {
        let size = self.data.len() as u64;
        for v in [ino, size, size.div_ceil(512), self.time.0, self.time.0, self.time.0] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.time.1, self.time.1, self.time.1, self.mode, self.nlink, self.uid, self.gid, self.rdev, 4096, 0] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

#[derive(Default)]
struct State {
    nodes: HashMap<u64, Node>,
    next_ino: u64,
}

/// The filesystem: one mutex over a map of nodes, as in the fuser floor.
pub struct UringFloor {
    st: Mutex<State>,
}

/// `struct fuse_entry_out` (128 bytes); ino 0 with the entry TTL is a
/// cached negative entry.
fn entry(ino: u64, n: Option<&Node>, out: &mut Vec<u8>) {
    for v in [ino, 0, TTL_SECS, if ino == 0 { 0 } else { TTL_SECS }] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&[0u8; 8]);
    match n {
        Some(n) => n.attr(ino, out),
        None => out.extend_from_slice(&[0u8; 88]),
    }
}

fn attr_out(ino: u64, n: &Node, out: &mut Vec<u8>) {
    out.extend_from_slice(&TTL_SECS.to_le_bytes());
    out.extend_from_slice(&[0u8; 8]);
    n.attr(ino, out);
}

impl UringFloor {
    pub fn new() -> UringFloor {
        let mut s = State { next_ino: 2, ..State::default() };
        s.nodes.insert(1, Node::new(libc::S_IFDIR | 0o777, 0, 0, 0));
        UringFloor { st: Mutex::new(s) }
    }

    fn make(&self, h: &[u8], parent: u64, name: &[u8], mode: u32, rdev: u32, out: &mut Vec<u8>) -> i32 {
        let mut s = self.st.lock().unwrap();
        let Some(p) = s.nodes.get(&parent) else { return libc::ENOENT };
        if !p.is_dir() {
            return libc::ENOTDIR;
        }
        if p.names.contains_key(name) {
            return libc::EEXIST;
        }
        let ino = s.next_ino;
        s.next_ino += 1;
        let n = Node::new(mode, u32_at(h, 24), u32_at(h, 28), rdev);
        entry(ino, Some(&n), out);
        let dir = n.is_dir();
        s.nodes.insert(ino, n);
        let p = s.nodes.get_mut(&parent).unwrap();
        let c = p.next_cookie;
        p.next_cookie += 1;
        p.names.insert(name.to_vec(), (ino, c));
        p.cookies.insert(c, (name.to_vec(), ino));
        if dir {
            p.nlink += 1;
        }
        0
    }

    /// Remove `name` from `parent`; drop the node when its last link goes
    /// (the floor keeps no open-unlinked files: nothing here reads them).
    fn remove(s: &mut State, parent: u64, name: &[u8], want_dir: Option<bool>) -> i32 {
        let Some(p) = s.nodes.get(&parent) else { return libc::ENOENT };
        let Some(&(ino, c)) = p.names.get(name) else { return libc::ENOENT };
        let n = &s.nodes[&ino];
        match want_dir {
            Some(true) if !n.is_dir() => return libc::ENOTDIR,
            Some(true) if !n.names.is_empty() => return libc::ENOTEMPTY,
            Some(false) if n.is_dir() => return libc::EISDIR,
            _ => {}
        }
        let dir = n.is_dir();
        let p = s.nodes.get_mut(&parent).unwrap();
        p.names.remove(name);
        p.cookies.remove(&c);
        if dir {
            p.nlink -= 1;
        }
        let n = s.nodes.get_mut(&ino).unwrap();
        n.nlink = n.nlink.saturating_sub(if dir { 2 } else { 1 });
        if n.nlink == 0 {
            s.nodes.remove(&ino);
        }
        0
    }

    /// Serve one request: `h` the in header, `arg` the op's fixed argument,
    /// `rest` its names or data. Writes the reply body to `out`; returns
    /// the errno (0: success) or -1 for "no reply" (forgets).
    fn handle(&self, h: &[u8], arg: &[u8], rest: &[u8], out: &mut Vec<u8>) -> i32 {
        let op = u32_at(h, 4);
        let nodeid = u64_at(h, 16);
        match op {
            LOOKUP => {
                let (name, _) = cstr(rest);
                let s = self.st.lock().unwrap();
                let Some(p) = s.nodes.get(&nodeid) else { return libc::ENOENT };
                match p.names.get(name) {
                    Some(&(ino, _)) => entry(ino, s.nodes.get(&ino), out),
                    None => entry(0, None, out),
                }
                0
            }
            FORGET | BATCH_FORGET | INTERRUPT => -1,
            GETATTR => {
                let s = self.st.lock().unwrap();
                let Some(n) = s.nodes.get(&nodeid) else { return libc::ENOENT };
                attr_out(nodeid, n, out);
                0
            }
            SETATTR => {
                let mut s = self.st.lock().unwrap();
                let Some(n) = s.nodes.get_mut(&nodeid) else { return libc::ENOENT };
                let valid = u32_at(arg, 0);
                if valid & (1 << 3) != 0 {
                    n.data.resize(u64_at(arg, 16) as usize, 0);
                }
                if valid & 1 != 0 {
                    n.mode = (n.mode & libc::S_IFMT) | (u32_at(arg, 68) & 0o7777);
                }
                attr_out(nodeid, n, out);
                0
            }
            MKNOD => {
                let (name, _) = cstr(rest);
                self.make(h, nodeid, name, u32_at(arg, 0), u32_at(arg, 4), out)
            }
            MKDIR => {
                let (name, _) = cstr(rest);
                self.make(h, nodeid, name, libc::S_IFDIR | (u32_at(arg, 0) & 0o7777), 0, out)
            }
            CREATE => {
                let (name, _) = cstr(rest);
                let e = self.make(h, nodeid, name, libc::S_IFREG | (u32_at(arg, 4) & 0o7777), 0, out);
                if e == 0 {
                    out.extend_from_slice(&[0u8; 16]); // fuse_open_out: fh 0, no flags
                }
                e
            }
            OPEN => {
                out.extend_from_slice(&[0u8; 16]);
                0
            }
            READ => {
                let s = self.st.lock().unwrap();
                let Some(n) = s.nodes.get(&nodeid) else { return libc::ENOENT };
                let (off, size) = (u64_at(arg, 8) as usize, u32_at(arg, 16) as usize);
                let from = off.min(n.data.len());
                out.extend_from_slice(&n.data[from..(from + size).min(n.data.len())]);
                0
            }
            WRITE => {
                let mut s = self.st.lock().unwrap();
                let Some(n) = s.nodes.get_mut(&nodeid) else { return libc::ENOENT };
                let (off, size) = (u64_at(arg, 8) as usize, u32_at(arg, 16) as usize);
                let data = &rest[..size.min(rest.len())];
                if n.data.len() < off + data.len() {
                    n.data.resize(off + data.len(), 0);
                }
                n.data[off..off + data.len()].copy_from_slice(data);
                out.extend_from_slice(&(data.len() as u32).to_le_bytes());
                out.extend_from_slice(&[0u8; 4]);
                0
            }
            STATFS => {
                for v in [1u64 << 30, 1 << 30, 1 << 30, 1 << 30, 1 << 30] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                for v in [4096u32, 255, 4096, 0, 0, 0, 0, 0, 0, 0] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                0
            }
            RELEASE | RELEASEDIR | FSYNC | FSYNCDIR => 0,
            UNLINK | RMDIR => {
                let (name, _) = cstr(rest);
                Self::remove(&mut self.st.lock().unwrap(), nodeid, name, Some(op == RMDIR))
            }
            RENAME | RENAME2 => {
                let newdir = u64_at(arg, 0);
                if op == RENAME2 && u32_at(arg, 8) != 0 {
                    return libc::EINVAL;
                }
                let (old, r) = cstr(rest);
                let (new, _) = cstr(r);
                let mut s = self.st.lock().unwrap();
                let Some(&(ino, _)) = s.nodes.get(&nodeid).and_then(|p| p.names.get(old)) else { return libc::ENOENT };
                if !s.nodes.get(&newdir).is_some_and(|d| d.is_dir()) {
                    return libc::ENOENT;
                }
                if let Some(&(tgt, _)) = s.nodes[&newdir].names.get(new) {
                    if tgt == ino {
                        return 0;
                    }
                    let want_dir = s.nodes[&ino].is_dir();
                    let e = Self::remove(&mut s, newdir, new, Some(want_dir));
                    if e != 0 {
                        return e;
                    }
                }
                let dir = s.nodes[&ino].is_dir();
                let p = s.nodes.get_mut(&nodeid).unwrap();
                let (_, c) = p.names.remove(old).unwrap();
                p.cookies.remove(&c);
                if dir {
                    p.nlink -= 1;
                }
                let np = s.nodes.get_mut(&newdir).unwrap();
                let c = np.next_cookie;
                np.next_cookie += 1;
                np.names.insert(new.to_vec(), (ino, c));
                np.cookies.insert(c, (new.to_vec(), ino));
                if dir {
                    np.nlink += 1;
                }
                0
            }
            READDIR => {
                let s = self.st.lock().unwrap();
                let Some(d) = s.nodes.get(&nodeid) else { return libc::ENOENT };
                let (off, size) = (u64_at(arg, 8), u32_at(arg, 16) as usize);
                for (&c, (name, ino)) in d.cookies.range(off + 1..) {
                    let len = (24 + name.len()).next_multiple_of(8);
                    if out.len() + len > size {
                        break;
                    }
                    let kind = s.nodes.get(ino).map_or(0, |n| (n.mode & libc::S_IFMT) >> 12);
                    out.extend_from_slice(&ino.to_le_bytes());
                    out.extend_from_slice(&c.to_le_bytes());
                    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
                    out.extend_from_slice(&kind.to_le_bytes());
                    out.extend_from_slice(name);
                    out.resize(out.len() + len - 24 - name.len(), 0);
                }
                0
            }
            DESTROY => 0,
            _ => libc::ENOSYS,
        }
    }
}

impl Default for UringFloor {
    fn default() -> Self {
        Self::new()
    }
}

/// `struct fuse_init_out` for the kernel's `struct fuse_init_in`.
fn init_reply(arg: &[u8], uring: bool, out: &mut Vec<u8>) -> bool {
    let (major, minor) = (u32_at(arg, 0), u32_at(arg, 4));
    let mut offered = u32_at(arg, 12) as u64;
    if offered & FUSE_INIT_EXT != 0 {
        offered |= (u32_at(arg, 16) as u64) << 32;
    }
    let mut want = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_PARALLEL_DIROPS | FUSE_MAX_PAGES | FUSE_INIT_EXT;
    if uring {
        want |= FUSE_OVER_IO_URING;
    }
    let flags = want & offered;
    for v in [major.min(7), minor, u32_at(arg, 8), flags as u32] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&16u16.to_le_bytes()); // max_background
    out.extend_from_slice(&12u16.to_le_bytes()); // congestion_threshold
    out.extend_from_slice(&(MAX_WRITE as u32).to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes()); // time_gran
    out.extend_from_slice(&((MAX_WRITE / 4096) as u16).to_le_bytes()); // max_pages
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&((flags >> 32) as u32).to_le_bytes());
    out.resize(64, 0);
    flags & FUSE_OVER_IO_URING != 0
}

/// Reply on the classic transport: out header, then the body.
fn write_reply(fd: i32, unique: u64, err: i32, body: &[u8]) {
    let len = 16 + if err == 0 { body.len() } else { 0 };
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&(len as u32).to_le_bytes());
    msg.extend_from_slice(&(-err).to_le_bytes());
    msg.extend_from_slice(&unique.to_le_bytes());
    if err == 0 {
        msg.extend_from_slice(body);
    }
    // SAFETY: a write of an owned buffer to an open fd.
    unsafe { libc::write(fd, msg.as_ptr().cast(), msg.len()) };
}

/// Mount at `mnt` and serve until unmounted: `threads` classic readers, and
/// with `uring` one pinned io_uring queue thread per CPU (`depth` entries each).
pub fn mount(mnt: &std::path::Path, threads: usize, uring: bool, depth: usize) -> io::Result<()> {
    // SAFETY: plain system calls; the fd is owned from here on.
    let fd = unsafe { libc::open(c"/dev/fuse".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fuse = unsafe { OwnedFd::from_raw_fd(fd) };
    let opts = std::ffi::CString::new(format!("fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other")).unwrap();
    let target = std::ffi::CString::new(mnt.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    let r = unsafe {
        libc::mount(c"floor-uring".as_ptr(), target.as_ptr(), c"fuse.floor".as_ptr(), libc::MS_NOSUID | libc::MS_NODEV, opts.as_ptr().cast())
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let fs = Arc::new(UringFloor::new());
    let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..threads.max(1))
        .map(|_| {
            let (fs, started) = (fs.clone(), started.clone());
            let fd = fuse.as_raw_fd();
            std::thread::Builder::new().name("floor-dev".into()).spawn(move || classic_loop(fd, &fs, uring, depth, &started))
        })
        .collect::<io::Result<Vec<_>>>()?
        .into_iter()
        .collect::<Vec<_>>();
    for r in readers {
        let _ = r.join();
    }
    drop(fuse);
    Ok(())
}

/// Read requests from /dev/fuse: INIT (then start the queues), forgets, and
/// whatever arrives before the rings are ready. Returns at unmount.
fn classic_loop(fd: i32, fs: &Arc<UringFloor>, uring: bool, depth: usize, started: &std::sync::atomic::AtomicBool) {
    let mut buf = vec![0u8; MAX_WRITE + 8192];
    let mut out = Vec::with_capacity(MAX_WRITE + 4096);
    loop {
        // SAFETY: a read into an owned buffer.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::ENOENT) => continue,
                _ => return, // ENODEV: unmounted
            }
        }
        let req = &buf[..n as usize];
        let (op, unique) = (u32_at(req, 4), u64_at(req, 8));
        out.clear();
        if op == INIT {
            let on = init_reply(&req[IN_HEADER..], uring, &mut out);
            write_reply(fd, unique, 0, &out);
            if on && !started.swap(true, std::sync::atomic::Ordering::SeqCst) {
                let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
                let possible = possible_cpus().unwrap_or(ncpu);
                for qid in 0..possible {
                    let fs = fs.clone();
                    let spawned = std::thread::Builder::new().name(format!("floor-uring-q{qid}")).spawn(move || {
                        if let Err(e) = queue_loop(fd, qid, depth, &fs) {
                            eprintln!("shoal-floor: io_uring queue {qid}: {e}");
                        }
                    });
                    if let Err(e) = spawned {
                        eprintln!("shoal-floor: io_uring queue {qid}: {e}");
                    }
                }
            }
            continue;
        }
        let split = (IN_HEADER + op_header_len(op)).min(req.len());
        let err = fs.handle(&req[..IN_HEADER], &req[IN_HEADER..split], &req[split..], &mut out);
        if err >= 0 {
            write_reply(fd, unique, err, &out);
        }
        if op == DESTROY {
            return;
        }
    }
}

/// CPUs the kernel may make queues for (`/sys/devices/system/cpu/possible`, "0-N").
fn possible_cpus() -> Option<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible").ok()?;
    let last = s.trim().rsplit(['-', ',']).next()?.parse::<usize>().ok()?;
    Some(last + 1)
}

/// One ring entry's buffers: the request header area and the payload.
struct Ent {
    header: Box<[u8; RING_HEADER]>,
    payload: Vec<u8>,
    iov: [libc::iovec; 2],
}

/// The SQE of a command on /dev/fuse (registered as fixed file 0).
fn command(op: u32, qid: usize, commit_id: u64, ent: &mut Ent, index: usize) -> io_uring::squeue::Entry128 {
    let mut cmd = [0u8; 80];
    cmd[8..16].copy_from_slice(&commit_id.to_le_bytes());
    cmd[16..18].copy_from_slice(&(qid as u16).to_le_bytes());
    let mut b = io_uring::opcode::UringCmd80::new(io_uring::types::Fixed(0), op).cmd(cmd);
    if op == CMD_REGISTER {
        ent.iov = [
            libc::iovec { iov_base: ent.header.as_mut_ptr().cast(), iov_len: RING_HEADER },
            libc::iovec { iov_base: ent.payload.as_mut_ptr().cast(), iov_len: ent.payload.len() },
        ];
        b = b.addr(Some(ent.iov.as_ptr() as u64));
    }
    let e = b.build().user_data(index as u64);
    if op != CMD_REGISTER {
        return e;
    }
    // The crate's builder has no `len`; the kernel wants the iovec count
    // there. SAFETY: Entry128 is `repr(C)`, an io_uring_sqe (len at byte
    // 24) followed by 64 bytes of command data; all plain integers.
    let mut raw: [u8; 128] = unsafe { std::mem::transmute(e) };
    raw[24..28].copy_from_slice(&2u32.to_le_bytes());
    unsafe { std::mem::transmute::<[u8; 128], io_uring::squeue::Entry128>(raw) }
}

/// Serve queue `qid` from a thread pinned to CPU `qid`.
fn queue_loop(fd: i32, qid: usize, depth: usize, fs: &UringFloor) -> io::Result<()> {
    // SAFETY: a cpu_set_t for this thread alone.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(qid, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    let mut ring: io_uring::IoUring<io_uring::squeue::Entry128, io_uring::cqueue::Entry> =
        io_uring::IoUring::builder().setup_cqsize(2 * depth as u32).build(depth as u32)?;
    ring.submitter().register_files(&[fd])?;
    let mut ents: Vec<Ent> = (0..depth)
        .map(|_| Ent {
            header: Box::new([0u8; RING_HEADER]),
            payload: vec![0u8; MAX_WRITE + 4096],
            iov: [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; 2],
        })
        .collect();
    for (i, e) in ents.iter_mut().enumerate() {
        let sqe = command(CMD_REGISTER, qid, 0, e, i);
        // SAFETY: the buffers the entry points at live in `ents` until this function returns.
        unsafe { ring.submission().push(&sqe).map_err(io::Error::other)? };
    }
    ring.submit()?;
    let mut out = Vec::with_capacity(MAX_WRITE + 4096);
    loop {
        ring.submit_and_wait(1)?;
        let done: Vec<(usize, i32)> = ring.completion().map(|c| (c.user_data() as usize, c.result())).collect();
        for (i, res) in done {
            if res < 0 {
                // ENOTCONN / ENODEV: the filesystem was unmounted.
                return if res == -libc::ENOTCONN || res == -libc::ENODEV || res == -libc::ECANCELED {
                    Ok(())
                } else {
                    Err(io::Error::from_raw_os_error(-res))
                };
            }
            let e = &mut ents[i];
            let h: [u8; IN_HEADER] = e.header[..IN_HEADER].try_into().unwrap();
            let commit_id = u64_at(&e.header[..], RING_ENT_IN_OUT + 8);
            let payload_sz = u32_at(&e.header[..], RING_ENT_IN_OUT + 16) as usize;
            let op = u32_at(&h, 4);
            let arg_len = op_header_len(op);
            let arg: Vec<u8> = e.header[128..128 + arg_len].to_vec();
            out.clear();
            let mut err = {
                let rest = &e.payload[..payload_sz.min(e.payload.len())];
                // Names without a header come in op_in on kernels that do
                // not give every op an (empty) header argument.
                if arg_len == 0 && payload_sz == 0 {
                    let op_in = e.header[128..256].to_vec();
                    fs.handle(&h, &[], &op_in, &mut out)
                } else {
                    fs.handle(&h, &arg, rest, &mut out)
                }
            };
            if err < 0 {
                err = libc::ENOSYS; // a forget never comes this way; answer anyway
            }
            let body = if err == 0 { out.len() } else { 0 };
            e.payload[..body].copy_from_slice(&out[..body]);
            let unique = u64_at(&h, 8);
            e.header[..4].copy_from_slice(&((16 + body) as u32).to_le_bytes());
            e.header[4..8].copy_from_slice(&(-err).to_le_bytes());
            e.header[8..16].copy_from_slice(&unique.to_le_bytes());
            e.header[RING_ENT_IN_OUT + 16..RING_ENT_IN_OUT + 20].copy_from_slice(&(body as u32).to_le_bytes());
            let sqe = command(CMD_COMMIT_AND_FETCH, qid, commit_id, e, i);
            // SAFETY: as above.
            unsafe { ring.submission().push(&sqe).map_err(io::Error::other)? };
        }
    }
}
