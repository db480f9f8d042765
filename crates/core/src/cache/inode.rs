//! A cached inode (`Inode`) and its state under its lock (`InodeState`).

use super::*;
use crate::sync::{Arc, AtomicBool, AtomicI64, AtomicU32, AtomicU64, LockClass, Mutex, Ordering};
use crate::types::{Attr, Ino, Kind};
use std::collections::BTreeMap;

/// The mutable state of an inode. protects: everything inside.
/// `repr(C)`: the fields every directory operation writes come first.
#[repr(C)]
pub struct InodeState {
    pub attr: Attr,
    /// Highest epoch that changed this inode; clean once durable >= it.
    pub dirty_epoch: u64,
    /// Highest epoch that changed what fdatasync must keep: the size, an
    /// inline file's bytes, the inode's existence (ext4's `i_datasync_tid`).
    /// Every record counts unless its change was only times or a data
    /// object's bytes (`Engine::emit_times`).
    pub data_epoch: u64,
    /// Directory was removed (rmdir or replaced by rename): no new entries.
    pub dead: bool,
    /// The inode's records were deleted from the store (nlink 0, last close done).
    pub destroyed: bool,
    /// A file that may have a data object: loaded from the store (its past
    /// unknown) or moved out of line since it was made. One made here that
    /// never went past INLINE_MAX has none, and its destruction removes
    /// nothing (an unlink of a small file costs no object removal).
    pub object: bool,
    /// Symlink target; for directories, the parent's inode number (8 bytes LE).
    pub blob: Vec<u8>,
    /// An inline file's bytes, as block 0 (at most INLINE_MAX bytes; shorter
    /// = zero tail). Past INLINE_MAX the bytes are in the data object.
    pub blocks: BTreeMap<u64, Vec<u8>>,
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// `(parent, name hash)` of the entry naming this inode with the sole
    /// flag; `None` once the inode may have a second name or data blocks.
    /// Only create sets it and only rename moves it; `Engine::unshare`
    /// clears it (and the entry's flag) before anything breaks the flag's promise.
    pub primary: Option<(Ino, u64)>,
    /// Handles through which the kernel reads and writes the data object
    /// directly (FUSE passthrough, `Engine::pin_data`): while any is open the
    /// bytes stay in the object whatever the size.
    pub pinned: u32,
    /// chattr(1) flags (`engine::flags`), kept in the record; mirrored in
    /// `Inode::flags` for checks that take no lock.
    pub flags: u32,
    /// An O_TMPFILE never named yet: link may name it with nlink 0
    /// (Linux's I_LINKABLE, `rules::link::may_link`); a file unlinked while
    /// open may not be.
    pub linkable: bool,
}

impl InodeState {
    pub fn parent(&self) -> Ino {
        if self.blob.len() == 8 {
            u64::from_le_bytes(self.blob[..8].try_into().unwrap())
        } else {
            0
        }
    }
    pub fn set_parent(&mut self, p: Ino) {
        self.blob = p.to_le_bytes().to_vec();
    }
}

/// A cached inode. Every cached file costs one, so its size is the cache's
/// size at scale: 296 bytes, 312 with the `Arc`'s counts, which mimalloc
/// serves from its 320-byte class. `st` used to be `CachePadded`, which made
/// the object 128-aligned and 512 bytes with its counts: at 1M cached files
/// the process's peak RSS went from 712 to 526 MB without it, with lookups,
/// seed 000 and seed 002 at two workers unchanged (docs/perf-log/13-seed001-hit-path.md).
/// `repr(C)` with `st` first puts the lock word in the line of the `Arc`'s
/// counts, so a lookup's pointer clone and its lock take one line.
#[repr(C)]
pub struct Inode {
    pub st: Mutex<InodeState>,
    pub ino: Ino,
    pub kind: Kind,
    /// `InodeState::flags`, written under the state's lock: checks read it
    /// without one (in the padding after `kind`: the object stays 296 bytes).
    pub flags: AtomicU32,
    /// Boxed: a file does not carry an (empty, padded) directory index.
    pub dir: Option<Box<Dir>>,
    /// References held by the kernel (FUSE lookup count). Pinned while > 0.
    pub lookups: AtomicU64,
    /// Open file handles. Pinned while > 0; an unlinked inode lives until 0.
    pub opens: AtomicU32,
    /// Used since reclaim last passed (CLOCK's reference bit, as on `Slot`).
    pub referenced: AtomicBool,
}

impl Inode {
    /// `acct`: the engine's bytes of evicted-name filters (see `EvictedFilter`).
    /// Borrowed, and cloned only for a directory: a clone is an atomic add on
    /// one engine-wide cache line, which two threads creating files bounced
    /// between their cores on every create (8% of crunl's cycles at 2 workers).
    pub fn new(st: InodeState, dir_complete: bool, acct: Option<&Arc<AtomicI64>>) -> Arc<Inode> {
        let kind = st.attr.kind;
        Arc::new(Inode {
            ino: st.attr.ino,
            kind,
            dir: if kind == Kind::Dir {
                let d = Dir::new(
                    dir_complete,
                    st.attr.gid,
                    st.attr.perm & 0o2000 != 0,
                    acct.cloned(),
                );
                d.default_acl.store(
                    st.xattrs.iter().any(|(n, _)| n == crate::acl::DEFAULT),
                    Ordering::Relaxed,
                );
                Some(Box::new(d))
            } else {
                None
            },
            flags: AtomicU32::new(st.flags),
            st: Mutex::new(LockClass::Inode, st),
            lookups: AtomicU64::new(0),
            opens: AtomicU32::new(0),
            referenced: AtomicBool::new(false),
        })
    }
}
