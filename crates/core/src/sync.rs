//! The one seam for synchronisation primitives.
//!
//! Every mutex, rwlock, condition variable and atomic the engine uses comes
//! from here. Built with `--cfg loom`, the counted locks (`Mutex`, `RwLock`,
//! `BitLocks`) and the atomics are loom's, so loom explores every
//! interleaving of the code that uses them: the loom models
//! (`crate::loom_models`, run by `scripts/loom.sh`) check the name lock, the
//! commit gate and reclaim against fills that way, on the engine's own code.
//! The uncounted `PlainMutex` and `Condvar` (the committer's bookkeeping)
//! stay parking_lot's: the models never contend on them.
//!
//! It also owns the contention counters: every lock is created
//! with a [`LockClass`], and `lock()` counts acquisitions, and on the slow path
//! (the lock was taken) waits and nanoseconds waited, per class. The fast path
//! costs a plain load and store on the calling thread's own counter block.

use std::time::Instant;

pub use parking_lot::Condvar;
#[cfg(not(loom))]
pub use parking_lot::{MutexGuard, RwLockReadGuard, RwLockWriteGuard};
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
pub use std::sync::{Arc, OnceLock};

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub use loom::sync::{MutexGuard, RwLockReadGuard, RwLockWriteGuard};

/// The lock types under the counted locks: parking_lot's, or loom's with
/// parking_lot's shape (`lock` returns the guard, `try_lock` an option).
#[cfg(not(loom))]
mod raw {
    pub type Mutex<T> = parking_lot::Mutex<T>;
    pub type RwLock<T> = parking_lot::RwLock<T>;
}
#[cfg(loom)]
mod raw {
    use super::*;
    pub struct Mutex<T>(loom::sync::Mutex<T>);
    impl<T> Mutex<T> {
        pub fn new(v: T) -> Self {
            Mutex(loom::sync::Mutex::new(v))
        }
        pub fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap()
        }
        pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            self.0.try_lock().ok()
        }
        pub fn get_mut(&mut self) -> &mut T {
            self.0.get_mut().unwrap()
        }
    }
    pub struct RwLock<T>(loom::sync::RwLock<T>);
    impl<T> RwLock<T> {
        pub fn new(v: T) -> Self {
            RwLock(loom::sync::RwLock::new(v))
        }
        pub fn read(&self) -> RwLockReadGuard<'_, T> {
            self.0.read().unwrap()
        }
        pub fn write(&self) -> RwLockWriteGuard<'_, T> {
            self.0.write().unwrap()
        }
        pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
            self.0.try_read().ok()
        }
        pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
            self.0.try_write().ok()
        }
    }
}

/// A mutex outside the lock classes: the committer's bookkeeping (its wakeup
/// flag and condition variables, the one-commit-at-a-time lock, the hooks set
/// at open), the engine's commit-thread handle, the store double's state and
/// the armed fault points. None is held across another lock of the protocol
/// except where docs/locking.md ("Uncounted locks") says so.
pub type PlainMutex<T> = parking_lot::Mutex<T>;
/// A `PlainMutex`'s guard.
pub type PlainMutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
pub use parking_lot::const_mutex as const_plain_mutex;

/// Lock classes, as in seed 002's lockmeter table and XFS's lock classes.
/// One byte: a lock's class is its first field, and under the per-name
/// scope the bytes after it hold a directory shard's name locks (`RwLock::side`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum LockClass {
    /// A name lock: under the per-name scope one of a directory shard's
    /// (`cache::Dir::name_lock`), else a slot of the name-lock table (per
    /// directory or global, by switch).
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

/// One thread's counters for one class.
#[derive(Default)]
struct ClassCounts {
    acquired: StdU64,
    contended: StdU64,
    wait_ns: StdU64,
}

/// The counters' own atomics are std's in every build: they count, they do
/// not order anything (and statics need a const constructor, which loom's
/// atomics lack).
use std::sync::atomic::AtomicU64 as StdU64;

/// One thread's counters for every class. Only its thread writes it, so an
/// add is a plain load and store, not a locked read-modify-write: with a
/// `fetch_add` per acquisition (stripes shared by thread number, as before),
/// counting cost about 11-12% of crunl's and rndrename's single-worker rate
/// (medians of three runs; 24 lock acquisitions per rndrename iteration;
/// docs/perf-log/08-shared-lines-threads-commits.md), which the
/// bench issue forbids ("cost nothing measurable"). Other threads only read.
#[derive(Default)]
#[repr(align(64))]
struct ThreadCounts {
    classes: [ClassCounts; LOCK_CLASSES.len()],
}

/// Every live thread's counters, for readers to sum.
static THREADS: std::sync::Mutex<Vec<Arc<ThreadCounts>>> = std::sync::Mutex::new(Vec::new());

/// The counts of threads that have exited (folded in by `Mine::drop`, so
/// counts outlive their threads, as lockmeter's did), and of acquisitions
/// made after a thread's block was dropped. Shared, so added with `fetch_add`.
static RETIRED: ThreadCounts = ThreadCounts {
    classes: [const {
        ClassCounts {
            acquired: StdU64::new(0),
            contended: StdU64::new(0),
            wait_ns: StdU64::new(0),
        }
    }; LOCK_CLASSES.len()],
};

/// This thread's block, registered in `THREADS` while the thread lives.
struct Mine(Arc<ThreadCounts>);

impl Drop for Mine {
    /// Fold the counts into `RETIRED` and unregister, under the lock readers
    /// sum under, so a reader sees them exactly once. The block then frees
    /// with its thread: a process that keeps starting threads keeps no
    /// memory for the ones that ended.
    fn drop(&mut self) {
        let mut all = THREADS.lock().unwrap_or_else(|e| e.into_inner());
        for (r, c) in RETIRED.classes.iter().zip(&self.0.classes) {
            r.acquired
                .fetch_add(c.acquired.load(Ordering::Relaxed), Ordering::Relaxed);
            r.contended
                .fetch_add(c.contended.load(Ordering::Relaxed), Ordering::Relaxed);
            r.wait_ns
                .fetch_add(c.wait_ns.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        all.retain(|t| !Arc::ptr_eq(t, &self.0));
    }
}

/// A snapshot of one class's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockCounts {
    pub acquired: u64,
    pub contended: u64,
    pub wait_ns: u64,
}

thread_local! {
    static MINE: Mine = {
        let c = Arc::new(ThreadCounts::default());
        THREADS.lock().unwrap_or_else(|e| e.into_inner()).push(c.clone());
        Mine(c)
    };
    static SLOT: usize = {
        static NEXT: StdU64 = StdU64::new(0);
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as usize
    };
}

/// A small per-thread number, stable for the thread's life (used to pick a
/// commit gate shard).
pub fn thread_slot() -> usize {
    SLOT.with(|s| *s)
}

/// Add to a counter only this thread writes (see `ThreadCounts`).
#[inline]
fn bump(c: &StdU64, v: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
}

#[inline]
fn note(class: LockClass, waited: Option<u64>) {
    let mine = MINE.try_with(|m| {
        let c = &m.0.classes[class as usize];
        bump(&c.acquired, 1);
        if let Some(ns) = waited {
            bump(&c.contended, 1);
            bump(&c.wait_ns, ns);
        }
    });
    if mine.is_err() {
        // A lock taken by another thread-local's destructor after this
        // thread's block was dropped (a cached inode freed at thread exit).
        let c = &RETIRED.classes[class as usize];
        c.acquired.fetch_add(1, Ordering::Relaxed);
        if let Some(ns) = waited {
            c.contended.fetch_add(1, Ordering::Relaxed);
            c.wait_ns.fetch_add(ns, Ordering::Relaxed);
        }
    }
}

/// Read the global lock counters (all engines in this process share them, as
/// lockmeter's did).
pub fn lock_counts(class: LockClass) -> LockCounts {
    let mut c = LockCounts::default();
    let all = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    for t in all.iter().map(|t| &**t).chain([&RETIRED]) {
        let k = &t.classes[class as usize];
        c.acquired += k.acquired.load(Ordering::Relaxed);
        c.contended += k.contended.load(Ordering::Relaxed);
        c.wait_ns += k.wait_ns.load(Ordering::Relaxed);
    }
    c
}

/// How long a contended lock is retried before the thread blocks. The
/// engine's critical sections are a few hundred nanoseconds (a cache line
/// or two moved between cores inside), so a waiter that spins this long
/// nearly always gets the lock without the futex sleep and wake-up that
/// cost both threads microseconds; parking_lot's own spin gives up after
/// about 15 pause instructions and then yields and parks. Bounded, so a
/// holder that sleeps (a store read under a name lock, a preempted vCPU)
/// costs a waiter at most this much CPU before it blocks.
const SPIN_NS: u64 = 4_000;

/// Retry `attempt` with growing pauses until it succeeds or `SPIN_NS` has
/// passed since `t`; `None` then, and the caller blocks.
#[inline(never)]
fn spin<G>(t: Instant, mut attempt: impl FnMut() -> Option<G>) -> Option<G> {
    // Under loom, one attempt: loom explores the interleavings, and a spin
    // would be a loop it cannot see the end of.
    if cfg!(loom) {
        return attempt();
    }
    let mut pauses = 1u32;
    loop {
        for _ in 0..pauses {
            std::hint::spin_loop();
        }
        if let Some(g) = attempt() {
            return Some(g);
        }
        if pauses < 64 {
            pauses *= 2;
        } else if t.elapsed().as_nanos() as u64 >= SPIN_NS {
            return None;
        }
    }
}

/// A mutex that counts its contention under a lock class. `repr(C)`, the
/// class first: the class, the lock word and the start of the data share the
/// first cache line (a directory shard's hot index fields, see `cache::Index`).
#[repr(C)]
pub struct Mutex<T> {
    class: LockClass,
    inner: raw::Mutex<T>,
}

impl<T> Mutex<T> {
    #[cfg(not(loom))]
    pub const fn new(class: LockClass, v: T) -> Self {
        Mutex {
            class,
            inner: parking_lot::const_mutex(v),
        }
    }
    #[cfg(loom)]
    pub fn new(class: LockClass, v: T) -> Self {
        Mutex {
            class,
            inner: raw::Mutex::new(v),
        }
    }
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        if let Some(g) = self.inner.try_lock() {
            note(self.class, None);
            return g;
        }
        let t = Instant::now();
        let g = spin(t, || self.inner.try_lock()).unwrap_or_else(|| self.inner.lock());
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

/// Up to 31 mutexes guarding no data, one bit each in one 32-bit word, the
/// word's top bit saying that a thread may be parked on one of them. A
/// directory shard keeps its name locks in the padding of its own lock
/// (`RwLock::side`), so locking a name touches no cache line the operation
/// does not touch anyway, and 31 of them per shard keep two random names
/// from sharing a lock about as rarely as the 4096-slot table did.
/// Counted under the class given to `lock`, like the other locks.
///
/// Written by hand because no crate packs mutexes into bits of a shared
/// word. Waiting follows parking_lot's raw mutex: spin, then park on the
/// word's address after setting the parked bit under the parking lot's
/// bucket lock, but only if the wanted bit is still held (the check and
/// the set are one compare-exchange). A release clears its bit, and if the
/// parked bit was set it clears that too and wakes every thread parked on
/// the word: a waiter for another bit finds its bit still held, sets the
/// parked bit again and parks again. No wake-up is lost: a waiter parks only
/// if its bit was held when it set the parked bit, and the release of that
/// bit comes later in the word's order, so it sees the parked bit.
#[derive(Default)]
pub struct BitLocks {
    word: AtomicU32,
    /// Under loom, the parking lot's place: parking_lot_core's park and
    /// unpark go through a bucket lock the validation runs under, which
    /// this mutex and condition variable stand in for (`park`, `unpark_all`).
    #[cfg(loom)]
    lot: (loom::sync::Mutex<()>, loom::sync::Condvar),
}

/// Locks in one `BitLocks` word.
pub const BIT_LOCKS: u32 = 31;
const BIT_PARKED: u32 = 1 << 31;

impl BitLocks {
    #[inline]
    fn try_bit(&self, bit: u32) -> bool {
        // Read first: a waiter spinning on a held bit does not take the line
        // from the holder.
        self.word.load(Ordering::Relaxed) & bit == 0
            && self.word.fetch_or(bit, Ordering::Acquire) & bit == 0
    }

    /// Lock number `i` (< `BIT_LOCKS`).
    #[inline]
    pub fn lock(&self, i: u32, class: LockClass) -> BitGuard<'_> {
        debug_assert!(i < BIT_LOCKS);
        let bit = 1 << i;
        if self.word.fetch_or(bit, Ordering::Acquire) & bit == 0 {
            note(class, None);
        } else {
            let t = Instant::now();
            if spin(t, || self.try_bit(bit).then_some(())).is_none() {
                self.lock_slow(bit);
            }
            note(class, Some(t.elapsed().as_nanos() as u64));
        }
        BitGuard { word: self, bit }
    }

    #[cold]
    fn lock_slow(&self, bit: u32) {
        while !self.try_bit(bit) {
            // Park only if the bit is still held once the parked bit is set.
            self.park(|| {
                let mut s = self.word.load(Ordering::Relaxed);
                loop {
                    if s & bit == 0 {
                        return false;
                    }
                    match self.word.compare_exchange_weak(
                        s,
                        s | BIT_PARKED,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return true,
                        Err(x) => s = x,
                    }
                }
            });
        }
    }

    /// Sleep on this word if `validate`, run where no unpark can pass it,
    /// says so.
    #[cfg(not(loom))]
    fn park(&self, validate: impl FnOnce() -> bool) {
        // SAFETY: the key is this word's address, which outlives the
        // call; the callbacks neither panic nor call into the parking lot.
        unsafe {
            parking_lot_core::park(
                self as *const BitLocks as usize,
                validate,
                || {},
                |_, _| {},
                parking_lot_core::DEFAULT_PARK_TOKEN,
                None,
            );
        }
    }
    #[cfg(loom)]
    fn park(&self, validate: impl FnOnce() -> bool) {
        let g = self.lot.0.lock().unwrap();
        if validate() {
            drop(self.lot.1.wait(g).unwrap());
        }
    }

    /// Wake every thread parked on this word.
    #[cfg(not(loom))]
    fn unpark_all(&self) {
        // SAFETY: as in `park`.
        unsafe {
            parking_lot_core::unpark_all(
                self as *const BitLocks as usize,
                parking_lot_core::DEFAULT_UNPARK_TOKEN,
            );
        }
    }
    #[cfg(loom)]
    fn unpark_all(&self) {
        let _g = self.lot.0.lock().unwrap();
        self.lot.1.notify_all();
    }

    #[inline]
    fn unlock(&self, bit: u32) {
        if self.word.fetch_and(!bit, Ordering::Release) & BIT_PARKED != 0 {
            self.wake();
        }
    }

    #[cold]
    fn wake(&self) {
        self.word.fetch_and(!BIT_PARKED, Ordering::Relaxed);
        self.unpark_all();
    }
}

/// A held lock of a `BitLocks` word, released on drop.
pub struct BitGuard<'a> {
    word: &'a BitLocks,
    bit: u32,
}

impl Drop for BitGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.word.unlock(self.bit);
    }
}

/// A reader-writer lock that counts its contention under a lock class
/// (laid out like `Mutex`). `side`: small locks that share the lock's cache
/// line, placed between the class byte and the lock word where the padding
/// was (a directory shard's name locks; `()` elsewhere).
#[repr(C)]
pub struct RwLock<T, S = ()> {
    class: LockClass,
    pub side: S,
    inner: raw::RwLock<T>,
}

impl<T> RwLock<T> {
    pub fn new(class: LockClass, v: T) -> Self {
        Self::with_side(class, (), v)
    }
}

impl<T, S> RwLock<T, S> {
    pub fn with_side(class: LockClass, side: S, v: T) -> Self {
        RwLock {
            class,
            side,
            inner: raw::RwLock::new(v),
        }
    }
    #[inline]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        if let Some(g) = self.inner.try_read() {
            note(self.class, None);
            return g;
        }
        let t = Instant::now();
        let g = spin(t, || self.inner.try_read()).unwrap_or_else(|| self.inner.read());
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
        let g = spin(t, || self.inner.try_write()).unwrap_or_else(|| self.inner.write());
        note(self.class, Some(t.elapsed().as_nanos() as u64));
        g
    }
}

/// A striped counter: adds touch only the caller's stripe.
pub struct Counter {
    stripes: [crossbeam_utils::CachePadded<AtomicU64>; 8],
}
impl Default for Counter {
    fn default() -> Self {
        Counter {
            stripes: std::array::from_fn(|_| crossbeam_utils::CachePadded::new(AtomicU64::new(0))),
        }
    }
}
impl Counter {
    #[inline]
    pub fn add(&self, v: i64) {
        self.stripes[thread_slot() % 8].fetch_add(v as u64, Ordering::Relaxed);
    }
    pub fn get(&self) -> i64 {
        self.stripes
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .fold(0u64, |a, b| a.wrapping_add(b)) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit locks exclude: threads increment counters with a plain load and
    /// store under the counter's bit (a lost update would show), some bits
    /// shared by several threads. Holders sleep now and then for longer than
    /// `SPIN_NS`, so waiters park and must be woken, also by the release of
    /// another bit of the same word.
    #[test]
    fn bit_locks_exclude_and_wake_parked_waiters() {
        let word = Arc::new(BitLocks::default());
        let counts: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
        let threads: Vec<_> = (0..6u32)
            .map(|t| {
                let (word, counts) = (word.clone(), counts.clone());
                std::thread::spawn(move || {
                    for k in 0..3_000u32 {
                        let i = (t + k) % 4 * 7 + 1; // bits 1, 8, 15, 22
                        let _g = word.lock(i, LockClass::Name);
                        let c = &counts[(i / 7) as usize];
                        let v = c.load(Ordering::Relaxed);
                        if k % 100 == 0 {
                            std::thread::sleep(std::time::Duration::from_micros(50));
                        }
                        c.store(v + 1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("no panic");
        }
        let total: u64 = counts.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(total, 6 * 3_000);
        assert_eq!(
            word.word.load(Ordering::Relaxed),
            0,
            "every bit released, no parked flag left"
        );
    }

    /// Per-thread blocks add up exactly, and counts outlive their threads.
    /// (Other tests in this process take locks too, so the class used here
    /// is one nothing else in the unit tests takes: `Rename`.)
    #[test]
    fn per_thread_counts_sum_exactly_after_threads_exit() {
        let before = lock_counts(LockClass::Rename).acquired;
        let m = Arc::new(Mutex::new(LockClass::Rename, 0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*m.lock(), 40_000);
        let c = lock_counts(LockClass::Rename);
        assert_eq!(c.acquired - before, 40_001);
        assert!(c.contended <= c.acquired);
    }
}
