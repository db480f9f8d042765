//! The per-name lock table (seed 000's cure): the right to change one
//! entry (directory, name), in slots hashed from the pair. The protocol is
//! docs/locking.md.

use super::*;
use crate::schema::name_hash;
use crate::sync::{BitGuard, BitLocks, LockClass, Mutex, MutexGuard};
use crate::types::LockScope;

/// The name-lock table (pdirops). A fixed array of mutexes; an operation on
/// (dir, name) takes slot `hash(dir, name) % NAME_SLOTS`. The lock-scope
/// switch changes only the key: `Dir` hashes the directory alone (i_sem),
/// `Global` uses slot 0 (the BKL). Two slots are always taken in index order.
pub struct NameLocks {
    slots: Vec<crossbeam_utils::CachePadded<Mutex<()>>>,
    scope: LockScope,
}

/// Held name locks (one or two), released on drop.
pub struct NameGuard<'a> {
    _a: Held<'a>,
    _b: Option<Held<'a>>,
}

/// (Held for their `Drop` alone.)
enum Held<'a> {
    /// A directory shard's name lock (per-name scope).
    Shard { _g: BitGuard<'a> },
    /// A slot of the table (directory and global scopes).
    Table { _g: MutexGuard<'a, ()> },
}

/// Which lock a name takes: a directory shard's, or a table slot.
#[derive(Clone, Copy)]
enum Which<'a> {
    Shard(&'a BitLocks, u32),
    Table(usize),
}

impl Which<'_> {
    /// The position in the one order name locks are taken in: a shard's
    /// lock by the address of its word, then its bit; a table slot by its
    /// index (one scope uses only one kind).
    fn key(&self) -> usize {
        match self {
            Which::Shard(l, i) => ((*l as *const BitLocks as usize) << 5) | *i as usize,
            Which::Table(i) => *i,
        }
    }
}

impl NameLocks {
    pub fn new(scope: LockScope) -> NameLocks {
        // The per-name scope keeps its locks in the directories' shards;
        // the table serves the other two (slot 0 is also `bkl`).
        let n = if scope == LockScope::Name {
            1
        } else {
            NAME_SLOTS
        };
        NameLocks {
            slots: (0..n)
                .map(|_| crossbeam_utils::CachePadded::new(Mutex::new(LockClass::Name, ())))
                .collect(),
            scope,
        }
    }
    /// The lock of the names of `dir` with this hash (`schema::name_hash`).
    fn which<'a>(&self, dir: &'a Inode, hash: u64) -> Which<'a> {
        match self.scope {
            LockScope::Global => Which::Table(0),
            LockScope::Dir => Which::Table(
                (dir.ino.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize % NAME_SLOTS,
            ),
            LockScope::Name => {
                let (l, i) = dir
                    .dir
                    .as_ref()
                    .expect("name locks are taken in directories")
                    .name_lock(hash);
                Which::Shard(l, i)
            }
        }
    }
    fn take<'a>(&'a self, w: Which<'a>) -> Held<'a> {
        match w {
            Which::Shard(l, i) => Held::Shard {
                _g: l.lock(i, LockClass::Name),
            },
            Which::Table(i) => Held::Table {
                _g: self.slots[i].lock(),
            },
        }
    }
    pub fn lock<'a>(&'a self, dir: &'a Inode, name: &[u8]) -> NameGuard<'a> {
        self.lock_hash(dir, name_hash(name))
    }
    /// Lock every name of `dir` with this hash (they share a lock).
    pub fn lock_hash<'a>(&'a self, dir: &'a Inode, hash: u64) -> NameGuard<'a> {
        NameGuard {
            _a: self.take(self.which(dir, hash)),
            _b: None,
        }
    }
    /// The big lock, under the `Global` scope only: seed 002's BKL also
    /// covered the read side of the namespace (`i_op->lookup`,
    /// `f_op->readdir`), `i_op->setattr` and `i_op->truncate`, and 2.4's
    /// ext2 mapped and allocated a file's blocks under it (`ext2_get_block`;
    /// the seed moved allocation to per-group locks), so the "before" switch
    /// takes it in lookup, readdir, setattr and write too. Those take no name
    /// lock otherwise; setattr and write take it after `unshare` has
    /// released its name lock, which under this scope is this same slot.
    pub fn bkl(&self) -> Option<NameGuard<'_>> {
        (self.scope == LockScope::Global).then(|| NameGuard {
            _a: Held::Table {
                _g: self.slots[0].lock(),
            },
            _b: None,
        })
    }
    /// Lock two names in the order of `Which::key`; one lock if they share one.
    pub fn lock2<'a>(
        &'a self,
        d1: &'a Inode,
        n1: &[u8],
        d2: &'a Inode,
        n2: &[u8],
    ) -> NameGuard<'a> {
        let (a, b) = (self.which(d1, name_hash(n1)), self.which(d2, name_hash(n2)));
        let (lo, hi) = if a.key() <= b.key() { (a, b) } else { (b, a) };
        let same = lo.key() == hi.key();
        let ga = self.take(lo);
        let gb = if same { None } else { Some(self.take(hi)) };
        NameGuard { _a: ga, _b: gb }
    }
}
