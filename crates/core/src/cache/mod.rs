//! In-memory objects: inodes (sharded table), directory indexes (sharded,
//! ordered by name hash), and the per-name lock table.
//!
//! protects (see docs/locking.md):
//! - `InodeTable` shard lock: membership of inodes in the cache.
//! - `Inode::st`: the inode's attributes, data blocks, xattrs, dirty epoch.
//! - `Dir` shard lock: the cached entries whose hash falls in the shard.
//! - `NameLocks` slot: the right to change the entry (dir, name) hashed there.

use crate::sync::{AtomicBool, Ordering};

pub const DIR_SHARDS: usize = 64;
const DIR_SHARD_SHIFT: u32 = 63 - 6;
pub const INODE_SHARDS: usize = 64;
/// Inode numbers are handed to threads in chunks of `1 << INO_CHUNK_SHIFT`.
pub const INO_CHUNK_SHIFT: u32 = 6;
pub const NAME_SLOTS: usize = 4096;

mod dir;
mod entry;
mod evicted;
mod index;
mod inode;
mod inode_table;
mod name_locks;

pub use dir::*;
pub use entry::*;
pub use evicted::*;
pub use index::*;
pub use inode::*;
pub use inode_table::*;
pub use name_locks::*;

/// Set a CLOCK reference bit. Only the first use after a reclaim pass writes,
/// so a hot object's cache line is not dirtied by every lookup.
#[inline]
fn touch(referenced: &AtomicBool) {
    if !referenced.load(Ordering::Relaxed) {
        referenced.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod size_guard {
    /// Every cached inode and entry costs this much: 10M of each is the
    /// cache at scale, so growth here is a memory regression (the budget's
    /// per-inode estimate is `size_of::<Inode>() + 296`).
    #[test]
    fn cached_objects_stay_small() {
        // With the Arc's two counts, within mimalloc's 320-byte class.
        assert!(
            std::mem::size_of::<super::Inode>() + 16 <= 320,
            "Inode is {} bytes",
            std::mem::size_of::<super::Inode>()
        );
        assert!(
            std::mem::size_of::<super::Dent>() <= 32,
            "Dent is {} bytes",
            std::mem::size_of::<super::Dent>()
        );
        assert_eq!(
            std::mem::size_of::<super::Slot>(),
            64,
            "a cached name is one cache line"
        );
        // A shard's lock word and its index's hot fields (through the inline
        // tags of a small shard and the slot array's pointer) sit in the
        // shard's first cache line.
        let lock = std::mem::size_of::<super::ShardLock>() - std::mem::size_of::<super::Index>();
        let hot = std::mem::offset_of!(super::Index, store) + std::mem::size_of::<super::Store>();
        assert_eq!(
            std::mem::size_of::<super::Line<super::ShardLock>>(),
            64,
            "a shard is one cache line"
        );
        assert_eq!(
            std::mem::size_of::<Option<super::Slot>>(),
            64,
            "an empty position costs no more than a slot"
        );
        assert!(
            lock + hot <= 64,
            "lock {lock} + hot index fields {hot} bytes"
        );
    }
}
