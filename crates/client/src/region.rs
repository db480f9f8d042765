//! The shared region of one connection (proto.rs's layout), as both ends
//! map it: the state word and the sleepers' flags as atomics, the slot as
//! raw bytes, and the wait and wake on the futex.
//!
//! The slot is memory another process writes: nothing here makes a Rust
//! reference to it that outlives a copy. The server copies a request out
//! (`copy_out`) before decoding it; the client writes its request and reads
//! its answer only while the state word says the slot is its own (the
//! server writes it only between REQUEST and ANSWER).

use crate::proto::*;
use rustix::fd::{AsFd, OwnedFd};
use rustix::thread::futex;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub struct Region {
    base: *mut u8,
}

// The region is plain shared memory, used by one thread at a time on
// each side (a connection is one client thread's and one server thread's).
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    /// The daemon's side: a new memfd of REGION bytes, sealed against
    /// shrinking and growing (a client that could shrink it would make the
    /// daemon's mapping fault), mapped.
    pub fn create() -> io::Result<(Region, OwnedFd)> {
        use rustix::fs::{MemfdFlags, SealFlags};
        let fd = rustix::fs::memfd_create(
            "shoal-client",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )?;
        rustix::fs::ftruncate(&fd, REGION as u64)?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        Ok((Self::map(&fd)?, fd))
    }

    /// Map a region (the client's side, with the memfd it received).
    pub fn map(fd: impl AsFd) -> io::Result<Region> {
        use rustix::mm::{MapFlags, ProtFlags};
        let st = rustix::fs::fstat(&fd)?;
        if st.st_size as usize != REGION {
            return Err(io::Error::from_raw_os_error(libc::EPROTO));
        }
        // SAFETY: a new shared mapping of the whole file, which is sealed
        // at REGION bytes: no access within it can fault.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                REGION,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )?
        };
        Ok(Region { base: p.cast() })
    }

    fn word(&self, off: usize) -> &AtomicU32 {
        // SAFETY: in the mapping, aligned (offsets are multiples of 64 from
        // a page), and only ever accessed atomically by both ends.
        unsafe { &*(self.base.add(off) as *const AtomicU32) }
    }

    /// The client's spin time the server last said (`SPIN_HINT`).
    pub fn spin_hint(&self) -> u32 {
        self.word(SPIN_HINT).load(Ordering::Relaxed)
    }

    pub fn set_spin_hint(&self, ns: u32) {
        self.word(SPIN_HINT).store(ns, Ordering::Relaxed)
    }

    pub fn state(&self) -> u32 {
        self.word(STATE).load(Ordering::Acquire)
    }

    /// Store `state` and wake the other side if its flag says it sleeps.
    pub fn post(&self, state: u32, peer_sleeps: usize) {
        let st = self.word(STATE);
        st.store(state, Ordering::SeqCst);
        if self.word(peer_sleeps).load(Ordering::SeqCst) != 0 {
            let _ = futex::wake(st, futex::Flags::empty(), 1);
        }
    }

    /// Spin until the state word is `want`, for `spin_ns` at most: false
    /// when it is not by then.
    pub fn spin_for(&self, want: u32, spin_ns: u64) -> bool {
        let st = self.word(STATE);
        let start = Instant::now();
        let mut i = 0u32;
        loop {
            if st.load(Ordering::Acquire) == want {
                return true;
            }
            std::hint::spin_loop();
            i = i.wrapping_add(1);
            if i.is_multiple_of(64) && start.elapsed().as_nanos() as u64 > spin_ns {
                return false;
            }
        }
    }

    /// Wait until the state word is `want`: spin for `spin_ns`, then sleep
    /// on the futex with `my_flag` set, calling `alive` every `poll`; false
    /// when `alive` says the other side is gone.
    pub fn wait_for(
        &self,
        want: u32,
        my_flag: usize,
        spin_ns: u64,
        poll: Duration,
        mut alive: impl FnMut() -> bool,
    ) -> bool {
        if self.spin_for(want, spin_ns) {
            return true;
        }
        let st = self.word(STATE);
        let flag = self.word(my_flag);
        let ts = rustix::thread::futex::Timespec {
            tv_sec: poll.as_secs() as _,
            tv_nsec: poll.subsec_nanos() as _,
        };
        let r = loop {
            flag.store(1, Ordering::SeqCst);
            let v = st.load(Ordering::SeqCst);
            if v == want {
                break true;
            }
            match futex::wait(st, futex::Flags::empty(), v, Some(&ts)) {
                Err(e) if e == rustix::io::Errno::TIMEDOUT && !alive() => break false,
                // Woken with nothing new: a hang-up watcher's nudge (the
                // daemon's: `wake`), or a stray wake-up.
                Ok(()) if st.load(Ordering::SeqCst) == v && !alive() => break false,
                // Woken, the word changed first (EAGAIN), or a signal.
                _ => {}
            }
        };
        flag.store(0, Ordering::Relaxed);
        r
    }

    /// Wake whoever sleeps on the state word, the state unchanged: it
    /// looks at its peer (`wait_for`'s `alive`).
    pub fn wake(&self) {
        let _ = futex::wake(self.word(STATE), futex::Flags::empty(), i32::MAX as u32);
    }

    /// Copy `len` bytes of the slot out (the server's first step).
    pub fn copy_out(&self, len: usize, out: &mut Vec<u8>) {
        let len = len.min(SLOT);
        out.clear();
        out.reserve(len);
        // SAFETY: within the mapping; the other process may write these
        // bytes meanwhile, so they are copied as they are and only the
        // copy is read (a torn request decodes as malformed, or as another
        // request of the same client: its own business).
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.add(CONTROL), out.as_mut_ptr(), len);
            out.set_len(len);
        }
    }

    /// The slot, to write into or read from while this side owns it.
    ///
    /// # Safety
    /// Only while the state word gives the slot to the caller's side
    /// (client: not REQUEST; server: REQUEST), and not kept past that.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slot(&self) -> &mut [u8] {
        std::slice::from_raw_parts_mut(self.base.add(CONTROL), SLOT)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe {
            let _ = rustix::mm::munmap(self.base.cast(), REGION);
        }
    }
}

/// Whether the socket's other end is still there (no hang-up, no error).
pub fn peer_alive(sock: impl AsFd) -> bool {
    use rustix::event::{PollFd, PollFlags};
    let mut p = [PollFd::new(&sock, PollFlags::RDHUP)];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match rustix::event::poll(&mut p, Some(&zero)) {
        Ok(0) => true,
        Ok(_) => !p[0]
            .revents()
            .intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR),
        Err(_) => false,
    }
}

/// Send `bytes` with `fd` (SCM_RIGHTS) on `sock`.
pub fn send_fd(sock: impl AsFd, bytes: &[u8], fd: impl AsFd) -> io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let fds = [fd.as_fd()];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    cmsg.push(SendAncillaryMessage::ScmRights(&fds));
    let n = rustix::net::sendmsg(
        sock,
        &[io::IoSlice::new(bytes)],
        &mut cmsg,
        SendFlags::NOSIGNAL,
    )?;
    if n != bytes.len() {
        return Err(io::Error::from_raw_os_error(libc::EPROTO));
    }
    Ok(())
}

/// Receive up to `buf.len()` bytes and at most one descriptor; (bytes, fd).
/// 0 bytes: the other end hung up.
pub fn recv_fd(sock: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = RecvAncillaryBuffer::new(&mut space);
    let r = rustix::net::recvmsg(
        sock,
        &mut [io::IoSliceMut::new(buf)],
        &mut cmsg,
        RecvFlags::CMSG_CLOEXEC | RecvFlags::WAITALL,
    )?;
    let mut fd = None;
    for m in cmsg.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = m {
            fd = fd.or(fds.next());
        }
    }
    Ok((r.bytes, fd))
}

/// The peer's supplementary groups as of its `connect` (SO_PEERGROUPS).
/// Written by hand: rustix and nix offer SO_PEERCRED but not this option.
pub fn peer_groups(sock: impl AsFd) -> io::Result<Vec<u32>> {
    use std::os::fd::AsRawFd;
    let fd = sock.as_fd().as_raw_fd();
    let mut groups = vec![0u32; 64];
    loop {
        let mut len = (groups.len() * 4) as libc::socklen_t;
        // SAFETY: the buffer is `len` bytes of u32s, as the option fills.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if r == 0 {
            groups.truncate(len as usize / 4);
            return Ok(groups);
        }
        let e = io::Error::last_os_error();
        // ERANGE: `len` now says the size needed.
        if e.raw_os_error() == Some(libc::ERANGE) && (len as usize / 4) > groups.len() {
            groups.resize(len as usize / 4, 0);
            continue;
        }
        return Err(e);
    }
}
