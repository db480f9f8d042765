//! Directory listing: readdir in name-hash order, and a directory's parent.

use super::*;

/// A page of a directory in cookie order: (hash, name) to the entry, None
/// where the cache holds the name's deletion.
type Listing = BTreeMap<(u64, Vec<u8>), Option<(Ino, Kind)>>;

impl Engine {
    /// Up to `max` entries after `cookie` (0 = from the start), in name-hash
    /// order; each entry's `cookie` resumes after it. An entry present for the
    /// whole listing is returned exactly once, whatever else changes.
    pub fn readdir(&self, ino: Ino, cookie: u64, max: usize) -> Result<Vec<DirEntry>> {
        let _t = self.stats.start(Op::Readdir);
        let _bkl = self.names.bkl();
        let d = self.dir_inode(ino)?;
        let dir = d.dir.as_ref().expect("dir");
        if d.st.lock().dead {
            return Ok(Vec::new());
        }
        if cookie == 0 {
            self.touch_atime(&d)?;
        }
        let max = max.max(1);
        let mut from = cookie.saturating_add(1).max(3);
        loop {
            let complete = dir.listing_complete() || self.store.is_null();
            if complete {
                let got = dir.range(from, u64::MAX, max);
                // Eviction clears `complete` before removing entries: if it ran
                // meanwhile, this listing may have holes; merge with the store.
                if !dir.listing_complete() && !self.store.is_null() {
                    continue;
                }
                return Ok(got
                    .into_iter()
                    .filter(|(_, _, d)| d.ino != 0)
                    .take(max)
                    .map(|(h, n, d)| DirEntry {
                        name: n.into_vec(),
                        ino: d.ino,
                        kind: d.kind,
                        cookie: h,
                    })
                    .collect());
            }
            // Merge the store's range with the cache, which shadows it. The
            // cache is read *before* the store: an entry missing from the
            // store scan was not yet committed, so it was dirty (and not
            // evictable) when the cache was read. Reading the cache after the
            // scan would lose an entry committed and evicted in between.
            let limit = max + 16;
            let cached = dir.range(from, u64::MAX, limit);
            let cached_bound = if cached.iter().filter(|(_, _, d)| d.ino != 0).count() >= limit {
                cached.last().map_or(u64::MAX, |c| c.0)
            } else {
                u64::MAX
            };
            // Shared `reclaim` from the scan to the fills below (rule 5): no
            // eviction can drop a newer negative entry in between.
            let reclaim = self.reclaim.read();
            let (lo, hi) = schema::entry_range(ino, from);
            let stored = self.store.scan(&lo, &hi, limit)?;
            let store_truncated = stored.len() == limit;
            let store_bound = if store_truncated {
                schema::parse_entry_key(&stored.last().unwrap().0)?.1
            } else {
                u64::MAX
            };
            let bound = store_bound.min(cached_bound);
            let truncated = bound != u64::MAX;
            let mut merged = Listing::new();
            for (k, v) in &stored {
                let (_, h, name) = schema::parse_entry_key(k)?;
                if h > bound {
                    continue;
                }
                let (eino, kind, sole) = schema::decode_entry(v)?;
                merged.insert((h, name.to_vec()), Some((eino, kind)));
                // Prime the cache with what the scan read: rm -rf unlinks
                // every listed name next, and a cached entry saves each
                // unlink a store read. Fills never replace a cached entry.
                if self.cfg.name_cache != NameCache::Off {
                    let dent = Dent {
                        ino: eino,
                        kind,
                        sole,
                        ver: 0,
                        dirty_epoch: 0,
                    };
                    if dir.fill(h, name, dent).1 {
                        self.cached_dents.add(1);
                    }
                }
            }
            drop(reclaim);
            for (h, n, dd) in cached.into_iter().filter(|c| c.0 <= bound) {
                merged.insert(
                    (h, n.into_vec()),
                    if dd.ino == 0 {
                        None
                    } else {
                        Some((dd.ino, dd.kind))
                    },
                );
            }
            let out: Vec<DirEntry> = merged
                .into_iter()
                .filter_map(|((h, name), v)| {
                    v.map(|(ino, kind)| DirEntry {
                        name,
                        ino,
                        kind,
                        cookie: h,
                    })
                })
                .take(max)
                .collect();
            if !out.is_empty() || !truncated {
                return Ok(out);
            }
            from = bound.saturating_add(1);
        }
    }

    /// The parent of a directory (for "..").
    pub fn parent_of(&self, ino: Ino) -> Result<Ino> {
        let d = self.dir_inode(ino)?;
        let p = d.st.lock().parent();
        Ok(p)
    }
}
