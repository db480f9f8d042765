//! Allocation (seeds 003 and 004): inode numbers in allocation groups, handed
//! to threads in chunks, and placement of a new inode in its parent's group
//! (`--placement near`) or, for directories, round-robin over the groups
//! (`spread`).

use super::*;

/// Inode numbers are handed to threads in chunks, like XFS's inode chunks, so
/// creating files does not touch a shared counter per file. The inode cache
/// is sharded by chunk (`cache::ino_shard`).
pub(super) const INO_CHUNK: u64 = 1 << crate::cache::INO_CHUNK_SHIFT;

thread_local! {
    /// Per thread, per (engine, group): the rest of the chunk it was handed.
    static INO_CACHE: std::cell::RefCell<HashMap<(u64, u32), (u64, u64)>> =
        std::cell::RefCell::new(HashMap::new());
}

impl Engine {
    /// Pick an AG and hand out an inode number from this thread's chunk.
    pub(super) fn alloc_ino(&self, g: &mut Gate<'_>, parent: Ino, kind: Kind) -> Result<Ino> {
        let nags = self.ag_next.len() as u32;
        let pag = ((parent >> AG_SHIFT) as u32).min(nags - 1);
        let ag = if kind == Kind::Dir && self.cfg.placement == Placement::Spread {
            (self.spread_rr.fetch_add(1, Ordering::Relaxed) % nags as u64) as u32
        } else {
            pag
        };
        let id = self.id;
        let seq = INO_CACHE.with(|c| {
            let mut c = c.borrow_mut();
            let slot = c.entry((id, ag)).or_insert((0, 0));
            if slot.0 >= slot.1 {
                let start = self.ag_next[ag as usize].fetch_add(INO_CHUNK, Ordering::Relaxed);
                *slot = (start, start + INO_CHUNK);
                // Persist the AG's high-water mark with this operation; the value only grows.
                g.put(
                    schema::ag_key(ag),
                    start + INO_CHUNK,
                    schema::encode_u64(start + INO_CHUNK),
                );
            }
            let s = slot.0;
            slot.0 += 1;
            s
        });
        if seq >= 1 << AG_SHIFT {
            return Err(Error::NoSpace);
        }
        Ok(((ag as u64) << AG_SHIFT) | seq)
    }
}
