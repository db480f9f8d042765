//! FUSE requests counted by type, in both modes: the request ids the
//! adapter core hands each mode's `Mode::start`.

use std::sync::atomic::{AtomicU64, Ordering};

/// FUSE requests received, by type: round trips are the cost through a
/// mount, so `shoal stats` shows them next to the engine's operations.
/// One relaxed atomic add per request (a round trip costs microseconds).
pub struct Requests {
    counts: [AtomicU64; REQUEST_NAMES.len()],
    /// Entry invalidations the pruner sent to the kernel (see `Handed`).
    pub invalidations: AtomicU64,
}

/// The request types counted, in `Requests` order. `forget` counts inodes
/// forgotten (the kernel batches them), not requests.
pub const REQUEST_NAMES: [&str; 33] = [
    "lookup",
    "forget",
    "getattr",
    "setattr",
    "readlink",
    "mknod",
    "mkdir",
    "unlink",
    "rmdir",
    "symlink",
    "rename",
    "link",
    "open",
    "read",
    "write",
    "flush",
    "release",
    "fsync",
    "opendir",
    "readdir",
    "readdirplus",
    "releasedir",
    "fsyncdir",
    "statfs",
    "access",
    "setxattr",
    "getxattr",
    "listxattr",
    "removexattr",
    "create",
    "fallocate",
    "lseek",
    "ioctl",
];

/// Indexes into `REQUEST_NAMES`.
pub mod req {
    pub const LOOKUP: usize = 0;
    pub const FORGET: usize = 1;
    pub const GETATTR: usize = 2;
    pub const SETATTR: usize = 3;
    pub const READLINK: usize = 4;
    pub const MKNOD: usize = 5;
    pub const MKDIR: usize = 6;
    pub const UNLINK: usize = 7;
    pub const RMDIR: usize = 8;
    pub const SYMLINK: usize = 9;
    pub const RENAME: usize = 10;
    pub const LINK: usize = 11;
    pub const OPEN: usize = 12;
    pub const READ: usize = 13;
    pub const WRITE: usize = 14;
    pub const FLUSH: usize = 15;
    pub const RELEASE: usize = 16;
    pub const FSYNC: usize = 17;
    pub const OPENDIR: usize = 18;
    pub const READDIR: usize = 19;
    pub const READDIRPLUS: usize = 20;
    pub const RELEASEDIR: usize = 21;
    pub const FSYNCDIR: usize = 22;
    pub const STATFS: usize = 23;
    pub const ACCESS: usize = 24;
    pub const SETXATTR: usize = 25;
    pub const GETXATTR: usize = 26;
    pub const LISTXATTR: usize = 27;
    pub const REMOVEXATTR: usize = 28;
    pub const CREATE: usize = 29;
    pub const FALLOCATE: usize = 30;
    pub const LSEEK: usize = 31;
    pub const IOCTL: usize = 32;
}

impl Default for Requests {
    fn default() -> Self {
        Requests {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            invalidations: AtomicU64::new(0),
        }
    }
}

impl Requests {
    #[inline]
    pub fn count(&self, i: usize) {
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }
    /// (name, count) for every request type.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        REQUEST_NAMES
            .iter()
            .zip(&self.counts)
            .map(|(n, c)| (*n, c.load(Ordering::Relaxed)))
            .collect()
    }
}
