//! Inode records and the cache: loading an inode or a directory from the store, queueing an inode's record (`emit_inode`), and the one ending of every mutation (`leave`).

use super::*;

/// A name's entry: (child, kind, sole flag, the child's inode when the
/// cached entry pins it).
pub(super) type Found = (Ino, Kind, bool, Option<Arc<Inode>>);

impl Engine {
    /// The cached inode, or load it from the store.
    pub(crate) fn inode(&self, ino: Ino) -> Result<Arc<Inode>> {
        if let Some(i) = self.inodes.get(ino) {
            return Ok(i);
        }
        if ino == 0 || self.store.is_null() {
            return Err(Error::NotFound);
        }
        let _r = self.reclaim.read();
        if let Some(i) = self.inodes.get(ino) {
            return Ok(i);
        }
        if self.is_gone(ino) {
            return Err(Error::NotFound);
        }
        let v = self
            .store
            .get(&schema::inode_key(ino))
            .map_err(|e| e.about(format_args!("inode {ino}")))?
            .ok_or(Error::NotFound)?;
        let (attr, extra) = schema::decode_inode(ino, &v)?;
        let mut st = self.new_state(attr, Vec::new());
        st.xattrs = extra.xattrs;
        st.primary = extra.primary;
        st.flags = extra.flags;
        st.object = attr.kind == Kind::File;
        match attr.kind {
            Kind::File => {
                // Past INLINE_MAX the bytes are in the data object.
                if attr.size <= INLINE_MAX && !extra.blob.is_empty() {
                    self.cached_data.add(extra.blob.len() as i64);
                    st.blocks.insert(0, extra.blob);
                }
            }
            _ => st.blob = extra.blob,
        }
        self.fills.fetch_add(1, Ordering::Relaxed);
        // Deleted while it was being read (an unlink of an uncached inode):
        // the record read is stale.
        if self.is_gone(ino) {
            return Err(Error::NotFound);
        }
        Ok(self
            .inodes
            .fill(Inode::new(st, false, Some(&self.evicted_filter_bytes))))
    }

    /// Note that `ino`'s records are deleted in epoch `epoch` (see `gone`).
    /// Before the inode leaves the table, so a miss always sees it.
    pub(super) fn mark_gone(&self, ino: Ino, epoch: u64) {
        if self.store.is_null() {
            // Nothing is ever loaded back (and no commit would clear it).
            return;
        }
        self.gone[(ino as usize) % self.gone.len()]
            .lock()
            .insert(ino, epoch);
    }

    pub(super) fn is_gone(&self, ino: Ino) -> bool {
        self.gone[(ino as usize) % self.gone.len()]
            .lock()
            .contains_key(&ino)
    }

    /// After a commit: deletions up to `durable` are in the store.
    pub(super) fn forget_gone(&self, durable: u64) {
        for s in &self.gone {
            let mut s = s.lock();
            if !s.is_empty() {
                s.retain(|_, e| *e > durable);
            }
        }
    }

    /// A directory for the duration of one operation, without touching the
    /// inode table or the directory's reference count: hot directories are
    /// pinned in a small per-thread cache (8 entries). Two threads working in
    /// one directory then share only the cache lines they must (the
    /// directory's state and one index shard), which is what lets them scale.
    ///
    /// Safety argument for the raw pointer in [`DirRef`]: the pointee is kept
    /// alive by the `Arc` in the thread-local cache, and entries are removed
    /// from that cache only when no `DirRef` of this thread is alive (depth 0).
    /// A pinned inode is never evicted (eviction requires that the table holds
    /// the only reference), so the cached object is the cache's object.
    pub(super) fn dir_ref(&self, ino: Ino) -> Result<DirRef> {
        let id = self.id;
        let hit = DIRS.with(|c| {
            let mut c = c.borrow_mut();
            let p = c
                .ents
                .iter()
                .find(|e| e.0 == id && e.1 == ino)
                .map(|e| Arc::as_ptr(&e.2));
            if p.is_some() {
                c.depth += 1;
            }
            p
        });
        if let Some(ptr) = hit {
            return Ok(DirRef {
                ptr,
                _not_send: std::marker::PhantomData,
            });
        }
        let i = self.dir_inode(ino)?;
        Ok(DIRS.with(|c| {
            let mut c = c.borrow_mut();
            if c.depth == 0 && c.ents.len() >= 8 {
                c.ents.remove(0);
            }
            let ptr = Arc::as_ptr(&i);
            c.ents.push((id, ino, i));
            c.depth += 1;
            DirRef {
                ptr,
                _not_send: std::marker::PhantomData,
            }
        }))
    }

    pub(super) fn dir_inode(&self, ino: Ino) -> Result<Arc<Inode>> {
        let i = self.inode(ino)?;
        if i.kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        Ok(i)
    }

    /// Resolve a name in a directory: the cache first; the store only when
    /// the directory is not known complete.
    /// Returns (child, kind, sole flag).
    pub(super) fn find(&self, dir: &Inode, name: &[u8]) -> Result<Option<(Ino, Kind, bool)>> {
        self.find_in(dir, name, false)
            .map(|f| f.map(|(ino, kind, sole, _)| (ino, kind, sole)))
    }

    /// `find`, and the child's inode when its cached entry pins it
    /// (`want_inode`; see `cache::Slot::inode`).
    pub(super) fn find_in(
        &self,
        dir: &Inode,
        name: &[u8],
        want_inode: bool,
    ) -> Result<Option<Found>> {
        let d = dir.dir.as_ref().ok_or(Error::NotDir)?;
        let h = name_hash(name);
        let (cached, node, complete) = match self.cfg.dir_index {
            DirIndex::Indexed => d.probe(h, name, want_inode),
            DirIndex::Linear => {
                let (c, complete) = d.resolve_linear(name);
                (c, None, complete)
            }
        };
        if let Some(c) = cached {
            if c.ino != 0
                || self.cfg.name_cache != NameCache::Off
                || c.dirty_epoch > self.committer.durable_epoch()
            {
                return Ok(if c.ino == 0 {
                    None
                } else {
                    Some((c.ino, c.kind, c.sole, node))
                });
            }
        }
        if complete || self.store.is_null() {
            return Ok(None);
        }
        let _r = self.reclaim.read();
        let got = match self
            .store
            .get(&schema::entry_key(dir.ino, h, name))
            .map_err(|e| e.about(format_args!("an entry of directory inode {}", dir.ino)))?
        {
            Some(v) => Some(schema::decode_entry(&v)?),
            None => None,
        };
        self.fills.fetch_add(1, Ordering::Relaxed);
        if self.cfg.name_cache == NameCache::Off {
            return Ok(got.map(|(ino, kind, sole)| (ino, kind, sole, None)));
        }
        let dent = Dent {
            ino: got.map_or(0, |g| g.0),
            kind: got.map_or(Kind::File, |g| g.1),
            sole: got.is_some_and(|g| g.2),
            ver: 0,
            dirty_epoch: 0,
        };
        let (d2, inserted) = d.fill(h, name, dent);
        if inserted {
            self.cached_dents.add(1);
        }
        Ok(if d2.ino == 0 {
            None
        } else {
            Some((d2.ino, d2.kind, d2.sole, None))
        })
    }

    /// Set an entry (positive or negative) in the directory cache and queue its
    /// record. `was_absent`: the caller found no entry under this name (it holds
    /// the name's lock, so that is still true). `sole`: the entry's sole flag
    /// (the caller keeps the inode's `primary` in step). `node`: the entry's
    /// inode if the caller has it, pinned in the cached entry
    /// (`cache::Slot::inode`); without it an entry naming the same inode
    /// keeps its pointer.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn put_entry(
        &self,
        g: &mut Gate<'_>,
        dir: &Inode,
        name: &[u8],
        ino: Ino,
        node: Option<&Arc<Inode>>,
        kind: Kind,
        sole: bool,
        was_absent: bool,
    ) {
        let d = dir.dir.as_ref().expect("directory");
        let h = name_hash(name);
        if g.is_null() && ino == 0 {
            // Memory only: nothing in a store to shadow, so no negative entry.
            if d.remove(h, name) {
                self.cached_dents.add(-1);
            }
            return;
        }
        // The version grows per key under the name slot the caller holds.
        let sole = sole && ino != 0;
        let (ver, fresh, first_in_epoch) = d.set_next(h, name, ino, node, kind, sole, g.epoch);
        if fresh {
            self.cached_dents.add(1);
        }
        if g.is_null() {
            return;
        }
        let key = schema::entry_key(dir.ino, h, name);
        if ino == 0 {
            g.del(key, ver);
        } else if was_absent && first_in_epoch {
            // Absent now and unchanged since the epoch opened: absent then too
            // (dirty entries are never evicted, so "not cached" means unchanged).
            g.put_new(key, ver, schema::encode_entry(ino, kind, sole));
        } else {
            g.put(key, ver, schema::encode_entry(ino, kind, sole));
        }
    }

    /// A change to a directory's entries made by this operation. Only this
    /// thread's stripe of the directory is touched (its lock is the only
    /// shared write); the committer folds the stripes into the directory's
    /// record when the epoch closes. Fails if the directory was removed.
    pub(super) fn dir_update(
        &self,
        g: &mut Gate<'_>,
        d: &Inode,
        entries: i64,
        subdirs: i64,
        t: Ts,
    ) -> Result<()> {
        let dir = d.dir.as_ref().ok_or(Error::NotDir)?;
        let mut s = dir.stripes[crate::sync::thread_slot() % DIR_STRIPES].lock();
        if s.dead {
            return Err(Error::NotFound);
        }
        s.entries += entries;
        s.subdirs += subdirs;
        if t > s.mtime {
            s.mtime = t;
        }
        s.dirty_epoch = s.dirty_epoch.max(g.epoch);
        drop(s);
        g.mark(d.ino);
        Ok(())
    }

    /// Move a directory's stripe deltas into its attributes. Lock order: the
    /// inode's state (held by the caller), then the stripes in index order.
    pub(super) fn dir_fold(d: &Inode, st: &mut InodeState) {
        let Some(dir) = &d.dir else { return };
        let dirty = Self::add_stripes(dir, &mut st.attr, true);
        st.dirty_epoch = st.dirty_epoch.max(dirty);
    }

    /// Add a directory's stripe deltas to `a` (size, nlink, and the newest
    /// stripe mtime as mtime and ctime: every stripe change is newer than the
    /// last fold or explicit setattr). With `reset`, the stripes are emptied
    /// (a fold). Returns the stripes' highest dirty epoch. The caller holds
    /// the directory's inode lock; stripes are taken in index order.
    pub(super) fn add_stripes(dir: &crate::cache::Dir, a: &mut Attr, reset: bool) -> u64 {
        let mut latest: Option<Ts> = None;
        let mut dirty = 0;
        for s in &dir.stripes {
            let mut s = s.lock();
            a.size = (a.size as i64 + s.entries) as u64;
            a.nlink = (a.nlink as i64 + s.subdirs) as u32;
            if s.mtime != Ts::default() {
                latest = latest.max(Some(s.mtime));
            }
            dirty = dirty.max(s.dirty_epoch);
            if reset {
                s.entries = 0;
                s.subdirs = 0;
                s.mtime = Ts::default();
            }
        }
        if let Some(m) = latest {
            a.mtime = m;
            a.ctime = m;
        }
        dirty
    }

    /// An inode's current attributes; for a directory, with its stripes' deltas.
    pub(super) fn attr_of(&self, i: &Inode) -> Attr {
        let st = i.st.lock();
        let mut a = st.attr;
        if let Some(dir) = &i.dir {
            Self::add_stripes(dir, &mut a, false);
        }
        a
    }

    /// rmdir and rename over a directory: fail unless empty, else mark it
    /// dead in its state and every stripe, all held at once, so no create can
    /// slip in between the check and the mark.
    pub(super) fn dir_kill_if_empty(d: &Inode) -> Result<()> {
        let mut st = d.st.lock();
        let dir = d.dir.as_ref().ok_or(Error::NotDir)?;
        let mut stripes: Vec<_> = dir.stripes.iter().map(|s| s.lock()).collect();
        let total = st.attr.size as i64 + stripes.iter().map(|s| s.entries).sum::<i64>();
        if total != 0 {
            return Err(Error::NotEmpty);
        }
        for s in stripes.iter_mut() {
            s.dead = true;
        }
        st.dead = true;
        Ok(())
    }

    /// The committer's formatter: the current record of every marked inode,
    /// with its stripes folded in (delayed logging, seed 003). Runs while every
    /// gate shard is held, so the state is exactly the closed epoch's.
    pub(super) fn format_marked(&self, inos: &[Ino], epoch: u64) -> Vec<Record> {
        let mut out = Vec::with_capacity(inos.len());
        for &ino in inos {
            let Some(i) = self.inodes.get(ino) else {
                continue;
            };
            let mut st = i.st.lock();
            if st.destroyed {
                continue;
            }
            Self::dir_fold(&i, &mut st);
            Self::bump(&mut st);
            st.dirty_epoch = st.dirty_epoch.max(epoch);
            let (key, ver, val) = Self::inode_record(&st);
            out.push(Record {
                key,
                ver,
                val: Some(val),
                fresh: false,
            });
        }
        out
    }

    pub(super) fn inode_record(st: &InodeState) -> (Vec<u8>, u64, Vec<u8>) {
        let a = &st.attr;
        let blob: Vec<u8>;
        let b: &[u8] = match a.kind {
            Kind::File if a.size <= INLINE_MAX => {
                let mut v = st.blocks.get(&0).cloned().unwrap_or_default();
                v.resize(a.size as usize, 0);
                blob = v;
                &blob
            }
            Kind::File => &[],
            _ => &st.blob,
        };
        // The sole flag promises no data blocks (see `Engine::unshare`).
        debug_assert!(
            st.primary.is_none()
                || (a.kind != Kind::Dir
                    && a.nlink <= 1
                    && (a.kind != Kind::File || a.size <= INLINE_MAX))
        );
        (
            schema::inode_key(a.ino),
            a.version,
            schema::encode_inode(a, b, &st.xattrs, st.primary, st.flags),
        )
    }

    /// Queue the inode record (attributes, inline data or symlink target or
    /// parent pointer, xattrs).
    pub(super) fn emit_inode(&self, g: &mut Gate<'_>, st: &mut InodeState) {
        st.data_epoch = g.epoch;
        self.emit_times(g, st);
    }

    /// `emit_inode` for a change fdatasync need not wait for: times, or
    /// bytes written inside a data object's length (the object's own sync
    /// keeps those).
    pub(super) fn emit_times(&self, g: &mut Gate<'_>, st: &mut InodeState) {
        st.dirty_epoch = g.epoch;
        // A destroyed inode's records are deleted in this or an earlier
        // commit; writing one again would leak an inode no name reaches.
        if g.is_null() || st.destroyed {
            return;
        }
        let (key, ver, val) = Self::inode_record(st);
        g.put(key, ver, val);
    }

    /// The end of a change to one inode's record (nothing else changed):
    /// its version bumped, its record queued in the gate's epoch, the gate
    /// left, then the commit waited for if durability asks it.
    pub(super) fn finish_inode_change(
        &self,
        mut g: Gate<'_>,
        mut st: crate::sync::MutexGuard<'_, InodeState>,
    ) -> Result<()> {
        Self::bump(&mut st);
        self.emit_inode(&mut g, &mut st);
        drop(st);
        self.leave(g)
    }

    /// The end of every mutation: leave the gate (its records are queued in
    /// its epoch), then wait for that epoch's commit if durability asks it.
    /// Waiting with the gate held would stop the epoch from closing.
    pub(super) fn leave(&self, g: Gate<'_>) -> Result<()> {
        let e = g.epoch;
        drop(g);
        self.after_mutation(e)
    }

    pub(super) fn bump(st: &mut InodeState) {
        st.attr.version += 1;
    }
}
