//! The inode table: cached inodes by number, sharded so that a chunk of
//! numbers handed to one thread stays in one shard.

use super::*;
use crate::sync::{Arc, LockClass, RwLock};
use crate::types::Ino;
use std::collections::HashMap;

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
/// a full block takes 8 (docs/perf-log/14-seed001-control-inode-table.md). A chunk with few
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
/// 1.74-1.79M pairs/s, docs/perf-log/08-shared-lines-threads-commits.md).
///
/// Consecutive chunks take consecutive shards rather than hashed ones:
/// threads creating in one allocation group take its chunks in turn, so
/// their current chunks are neighbours and sit in different shards. Hashed,
/// two threads' chunks shared a shard one time in 64 (seed000: 70-110K
/// waits a run, docs/perf-log/11-seed000-in-one-run.md). The group number, times an odd
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
        // docs/perf-log/12-rndrename-big-lock.md).
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

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use crate::schema::name_hash;
    use crate::types::{Attr, Kind};
    use rand::{Rng, SeedableRng};
    #[allow(unused_imports)]
    use std::collections::{BTreeMap, HashSet};

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
            xattrs: vec![],
            dirty_epoch: 0,
            data_epoch: 0,
            dead: false,
            destroyed: false,
            object: false,
            primary: None,
            pinned: 0,
            flags: 0,
            linkable: false,
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
}
