//! Recovery and reclaim: orphans left by a crash, batched eviction under the cache budget and the memory bound, statfs.

use super::*;

impl Engine {
    /// Reclaim inodes that were unlinked while open when the last daemon died.
    pub(super) fn recover_orphans(&self) -> Result<()> {
        let (lo, hi) = (vec![schema::K_ORPHAN], vec![schema::K_ORPHAN + 1]);
        let orphans = self.store.scan(&lo, &hi, usize::MAX)?;
        if orphans.is_empty() {
            return Ok(());
        }
        for (k, _) in &orphans {
            let ino = schema::parse_orphan_key(k)?;
            let mut g = self.committer.enter()?;
            match self.inode(ino) {
                Ok(i) => {
                    let mut st = i.st.lock();
                    Self::bump(&mut st);
                    self.destroy(&mut g, &mut st, true)?;
                    drop(st);
                    self.inodes.remove_if(ino, |_| true);
                }
                Err(Error::NotFound) => g.del(k.clone(), u64::MAX),
                Err(e) => return Err(e),
            }
        }
        tracing::info!("reclaimed {} orphan inodes", orphans.len());
        self.committer.commit_once()
    }

    /// Estimated bytes held by the caches.
    pub fn cache_usage(&self) -> u64 {
        let inodes = self.inodes.len() as u64;
        let dents = self.cached_dents.get().max(0) as u64;
        let data = self.cached_data.get().max(0) as u64;
        // Per inode: the in-memory inode, plus its Arc header, table slot and
        // allocator rounding. Calibrated against RSS when the inode was padded
        // to 384 bytes (300K files at 16 vs 64 MiB budgets, and 270K cached
        // inodes through a mount: about 800 bytes each in all), as
        // `size_of + 400`. Of that 400, the padded layout's `Arc` took 128
        // bytes (a 128-aligned header: 512 a block); the unpadded one takes
        // 24 (312 bytes in mimalloc's 320 class), so 104 fewer.
        // Per entry: a 64-byte slot and a tag byte at the index's load of
        // 3/8 to 3/4 (86-172 bytes), and a long name's heap copy: 192 was
        // calibrated on the bucket array before it and stays an upper bound
        // for names of up to 20 bytes.
        let per_inode = (std::mem::size_of::<Inode>() + 296) as u64;
        // Evicted names: the bytes of their directories' filters.
        let filters = self.evicted_filter_bytes.load(Ordering::Relaxed).max(0) as u64;
        inodes * per_inode + dents * 192 + data + filters
    }

    /// Change the cache budget (bytes) of a running engine; reclaim brings
    /// the cache under it in batches after the next commits. Under a memory
    /// bound the next sample recomputes it.
    pub fn set_budget(&self, bytes: u64) {
        self.budget.store(bytes, Ordering::Relaxed);
    }

    /// The cache budget in force (bytes).
    pub fn budget(&self) -> u64 {
        self.budget.load(Ordering::Relaxed)
    }

    /// Under a process memory bound, at most every 50 ms: measure resident
    /// memory, take what is not the cache (the store's block cache and
    /// memtables, allocator slack, stacks, the estimate's error) as overhead,
    /// and give the cache what is left of 70% of the bound (throttling lets
    /// the cache run a quarter over its budget, and the estimate runs ahead
    /// of a shrinking budget: measured, 3M creates under a 700 MiB bound
    /// peaked at 767 MiB with 80% and at 603 MiB with 70%). Feedback rather
    /// than a model of the store's memory, which we do not own. Above 80% of
    /// the bound the budget is cut below the current estimate; above 85%
    /// writers stall (`throttle`). For 300 ms after a reclaim pass that freed more than
    /// 5% of the bound, the overhead is not re-measured: the allocator has
    /// not yet returned the freed memory, and taking that lag for overhead
    /// emptied the cache (measured: the budget swung between 16 MiB and
    /// 600 MiB).
    pub(super) fn adapt_budget(&self) {
        let bound = self.cfg.memory_bytes;
        if bound == 0 {
            return;
        }
        let ms = unix_ms();
        let last = self.budget_sampled.load(Ordering::Relaxed);
        if ms < last + 50
            || self
                .budget_sampled
                .compare_exchange(last, ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let Some(rss) = resident_bytes() else { return };
        // Over 85%: every writer waits for a commit and reclaims before its
        // next operation, until a sample finds the process back under.
        self.over_bound
            .store(rss > bound / 100 * 85, Ordering::Relaxed);
        if ms < self.big_reclaim_at.load(Ordering::Relaxed) + 300 {
            return;
        }
        let usage = self.cache_usage();
        let overhead = rss.saturating_sub(usage);
        let mut b = cache_share(bound).saturating_sub(overhead);
        if rss > bound / 100 * 80 {
            // Near the bound whatever the estimate says: shrink from here.
            b = b.min(usage / 10 * 8);
        }
        self.budget.store(
            b.clamp(16 << 20, self.cfg.cache_bytes.max(16 << 20)),
            Ordering::Relaxed,
        );
    }

    pub fn cached_inodes(&self) -> usize {
        self.inodes.len()
    }

    /// Dirty throttling, like the kernel's balance_dirty_pages: a writer that
    /// finds the cache a quarter over budget waits for the open epoch to
    /// commit (dirty objects become evictable) and reclaims itself, so memory
    /// stays bounded when operations outrun the committer's reclaim. Called
    /// before an operation takes any lock; the estimate is read every 64th
    /// operation of a thread (it sums the inode-table shards).
    pub(super) fn throttle(&self) {
        thread_local!(static OPS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) });
        let over_bound = self.over_bound.load(Ordering::Relaxed);
        if !over_bound {
            if self.store.is_null()
                || OPS.with(|n| {
                    n.set(n.get().wrapping_add(1));
                    n.get() % 64 != 0
                })
            {
                return;
            }
            if self.committer.open_records() > Committer::MAX_OPEN {
                // The open epoch is full: wait for it to commit (bounded batches).
                self.throttled.fetch_add(1, Ordering::Relaxed);
                let _ = self.committer.wait(self.committer.epoch());
                return;
            }
            let budget = self.budget();
            if self.cache_usage() <= budget + budget / 4 {
                return;
            }
        }
        self.throttled.fetch_add(1, Ordering::Relaxed);
        // A failed commit shows up in the operation's own `enter`.
        let _ = self.committer.wait(self.committer.epoch());
        self.maybe_reclaim();
    }

    /// Evict a directory's clean entries, one `RECLAIM_CHUNK` under each
    /// exclusive hold of the `reclaim` lock.
    pub(super) fn evict_dents(&self, d: &crate::cache::Dir, durable: u64) {
        for ds in 0..crate::cache::DIR_SHARDS {
            let mut from = 0;
            loop {
                let r = self.reclaim.write();
                let (ev, _, next) = d.evict_clean_chunk(ds, durable, from, RECLAIM_CHUNK);
                drop(r);
                if ev > 0 {
                    self.cached_dents.add(-(ev as i64));
                    self.evicted_dents.fetch_add(ev as u64, Ordering::Relaxed);
                }
                match next {
                    Some(h) => from = h,
                    None => break,
                }
            }
        }
    }

    /// Batched reclaim (seed 003): when over budget, walk inode-table shards
    /// from a cursor and evict clean, unreferenced objects a shard at a time,
    /// until under 90% of the budget. Dirty objects are never evicted.
    pub fn maybe_reclaim(&self) {
        if self.store.is_null() {
            return;
        }
        self.adapt_budget();
        let budget = self.budget();
        let off = self.cfg.name_cache == NameCache::Off;
        let before = self.cache_usage();
        if before <= budget && !off {
            return;
        }
        let target = budget / 10 * 9;
        let configured = match self.cfg.memory_bytes {
            0 => self.cfg.cache_bytes,
            m => self.cfg.cache_bytes.min(cache_share(m)),
        };
        let demote_at = configured / 4;
        let _big = (self.cfg.memory_bytes > 0).then_some(BigReclaim { e: self, before });
        let n = self.inodes.shard_count();
        // File data past 4 KiB is in data objects (the page cache of the
        // local filesystem holds it), so a pass takes entries and inodes.
        // Up to two rounds of the shards: a cached entry pins its inode
        // (`cache::Slot::inode`), so an inode whose entry this pass evicted
        // after visiting the inode's shard is evictable only on the next round.
        for k in 0..2 * n {
            if (self.cache_usage() <= target && !off) || (off && k >= n) {
                break;
            }
            let si = self.reclaim_cursor.fetch_add(1, Ordering::Relaxed) % n;
            let durable = self.committer.durable_epoch();
            let snapshot = self.inodes.shard_snapshot(si);
            // Directory entries first: a directory's clean entries can go even
            // if the directory stays. The exclusive `reclaim` lock is held for
            // one bounded chunk at a time (RECLAIM_CHUNK entries or inodes):
            // one hold per 156K-entry directory shard stalled lookups that
            // needed a store fill for about 107 ms each.
            for i in &snapshot {
                if let Some(d) = &i.dir {
                    self.evict_dents(d, durable);
                    // Evicted-name filters past a quarter of the configured
                    // budget: large directories give up "complete" (see
                    // `Dir::demote`). Not the budget in force: that one
                    // shrinks fast while the RSS is near the memory bound
                    // (`adapt_budget`), and demotion cannot be undone, so a
                    // moment's squeeze made every later create read the
                    // store (37.7M of 50M in one run,
                    // docs/perf-log/07-unlink-without-read-demotion.md). The
                    // filters stay in `cache_usage`, so under a squeeze reclaim evicts entries and inodes instead.
                    let filter_bytes =
                        self.evicted_filter_bytes.load(Ordering::Relaxed).max(0) as u64;
                    if filter_bytes > demote_at && d.evicted.load(Ordering::Relaxed) >= 4096 {
                        let n = d.demote();
                        self.demoted_hashes.fetch_add(n, Ordering::Relaxed);
                    }
                }
            }
            // The snapshot's references would keep every inode from eviction.
            let inos: Vec<Ino> = snapshot.iter().map(|i| i.ino).collect();
            drop(snapshot);
            if off {
                continue;
            }
            let mut freed_data = 0i64;
            let mut ev = 0;
            for chunk in inos.chunks(RECLAIM_CHUNK) {
                let _r = self.reclaim.write();
                ev += self.inodes.evict_listed(si, chunk, |i| {
                    if i.ino == ROOT_INO
                        || i.lookups.load(Ordering::Relaxed) > 0
                        || i.opens.load(Ordering::Relaxed) > 0
                    {
                        return false;
                    }
                    // Used since the last pass: a second chance (CLOCK).
                    if i.referenced.swap(false, Ordering::Relaxed) {
                        return false;
                    }
                    if let Some(d) = &i.dir {
                        if d.cached() > 0 {
                            return false;
                        }
                        // Unfolded stripe deltas live only here: keep the directory.
                        let stripes_clean = d.stripes.iter().all(|s| {
                            s.try_lock().is_some_and(|s| {
                                s.dirty_epoch <= durable && s.entries == 0 && s.subdirs == 0
                            })
                        });
                        if !stripes_clean {
                            return false;
                        }
                    }
                    match i.st.try_lock() {
                        Some(st) if st.dirty_epoch <= durable => {
                            freed_data += st.blocks.values().map(|b| b.len() as i64).sum::<i64>();
                            true
                        }
                        _ => false,
                    }
                });
            }
            self.cached_data.add(-freed_data);
            self.evicted_inodes.fetch_add(ev as u64, Ordering::Relaxed);
            self.reclaim_batches.fetch_add(1, Ordering::Relaxed);
        }
    }
}
