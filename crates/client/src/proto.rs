//! The protocol between a client and a mount's daemon, written once for
//! both ends (docs/client.md, "One call").
//!
//! A connection is a Unix stream socket (`client.sock` in the mount's run
//! directory) and a shared region the daemon makes: a sealed memfd of
//! `REGION` bytes, handed over the socket with `SCM_RIGHTS` right after
//! `connect`, with the `HELLO` bytes (version and size). The region is a
//! control page (the slot's state word and the two sleepers' flags, each on
//! its own cache line) and one slot of `SLOT` bytes that holds a request,
//! then its answer. One request is in flight at a time.
//!
//! The state word moves IDLE -> REQUEST (the client, release order; a
//! `FUTEX_WAKE` if `SERVER_SLEEPS` says the server thread sleeps) -> ANSWER
//! (the server, the same way with `CLIENT_SLEEPS`) -> REQUEST ... Whoever
//! waits sets its flag, then reads the state word again, then
//! `FUTEX_WAIT`s on it (sequentially consistent on both sides: either the
//! waker sees the flag or the waiter sees the new state).
//!
//! A request: `REQ_HEAD` bytes (op, flags, two directory handles, ten
//! numbers), then three byte strings, each a u32 length and its bytes.
//! An answer: `ANS_HEAD` bytes (errno, whether a descriptor follows on the
//! socket, four numbers, a `Stat`), then one byte string. Numbers are in
//! the machine's order: both ends run on one machine.
//!
//! The server copies a request out of the region before it reads a byte
//! of it and checks every length against the slot (`Request::decode`): the
//! client may change the region at any time.

pub const VERSION: u32 = 1;
/// The control page: the state word and the sleepers' flags.
pub const CONTROL: usize = 4096;
/// The request and answer slot.
pub const SLOT: usize = 1 << 20;
pub const REGION: usize = CONTROL + SLOT;
/// Offsets in the control page, each u32 on its own cache line.
pub const STATE: usize = 0;
pub const SERVER_SLEEPS: usize = 64;
pub const CLIENT_SLEEPS: usize = 128;
/// How long the client spins for its answer, in ns, as the server last
/// said (0: `CLIENT_SPIN_NS`). The server says `CLIENT_SPIN_LONG_NS` while
/// every busy connection's two threads can have a CPU each, where a
/// client that sleeps costs a wake-up per call; else nothing, and a
/// spinning client would take its own server's CPU (`clients::Spin`).
pub const SPIN_HINT: usize = 192;

/// The slot's states.
pub const IDLE: u32 = 0;
pub const REQUEST: u32 = 1;
pub const ANSWER: u32 = 2;

/// What the daemon sends with the region: VERSION (u32), REGION (u64).
pub const HELLO: usize = 12;

/// How long a waiting side spins before it sleeps on the futex. Short: on
/// a 2-core machine the spinning client takes the CPU the server needs.
pub const CLIENT_SPIN_NS: u64 = 4_000;
pub const CLIENT_SPIN_LONG_NS: u32 = 100_000;
pub const SERVER_SPIN_NS: u64 = 20_000;

/// A spin time, or `SHOAL_CLIENT_SPIN_NS` / `SHOAL_SERVER_SPIN_NS` from
/// the environment when set (for benchmarks: scripts/bench-client.sh
/// compares them), read once.
pub fn spin_ns(server: bool) -> u64 {
    spin_env(server).unwrap_or(if server {
        SERVER_SPIN_NS
    } else {
        CLIENT_SPIN_NS
    })
}

/// `SHOAL_SERVER_SPIN_NS` / `SHOAL_CLIENT_SPIN_NS`, when set: it wins
/// over the server's hint too.
pub fn spin_env(server: bool) -> Option<u64> {
    use std::sync::OnceLock;
    static SPIN: [OnceLock<Option<u64>>; 2] = [OnceLock::new(), OnceLock::new()];
    *SPIN[server as usize].get_or_init(|| {
        let var = if server {
            "SHOAL_SERVER_SPIN_NS"
        } else {
            "SHOAL_CLIENT_SPIN_NS"
        };
        std::env::var(var).ok().and_then(|v| v.parse().ok())
    })
}
/// A sleeping client looks for a hang-up of the daemon this often.
pub const CLIENT_POLL_MS: u64 = 50;
/// A sleeping server thread looks for a hang-up of its client this often.
pub const SERVER_POLL_MS: u64 = 500;

/// Operations. A path is resolved by the daemon from a directory handle:
/// 0 is the mount's root, others come from `OPENDIR` on this connection
/// (so a client reaches only what a path walk with its credentials
/// reaches, never an inode by number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Op {
    /// No engine call: the round trip alone.
    Ping = 1,
    /// dir, s0 = path, FOLLOW: the `Stat`.
    Stat = 2,
    /// dir, s0, a0 = mode, a1 = umask.
    Mkdir = 3,
    /// dir, s0, a0 = mode, a1 = umask: a regular file, not opened
    /// (creat and close in one call); EEXIST if the name is taken.
    Create = 4,
    /// dir, s0, flags = open(2) flags, a0 = mode, a1 = umask: the Stat,
    /// a0 = the handle, and the data object's descriptor on the socket.
    Open = 5,
    /// a0 = handle: a file's or a directory's.
    Close = 6,
    /// a0 = handle, flags = 1 for fdatasync.
    Fsync = 7,
    /// dir, s0.
    Unlink = 8,
    Rmdir = 9,
    /// dir, s0 -> dir2, s1, flags = renameat2's.
    Rename = 10,
    /// dir, s0 (the existing name, FOLLOW) -> dir2, s1.
    Link = 11,
    /// dir, s0 = the new name, s1 = the target.
    Symlink = 12,
    /// dir, s0: the target in the answer's bytes.
    Readlink = 13,
    /// dir, s0, FOLLOW: a0 = a handle usable as a `dir`, and the Stat.
    Opendir = 14,
    /// a0 = handle, a1 = cookie: entries (`encode_entry`) in the answer's
    /// bytes, as many as fit; none at the end.
    Readdir = 15,
    /// dir, s0, FOLLOW, a0 = which (`SET_*`), a1 mode, a2 uid, a3 gid,
    /// a4 size, a5/a6 atime sec/nsec, a7/a8 mtime sec/nsec (nsec
    /// `TIME_NOW` for now).
    Setattr = 16,
    /// dir, s0, FOLLOW, s1 = name: the value.
    Getxattr = 17,
    /// dir, s0, FOLLOW, s1 = name, s2 = value, a0 = XATTR_CREATE/REPLACE.
    Setxattr = 18,
    /// dir, s0, FOLLOW: names, each ending in NUL.
    Listxattr = 19,
    /// dir, s0, FOLLOW, s1 = name.
    Removexattr = 20,
    /// a0 = a file's handle: its Stat, with what was written through the
    /// descriptor taken in first (fstat).
    Fstat = 21,
    /// dir, s0, FOLLOW: a regular file's bytes whole in the answer's bytes,
    /// and its Stat; EFBIG past `ANSWER_MAX` (open it instead). No handle,
    /// no descriptor, no data object pinned: one round trip for a small
    /// file (docs/client.md, "Reading a file whole").
    ReadFile = 22,
}

impl Op {
    pub fn from_u32(v: u32) -> Option<Op> {
        use Op::*;
        Some(match v {
            1 => Ping,
            2 => Stat,
            3 => Mkdir,
            4 => Create,
            5 => Open,
            6 => Close,
            7 => Fsync,
            8 => Unlink,
            9 => Rmdir,
            10 => Rename,
            11 => Link,
            12 => Symlink,
            13 => Readlink,
            14 => Opendir,
            15 => Readdir,
            16 => Setattr,
            17 => Getxattr,
            18 => Setxattr,
            19 => Listxattr,
            20 => Removexattr,
            21 => Fstat,
            22 => ReadFile,
            _ => return None,
        })
    }
}

/// Request flag: follow a symlink in the last component.
pub const FOLLOW: u32 = 1;

/// Setattr's `a0` bits.
pub const SET_MODE: u64 = 1;
pub const SET_UID: u64 = 2;
pub const SET_GID: u64 = 4;
pub const SET_SIZE: u64 = 8;
pub const SET_ATIME: u64 = 16;
pub const SET_MTIME: u64 = 32;
/// A time's nsec meaning "now" (utimensat's UTIME_NOW).
pub const TIME_NOW: u64 = (1 << 30) - 1;

/// An answer's errno beyond Linux's: the path leads out of the mount (an
/// absolute symlink elsewhere); the answer's bytes are the path to
/// continue at, outside.
pub const OUTSIDE: i32 = 0x10000;

pub const ARGS: usize = 10;
/// op, flags, dir, dir2, ARGS numbers.
pub const REQ_HEAD: usize = 4 + 4 + 8 + 8 + 8 * ARGS;
pub const STAT_WORDS: usize = 15;
/// errno, fd follows, four numbers, a Stat.
pub const ANS_HEAD: usize = 4 + 4 + 8 * 4 + 8 * STAT_WORDS;

/// A request as the server decoded it (its own copy).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    pub op: u32,
    pub flags: u32,
    pub dir: u64,
    pub dir2: u64,
    pub a: [u64; ARGS],
    pub s: [Vec<u8>; 3],
}

/// Out of the slot's bounds, or a length that does not add up.
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed;

impl Request {
    /// Encode into `slot` (at least `request_len` bytes: the client
    /// refuses a larger request with E2BIG before); the length used.
    pub fn encode(&self, slot: &mut [u8]) -> usize {
        encode_request(
            slot,
            self.op,
            self.flags,
            self.dir,
            self.dir2,
            &self.a,
            [&self.s[0], &self.s[1], &self.s[2]],
        )
    }

    /// Decode a request the server copied out of the region: every length
    /// checked against what was copied.
    pub fn decode(b: &[u8]) -> Result<Request, Malformed> {
        let mut r = Reader { b, at: 0 };
        let op = r.u32()?;
        let flags = r.u32()?;
        let dir = r.u64()?;
        let dir2 = r.u64()?;
        let mut a = [0u64; ARGS];
        for x in a.iter_mut() {
            *x = r.u64()?;
        }
        let s = [r.bytes()?, r.bytes()?, r.bytes()?];
        Ok(Request {
            op,
            flags,
            dir,
            dir2,
            a,
            s,
        })
    }
}

/// How many bytes of the slot the request in `b` (a copy of its start)
/// takes: `Ok(n)` when `b` holds all of it (n <= b.len()), `Err(Some(m))`
/// when the lengths read so far need `m` bytes copied, `Err(None)` when
/// they pass the slot. The server copies the first bytes, then what this
/// asks for: a request costs its own size to copy, not the slot's.
pub fn request_size(b: &[u8]) -> Result<usize, Option<usize>> {
    let mut at = REQ_HEAD;
    for _ in 0..3 {
        if b.len() < at + 4 {
            return Err(Some(at + 4));
        }
        let n = u32::from_ne_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        at = at + 4 + n;
        if at > SLOT {
            return Err(None);
        }
    }
    if b.len() < at {
        return Err(Some(at));
    }
    Ok(at)
}

/// The bytes a request with these strings takes.
pub fn request_len(s: [&[u8]; 3]) -> usize {
    REQ_HEAD + s.iter().map(|x| 4 + x.len()).sum::<usize>()
}

/// Write a request into `slot` (at least `request_len` long); the length.
pub fn encode_request(
    slot: &mut [u8],
    op: u32,
    flags: u32,
    dir: u64,
    dir2: u64,
    a: &[u64; ARGS],
    s: [&[u8]; 3],
) -> usize {
    let mut w = Writer { b: slot, at: 0 };
    w.u32(op);
    w.u32(flags);
    w.u64(dir);
    w.u64(dir2);
    for x in a {
        w.u64(*x);
    }
    for x in s {
        w.bytes(x);
    }
    w.at
}

/// Attributes as a client sees them (stat(2)'s fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    pub ino: u64,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub size: u64,
    pub blocks: u64,
    pub atime: (i64, u32),
    pub mtime: (i64, u32),
    pub ctime: (i64, u32),
    pub blksize: u32,
}

impl Stat {
    fn words(&self) -> [u64; STAT_WORDS] {
        [
            self.ino,
            self.mode as u64,
            self.nlink as u64,
            self.uid as u64,
            self.gid as u64,
            self.rdev as u64,
            self.size,
            self.blocks,
            self.atime.0 as u64,
            self.atime.1 as u64,
            self.mtime.0 as u64,
            self.mtime.1 as u64,
            self.ctime.0 as u64,
            self.ctime.1 as u64,
            self.blksize as u64,
        ]
    }
    fn from_words(w: &[u64; STAT_WORDS]) -> Stat {
        Stat {
            ino: w[0],
            mode: w[1] as u32,
            nlink: w[2] as u32,
            uid: w[3] as u32,
            gid: w[4] as u32,
            rdev: w[5] as u32,
            size: w[6],
            blocks: w[7],
            atime: (w[8] as i64, w[9] as u32),
            mtime: (w[10] as i64, w[11] as u32),
            ctime: (w[12] as i64, w[13] as u32),
            blksize: w[14] as u32,
        }
    }
    pub fn is_dir(&self) -> bool {
        self.mode & 0o170000 == 0o040000
    }
    pub fn is_file(&self) -> bool {
        self.mode & 0o170000 == 0o100000
    }
    pub fn is_symlink(&self) -> bool {
        self.mode & 0o170000 == 0o120000
    }
}

/// An answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// 0, a Linux errno, or `OUTSIDE`.
    pub errno: i32,
    /// A descriptor follows on the socket (sent before the state word
    /// says ANSWER, so the client's receive never waits).
    pub fd: bool,
    pub a: [u64; 4],
    pub stat: Stat,
    pub data: Vec<u8>,
}

impl Answer {
    pub fn err(errno: i32) -> Answer {
        Answer {
            errno,
            ..Default::default()
        }
    }
    /// Write into `slot`; answers larger than the slot are cut by the
    /// server before (readdir fills only what fits).
    pub fn encode(&self, slot: &mut [u8]) -> usize {
        let mut w = Writer { b: slot, at: 0 };
        w.u32(self.errno as u32);
        w.u32(self.fd as u32);
        for x in self.a {
            w.u64(x);
        }
        for x in self.stat.words() {
            w.u64(x);
        }
        w.bytes(&self.data);
        w.at
    }
    pub fn decode(b: &[u8]) -> Result<Answer, Malformed> {
        let mut r = Reader { b, at: 0 };
        let errno = r.u32()? as i32;
        let fd = r.u32()? != 0;
        let mut a = [0u64; 4];
        for x in a.iter_mut() {
            *x = r.u64()?;
        }
        let mut w = [0u64; STAT_WORDS];
        for x in w.iter_mut() {
            *x = r.u64()?;
        }
        Ok(Answer {
            errno,
            fd,
            a,
            stat: Stat::from_words(&w),
            data: r.bytes()?,
        })
    }
}

/// The most answer bytes a slot carries.
pub const ANSWER_MAX: usize = SLOT - ANS_HEAD - 4;

/// A directory entry in a readdir answer: ino, cookie (to resume after
/// it), the type's `S_IFMT` bits >> 12, the name's length, the name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u64,
    pub cookie: u64,
    pub kind: u8,
    pub name: Vec<u8>,
}

pub fn encode_entry(out: &mut Vec<u8>, e: &DirEntry) {
    out.extend_from_slice(&e.ino.to_ne_bytes());
    out.extend_from_slice(&e.cookie.to_ne_bytes());
    out.push(e.kind);
    out.extend_from_slice(&(e.name.len() as u16).to_ne_bytes());
    out.extend_from_slice(&e.name);
}

pub fn entry_len(name: &[u8]) -> usize {
    8 + 8 + 1 + 2 + name.len()
}

pub fn decode_entries(b: &[u8]) -> Result<Vec<DirEntry>, Malformed> {
    let mut r = Reader { b, at: 0 };
    let mut out = Vec::new();
    while r.at < b.len() {
        let ino = r.u64()?;
        let cookie = r.u64()?;
        let kind = r.take(1)?[0];
        let n = u16::from_ne_bytes(r.take(2)?.try_into().unwrap()) as usize;
        out.push(DirEntry {
            ino,
            cookie,
            kind,
            name: r.take(n)?.to_vec(),
        });
    }
    Ok(out)
}

struct Writer<'a> {
    b: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, x: &[u8]) {
        self.b[self.at..self.at + x.len()].copy_from_slice(x);
        self.at += x.len();
    }
    fn u32(&mut self, v: u32) {
        self.put(&v.to_ne_bytes())
    }
    fn u64(&mut self, v: u64) {
        self.put(&v.to_ne_bytes())
    }
    fn bytes(&mut self, x: &[u8]) {
        self.u32(x.len() as u32);
        self.put(x);
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end = self.at.checked_add(n).ok_or(Malformed)?;
        let x = self.b.get(self.at..end).ok_or(Malformed)?;
        self.at = end;
        Ok(x)
    }
    fn u32(&mut self) -> Result<u32, Malformed> {
        Ok(u32::from_ne_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_ne_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, Malformed> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_round_trip_and_bad_lengths_are_malformed() {
        let r = Request {
            op: Op::Rename as u32,
            flags: 1,
            dir: 3,
            dir2: 4,
            a: [7; ARGS],
            s: [b"a/b".to_vec(), b"c".to_vec(), vec![]],
        };
        let mut slot = vec![0u8; 4096];
        let n = r.encode(&mut slot);
        assert_eq!(n, request_len([b"a/b", b"c", b""]));
        assert_eq!(Request::decode(&slot[..n]), Ok(r));
        // A length past what was copied.
        slot[REQ_HEAD..REQ_HEAD + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(Request::decode(&slot[..n]), Err(Malformed));
        assert_eq!(Request::decode(&slot[..10]), Err(Malformed));
        let a = Answer {
            errno: 0,
            fd: true,
            a: [1, 2, 3, 4],
            stat: Stat {
                ino: 9,
                mode: 0o100644,
                mtime: (-5, 7),
                ..Default::default()
            },
            data: b"xyz".to_vec(),
        };
        let n = a.encode(&mut slot);
        assert_eq!(n, ANS_HEAD + 4 + 3);
        assert_eq!(Answer::decode(&slot[..n]), Ok(a));
        let mut b = Vec::new();
        let e = DirEntry {
            ino: 5,
            cookie: 6,
            kind: 4,
            name: b"dir".to_vec(),
        };
        encode_entry(&mut b, &e);
        assert_eq!(b.len(), entry_len(b"dir"));
        assert_eq!(decode_entries(&b), Ok(vec![e]));
        assert_eq!(decode_entries(&b[..5]), Err(Malformed));
        // The sizes the server copies in steps.
        let n = Request::default().encode(&mut slot);
        assert_eq!(request_size(&slot[..n]), Ok(n));
        assert_eq!(request_size(&slot[..REQ_HEAD]), Err(Some(REQ_HEAD + 4)));
        slot[REQ_HEAD..REQ_HEAD + 4].copy_from_slice(&100u32.to_ne_bytes());
        assert_eq!(
            request_size(&slot[..REQ_HEAD + 8]),
            Err(Some(REQ_HEAD + 108))
        );
        slot[REQ_HEAD..REQ_HEAD + 4].copy_from_slice(&(SLOT as u32).to_ne_bytes());
        assert_eq!(request_size(&slot[..REQ_HEAD + 8]), Err(None));
    }
}
