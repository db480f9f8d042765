//! The one seam for synchronisation primitives.
//!
//! Every mutex, rwlock and atomic the engine uses comes from here, so a model
//! checker (loom, shuttle) can be swapped in under a cfg flag without touching
//! the operations. It also owns the contention counters: every lock is created
//! with a [`LockClass`], and `lock()` counts acquisitions, and on the slow path
//! (the lock was taken) waits and nanoseconds waited, per class. The fast path
//! costs one relaxed `fetch_add` on a per-class, per-CPU-ish striped counter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

pub use parking_lot::{Condvar, MutexGuard, RwLockReadGuard, RwLockWriteGuard};
pub use std::sync::atomic::{AtomicBool, AtomicU32};
pub use std::sync::Arc;

/// Lock classes, as in seed 002's lockmeter table and XFS's lock classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum LockClass {
    /// A slot of the name-lock table (per name, per directory or global, by switch).
    Name = 0,
    /// An inode's state mutex (attributes, data, xattrs).
    Inode,
    /// A shard of a directory's entry index.
    DirShard,
    /// A shard of the inode cache.
    InodeTable,
    /// A commit gate shard (ops hold it from first mutation to enqueue).
    Gate,
    /// The cross-directory rename mutex (like Linux's s_vfs_rename_mutex).
    Rename,
    /// The reclaim lock (fills share it, batched eviction takes it exclusively).
    Reclaim,
    /// A thread-stripe of a directory's entry count and times.
    DirStripe,
}

pub const LOCK_CLASSES: [LockClass; 8] = [
    LockClass::Name,
    LockClass::Inode,
    LockClass::DirShard,
    LockClass::InodeTable,
    LockClass::Gate,
    LockClass::Rename,
    LockClass::Reclaim,
    LockClass::DirStripe,
];

impl LockClass {
    pub fn name(self) -> &'static str {
        match self {
            LockClass::Name => "name",
            LockClass::Inode => "inode",
            LockClass::DirShard => "dir_shard",
            LockClass::InodeTable => "inode_table",
            LockClass::Gate => "commit_gate",
            LockClass::Rename => "rename",
            LockClass::Reclaim => "reclaim",
            LockClass::DirStripe => "dir_stripe",
        }
    }
}

const STRIPES: usize = 8;

#[derive(Default)]
#[repr(align(64))]
struct Stripe {
    acquired: AtomicU64,
    contended: AtomicU64,
    wait_ns: AtomicU64,
}

/// Per-class counters, striped by thread so the fast path does not bounce a
/// shared cache line between cores.
pub struct LockStats {
    stripes: [[Stripe; STRIPES]; LOCK_CLASSES.len()],
}

/// A snapshot of one class's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockCounts {
    pub acquired: u64,
    pub contended: u64,
    pub wait_ns: u64,
}

static STATS: LockStats = LockStats {
    stripes: [const { [const { Stripe { acquired: AtomicU64::new(0), contended: AtomicU64::new(0), wait_ns: AtomicU64::new(0) } }; STRIPES] }; LOCK_CLASSES.len()],
};

thread_local! {
    static STRIPE: usize = {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        (NEXT.fetch_add(1, Ordering::Relaxed) as usize) % STRIPES
    };
    static SLOT: usize = {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) as usize
    };
}

/// A small per-thread number, stable for the thread's life (used to pick a
/// commit gate shard).
pub fn thread_slot() -> usize {
    SLOT.with(|s| *s)
}

fn stripe() -> usize {
    STRIPE.with(|s| *s)
}

#[inline]
fn note(class: LockClass, waited: Option<u64>) {
    let s = &STATS.stripes[class as usize][stripe()];
    s.acquired.fetch_add(1, Ordering::Relaxed);
    if let Some(ns) = waited {
        s.contended.fetch_add(1, Ordering::Relaxed);
        s.wait_ns.fetch_add(ns, Ordering::Relaxed);
    }
}

/// Read the global lock counters (all engines in this process share them, as
/// lockmeter's did).
pub fn lock_counts(class: LockClass) -> LockCounts {
    let mut c = LockCounts::default();
    for s in &STATS.stripes[class as usize] {
        c.acquired += s.acquired.load(Ordering::Relaxed);
        c.contended += s.contended.load(Ordering::Relaxed);
        c.wait_ns += s.wait_ns.load(Ordering::Relaxed);
    }
    c
}

/// A mutex that counts its contention under a lock class.
pub struct Mutex<T> {
    class: LockClass,
    inner: parking_lot::Mutex<T>,
}

impl<T> Mutex<T> {
    pub const fn new(class: LockClass, v: T) -> Self {
        Mutex { class, inner: parking_lot::const_mutex(v) }
    }
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        if let Some(g) = self.inner.try_lock() {
            note(self.class, None);
            return g;
        }
        let t = Instant::now();
        let g = self.inner.lock();
        note(self.class, Some(t.elapsed().as_nanos() as u64));
        g
    }
    /// Never waits; counted only when it succeeds.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let g = self.inner.try_lock();
        if g.is_some() {
            note(self.class, None);
        }
        g
    }
    pub fn get_mut(&mut self) -> &mut T {
        self.inner.get_mut()
    }
}

/// A reader-writer lock that counts its contention under a lock class.
pub struct RwLock<T> {
    class: LockClass,
    inner: parking_lot::RwLock<T>,
}

impl<T> RwLock<T> {
    pub const fn new(class: LockClass, v: T) -> Self {
        RwLock { class, inner: parking_lot::const_rwlock(v) }
    }
    #[inline]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        if let Some(g) = self.inner.try_read() {
            note(self.class, None);
            return g;
        }
        let t = Instant::now();
        let g = self.inner.read();
        note(self.class, Some(t.elapsed().as_nanos() as u64));
        g
    }
    #[inline]
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        if let Some(g) = self.inner.try_write() {
            note(self.class, None);
            return g;
        }
        let t = Instant::now();
        let g = self.inner.write();
        note(self.class, Some(t.elapsed().as_nanos() as u64));
        g
    }
}
