//! One directory shard's index of cached names: `Slot` (one cache line a
//! name), the hash-ordered table with displacement tags (`Index`), and its
//! probes, inserts, removals and ordered ranges.

use super::*;
use crate::sync::{Arc, AtomicBool};
use crate::types::{Ino, Kind};
use smallvec::SmallVec;

/// One cached name of a directory shard: exactly one cache line (the
/// entry's fields are stored flat rather than as a `Dent`, whose padding made
/// the slot 72 bytes, so a probe or an update of one name touched two lines;
/// a lookup's binary search over a bucket touched up to three).
#[repr(align(64))]
pub struct Slot {
    pub hash: u64,
    pub(super) ino: Ino,
    pub(super) ver: u64,
    pub(super) dirty_epoch: u64,
    /// The entry's inode, when the entry was made or looked up with it in
    /// hand: the entry pins it, as a dentry pins its inode in Linux (inode
    /// reclaim evicts only inodes the table alone holds, so the pointer is
    /// always the table's object for `ino`). A lookup then goes from the
    /// name to the attributes without the inode table's hash probe, two
    /// cache misses at 1M entries. `None` for a negative entry, and for an
    /// entry filled from the store until a lookup attaches its inode.
    pub(super) inode: Option<Arc<Inode>>,
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
    pub(super) fn set(&mut self, d: Dent, inode: Option<Arc<Inode>>) -> Option<Arc<Inode>> {
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
/// (docs/perf-log/08-shared-lines-threads-commits.md).
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
    pub(super) bits: u32,
    pub(super) len: u32,
    pub(super) tags: SmallVec<[u8; 16]>,
    /// One slot a position (`tags.len()` of them); `is_tiny` tells which
    /// field of the union is live.
    pub(super) store: Store,
}

/// Entries a shard holds as one sorted run (`bits == 0`) before hashing.
const SMALL_MAX: usize = 12;

/// Positions of a tiny shard: one whose slots are boxed (`Store::tiny`).
/// Every other table has at least 4 positions, so `tags.len() == TINY`
/// tells a tiny shard (`Index::is_tiny`).
pub(super) const TINY: usize = 2;

/// Where a shard's slots live. A flat array, one 64-byte slot a position,
/// except in a tiny shard (at most `TINY` entries, the state of most shards
/// of a directory of a few dozen names, and of every shard of an empty one),
/// which boxes each slot. The box comes from the inserting thread's heap
/// (mimalloc keeps one per thread), so the line a new name is written to is
/// one that thread already owns, where a flat array's first position is a
/// line every thread writes. Two threads making and removing random names in
/// one directory (rndrename) then move the shard's first line between cores
/// and not also its slots' (docs/perf-log/12-rndrename-big-lock.md). A lookup reads one
/// slot line either way: the pointers sit in the shard's first line, in the
/// place of the flat array's.
///
/// A union, not an enum, because an enum's tag would push the slot pointer
/// out of the shard's first cache line (`size_guard` checks the layout); the
/// tag is the tags' length instead.
pub(super) union Store {
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

/// The home of `hash` in a table of `2^bits` homes: the `bits` hash bits
/// just below the shard bits.
#[inline]
pub(super) fn home_at(hash: u64, bits: u32) -> usize {
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
    pub(super) fn is_tiny(&self) -> bool {
        self.tags.len() == TINY
    }

    /// The slot at position `q`, if any. The `Store` accessors below are
    /// the only code that touches the union; each reads the field
    /// `is_tiny` names. A shard turns flat only through `set_flat`, which
    /// swaps the field with the tags, and tiny again only as a whole new
    /// `Index::default()` (`shrink`).
    #[inline]
    pub(super) fn at(&self, q: usize) -> Option<&Slot> {
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
    pub(super) fn slot(&self, q: usize) -> &Slot {
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
    pub(super) fn remove_at(&mut self, q: usize) -> Slot {
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
    pub(super) fn slots_from(&self, lo: usize) -> impl Iterator<Item = &Slot> {
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
    pub(super) fn check(&self) {
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
    pub(super) fn shrink(&mut self) {
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
