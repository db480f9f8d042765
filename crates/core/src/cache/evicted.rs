//! The hashes of names evicted from a complete directory (`EvictedFilter`):
//! what keeps a cache miss definite after reclaim (seed 001's cure at scale).

use super::*;
use std::collections::HashSet;

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
pub(super) fn mix64(mut x: u64) -> u64 {
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
            // (docs/perf-log/07-unlink-without-read-demotion.md). Probes for a miss: 6 stages at
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

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use crate::schema::name_hash;
    use rand::{Rng, SeedableRng};
    #[allow(unused_imports)]
    use std::collections::{BTreeMap, HashSet};

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
}
