//! FUSE over io_uring (Linux 6.14+, `fuse.enable_uring`): added for shoal,
//! see PATCHED.md. The kernel keeps one request queue per possible CPU and
//! hands a request to the queue of the CPU its caller runs on; each queue is
//! served by one thread pinned to that CPU, so a request and its reply stay
//! on one CPU. A reply and the fetch of the entry's next request are one
//! submission (`COMMIT_AND_FETCH`), made by the next `receive`.
//!
//! The rest of fuser is unchanged: `receive` rebuilds the classic wire
//! layout (in header, the op's fixed argument, then names and data) in the
//! caller's buffer, and `reply` takes the classic reply layout (out header,
//! then the body). Forgets, interrupts and notifications keep using
//! /dev/fuse. A reply must be sent by the thread that received the request
//! before its next `receive` (the ring is used by one thread; fuser's event
//! loop replies inline).

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::Mutex;

use io_uring::{IoUring, cqueue, opcode, squeue, types};
use nix::errno::Errno;

const CMD_REGISTER: u32 = 1;
const CMD_COMMIT_AND_FETCH: u32 = 2;
const IN_HEADER: usize = 40;
/// `struct fuse_uring_req_header`: in_out[128], op_in[128], then
/// `struct fuse_uring_ent_in_out` {flags, commit_id, payload_sz, padding, reserved}.
const RING_HEADER: usize = 288;
const OP_IN: usize = 128;
const ENT_IN_OUT: usize = 256;

/// Bytes of an opcode's fixed argument (`in_args[0]`, the "op header" the
/// kernel copies to `op_in`); names and data come in the payload.
fn op_arg_len(op: u32) -> usize {
    match op {
        3 | 8 | 20 | 30 | 35 | 37 | 45 | 51 => 16, // getattr mknod fsync fsyncdir create bmap rename2 tmpfile
        9 | 12 | 13 | 14 | 22 | 23 | 27 | 34 => 8,  // mkdir rename link open getxattr listxattr opendir access
        21 => 8,                                     // setxattr (without SETXATTR_EXT)
        4 => 88,                                     // setattr
        15 | 16 | 28 | 44 => 40,                     // read write readdir readdirplus
        18 | 25 | 29 | 40 | 46 => 24,                // release flush releasedir poll lseek
        31..=33 => 48,                               // getlk setlk setlkw
        39 | 43 => 32,                               // ioctl fallocate
        47 => 56,                                    // copy_file_range
        52 => 24,                                    // statx
        _ => 0,
    }
}

struct Ent {
    header: Box<[u8; RING_HEADER]>,
    payload: Vec<u8>,
    iov: [libc::iovec; 2],
    /// The request's commit id (echoed in the commit) and its unique (the
    /// reply's key); 0 while the entry holds no request.
    commit_id: u64,
    unique: u64,
}

struct Inner {
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
    ents: Vec<Ent>,
    /// Entries holding a request not yet handed to `receive`.
    ready: VecDeque<usize>,
}

/// One per-CPU queue.
pub(crate) struct Queue {
    qid: usize,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "uring::Queue({})", self.qid)
    }
}

// SAFETY: the iovecs point into buffers owned by the same `Ent`, which only
// the holder of the mutex touches; the kernel writes them only between a
// submission and its completion, and the entry is handed out after that.
unsafe impl Send for Queue {}
unsafe impl Sync for Queue {}

fn command(op: u32, qid: usize, ent: &mut Ent, index: usize) -> squeue::Entry128 {
    let mut cmd = [0u8; 80];
    cmd[8..16].copy_from_slice(&ent.commit_id.to_le_bytes());
    cmd[16..18].copy_from_slice(&(qid as u16).to_le_bytes());
    let mut b = opcode::UringCmd80::new(types::Fixed(0), op).cmd(cmd);
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
    // The builder has no `len`; REGISTER wants the iovec count there.
    // SAFETY: Entry128 is `repr(C)`: an io_uring_sqe (len at byte 24) and
    // 64 bytes of command data, all plain integers.
    let mut raw: [u8; 128] = unsafe { std::mem::transmute(e) };
    raw[24..28].copy_from_slice(&2u32.to_le_bytes());
    unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(raw) }
}

impl Queue {
    /// Register `depth` entries of queue `qid` on the /dev/fuse fd `fd`,
    /// each with a payload buffer of `payload` bytes (at least the
    /// connection's largest request).
    pub(crate) fn new(fd: RawFd, qid: usize, depth: usize, payload: usize) -> io::Result<Queue> {
        let mut ring = IoUring::builder().setup_cqsize(2 * depth as u32).build(depth as u32)?;
        ring.submitter().register_files(&[fd])?;
        let mut ents: Vec<Ent> = (0..depth)
            .map(|_| Ent {
                header: Box::new([0u8; RING_HEADER]),
                payload: vec![0u8; payload],
                iov: [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; 2],
                commit_id: 0,
                unique: 0,
            })
            .collect();
        for (i, e) in ents.iter_mut().enumerate() {
            let sqe = command(CMD_REGISTER, qid, e, i);
            // SAFETY: the buffers live in `ents`, owned by the queue for its life.
            unsafe { ring.submission().push(&sqe).map_err(io::Error::other)? };
        }
        ring.submit()?;
        Ok(Queue { qid, inner: Mutex::new(Inner { ring, ents, ready: VecDeque::new() }) })
    }

    /// The next request, in the classic layout, into `buf`. Submits the
    /// replies queued since the last call in the same system call.
    pub(crate) fn receive(&self, buf: &mut [u8]) -> nix::Result<usize> {
        let mut g = self.inner.lock().unwrap();
        loop {
            if let Some(i) = g.ready.pop_front() {
                let e = &mut g.ents[i];
                e.commit_id = u64::from_le_bytes(e.header[ENT_IN_OUT + 8..ENT_IN_OUT + 16].try_into().unwrap());
                e.unique = u64::from_le_bytes(e.header[8..16].try_into().unwrap());
                let payload = u32::from_le_bytes(e.header[ENT_IN_OUT + 16..ENT_IN_OUT + 20].try_into().unwrap()) as usize;
                let op = u32::from_le_bytes(e.header[4..8].try_into().unwrap());
                let arg = op_arg_len(op);
                let total = IN_HEADER + arg + payload;
                if total > buf.len() || payload > e.payload.len() {
                    return Err(Errno::EIO);
                }
                buf[..IN_HEADER].copy_from_slice(&e.header[..IN_HEADER]);
                buf[..4].copy_from_slice(&(total as u32).to_le_bytes());
                buf[IN_HEADER..IN_HEADER + arg].copy_from_slice(&e.header[OP_IN..OP_IN + arg]);
                buf[IN_HEADER + arg..total].copy_from_slice(&e.payload[..payload]);
                return Ok(total);
            }
            match g.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))),
            }
            let done: Vec<(usize, i32)> = g.ring.completion().map(|c| (c.user_data() as usize, c.result())).collect();
            for (i, res) in done {
                if res < 0 {
                    // The connection is gone (unmount): end the loop as a
                    // /dev/fuse read would.
                    return Err(match -res {
                        libc::ENOTCONN | libc::ENODEV | libc::ECANCELED => Errno::ENODEV,
                        e => Errno::from_raw(e),
                    });
                }
                g.ready.push_back(i);
            }
        }
    }

    /// Send a reply (classic layout: out header, then the body) for a
    /// request this queue handed out. Returns false if `unique` is not one
    /// of this queue's requests (the caller then writes to /dev/fuse).
    pub(crate) fn reply(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<bool> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total < 16 {
            return Ok(false);
        }
        let mut head = [0u8; 16];
        gather(bufs, 0, &mut head);
        let unique = u64::from_le_bytes(head[8..16].try_into().unwrap());
        let mut g = self.inner.lock().unwrap();
        let Some(i) = g.ents.iter().position(|e| e.unique == unique && unique != 0) else { return Ok(false) };
        let qid = self.qid;
        let e = &mut g.ents[i];
        let body = total - 16;
        if body > e.payload.len() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // Straight from fuser's slices into the entry (a READ reply is up to
        // a megabyte: no intermediate copy).
        e.header[..16].copy_from_slice(&head);
        gather(bufs, 16, &mut e.payload[..body]);
        e.header[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&(body as u32).to_le_bytes());
        let sqe = command(CMD_COMMIT_AND_FETCH, qid, e, i);
        (e.commit_id, e.unique) = (0, 0);
        // SAFETY: as in `new`.
        unsafe { g.ring.submission().push(&sqe).map_err(io::Error::other)? };
        Ok(true)
    }
}

/// Copy the bytes of `bufs` (taken as one message) from offset `skip` on
/// into `dst`, as many as `dst` holds.
fn gather(bufs: &[io::IoSlice<'_>], mut skip: usize, dst: &mut [u8]) {
    let mut at = 0;
    for b in bufs {
        if at == dst.len() {
            return;
        }
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        let n = (b.len() - skip).min(dst.len() - at);
        dst[at..at + n].copy_from_slice(&b[skip..skip + n]);
        at += n;
        skip = 0;
    }
}

/// Possible CPUs (`/sys/devices/system/cpu/possible`): the kernel makes a
/// queue for each, and is ready only once every queue has entries.
pub(crate) fn possible_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| s.trim().rsplit(['-', ',']).next()?.parse::<usize>().ok())
        .map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), |n| n + 1)
}

/// Pin the calling thread to `cpu`.
pub(crate) fn pin(cpu: usize) {
    // SAFETY: a cpu_set_t for this thread alone.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
