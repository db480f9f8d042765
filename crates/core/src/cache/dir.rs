//! A cached directory (`Dir`): its index sharded by name hash, each shard
//! one cache line with its lock, completeness, and chunked eviction.

use super::*;
use crate::sync::{
    Arc, AtomicBool, AtomicI64, AtomicU32, AtomicU64, BitLocks, LockClass, Mutex, OnceLock,
    Ordering, RwLock,
};
use crate::types::{Ino, Kind};

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
pub(super) type ShardLock = RwLock<Index, BitLocks>;

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
    /// about as much to the table's lines as to the shards' (docs/perf-log/11-seed000-in-one-run.md and 12-rndrename-big-lock.md).
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

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use crate::schema::name_hash;
    use rand::{Rng, SeedableRng};
    #[allow(unused_imports)]
    use std::collections::{BTreeMap, HashSet};

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
