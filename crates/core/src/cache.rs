//! In-memory objects: inodes (sharded table), directory indexes (sharded,
//! ordered by name hash), and the per-name lock table.
//!
//! protects (see docs/locking.md):
//! - `InodeTable` shard lock: membership of inodes in the cache.
//! - `Inode::st`: the inode's attributes, data blocks, xattrs, dirty epoch.
//! - `Dir` shard lock: the cached entries whose hash falls in the shard.
//! - `NameLocks` slot: the right to change the entry (dir, name) hashed there.

use crate::schema::name_hash;
use crate::sync::{
    Arc, AtomicBool, AtomicI64, AtomicU32, AtomicU64, BitGuard, BitLocks, LockClass, Mutex,
    MutexGuard, OnceLock, Ordering, RwLock,
};
use crate::types::{Attr, Ino, Kind, LockScope};
use smallvec::SmallVec;
use std::collections::{BTreeMap, HashMap, HashSet};

pub const DIR_SHARDS: usize = 64;
const DIR_SHARD_SHIFT: u32 = 63 - 6;
pub const INODE_SHARDS: usize = 64;
/// Inode numbers are handed to threads in chunks of `1 << INO_CHUNK_SHIFT`.
pub const INO_CHUNK_SHIFT: u32 = 6;
pub const NAME_SLOTS: usize = 4096;

/// A cached directory entry. `ino == 0` is a negative entry: the name is known
/// absent (a miss cached, or an unlink not yet committed, which must shadow the
/// store's old entry until it is).
#[derive(Clone, Copy, Debug)]
pub struct Dent {
    pub ino: Ino,
    pub kind: Kind,
    /// The entry's sole flag (`schema::encode_entry`): unlink may delete the
    /// inode without reading it.
    pub sole: bool,
    pub ver: u64,
    pub dirty_epoch: u64,
}

/// A cached name in 21 bytes: up to 20 in place (most file names), longer
/// ones on the heap behind a thin pointer. Written by hand because it is the
/// index's hot path: a lookup in a big directory that finds its hash then
/// compares the name without a further pointer chase (a cache miss at 1M
/// entries), a short name costs no allocation of its own, and at 21 bytes
/// with alignment 1 it leaves room in the slot's one cache line for the
/// pointer to the entry's inode (`Slot::inode`). An enum of an inline array
/// and a `Box<[u8]>` takes 24 bytes with alignment 8, which did not fit.
///
/// Layout: the last byte is the length of an inline name, or `NAME_HEAP`;
/// then the first `size_of::<usize>()` bytes hold a pointer from
/// `Box::into_raw(Box<Box<[u8]>>)`, owned by this `Name` alone (it is neither
/// `Clone` nor `Copy`, and `Drop` frees it).
pub struct Name([u8; NAME_BYTES]);

const NAME_BYTES: usize = 21;
const NAME_INLINE: usize = NAME_BYTES - 1;
const NAME_HEAP: u8 = u8::MAX;
const PTR: usize = std::mem::size_of::<usize>();

impl Name {
    pub fn new(n: &[u8]) -> Name {
        let mut b = [0u8; NAME_BYTES];
        if n.len() <= NAME_INLINE {
            b[..n.len()].copy_from_slice(n);
            b[NAME_INLINE] = n.len() as u8;
        } else {
            let p: *mut Box<[u8]> = Box::into_raw(Box::new(Box::<[u8]>::from(n)));
            b[..PTR].copy_from_slice(&(p as usize).to_ne_bytes());
            b[NAME_INLINE] = NAME_HEAP;
        }
        Name(b)
    }

    #[inline]
    fn heap(&self) -> Option<*mut Box<[u8]>> {
        (self.0[NAME_INLINE] == NAME_HEAP)
            .then(|| usize::from_ne_bytes(self.0[..PTR].try_into().unwrap()) as *mut Box<[u8]>)
    }
}

impl std::ops::Deref for Name {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self.heap() {
            // SAFETY: the pointer came from `Box::into_raw` in `new` and is
            // freed only by `drop`, which needs `&mut self`.
            Some(p) => unsafe { &*p },
            None => &self.0[..self.0[NAME_INLINE] as usize],
        }
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        if let Some(p) = self.heap() {
            // SAFETY: as in `deref`; this is the pointer's one owner.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

/// Set a CLOCK reference bit. Only the first use after a reclaim pass writes,
/// so a hot object's cache line is not dirtied by every lookup.
#[inline]
fn touch(referenced: &AtomicBool) {
    if !referenced.load(Ordering::Relaxed) {
        referenced.store(true, Ordering::Relaxed);
    }
}

/// One cached name of a directory shard: exactly one cache line (the
/// entry's fields are stored flat rather than as a `Dent`, whose padding made
/// the slot 72 bytes, so a probe or an update of one name touched two lines;
/// a lookup's binary search over a bucket touched up to three).
#[repr(align(64))]
pub struct Slot {
    pub hash: u64,
    ino: Ino,
    ver: u64,
    dirty_epoch: u64,
    /// The entry's inode, when the entry was made or looked up with it in
    /// hand: the entry pins it, as a dentry pins its inode in Linux (inode
    /// reclaim evicts only inodes the table alone holds, so the pointer is
    /// always the table's object for `ino`). A lookup then goes from the
    /// name to the attributes without the inode table's hash probe, two
    /// cache misses at 1M entries. `None` for a negative entry, and for an
    /// entry filled from the store until a lookup attaches its inode.
    inode: Option<Arc<Inode>>,
    pub name: Name,
    kind: Kind,
    sole: bool,
    /// Looked up since reclaim last passed (CLOCK's reference bit): reclaim
    /// clears it and keeps the entry once, so a hot set survives eviction.
    pub referenced: AtomicBool,
}

impl Slot {
    fn new(hash: u64, name: &[u8], d: Dent, inode: Option<Arc<Inode>>) -> Slot {
        let mut s = Slot {
            hash,
            name: Name::new(name),
            ino: 0,
            ver: 0,
            dirty_epoch: 0,
            inode: None,
            kind: Kind::File,
            sole: false,
            referenced: AtomicBool::new(false),
        };
        s.set(d, inode);
        s
    }
    /// The entry.
    #[inline]
    pub fn d(&self) -> Dent {
        Dent {
            ino: self.ino,
            kind: self.kind,
            sole: self.sole,
            ver: self.ver,
            dirty_epoch: self.dirty_epoch,
        }
    }
    /// Set the entry; returns the inode pointer it replaced (for the caller
    /// to drop after releasing the shard lock). `inode`: the entry's inode if
    /// the caller has it; without it, a pointer to the same `ino` is kept.
    #[inline]
    fn set(&mut self, d: Dent, inode: Option<Arc<Inode>>) -> Option<Arc<Inode>> {
        debug_assert!(inode.as_ref().is_none_or(|i| i.ino == d.ino));
        let keep = d.ino != 0 && d.ino == self.ino && inode.is_none();
        (self.ino, self.kind, self.sole, self.ver, self.dirty_epoch) =
            (d.ino, d.kind, d.sole, d.ver, d.dirty_epoch);
        if keep {
            None
        } else {
            std::mem::replace(&mut self.inode, if d.ino == 0 { None } else { inode })
        }
    }
}

/// One directory shard's entries in hash order, written by hand because the
/// shape is the product: an ordered linear-probing table (Amble and Knuth's
/// ordered hash table). `2^bits` home positions are addressed by the hash
/// bits below the shard bits, `slack` overflow positions follow them (no
/// wraparound), and the entries sit in position order sorted by hash, each at
/// or after its home with no empty position in between. So a listing walks
/// the array in order (readdir's cookies are hashes) and a lookup starts at
/// its home. Names with equal hashes sit side by side.
///
/// Beside the slots, one tag byte a position: 0 for empty, else the entry's
/// distance from its home (saturating at `DISP_SATURATED`) and the 4 hash
/// bits after the home bits. A position's (home, those 4 bits) is a prefix
/// of its hash, so a lookup compares prefixes in the tags and reads a slot
/// only when the prefix is its own. The tags of a 1M-entry directory take
/// about 1.7 MB, which a core's L2 holds (2 MiB here) while the 64-byte
/// slots do not: a lookup of an absent name is settled from the tags alone
/// (a slot is read about once in 20), and a present name costs one slot
/// line. Before, a bucket array of sorted vectors cost a bucket-header miss
/// and a binary search, two or three dependent misses for any lookup
/// (docs/BENCHMARKS.md, run 8).
///
/// The table doubles past 3/4 full. Inserting shifts the rest of a run one
/// position right; removing shifts the displaced entries after it one left
/// (both keep the order). A shard of at most `SMALL_MAX` entries is one run
/// from home 0, a sorted array whose tags stay inline. A shard of at most
/// `TINY` entries keeps each slot in a box of its own (`Store`).
///
/// `repr(C)`, hot fields first: with the shard's lock word they fill the
/// shard's first cache line, and a small shard's tags sit there too
/// (`SmallVec`), so a name in a small directory costs two lines (this one
/// and its slot), not three.
#[repr(C)]
pub struct Index {
    bits: u32,
    len: u32,
    tags: SmallVec<[u8; 16]>,
    /// One slot a position (`tags.len()` of them); `is_tiny` tells which
    /// field of the union is live.
    store: Store,
}

/// Entries a shard holds as one sorted run (`bits == 0`) before hashing.
const SMALL_MAX: usize = 12;

/// Positions of a tiny shard: one whose slots are boxed (`Store::tiny`).
/// Every other table has at least 4 positions, so `tags.len() == TINY`
/// tells a tiny shard (`Index::is_tiny`).
const TINY: usize = 2;

/// Where a shard's slots live. A flat array, one 64-byte slot a position,
/// except in a tiny shard (at most `TINY` entries, the state of most shards
/// of a directory of a few dozen names, and of every shard of an empty one),
/// which boxes each slot. The box comes from the inserting thread's heap
/// (mimalloc keeps one per thread), so the line a new name is written to is
/// one that thread already owns, where a flat array's first position is a
/// line every thread writes. Two threads making and removing random names in
/// one directory (rndrename) then move the shard's first line between cores
/// and not also its slots' (docs/BENCHMARKS.md, run 12). A lookup reads one
/// slot line either way: the pointers sit in the shard's first line, in the
/// place of the flat array's.
///
/// A union, not an enum, because an enum's tag would push the slot pointer
/// out of the shard's first cache line (`size_guard` checks the layout); the
/// tag is the tags' length instead.
union Store {
    flat: std::mem::ManuallyDrop<Box<[Option<Slot>]>>,
    tiny: std::mem::ManuallyDrop<[Option<Box<Slot>>; TINY]>,
}

impl Default for Index {
    fn default() -> Self {
        Index {
            bits: 0,
            len: 0,
            tags: SmallVec::from_elem(0, TINY),
            store: Store {
                tiny: std::mem::ManuallyDrop::new([None, None]),
            },
        }
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        self.drop_store();
    }
}
/// Tag displacement codes 1..=15 are a distance of 0..=13 from home plus
/// one; 15 means 14 or more (the slot's hash then tells the home).
const DISP_SATURATED: u8 = 15;

/// The hashes of names evicted from one shard of a complete directory:
/// "absent" means the name was never evicted, so a cache miss on it is
/// definite and a create needs no store read; "maybe" sends the lookup to the
/// store, which is always correct. Up to 1024 hashes are kept exactly (16
/// bytes each, small directories); past that they move into a Bloom filter
/// (10 bits, 1.25 bytes a name), which grows in stages of 4x, then 2x. Before, the
/// exact set alone, at 50M files, outgrew its share of the budget and was
/// dropped ("demoted"), after which creates read the store (29M reads in one
/// 50M run, docs/BENCHMARKS.md).
///
/// The filter is written by hand rather than taken from a crate because of
/// four needs together: the keys are already uniform 64-bit hashes (nothing
/// to hash again), a probe must touch one cache line (blocked: all of a key's
/// bits in one 512-bit block), the filter must grow without the keys it was
/// built from (stages), and its memory must be exact for the cache budget.
#[derive(Default)]
pub struct EvictedFilter {
    exact: HashSet<u64, std::hash::BuildHasherDefault<InoHasher>>,
    stages: Vec<FilterStage>,
    len: u64,
}

struct FilterStage {
    blocks: Box<[[u64; 8]]>,
    cap: usize,
    n: usize,
}

const FILTER_EXACT: usize = 1024;
const FILTER_FIRST: usize = 4 * FILTER_EXACT;
const FILTER_X2_FROM: usize = 1 << 18;
const FILTER_BITS_PER_NAME: usize = 10;
const FILTER_PROBES: u32 = 7;

/// splitmix64's finaliser (the inode hasher's, and the evicted filter's
/// probes, where a per-stage seed makes each stage's probes independent).
#[inline]
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl FilterStage {
    fn new(cap: usize) -> FilterStage {
        let nblocks = (cap * FILTER_BITS_PER_NAME).div_ceil(512).max(1);
        FilterStage {
            blocks: vec![[0u64; 8]; nblocks].into_boxed_slice(),
            cap,
            n: 0,
        }
    }

    /// The block and the bit positions (0..512) of `hash` in this stage.
    #[inline]
    fn probes(&self, hash: u64, seed: u64) -> (usize, u64) {
        let x = mix64(hash ^ seed);
        let block = ((x as u128 * self.blocks.len() as u128) >> 64) as usize;
        (block, mix64(x))
    }

    /// Probe `j`'s word in the block and bit in the word (9 bits of `bits` each).
    #[inline]
    fn bit(bits: u64, j: u32) -> (usize, u64) {
        let p = (bits >> (9 * j)) & 511;
        ((p >> 6) as usize, 1 << (p & 63))
    }

    fn contains(&self, hash: u64, seed: u64) -> bool {
        let (b, bits) = self.probes(hash, seed);
        let blk = &self.blocks[b];
        (0..FILTER_PROBES).all(|j| {
            let (w, m) = Self::bit(bits, j);
            blk[w] & m != 0
        })
    }

    fn insert(&mut self, hash: u64, seed: u64) {
        let (b, bits) = self.probes(hash, seed);
        let blk = &mut self.blocks[b];
        for j in 0..FILTER_PROBES {
            let (w, m) = Self::bit(bits, j);
            blk[w] |= m;
        }
        self.n += 1;
    }
}

impl EvictedFilter {
    #[inline]
    fn seed(i: usize) -> u64 {
        (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// False: `hash` was never inserted. True: it may have been.
    pub fn maybe_contains(&self, hash: u64) -> bool {
        self.exact.contains(&hash)
            || self
                .stages
                .iter()
                .enumerate()
                .any(|(i, s)| s.contains(hash, Self::seed(i)))
    }

    /// Add a hash; false if it (or a colliding one) was in already.
    pub fn insert(&mut self, hash: u64) -> bool {
        if self.maybe_contains(hash) {
            return false;
        }
        self.len += 1;
        if self.stages.is_empty() && self.exact.len() < FILTER_EXACT {
            self.exact.insert(hash);
            return true;
        }
        if self.stages.last().is_none_or(|s| s.n >= s.cap) {
            // x4 while small (few stages, so few probes for a miss), x2
            // from FILTER_X2_FROM on: a stage is allocated whole, and at 50M
            // names in one directory a x4 stage left up to 3/4 of the
            // filter's bytes unused, enough to pass the demotion threshold
            // (docs/BENCHMARKS.md, run 7). Probes for a miss: 6 stages at
            // 1.5M names a shard either way.
            let cap = self.stages.last().map_or(FILTER_FIRST, |s| {
                if s.cap < FILTER_X2_FROM {
                    s.cap * 4
                } else {
                    s.cap * 2
                }
            });
            self.stages.push(FilterStage::new(cap));
        }
        let i = self.stages.len() - 1;
        for h in std::mem::take(&mut self.exact) {
            self.stages[i].insert(h, Self::seed(i));
        }
        self.stages[i].insert(hash, Self::seed(i));
        true
    }

    /// Hashes inserted.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes held (a hash set slot: 8 bytes and a control byte, at
    /// most 7/8 full).
    pub fn bytes(&self) -> usize {
        self.exact.capacity() * 10
            + self
                .stages
                .iter()
                .map(|s| s.blocks.len() * 64)
                .sum::<usize>()
    }
}

/// The home of `hash` in a table of `2^bits` homes: the `bits` hash bits
/// just below the shard bits.
#[inline]
fn home_at(hash: u64, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        ((hash << (64 - DIR_SHARD_SHIFT)) >> (64 - bits)) as usize
    }
}

/// The 4 hash bits after the home bits.
#[inline]
fn fp_at(hash: u64, bits: u32) -> u8 {
    (((hash << (64 - DIR_SHARD_SHIFT)) << bits) >> 60) as u8
}

/// The tag of an entry `disp` positions after its home.
#[inline]
fn tag_of(hash: u64, bits: u32, disp: usize) -> u8 {
    ((disp.min(DISP_SATURATED as usize - 1) as u8 + 1) << 4) | fp_at(hash, bits)
}

impl Index {
    /// The slots are boxed one by one (see `Store`).
    #[inline]
    fn is_tiny(&self) -> bool {
        self.tags.len() == TINY
    }

    /// The slot at position `q`, if any. The `Store` accessors below are
    /// the only code that touches the union; each reads the field
    /// `is_tiny` names. A shard turns flat only through `set_flat`, which
    /// swaps the field with the tags, and tiny again only as a whole new
    /// `Index::default()` (`shrink`).
    #[inline]
    fn at(&self, q: usize) -> Option<&Slot> {
        // SAFETY: `is_tiny` names the live field (see above).
        unsafe {
            if self.is_tiny() {
                (*self.store.tiny)[q].as_deref()
            } else {
                (*self.store.flat)[q].as_ref()
            }
        }
    }

    #[inline]
    fn at_mut(&mut self, q: usize) -> Option<&mut Slot> {
        // SAFETY: as in `at`.
        unsafe {
            if self.is_tiny() {
                (*self.store.tiny)[q].as_deref_mut()
            } else {
                (*self.store.flat)[q].as_mut()
            }
        }
    }

    /// Take the slot at `q` out, leaving the position empty.
    #[inline]
    fn take_at(&mut self, q: usize) -> Option<Slot> {
        // SAFETY: as in `at`.
        unsafe {
            if self.is_tiny() {
                (*self.store.tiny)[q].take().map(|b| *b)
            } else {
                (*self.store.flat)[q].take()
            }
        }
    }

    /// Put `s` at the empty position `q` (a tiny shard boxes it here, on
    /// this thread's heap).
    #[inline]
    fn put_at(&mut self, q: usize, s: Slot) {
        // SAFETY: as in `at`.
        unsafe {
            if self.is_tiny() {
                debug_assert!((*self.store.tiny)[q].is_none());
                (*self.store.tiny)[q] = Some(Box::new(s));
            } else {
                debug_assert!((*self.store.flat)[q].is_none());
                (*self.store.flat)[q] = Some(s);
            }
        }
    }

    /// Move the slots at `q..e` one position right; the (empty) one at `e` comes to `q`.
    #[inline]
    fn shift_right(&mut self, q: usize, e: usize) {
        // SAFETY: as in `at`.
        unsafe {
            if self.is_tiny() {
                (*self.store.tiny)[q..=e].rotate_right(1);
            } else {
                (*self.store.flat)[q..=e].rotate_right(1);
            }
        }
    }

    /// Move the slot at `j + 1` to the empty position `j` (a tiny shard moves
    /// the box, so the slot stays on the heap of the thread that made it).
    #[inline]
    fn move_down(&mut self, j: usize) {
        // SAFETY: as in `at`.
        unsafe {
            if self.is_tiny() {
                let t = &mut *self.store.tiny;
                debug_assert!(t[j].is_none());
                t[j] = t[j + 1].take();
            } else {
                let f = &mut *self.store.flat;
                debug_assert!(f[j].is_none());
                f[j] = f[j + 1].take();
            }
        }
    }

    /// Free the live field of the store (the caller replaces it, or is `drop`).
    fn drop_store(&mut self) {
        // SAFETY: as in `at`; the field is dropped once, and the caller writes
        // a new store (or drops the index) before anything reads it.
        unsafe {
            if self.is_tiny() {
                std::mem::ManuallyDrop::drop(&mut self.store.tiny);
            } else {
                std::mem::ManuallyDrop::drop(&mut self.store.flat);
            }
        }
    }

    /// Replace the tags and the slots together with a flat array (the
    /// union's tag is the tags' length). Every position of the old store
    /// must be empty.
    fn set_flat(&mut self, tags: SmallVec<[u8; 16]>, flat: Box<[Option<Slot>]>) {
        debug_assert!((0..self.tags.len()).all(|q| self.at(q).is_none()));
        debug_assert!(tags.len() != TINY && tags.len() == flat.len());
        self.drop_store();
        self.store = Store {
            flat: std::mem::ManuallyDrop::new(flat),
        };
        self.tags = tags;
    }

    #[inline]
    fn slot(&self, q: usize) -> &Slot {
        self.at(q).expect("a tagged position holds a slot")
    }

    /// Walk the positions from `hash`'s home in order. The tags settle
    /// most positions: a smaller prefix (home, 4 hash bits) is passed over,
    /// and an empty position or a greater prefix ends the walk with
    /// `Err(position)`, where an entry with `hash` would go. At a position
    /// the tag cannot settle (the same prefix, or a saturated distance)
    /// `decide` reads the slot: `Some` ends the walk with `Ok`, `None` walks on.
    fn walk<R>(
        &self,
        hash: u64,
        mut decide: impl FnMut(usize, &Slot) -> Option<R>,
    ) -> Result<R, usize> {
        let p = home_at(hash, self.bits);
        let key = (p, fp_at(hash, self.bits));
        for q in p..self.tags.len() {
            let t = self.tags[q];
            if t == 0 {
                return Err(q);
            }
            let code = t >> 4;
            if code != DISP_SATURATED {
                let e = (q - (code as usize - 1), t & 15);
                if e < key {
                    continue;
                }
                if e > key {
                    return Err(q);
                }
            }
            if let Some(r) = decide(q, self.slot(q)) {
                return Ok(r);
            }
        }
        Err(self.tags.len())
    }

    /// The position of (hash, name).
    fn find(&self, hash: u64, name: &[u8]) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let found = self.walk(hash, |q, s| {
            if s.hash > hash {
                Some(None)
            } else if s.hash == hash && &*s.name == name {
                Some(Some(q))
            } else {
                None
            }
        });
        found.ok().flatten()
    }

    /// The first position at or after `hash`'s home that is empty or holds a
    /// greater hash (where an entry with `hash` goes, after its equals).
    fn seek_after(&self, hash: u64) -> usize {
        self.walk(hash, |q, s| (s.hash > hash).then_some(q))
            .unwrap_or_else(|q| q)
    }

    pub fn get(&self, hash: u64, name: &[u8]) -> Option<Dent> {
        self.find(hash, name).map(|q| self.slot(q).d())
    }

    pub fn get_slot(&self, hash: u64, name: &[u8]) -> Option<&Slot> {
        self.find(hash, name).map(|q| self.slot(q))
    }

    pub fn get_slot_mut(&mut self, hash: u64, name: &[u8]) -> Option<&mut Slot> {
        self.find(hash, name)
            .map(|q| self.at_mut(q).expect("a tagged position holds a slot"))
    }

    /// Insert a name known to be absent.
    pub fn insert(&mut self, hash: u64, name: &[u8], d: Dent, inode: Option<Arc<Inode>>) {
        let homes = 1usize << self.bits;
        let full = if self.is_tiny() {
            TINY
        } else if self.bits == 0 {
            SMALL_MAX
        } else {
            homes / 4 * 3
        };
        if self.len as usize >= full {
            self.rebuild(if self.bits == 0 { 5 } else { self.bits + 1 });
        }
        loop {
            let q = self.seek_after(hash);
            // The run from q ends at the first empty position.
            let Some(e) = (q..self.tags.len()).find(|&e| self.tags[e] == 0) else {
                // No room before the end: more overflow positions.
                self.rebuild(self.bits);
                continue;
            };
            self.shift_right(q, e);
            self.tags[q..=e].rotate_right(1);
            for t in &mut self.tags[q + 1..=e] {
                // One further from home (a saturated code stays saturated).
                if *t >> 4 != DISP_SATURATED {
                    *t += 1 << 4;
                }
            }
            self.tags[q] = tag_of(hash, self.bits, q - home_at(hash, self.bits));
            self.put_at(q, Slot::new(hash, name, d, inode));
            self.len += 1;
            return;
        }
    }

    /// Lay the entries out again in `2^bits` homes, with as much overflow
    /// room as they need (at least a sixteenth of the homes, doubled until
    /// the last run fits; called with the same `bits` when a run reached the end).
    fn rebuild(&mut self, bits: u32) {
        let entries: Vec<Slot> = (0..self.tags.len())
            .filter_map(|q| self.take_at(q))
            .collect();
        let homes = 1usize << bits;
        let mut slack = if bits == 0 {
            // One sorted run: 4, 8 or 16 positions (tags inline).
            let n = if self.bits == 0 {
                (self.tags.len() * 2).max(4)
            } else {
                4
            };
            n - 1
        } else if self.bits == bits {
            // A run reached the end: twice the overflow room.
            (self.tags.len() - homes) * 2
        } else {
            (homes / 16).max(4)
        };
        // Where each entry goes: its home, or right after the one before.
        let fits = |slack: usize| {
            let mut next = 0;
            for s in &entries {
                let q = home_at(s.hash, bits).max(next);
                if q >= homes + slack {
                    return false;
                }
                next = q + 1;
            }
            true
        };
        while !fits(slack) {
            slack = slack * 2 + 1;
        }
        let n = homes + slack;
        let mut tags: SmallVec<[u8; 16]> = SmallVec::from_elem(0, n);
        let mut slots: Vec<Option<Slot>> = Vec::with_capacity(n);
        slots.resize_with(n, || None);
        let mut next = 0;
        for s in entries {
            let h = home_at(s.hash, bits);
            let q = h.max(next);
            tags[q] = tag_of(s.hash, bits, q - h);
            slots[q] = Some(s);
            next = q + 1;
        }
        self.bits = bits;
        self.set_flat(tags, slots.into_boxed_slice());
    }

    /// Take the entry at `q` out; the displaced entries after it move one
    /// position back (towards their homes), which keeps the order.
    fn remove_at(&mut self, q: usize) -> Slot {
        let s = self.take_at(q).expect("a tagged position holds a slot");
        let mut j = q;
        while j + 1 < self.tags.len() {
            let t = self.tags[j + 1];
            // Stop at an empty position or an entry at its home.
            if t == 0 || t >> 4 == 1 {
                break;
            }
            self.move_down(j);
            self.tags[j] = if t >> 4 == DISP_SATURATED {
                let h = self.slot(j).hash;
                tag_of(h, self.bits, j - home_at(h, self.bits))
            } else {
                t - (1 << 4)
            };
            j += 1;
        }
        self.tags[j] = 0;
        self.len -= 1;
        s
    }

    /// Take a name out; the caller drops it (after releasing the shard lock).
    pub fn remove(&mut self, hash: u64, name: &[u8]) -> Option<Slot> {
        let q = self.find(hash, name)?;
        Some(self.remove_at(q))
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// All entries in hash order.
    pub fn iter(&self) -> impl Iterator<Item = &Slot> {
        self.slots_from(0)
    }

    /// The entries at position `lo` and after, in hash order.
    fn slots_from(&self, lo: usize) -> impl Iterator<Item = &Slot> {
        (lo..self.tags.len()).filter_map(|q| self.at(q))
    }

    /// Entries of shard `si` with `from <= hash <= to`, in hash order. An
    /// entry before `from`'s home has a smaller hash prefix, so the walk
    /// starts there.
    pub fn range(&self, si: usize, from: u64, to: u64) -> impl Iterator<Item = &Slot> {
        let lo = if dir_shard(from) < si {
            0
        } else {
            home_at(from, self.bits).min(self.tags.len())
        };
        self.slots_from(lo)
            .take_while(move |s| s.hash <= to)
            .filter(move |s| s.hash >= from)
    }

    /// The table's invariants (tests): entries sorted by hash, each at or
    /// after its home with no empty position in between, tags exact, `len` right.
    #[cfg(test)]
    fn check(&self) {
        assert!(self.is_tiny() == (self.tags.len() == TINY));
        if self.is_tiny() {
            assert_eq!(self.bits, 0, "a tiny shard is one run");
        }
        let (mut n, mut prev) = (0, 0u64);
        for q in 0..self.tags.len() {
            match self.at(q) {
                None => assert_eq!(self.tags[q], 0, "position {q}"),
                Some(e) => {
                    let h = home_at(e.hash, self.bits);
                    assert!(
                        h <= q && (h..q).all(|j| self.tags[j] != 0),
                        "entry at {q} is cut off from its home {h}"
                    );
                    assert_eq!(self.tags[q], tag_of(e.hash, self.bits, q - h), "tag at {q}");
                    assert!(e.hash >= prev, "order at {q}");
                    prev = e.hash;
                    n += 1;
                }
            }
        }
        assert_eq!(n, self.len as usize);
    }

    /// Give memory back: an empty shard frees its table, a table at most
    /// 1/8 full halves until it is at least 3/8 full (or small again).
    fn shrink(&mut self) {
        if self.len == 0 {
            *self = Index::default();
            return;
        }
        let len = self.len as usize;
        if self.bits > 0 && len * 8 <= 1 << self.bits {
            let mut bits = self.bits;
            while bits > 5 && len * 8 < 3 << bits {
                bits -= 1;
            }
            self.rebuild(if len <= SMALL_MAX / 2 { 0 } else { bits });
        }
    }
}

/// One cache line per directory shard: unlike `CachePadded` (128 bytes on
/// x86-64, for the adjacent-line prefetcher) this keeps a directory's 64
/// shards in 4 KiB. The shard's lock word, its name locks and its index's
/// hot fields fill the line exactly (`size_guard`); the evicted-name
/// filters live apart (`Dir::filters`).
#[repr(align(64))]
pub struct Line<T>(T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A directory shard's lock, with the shard's name locks in its line
/// (`RwLock::side`: the bytes between the lock's class and its lock word).
type ShardLock = RwLock<Index, BitLocks>;

pub struct Dir {
    /// Padded: two threads working on different shards must not share a cache line.
    shards: [Line<ShardLock>; DIR_SHARDS],
    /// Every live entry of the directory is in the shards, except names whose
    /// hashes are in a shard's `evicted` set: a miss on any other hash is a
    /// definite "absent" without a store read. False for a directory loaded
    /// from the store (its entries are not all known).
    pub complete: AtomicBool,
    /// How many hashes the shards' `evicted` filters hold (0: listing from the
    /// cache alone is whole). Raised under the shard lock before entries go.
    pub evicted: AtomicU64,
    /// Hashes of names evicted from a complete directory, one filter per
    /// shard: a miss on any other hash is still definite, so creating new
    /// names never reads the store (about 1.5 bytes per evicted name instead
    /// of a cached entry's ~200). Made at the first eviction (most
    /// directories never have one), outside the shards so that a shard is one
    /// cache line. A shard's filter is read and changed only under the
    /// shard's lock, taken first (the filter's lock is a leaf).
    filters: OnceLock<Box<[RwLock<EvictedFilter>]>>,
    /// The engine-wide bytes of evicted-name filters (cache accounting).
    acct: Option<Arc<AtomicI64>>,
    /// Per-thread deltas of the directory's entry count, subdirectory count and
    /// times. Creates and unlinks in one directory touch only their thread's
    /// stripe; the committer folds the stripes into the inode once per epoch.
    /// protects: the fields of `DirStripe`.
    pub stripes: [crossbeam_utils::CachePadded<Mutex<DirStripe>>; DIR_STRIPES],
    /// Copies of the directory's group and setgid bit (read by creates without
    /// taking the inode lock; written under it by setattr).
    pub gid: AtomicU32,
    pub sgid: AtomicBool,
    /// Whether the directory has a default ACL (`acl::DEFAULT`): only then
    /// does a create read the directory's xattrs. Written under the inode lock.
    pub default_acl: AtomicBool,
}

pub const DIR_STRIPES: usize = 4;

impl Drop for Dir {
    fn drop(&mut self) {
        if let Some(a) = &self.acct {
            let bytes: usize = self
                .filters
                .get()
                .map_or(0, |f| f.iter().map(|f| f.read().bytes()).sum());
            a.fetch_sub(bytes as i64, Ordering::Relaxed);
        }
    }
}

/// One thread-stripe of a directory's changing counters (see `Dir::stripes`).
#[derive(Default)]
pub struct DirStripe {
    pub entries: i64,
    pub subdirs: i64,
    pub mtime: crate::types::Ts,
    /// Highest epoch that changed this stripe (the directory is dirty until durable).
    pub dirty_epoch: u64,
    /// The directory was removed: set in every stripe, under all of them.
    pub dead: bool,
}

#[inline]
pub fn dir_shard(hash: u64) -> usize {
    (hash >> DIR_SHARD_SHIFT) as usize & (DIR_SHARDS - 1)
}

impl Dir {
    pub fn new(complete: bool, gid: u32, sgid: bool, acct: Option<Arc<AtomicI64>>) -> Dir {
        Dir {
            shards: std::array::from_fn(|_| {
                Line(RwLock::with_side(
                    LockClass::DirShard,
                    Default::default(),
                    Index::default(),
                ))
            }),
            complete: AtomicBool::new(complete),
            evicted: AtomicU64::new(0),
            filters: OnceLock::new(),
            acct,
            stripes: std::array::from_fn(|_| {
                crossbeam_utils::CachePadded::new(Mutex::new(
                    LockClass::DirStripe,
                    DirStripe::default(),
                ))
            }),
            gid: AtomicU32::new(gid),
            sgid: AtomicBool::new(sgid),
            default_acl: AtomicBool::new(false),
        }
    }

    /// The per-name-scope lock of the names with this hash: one of the
    /// `BIT_LOCKS` in the line of the shard that holds them, picked by the
    /// hash modulo their number. A create, unlink or rename of a random
    /// name then moves one line between cores (the shard's), not two: with
    /// the name locks in a table of their own, rndrename at 2 workers lost
    /// about as much to the table's lines as to the shards' (docs/BENCHMARKS.md, runs 11 and 12).
    pub fn name_lock(&self, hash: u64) -> (&BitLocks, u32) {
        (
            &self.shards[dir_shard(hash)].side,
            (hash % crate::sync::BIT_LOCKS as u64) as u32,
        )
    }

    /// Indexed lookup in one shard: the entry, whether a miss is definite,
    /// and with `want_inode` the entry's pinned inode (a clone of the
    /// pointer: no inode-table probe). The evicted set is read under the
    /// shard's lock, and eviction adds a name's hash to it under the same
    /// write lock *before* removing the entry, so a miss caused by eviction
    /// is never taken for a definite one.
    #[inline]
    pub fn probe(
        &self,
        hash: u64,
        name: &[u8],
        want_inode: bool,
    ) -> (Option<Dent>, Option<Arc<Inode>>, bool) {
        let s = self.shards[dir_shard(hash)].read();
        let slot = s.get_slot(hash, name);
        if let Some(sl) = slot {
            touch(&sl.referenced);
        }
        let d = slot.map(|sl| sl.d());
        let inode = if want_inode {
            slot.and_then(|sl| sl.inode.clone())
        } else {
            None
        };
        // Only a miss or a negative entry asks whether the absence is definite
        // (a positive hit skips the filter probes; the flag is then unused).
        let definite = d.is_none_or(|d| d.ino == 0)
            && self.complete.load(Ordering::SeqCst)
            && !self.maybe_evicted(hash);
        (d, inode, definite)
    }

    /// Whether `hash` may be a name evicted from this (complete) directory.
    /// Called under the shard's lock. No filter holds anything while the
    /// count is 0: eviction raises it under the shard's write lock, before
    /// the entries go.
    #[inline]
    fn maybe_evicted(&self, hash: u64) -> bool {
        self.evicted.load(Ordering::SeqCst) != 0
            && self
                .filters
                .get()
                .is_some_and(|f| f[dir_shard(hash)].read().maybe_contains(hash))
    }

    /// Pin `inode` in the entry that names it, if the entry is still cached,
    /// still names it and holds no pointer yet (an entry filled from the
    /// store, on its first lookup). The caller got `inode` from the inode
    /// table, so it is the table's object for its number.
    pub fn attach(&self, hash: u64, name: &[u8], inode: &Arc<Inode>) {
        let mut s = self.shards[dir_shard(hash)].write();
        if let Some(sl) = s.get_slot_mut(hash, name) {
            if sl.ino == inode.ino && sl.inode.is_none() {
                sl.inode = Some(inode.clone());
            }
        }
    }

    /// The linear-scan counterpart of `probe` (the seed-001 "before" switch).
    pub fn resolve_linear(&self, name: &[u8]) -> (Option<Dent>, bool) {
        let d = self.get_linear(name);
        (d, self.listing_complete())
    }

    /// Every entry is cached: a listing needs no store. Checked again after
    /// reading the cache, since eviction raises `evicted` before removing.
    pub fn listing_complete(&self) -> bool {
        self.complete.load(Ordering::SeqCst) && self.evicted.load(Ordering::SeqCst) == 0
    }

    /// Linear lookup (the seed-001 "before" switch): compare every cached name.
    pub fn get_linear(&self, name: &[u8]) -> Option<Dent> {
        for sh in &self.shards {
            let s = sh.read();
            for e in s.iter() {
                if &*e.name == name {
                    return Some(e.d());
                }
            }
        }
        None
    }

    /// Set a name's entry to `ino` (0 = negative) with the next version, in
    /// one critical section. Returns (new version, whether the name was new to
    /// the cache, whether no earlier change of this epoch touched it).
    /// `inode`: the entry's inode if the caller has it (pinned in the slot).
    #[allow(clippy::too_many_arguments)]
    pub fn set_next(
        &self,
        hash: u64,
        name: &[u8],
        ino: Ino,
        inode: Option<&Arc<Inode>>,
        kind: Kind,
        sole: bool,
        epoch: u64,
    ) -> (u64, bool, bool) {
        // Declared before the guard, so a replaced pointer is dropped after
        // the shard lock is released.
        let _replaced;
        let mut s = self.shards[dir_shard(hash)].write();
        if let Some(old) = s.get_slot_mut(hash, name) {
            let ver = old.ver + 1;
            let first = old.dirty_epoch < epoch;
            _replaced = old.set(
                Dent {
                    ino,
                    kind,
                    sole,
                    ver,
                    dirty_epoch: epoch,
                },
                inode.cloned(),
            );
            return (ver, false, first);
        }
        s.insert(
            hash,
            name,
            Dent {
                ino,
                kind,
                sole,
                ver: 1,
                dirty_epoch: epoch,
            },
            inode.filter(|_| ino != 0).cloned(),
        );
        (1, true, true)
    }

    /// Remove a name's cached entry. Returns whether it was cached.
    pub fn remove(&self, hash: u64, name: &[u8]) -> bool {
        // The name is freed after the shard lock is released.
        let slot = self.shards[dir_shard(hash)].write().remove(hash, name);
        slot.is_some()
    }

    /// Insert only if the name is not cached (fills from the store never
    /// overwrite a newer in-memory entry).
    /// Returns the entry now cached and whether this call inserted it.
    pub fn fill(&self, hash: u64, name: &[u8], d: Dent) -> (Dent, bool) {
        let mut s = self.shards[dir_shard(hash)].write();
        if let Some(old) = s.get(hash, name) {
            return (old, false);
        }
        s.insert(hash, name, d, None);
        (d, true)
    }

    /// Cached entries (positive and negative) with `from <= hash <= to`, in
    /// hash order, stopping after `max_pos` positive ones.
    pub fn range(&self, from: u64, to: u64, max_pos: usize) -> Vec<(u64, Box<[u8]>, Dent)> {
        let mut out = Vec::new();
        let mut pos = 0;
        if from > to {
            return out;
        }
        for si in dir_shard(from)..=dir_shard(to) {
            let s = self.shards[si].read();
            let mut last = None;
            for e in s.range(si, from, to) {
                // Stop only between hashes: a cookie resumes after a whole hash.
                if pos >= max_pos && last != Some(e.hash) {
                    return out;
                }
                out.push((e.hash, Box::<[u8]>::from(&*e.name), e.d()));
                if e.ino != 0 {
                    pos += 1;
                }
                last = Some(e.hash);
            }
            if pos >= max_pos {
                return out;
            }
        }
        out
    }

    /// Number of cached entries (positive and negative).
    pub fn cached(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }

    /// Forget that the directory is complete and drop its evicted-name filters,
    /// when they have grown to cost more memory than the store reads they
    /// save (a miss then asks the store, whose filters answer most misses
    /// without I/O). `complete` is cleared before any filter is dropped, and a
    /// filter only changes under its shard's write lock, so `probe` never sees a
    /// definite miss for an evicted name. Returns the hashes dropped.
    pub fn demote(&self) -> u64 {
        self.complete.store(false, Ordering::SeqCst);
        let (mut dropped, mut bytes) = (0u64, 0usize);
        if let Some(filters) = self.filters.get() {
            for (sh, f) in self.shards.iter().zip(filters.iter()) {
                let _s = sh.write();
                let set = std::mem::take(&mut *f.write());
                dropped += set.len();
                bytes += set.bytes();
            }
        }
        self.evicted.fetch_sub(dropped, Ordering::SeqCst);
        if let Some(a) = &self.acct {
            a.fetch_sub(bytes as i64, Ordering::Relaxed);
        }
        dropped
    }

    /// Evict clean entries (dirty_epoch <= durable). Returns (evicted, still dirty).
    pub fn evict_clean(&self, durable: u64) -> (usize, usize) {
        // An unbounded chunk is the whole shard.
        (0..DIR_SHARDS)
            .map(|si| self.evict_clean_chunk(si, durable, 0, usize::MAX))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }

    /// Evict the clean entries of shard `si` with hashes from `from` on,
    /// stopping after about `max` entries (at the end of a hash): reclaim
    /// holds its exclusive lock per chunk, so evicting a huge directory never
    /// stalls a fill for longer than one chunk. Returns (evicted, still dirty,
    /// where the next chunk starts: None when the shard is done). The cursor
    /// is a hash, so it stays right if the table grows or shrinks between chunks.
    pub fn evict_clean_chunk(
        &self,
        si: usize,
        durable: u64,
        from: u64,
        max: usize,
    ) -> (usize, usize, Option<u64>) {
        // The evicted entries (names, inode pointers), dropped after the shard lock.
        let mut gone: Vec<Slot> = Vec::new();
        let mut guard = self.shards[si].write();
        let s: &mut Index = &mut guard;
        let from = from.max((si as u64) << DIR_SHARD_SHIFT);
        let n = s.tags.len();
        let start = if s.len == 0 {
            n
        } else {
            home_at(from, s.bits).min(n)
        };
        // The chunk: positions start..end, holding `max` entries from `from`
        // on and the rest of the last one's hash.
        let (mut end, mut visited, mut last) = (start, 0, None);
        let mut victims = Vec::new();
        let mut dirty = 0;
        while end < n {
            if let Some(e) = s.at(end) {
                if e.hash >= from {
                    if visited >= max && last != Some(e.hash) {
                        break;
                    }
                    visited += 1;
                    last = Some(e.hash);
                    // A referenced entry gets a second chance (its bit is cleared).
                    let referenced = e.referenced.swap(false, Ordering::Relaxed);
                    if e.dirty_epoch > durable {
                        dirty += 1;
                    } else if !referenced {
                        victims.push(end);
                    }
                }
            }
            end += 1;
        }
        let next = s.slots_from(end).next().map(|e| e.hash);
        if self.complete.load(Ordering::SeqCst) && !victims.is_empty() {
            // Remember the hashes before the entries go (see `probe`).
            let filters = self.filters.get_or_init(|| {
                (0..DIR_SHARDS)
                    .map(|_| RwLock::new(LockClass::DirShard, EvictedFilter::default()))
                    .collect()
            });
            let mut f = filters[si].write();
            let (mut added, bytes) = (0, f.bytes());
            for &q in &victims {
                let h = s.slot(q).hash;
                added += f.insert(h) as u64;
            }
            self.evicted.fetch_add(added, Ordering::SeqCst);
            if let Some(a) = &self.acct {
                a.fetch_add((f.bytes() - bytes) as i64, Ordering::Relaxed);
            }
        }
        // From the back: removing at q moves only entries after q.
        for &q in victims.iter().rev() {
            gone.push(s.remove_at(q));
        }
        let ev = gone.len();
        if next.is_none() {
            // Done: shrink the table if it has become sparse.
            s.shrink();
        }
        (ev, dirty, next)
    }
}

/// The mutable state of an inode. protects: everything inside.
/// `repr(C)`: the fields every directory operation writes come first.
#[repr(C)]
pub struct InodeState {
    pub attr: Attr,
    /// Highest epoch that changed this inode; clean once durable >= it.
    pub dirty_epoch: u64,
    /// Directory was removed (rmdir or replaced by rename): no new entries.
    pub dead: bool,
    /// The inode's records were deleted from the store (nlink 0, last close done).
    pub destroyed: bool,
    /// Symlink target; for directories, the parent's inode number (8 bytes LE).
    pub blob: Vec<u8>,
    /// Cached data blocks (each at most BLOCK bytes; shorter = zero tail).
    pub blocks: BTreeMap<u64, Vec<u8>>,
    /// All data blocks are in `blocks` (new file, or inline file): a missing block is a hole.
    pub blocks_complete: bool,
    /// Blocks at or past this index that are not cached are holes, even if the
    /// store still has them: their deletion is queued but may not be committed
    /// yet (truncate). Reset when the inode is clean and its blocks are evicted.
    pub holes_from: u64,
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// `(parent, name hash)` of the entry naming this inode with the sole
    /// flag; `None` once the inode may have a second name or data blocks.
    /// Only create sets it and only rename moves it; `Engine::unshare`
    /// clears it (and the entry's flag) before anything breaks the flag's promise.
    pub primary: Option<(Ino, u64)>,
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
/// seed 000 and seed 002 at two workers unchanged (docs/BENCHMARKS.md, run 13).
/// `repr(C)` with `st` first puts the lock word in the line of the `Arc`'s
/// counts, so a lookup's pointer clone and its lock take one line.
#[repr(C)]
pub struct Inode {
    pub st: Mutex<InodeState>,
    pub ino: Ino,
    pub kind: Kind,
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
            st: Mutex::new(LockClass::Inode, st),
            lookups: AtomicU64::new(0),
            opens: AtomicU32::new(0),
            referenced: AtomicBool::new(false),
        })
    }
}

/// The inode cache: a fixed number of shards by allocation chunk (see
/// `ino_shard`). Lookups take a shard's read lock for one probe.
pub struct InodeTable {
    shards: Vec<crossbeam_utils::CachePadded<RwLock<InoShard>>>,
}

const CHUNK: usize = 1 << INO_CHUNK_SHIFT;

type ChunkMap = HashMap<u64, InoBlock, std::hash::BuildHasherDefault<InoHasher>>;

/// One allocation chunk's cached inodes, by offset in the chunk (XFS's
/// inode cluster): 512 bytes, and how many are cached.
struct InoBlock {
    slots: Box<[Option<Arc<Inode>>; CHUNK]>,
    live: u32,
}

/// One shard of the inode table: a map from chunk number to the chunk's
/// block. Written by hand because the layout is the product: a thread hands
/// out its chunk's numbers in a row, so a run of creates writes one block,
/// lines its core already holds, after one probe of a map with one entry a
/// chunk, which stays in cache. A map keyed by the inode number sent each
/// create to a random place in a table of about 16K inodes a shard at 1M
/// cached, a miss or two per create, and took about 35 bytes an inode where
/// a full block takes 8 (docs/BENCHMARKS.md, run 14). A chunk with few
/// survivors costs its whole block, which the memory bound sees as overhead
/// (`Engine::cache_usage`).
///
/// An emptied block stays until `EMPTY_BLOCKS`, or an eighth of the
/// shard's blocks if more, have piled up, then they go in one sweep of the
/// shard's map (so a sweep's cost is spread over as many emptied blocks as
/// the map has entries over 8): create+unlink empties its chunk's block at
/// every unlink, and freeing it there would cost an allocation, 512 zeroed
/// bytes and two map updates a pair.
struct InoShard {
    chunks: ChunkMap,
    len: usize,
    /// Blocks with no inode, kept for the next create in their chunk.
    empty: usize,
}

const EMPTY_BLOCKS: usize = 64;

impl InoShard {
    #[inline]
    fn get(&self, ino: Ino) -> Option<&Arc<Inode>> {
        self.chunks
            .get(&(ino >> INO_CHUNK_SHIFT))
            .and_then(|b| b.slots[ino as usize % CHUNK].as_ref())
    }

    /// Put `i` in its place; returns the inode it replaced.
    fn insert(&mut self, i: Arc<Inode>) -> Option<Arc<Inode>> {
        let slot = self.free_or_taken(i.ino);
        slot.replace(i)
    }

    /// The cached inode of `i.ino`, `i` put there first if there is none.
    fn fill(&mut self, i: Arc<Inode>) -> Arc<Inode> {
        self.free_or_taken(i.ino).get_or_insert(i).clone()
    }

    /// The position of `ino`, its chunk's block made if need be. An empty
    /// position is counted as taken: the caller fills it.
    fn free_or_taken(&mut self, ino: Ino) -> &mut Option<Arc<Inode>> {
        let mut fresh = false;
        let b = self
            .chunks
            .entry(ino >> INO_CHUNK_SHIFT)
            .or_insert_with(|| {
                fresh = true;
                InoBlock {
                    slots: Box::new(std::array::from_fn(|_| None)),
                    live: 0,
                }
            });
        let slot = &mut b.slots[ino as usize % CHUNK];
        if slot.is_none() {
            if b.live == 0 && !fresh {
                self.empty -= 1;
            }
            b.live += 1;
            self.len += 1;
        }
        slot
    }

    fn remove(&mut self, ino: Ino) -> Option<Arc<Inode>> {
        let b = self.chunks.get_mut(&(ino >> INO_CHUNK_SHIFT))?;
        let old = b.slots[ino as usize % CHUNK].take()?;
        b.live -= 1;
        self.len -= 1;
        if b.live == 0 {
            self.empty += 1;
            if self.empty > EMPTY_BLOCKS.max(self.chunks.len() / 8) {
                self.chunks.retain(|_, b| b.live > 0);
                self.empty = 0;
            }
        }
        Some(old)
    }

    fn values(&self) -> impl Iterator<Item = &Arc<Inode>> {
        self.chunks.values().flat_map(|b| b.slots.iter().flatten())
    }
}

/// Inode numbers are not attacker-chosen hash keys: a multiply-xorshift mix
/// (splitmix64's finaliser) costs a few cycles where SipHash costs ~20 ns.
#[derive(Default)]
pub struct InoHasher(u64);

impl std::hash::Hasher for InoHasher {
    fn finish(&self) -> u64 {
        mix64(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | *b as u64;
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

/// The shard of an inode number, by its 64-inode allocation chunk
/// (`INO_CHUNK_SHIFT`): a thread hands out numbers from its own chunk, so
/// the inodes it creates and removes in a row sit in one shard whose lock line
/// stays in its core's cache. Sharding by the number itself made two
/// threads' creates meet on every shard's line about every other operation
/// (crunl at 2 workers, together with the `Inode::new` change: 1.54-1.64M ->
/// 1.74-1.79M pairs/s, docs/BENCHMARKS.md run 8).
///
/// Consecutive chunks take consecutive shards rather than hashed ones:
/// threads creating in one allocation group take its chunks in turn, so
/// their current chunks are neighbours and sit in different shards. Hashed,
/// two threads' chunks shared a shard one time in 64 (seed000: 70-110K
/// waits a run, docs/BENCHMARKS.md run 11). The group number, times an odd
/// constant, offsets each group's sequence, so the first chunks of
/// different groups do not all start at shard 0.
#[inline]
fn ino_shard(ino: Ino) -> usize {
    let ag = ino >> crate::schema::AG_SHIFT;
    ((ino >> INO_CHUNK_SHIFT).wrapping_add(ag.wrapping_mul(0x9E37_79B9_7F4A_7C15 >> 40))
        % INODE_SHARDS as u64) as usize
}

impl Default for InodeTable {
    fn default() -> Self {
        // Each shard's map starts with room for 16 chunks. A map that grew
        // from empty got a table of a few dozen bytes from whichever thread
        // first inserted into its shard, next to other shards' tables in
        // that thread's heap, across cache lines. Threads working in their
        // own chunks' shards then shared those lines: rndrename 2w/1w 1.69
        // -> 1.77, crunl 1.85 -> 2.04 (six alternated runs,
        // docs/BENCHMARKS.md run 12).
        InodeTable {
            shards: (0..INODE_SHARDS)
                .map(|_| {
                    let shard = InoShard {
                        chunks: HashMap::with_capacity_and_hasher(16, Default::default()),
                        len: 0,
                        empty: 0,
                    };
                    crossbeam_utils::CachePadded::new(RwLock::new(LockClass::InodeTable, shard))
                })
                .collect(),
        }
    }
}

impl InodeTable {
    pub fn get(&self, ino: Ino) -> Option<Arc<Inode>> {
        let i = self.shards[ino_shard(ino)].read().get(ino).cloned();
        if let Some(i) = &i {
            touch(&i.referenced);
        }
        i
    }
    /// Insert unless present; returns the cached one.
    pub fn fill(&self, i: Arc<Inode>) -> Arc<Inode> {
        self.shards[ino_shard(i.ino)].write().fill(i)
    }
    pub fn insert(&self, i: Arc<Inode>) {
        // A replaced inode is dropped after the shard lock is released.
        let _old = self.shards[ino_shard(i.ino)].write().insert(i);
    }
    pub fn remove_if(&self, ino: Ino, pred: impl FnOnce(&Arc<Inode>) -> bool) -> bool {
        let mut s = self.shards[ino_shard(ino)].write();
        if s.get(ino).is_some_and(pred) {
            s.remove(ino);
            return true;
        }
        false
    }
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().len).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }
    /// All inodes of one shard (for reclaim walks and fsck-like checks).
    pub fn shard_snapshot(&self, i: usize) -> Vec<Arc<Inode>> {
        self.shards[i].read().values().cloned().collect()
    }
    /// Evict from shard `i` those of the listed inodes that nobody else holds
    /// and `pred` approves, holding the shard's write lock (so nobody can take
    /// a new reference meanwhile). Batched like XFS's gang lookups; reclaim
    /// passes a bounded chunk of a shard at a time.
    pub fn evict_listed(
        &self,
        i: usize,
        inos: &[Ino],
        mut pred: impl FnMut(&Arc<Inode>) -> bool,
    ) -> usize {
        let mut s = self.shards[i].write();
        let mut ev = 0;
        for &ino in inos {
            if s.get(ino)
                .is_some_and(|inode| Arc::strong_count(inode) == 1 && pred(inode))
            {
                s.remove(ino);
                ev += 1;
            }
        }
        if ev > 0 && s.chunks.capacity() > 64 && s.chunks.len() * 8 < s.chunks.capacity() {
            s.chunks.shrink_to_fit();
        }
        ev
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A chunk's inodes share one shard, and any 64 consecutive chunks of a
    /// group take all 64 shards: threads taking a group's chunks in turn
    /// hold neighbouring chunks, so they never meet on a shard.
    #[test]
    fn consecutive_chunks_take_consecutive_shards() {
        for ag in [0u64, 1, 7] {
            for start in [0u64, 1000] {
                let base = (ag << crate::schema::AG_SHIFT) + (start << INO_CHUNK_SHIFT);
                let shards: HashSet<usize> = (0..INODE_SHARDS as u64)
                    .map(|c| {
                        let first = base + (c << INO_CHUNK_SHIFT);
                        let s = ino_shard(first);
                        assert!(
                            (0..1 << INO_CHUNK_SHIFT).all(|i| ino_shard(first + i) == s),
                            "chunk {c} of group {ag} spans shards"
                        );
                        s
                    })
                    .collect();
                assert_eq!(shards.len(), INODE_SHARDS, "group {ag} from chunk {start}");
            }
        }
    }

    fn table_inode(ino: Ino) -> Arc<Inode> {
        let t = crate::types::Ts::default();
        let attr = Attr {
            size: 0,
            version: 0,
            mtime: t,
            ctime: t,
            nlink: 1,
            perm: 0o644,
            kind: Kind::File,
            ino,
            uid: 0,
            gid: 0,
            rdev: 0,
            atime: t,
            crtime: t,
        };
        let st = InodeState {
            attr,
            blob: vec![],
            blocks: BTreeMap::new(),
            blocks_complete: true,
            holes_from: u64::MAX,
            xattrs: vec![],
            dirty_epoch: 0,
            dead: false,
            destroyed: false,
            primary: None,
        };
        Inode::new(st, true, None)
    }

    /// A chunk's inodes share one block. An emptied block is kept for the
    /// chunk's next create, and the shard's emptied blocks go together once
    /// more than `EMPTY_BLOCKS` have piled up.
    #[test]
    fn a_chunk_is_one_block_and_emptied_blocks_go_in_a_sweep() {
        let t = InodeTable::default();
        // Chunks 5, 5 + 64, 5 + 128, ... of group 0 share a shard.
        let chunk = |j: u64| (5 + j * INODE_SHARDS as u64) << INO_CHUNK_SHIFT;
        let shard = ino_shard(chunk(0));
        assert!((0..100).all(|j| ino_shard(chunk(j)) == shard));
        let blocks = |t: &InodeTable| t.shards[shard].read().chunks.len();
        for k in 0..CHUNK as u64 {
            t.insert(table_inode(chunk(0) + k));
        }
        assert_eq!((blocks(&t), t.len()), (1, CHUNK));
        for k in 0..CHUNK as u64 {
            assert!(t.remove_if(chunk(0) + k, |_| true));
        }
        assert!(!t.remove_if(chunk(0) + 1, |_| true), "removed twice");
        assert_eq!((blocks(&t), t.len()), (1, 0));
        // The kept block takes the chunk's next inode, and empties again.
        t.insert(table_inode(chunk(0) + 3));
        assert_eq!((blocks(&t), t.len()), (1, 1));
        assert!(t.remove_if(chunk(0) + 3, |_| true));
        for j in 1..=EMPTY_BLOCKS as u64 {
            t.insert(table_inode(chunk(j)));
            assert!(t.remove_if(chunk(j), |_| true));
            let want = if j < EMPTY_BLOCKS as u64 {
                j as usize + 1
            } else {
                0
            };
            assert_eq!(blocks(&t), want, "after chunk {j}");
        }
        assert_eq!(t.len(), 0);
    }

    /// The count of emptied blocks stays exact through fills, removals,
    /// refills of emptied blocks and sweeps, in a shard with many chunks
    /// (where a sweep waits for an eighth of the blocks).
    #[test]
    fn emptied_blocks_are_counted_exactly() {
        let t = InodeTable::default();
        let chunk = |j: u64| (7 + j * INODE_SHARDS as u64) << INO_CHUNK_SHIFT;
        let shard = ino_shard(chunk(0));
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let mut live: BTreeMap<Ino, Arc<Inode>> = BTreeMap::new();
        let mut fewest_blocks = usize::MAX;
        for step in 0..200_000u64 {
            // Four numbers a chunk, so that blocks empty often.
            let ino = chunk(rng.gen_range(0..1500)) + rng.gen_range(0..4);
            if live.contains_key(&ino) && rng.gen_bool(0.6) {
                assert!(t.remove_if(ino, |_| true));
                live.remove(&ino);
            } else if !live.contains_key(&ino) && rng.gen_bool(0.3) {
                let i = table_inode(ino);
                if step % 2 == 0 {
                    t.insert(i.clone());
                } else {
                    t.fill(i.clone());
                }
                live.insert(ino, i);
            }
            if step % 10_000 == 0 {
                let s = t.shards[shard].read();
                let empty = s.chunks.values().filter(|b| b.live == 0).count();
                assert_eq!(s.empty, empty, "step {step}");
                assert!(s
                    .chunks
                    .values()
                    .all(|b| b.live as usize == b.slots.iter().flatten().count()));
                assert_eq!(s.len, live.len());
                if step > 0 {
                    fewest_blocks = fewest_blocks.min(s.chunks.len());
                }
            }
        }
        // Sweeps happened: every chunk has had a block since early on.
        assert!(
            fewest_blocks < 1500 - EMPTY_BLOCKS,
            "{fewest_blocks} blocks at the fewest"
        );
    }

    /// The inode table against a model: whole and
    /// partly removed chunks, numbers never inserted, `fill` keeping the
    /// cached object, eviction of what the table alone holds.
    #[test]
    fn inode_table_matches_a_model() {
        let t = InodeTable::default();
        let mut model: BTreeMap<Ino, Arc<Inode>> = BTreeMap::new();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut next = 1u64;
        for round in 0..40 {
            // A run of creates from a fresh chunk, as a thread makes them.
            for _ in 0..rng.gen_range(1..300) {
                let i = table_inode(next);
                next += 1;
                t.insert(i.clone());
                model.insert(i.ino, i);
            }
            // Removals: random ones, and now and then a whole chunk.
            let keys: Vec<Ino> = model.keys().copied().collect();
            for &ino in &keys {
                if rng.gen_bool(0.3)
                    || (round % 7 == 0 && ino >> INO_CHUNK_SHIFT == keys[0] >> INO_CHUNK_SHIFT)
                {
                    assert!(t.remove_if(ino, |_| true));
                    model.remove(&ino);
                }
            }
            assert_eq!(t.len(), model.len());
            for ino in 0..next + 100 {
                match (t.get(ino), model.get(&ino)) {
                    (Some(a), Some(b)) => assert!(Arc::ptr_eq(&a, b), "ino {ino}"),
                    (None, None) => {}
                    (a, b) => panic!("ino {ino}: table {} model {}", a.is_some(), b.is_some()),
                }
            }
            if let Some((&ino, i)) = model.iter().next() {
                assert!(Arc::ptr_eq(&t.fill(table_inode(ino)), i));
            }
        }
        // Eviction takes exactly the inodes nobody else holds.
        let held: Vec<Arc<Inode>> = model.values().step_by(3).cloned().collect();
        drop(model);
        for s in 0..t.shard_count() {
            let inos: Vec<Ino> = t.shard_snapshot(s).iter().map(|i| i.ino).collect();
            t.evict_listed(s, &inos, |_| true);
        }
        assert_eq!(t.len(), held.len());
        assert!(held
            .iter()
            .all(|i| t.get(i.ino).is_some_and(|x| Arc::ptr_eq(&x, i))));
    }

    /// The entry and whether a miss is definite (`Dir::probe` without the inode).
    fn resolve(d: &Dir, hash: u64, name: &[u8]) -> (Option<Dent>, bool) {
        let (e, _, definite) = d.probe(hash, name, false);
        (e, definite)
    }

    /// The hand-written index against a BTreeMap model: lookups, hash order,
    /// ranges that cross homes and shards, growth and shrinking.
    #[test]
    fn index_matches_an_ordered_map() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let d = Dir::new(true, 0, false, None);
        let mut model: BTreeMap<(u64, Vec<u8>), Ino> = BTreeMap::new();
        for round in 0..3 {
            for i in 0..20_000u64 {
                let name = format!("n{}", rng.gen_range(0..30_000u32)).into_bytes();
                // Force some equal hashes: two names per hash in a tenth of the cases.
                let h = if i % 10 == 0 {
                    name_hash(&name[..2.min(name.len())])
                } else {
                    name_hash(&name)
                };
                if rng.gen_bool(0.7) {
                    d.set_next(h, &name, i + 1, None, Kind::File, false, 0);
                    model.insert((h, name), i + 1);
                } else {
                    assert_eq!(
                        d.remove(h, &name),
                        model.remove(&(h, name.clone())).is_some()
                    );
                }
            }
            assert_eq!(d.cached(), model.len(), "round {round}");
            for ((h, n), ino) in model.iter().take(2000) {
                assert_eq!(resolve(&d, *h, n).0.map(|x| x.ino), Some(*ino));
            }
            // Whole listing, in pages, equals the model in (hash, position) order.
            let all = d.range(0, u64::MAX, usize::MAX);
            let hashes: Vec<u64> = all.iter().map(|x| x.0).collect();
            let want: Vec<u64> = model.keys().map(|k| k.0).collect();
            assert_eq!(hashes, want);
            let mut from = 0;
            let mut seen = 0;
            loop {
                let page = d.range(from, u64::MAX, 100);
                if page.is_empty() {
                    break;
                }
                seen += page.len();
                from = page.last().unwrap().0 + 1;
            }
            assert_eq!(seen, model.len());
            // A range inside the hash space.
            let (lo, hi) = (1u64 << 60, 3u64 << 60);
            let got = d.range(lo, hi, usize::MAX).len();
            assert_eq!(got, model.keys().filter(|k| k.0 >= lo && k.0 <= hi).count());
            // Evict everything clean at the end of a round but the last:
            // every evicted name's miss is no longer definite, others' are.
            if round < 2 {
                // The 2000 names resolved above are referenced: CLOCK keeps
                // them for one more pass.
                let referenced = model.len().min(2000);
                let (ev, dirty) = d.evict_clean(0);
                assert_eq!((ev, dirty), (model.len() - referenced, 0));
                assert_eq!(d.evict_clean(0), (referenced, 0));
                for (h, n) in model.keys().take(500) {
                    let (got, definite) = resolve(&d, *h, n);
                    assert!(got.is_none() && !definite);
                }
                assert!(resolve(&d, name_hash(b"never-created"), b"never-created").1);
                assert!(!d.listing_complete());
                model.clear();
            }
        }
        // Demotion: nothing is definite any more, and the sets are gone.
        let held = d.evicted.load(Ordering::SeqCst);
        assert!(held > 0);
        assert_eq!(d.demote(), held);
        assert_eq!(d.evicted.load(Ordering::SeqCst), 0);
        assert!(!resolve(&d, name_hash(b"never-created"), b"never-created").1);
        assert!(!d.listing_complete());
    }

    /// A shard of at most `TINY` entries boxes its slots and one of more
    /// has a flat array; growing and shrinking across the line keeps every
    /// entry, the order and the tags (random operations in one shard
    /// against a model, equal hashes and long names included).
    #[test]
    fn tiny_shards_switch_to_flat_and_back() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut ix = Index::default();
        assert!(ix.is_tiny());
        let mut model: BTreeMap<(u64, Vec<u8>), Ino> = BTreeMap::new();
        let base = 9u64 << DIR_SHARD_SHIFT;
        let dent = |ino| Dent {
            ino,
            kind: Kind::File,
            sole: false,
            ver: 1,
            dirty_epoch: 0,
        };
        // Removing the first of two moves the second's box, not its slot:
        // the slot stays where the thread that made it put it.
        ix.insert(base | 1, b"a", dent(1), None);
        ix.insert(base | 2, b"b", dent(2), None);
        let second = ix.slot(1) as *const Slot;
        assert!(ix.remove(base | 1, b"a").is_some());
        assert!(ix.is_tiny() && std::ptr::eq(ix.slot(0), second));
        assert!(ix.remove(base | 2, b"b").is_some());
        ix.shrink();
        let (mut tiny_seen, mut flat_seen) = (0, 0);
        for i in 0..20_000u64 {
            // Sizes wander between 0 and about 6: most steps are near the line.
            let grow = model.is_empty() || (model.len() < 6 && rng.gen_bool(0.5));
            if grow {
                let h = base
                    | if rng.gen_bool(0.2) {
                        77
                    } else {
                        rng.gen::<u64>() % (1 << 20)
                    };
                let len = if rng.gen_bool(0.3) { 40 } else { 6 };
                let name: Vec<u8> = (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect();
                if let std::collections::btree_map::Entry::Vacant(v) =
                    model.entry((h, name.clone()))
                {
                    ix.insert(h, &name, dent(i + 1), None);
                    v.insert(i + 1);
                }
            } else {
                let k = model
                    .keys()
                    .nth(rng.gen_range(0..model.len()))
                    .cloned()
                    .expect("not empty");
                assert_eq!(ix.remove(k.0, &k.1).map(|s| s.d().ino), model.remove(&k));
                if model.is_empty() {
                    ix.shrink();
                }
            }
            ix.check();
            assert_eq!(ix.len(), model.len());
            if ix.is_tiny() {
                tiny_seen += 1;
                assert!(model.len() <= TINY);
            } else {
                flat_seen += 1;
            }
            let got: Vec<(u64, Vec<u8>, Ino)> = ix
                .iter()
                .map(|s| (s.hash, s.name.to_vec(), s.d().ino))
                .collect();
            let mut want: Vec<(u64, Vec<u8>, Ino)> = model
                .iter()
                .map(|((h, n), i)| (*h, n.clone(), *i))
                .collect();
            // Equal hashes keep their insertion order in the index, not name order.
            let mut got_sorted = got.clone();
            got_sorted.sort();
            want.sort();
            assert_eq!(got_sorted, want);
            assert!(got.windows(2).all(|w| w[0].0 <= w[1].0), "hash order");
            for ((h, n), ino) in &model {
                assert_eq!(ix.get(*h, n).map(|d| d.ino), Some(*ino));
            }
            assert!(ix.get(base | 77, b"absent").is_none());
        }
        assert!(
            tiny_seen > 1000 && flat_seen > 1000,
            "both kinds exercised: {tiny_seen} tiny, {flat_seen} flat"
        );
    }

    /// The ordered table under crowded hashes: long runs (saturated
    /// distances in the tags), runs into the overflow room at the end of
    /// the shard, many equal hashes, growth and shrinking, against a model.
    #[test]
    fn index_keeps_order_under_crowded_hashes() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut ix = Index::default();
        let mut model: BTreeMap<(u64, Vec<u8>), Ino> = BTreeMap::new();
        let base = 5u64 << DIR_SHARD_SHIFT;
        let span = 1u64 << DIR_SHARD_SHIFT;
        let dent = |ino| Dent {
            ino,
            kind: Kind::File,
            sole: false,
            ver: 1,
            dirty_epoch: 0,
        };
        for i in 0..60_000u64 {
            let low = match rng.gen_range(0..4) {
                0 => rng.gen_range(0..64),
                1 => span - 1 - rng.gen_range(0..64),
                2 => rng.gen::<u64>() % span,
                _ => 12_345,
            };
            let h = base | low;
            let name = format!("n{}", rng.gen_range(0..40)).into_bytes();
            if rng.gen_bool(if i < 40_000 { 0.65 } else { 0.2 }) {
                if let std::collections::btree_map::Entry::Vacant(v) =
                    model.entry((h, name.clone()))
                {
                    ix.insert(h, &name, dent(i + 1), None);
                    v.insert(i + 1);
                }
            } else {
                assert_eq!(
                    ix.remove(h, &name).map(|s| s.d().ino),
                    model.remove(&(h, name))
                );
            }
            if i % 2000 == 0 || i == 59_999 {
                ix.check();
                assert_eq!(ix.len(), model.len());
                let hashes: Vec<u64> = ix.iter().map(|s| s.hash).collect();
                assert_eq!(hashes, model.keys().map(|k| k.0).collect::<Vec<_>>());
                for ((h, n), ino) in model.iter().step_by(7) {
                    assert_eq!(ix.get(*h, n).map(|d| d.ino), Some(*ino));
                }
                assert!(ix.get(base | 12_345, b"absent").is_none());
                assert!(ix.get(base | 7, b"n99").is_none());
                let (lo, hi) = (base | 40, base | (span - 30));
                assert_eq!(
                    ix.range(5, lo, hi).count(),
                    model.keys().filter(|k| k.0 >= lo && k.0 <= hi).count()
                );
            }
        }
        // Down to a few entries: the table shrinks.
        let keep: HashSet<u64> = model.keys().map(|k| k.0).take(3).collect();
        let gone: Vec<(u64, Vec<u8>)> = model
            .keys()
            .filter(|k| !keep.contains(&k.0))
            .cloned()
            .collect();
        assert!(!gone.is_empty());
        for (h, n) in &gone {
            assert!(ix.remove(*h, n).is_some());
            model.remove(&(*h, n.clone()));
        }
        ix.shrink();
        ix.check();
        assert_eq!(ix.len(), model.len());
        assert!(
            ix.tags.len() <= 64,
            "{} positions for {} entries",
            ix.tags.len(),
            ix.len()
        );
        for ((h, n), ino) in &model {
            assert_eq!(ix.get(*h, n).map(|d| d.ino), Some(*ino));
        }
    }

    /// The evicted-name filter: never a false "absent" (that would make a
    /// cache miss on an evicted name definite, and a create would shadow a
    /// stored name), across stage growth; few false "maybe"s; ~1.5 bytes a name.
    #[test]
    fn evicted_filter_has_no_false_negatives() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut f = EvictedFilter::default();
        let keys: Vec<u64> = (0..300_000).map(|_| rng.gen()).collect();
        let mut added = 0;
        for (i, k) in keys.iter().enumerate() {
            added += f.insert(*k) as u64;
            if i % 997 == 0 {
                assert!(keys[..=i].iter().step_by(101).all(|k| f.maybe_contains(*k)));
            }
        }
        assert!(keys.iter().all(|k| f.maybe_contains(*k)));
        assert_eq!(f.len(), added);
        assert!(
            added > 290_000,
            "inserts refused as duplicates: {}",
            300_000 - added
        );
        let fp = (0..100_000).filter(|_| f.maybe_contains(rng.gen())).count();
        assert!(fp < 6_000, "false positive rate {fp} in 100000");
        let per_name = f.bytes() as f64 / keys.len() as f64;
        eprintln!("evicted filter: {fp} false maybes in 100000, {per_name:.2} bytes a name");
        assert!(per_name < 3.0, "{per_name} bytes per name");
        // Small: exact, 16 bytes or so a name, no false positives.
        let mut small = EvictedFilter::default();
        assert!((0..1000u64).all(|k| small.insert(k * 7919)));
        assert!(small.bytes() < 1000 * 24 && small.stages.is_empty());
        assert_eq!(
            (0..100_000u64)
                .filter(|k| k % 7919 != 0 && small.maybe_contains(*k))
                .count(),
            0
        );
        assert!(!EvictedFilter::default().maybe_contains(1));
    }

    /// Chunked eviction with a hash cursor: names inserted between chunks (so
    /// the table grows under the cursor) are not skipped wrongly or
    /// lost, dirty names stay, and every evicted name's miss stops being definite.
    #[test]
    fn chunked_eviction_survives_growth_between_chunks() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let d = Dir::new(true, 0, false, None);
        let mut clean: BTreeMap<(u64, Vec<u8>), Ino> = BTreeMap::new();
        let mut dirty: BTreeMap<(u64, Vec<u8>), Ino> = BTreeMap::new();
        for i in 0..20_000u64 {
            let name = format!("n{i}").into_bytes();
            let h = name_hash(&name);
            // Epoch 1 is durable (clean), epoch 5 is not (dirty).
            let e = if rng.gen_bool(0.1) { 5 } else { 1 };
            d.set_next(h, &name, i + 1, None, Kind::File, false, e);
            if e == 1 {
                clean.insert((h, name), i + 1)
            } else {
                dirty.insert((h, name), i + 1)
            };
        }
        let mut added: BTreeMap<(u64, Vec<u8>), Ino> = BTreeMap::new();
        let mut ev_total = 0;
        let mut k = 0u64;
        for si in 0..DIR_SHARDS {
            let mut from = 0;
            loop {
                let (ev, _, next) = d.evict_clean_chunk(si, 1, from, 37);
                ev_total += ev;
                // New dirty names between chunks make the shard's array grow.
                for _ in 0..40 {
                    let name = format!("late{k}").into_bytes();
                    k += 1;
                    let h = name_hash(&name);
                    d.set_next(h, &name, 1_000_000 + k, None, Kind::File, false, 5);
                    added.insert((h, name), 1_000_000 + k);
                }
                match next {
                    Some(h) => {
                        assert!(
                            h >= from && dir_shard(h) == si,
                            "the cursor moves forward within the shard"
                        );
                        from = h;
                    }
                    None => break,
                }
            }
        }
        assert_eq!(ev_total, clean.len());
        for ((h, n), ino) in dirty.iter().chain(added.iter()) {
            assert_eq!(resolve(&d, *h, n).0.map(|x| x.ino), Some(*ino));
        }
        for (h, n) in clean.keys() {
            let (got, definite) = resolve(&d, *h, n);
            assert!(got.is_none() && !definite);
        }
        assert_eq!(d.cached(), dirty.len() + added.len());
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
