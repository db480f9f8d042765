//! The data path: open, release, read, write, fallocate, fsync and sync.

use super::*;

impl Engine {
    /// Open a file for I/O: the inode stays alive (even unlinked) until `release`.
    pub fn open_file(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<Attr> {
        let _t = self.stats.start(Op::Open);
        let i = self.inode(ino)?;
        let a = i.st.lock().attr;
        if ctx.check_perms {
            check_access(ctx, &a, mask)?;
        }
        i.opens.fetch_add(1, Ordering::AcqRel);
        Ok(a)
    }

    /// Open a directory for listing: a permission check only (handles carry no state).
    pub fn open_dir(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<()> {
        let i = self.inode(ino)?;
        if i.kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        let a = i.st.lock().attr;
        check_access(ctx, &a, mask)
    }

    /// Close a handle. The last close of an unlinked file reclaims it.
    pub fn release(&self, ino: Ino) -> Result<()> {
        let _t = self.stats.start(Op::Release);
        let i = self.inode(ino)?;
        let prev = i.opens.fetch_sub(1, Ordering::AcqRel);
        if prev == 1 {
            let needs = {
                let st = i.st.lock();
                st.attr.nlink == 0 && !st.destroyed
            };
            if needs {
                let mut g = self.committer.enter()?;
                let mut st = i.st.lock();
                if st.attr.nlink == 0 && !st.destroyed && i.opens.load(Ordering::Acquire) == 0 {
                    Self::bump(&mut st);
                    self.destroy(&mut g, &mut st, true)?;
                }
                drop(st);
                drop(g);
                if i.lookups.load(Ordering::Relaxed) == 0 {
                    self.inodes.remove_if(ino, |x| {
                        x.opens.load(Ordering::Relaxed) == 0
                            && x.lookups.load(Ordering::Relaxed) == 0
                    });
                }
            }
        }
        Ok(())
    }

    pub fn read(&self, ino: Ino, off: u64, size: u32) -> Result<Vec<u8>> {
        let _t = self.stats.start(Op::Read);
        let i = self.inode(ino)?;
        if i.kind == Kind::Dir {
            return Err(Error::IsDir);
        }
        let st = i.st.lock();
        let fsize = st.attr.size;
        if off >= fsize {
            return Ok(Vec::new());
        }
        let end = fsize.min(off + size as u64);
        let mut out = vec![0u8; (end - off) as usize];
        // A block not cached may be in the store (else it is a hole). Read
        // through without caching: the page cache above keeps it.
        let stored = |b: u64| {
            !st.blocks.contains_key(&b)
                && !st.blocks_complete
                && b < st.holes_from
                && !self.store.is_null()
        };
        let (first, last) = (off / BLOCK, (end - 1) / BLOCK);
        // Two or more: one range scan from the first to the last, instead of
        // a point read each (a 128 KiB READ was 32 point reads, each with its
        // own filter probes and index seek; docs/perf-log/10-seed001-both-sizes.md).
        // Found blocks come back in block order; the cursor walks them.
        let wanted = (
            (first..=last).find(|&b| stored(b)),
            (first..=last).rev().find(|&b| stored(b)),
        );
        let scanned = match wanted {
            (Some(a), Some(z)) if a != z => Some(
                self.store
                    .scan(
                        &schema::data_key(ino, a),
                        &schema::data_key(ino, z + 1),
                        (z - a + 1) as usize,
                    )
                    .map_err(|e| e.about(format_args!("inode {ino} data blocks {a}-{z}")))?,
            ),
            _ => None,
        };
        let mut cursor = 0;
        let mut pos = off;
        while pos < end {
            let b = pos / BLOCK;
            let boff = (pos % BLOCK) as usize;
            let n = ((BLOCK as usize - boff) as u64).min(end - pos) as usize;
            let dst = &mut out[(pos - off) as usize..(pos - off) as usize + n];
            if let Some(blk) = st.blocks.get(&b) {
                copy_from_block(blk, boff, dst);
            } else if stored(b) {
                let v = match &scanned {
                    Some(found) => {
                        while cursor < found.len()
                            && schema::parse_data_key(&found[cursor].0)?.1 < b
                        {
                            cursor += 1;
                        }
                        match found.get(cursor) {
                            Some((k, v)) if schema::parse_data_key(k)?.1 == b => {
                                Some(std::borrow::Cow::Borrowed(v.as_slice()))
                            }
                            _ => None,
                        }
                    }
                    None => self
                        .store
                        .get(&schema::data_key(ino, b))
                        .map_err(|e| e.about(format_args!("inode {ino} data block {b}")))?
                        .map(std::borrow::Cow::Owned),
                };
                if let Some(v) = v {
                    copy_from_block(schema::decode_data(&v)?, boff, dst);
                }
            }
            pos += n as u64;
        }
        drop(st);
        self.touch_atime(&i)?;
        Ok(out)
    }

    /// The access time after a read or a listing, per `Config::atime`.
    pub(super) fn touch_atime(&self, i: &Inode) -> Result<()> {
        if self.cfg.atime == Atime::Never || self.cfg.read_only {
            return Ok(());
        }
        let t = now();
        let due = |a: &Attr| match self.cfg.atime {
            Atime::Strict => a.atime != t,
            Atime::Relative => {
                a.atime <= a.mtime || a.atime <= a.ctime || t.sec - a.atime.sec >= 24 * 3600
            }
            Atime::Never => false,
        };
        if !due(&i.st.lock().attr) {
            return Ok(());
        }
        let mut g = self.committer.enter()?;
        let mut st = i.st.lock();
        if st.destroyed || !due(&st.attr) {
            return Ok(());
        }
        Self::dir_fold(i, &mut st);
        st.attr.atime = t;
        Self::bump(&mut st);
        self.emit_inode(&mut g, &mut st);
        Ok(())
    }

    pub fn write(&self, ino: Ino, off: u64, data: &[u8]) -> Result<u32> {
        self.throttle();
        let _t = self.stats.start(Op::Write);
        self.writable()?;
        let i = self.inode(ino)?;
        if i.kind == Kind::Dir {
            return Err(Error::IsDir);
        }
        if data.is_empty() {
            return Ok(0);
        }
        let end = off
            .checked_add(data.len() as u64)
            .ok_or(Error::FileTooBig)?;
        if end > MAX_FILE_SIZE {
            return Err(Error::FileTooBig);
        }
        self.room(RECORD_ROOM + data.len() as u64)?;
        if end > INLINE_MAX {
            self.unshare(&i)?;
        }
        // After `unshare`, which takes and releases a name lock of its own.
        let _bkl = self.names.bkl();
        let mut g = self.committer.enter()?;
        let t = now();
        let mut st = i.st.lock();
        if st.destroyed {
            // Writeback of a file whose last name and handle are gone: its
            // records are deleted, so the data has nowhere to go.
            return Ok(data.len() as u32);
        }
        let old = st.attr.size;
        if end > old {
            self.resize(&mut g, &mut st, end)?;
        }
        Self::bump(&mut st);
        let mut pos = off;
        let mut touched = Vec::new();
        while pos < end {
            let b = pos / BLOCK;
            let boff = (pos % BLOCK) as usize;
            let n = ((BLOCK as usize - boff) as u64).min(end - pos) as usize;
            self.load_block(&mut st, b)?;
            let src = &data[(pos - off) as usize..(pos - off) as usize + n];
            let blk = st.blocks.entry(b).or_default();
            let before = blk.len();
            if blk.len() < boff + n {
                blk.resize(boff + n, 0);
            }
            blk[boff..boff + n].copy_from_slice(src);
            let grew = blk.len() - before;
            self.cached_data.add(grew as i64);
            touched.push(b);
            pos += n as u64;
        }
        st.attr.mtime = t;
        st.attr.ctime = t;
        if st.attr.size > INLINE_MAX {
            for b in touched {
                let v = schema::encode_data(&st.blocks[&b]);
                g.put(schema::data_key(ino, b), st.attr.version, v);
            }
        }
        self.emit_inode(&mut g, &mut st);
        drop(st);
        self.leave(g)?;
        Ok(data.len() as u32)
    }

    /// Clear setuid and setgid before a caller modifies a regular file's
    /// data, as Linux does for every filesystem (`setattr_should_drop_suidgid`):
    /// setuid always, setgid when the file is group-executable or the caller
    /// is not in its group; root (standing in for CAP_FSETID) keeps both.
    /// `groups` gives the caller's supplementary groups and is called only
    /// when the answer depends on them (the FUSE adapter reads them from
    /// /proc). The kernel clears the bits itself only when setgid comes with
    /// group exec (fuse_setattr), so the adapter calls this before writes and
    /// fallocate. Returns whether the mode changed.
    pub fn drop_privileges(
        &self,
        uid: u32,
        gid: u32,
        groups: impl FnOnce() -> Vec<u32>,
        ino: Ino,
    ) -> Result<bool> {
        if uid == 0 {
            return Ok(false);
        }
        let i = self.inode(ino)?;
        if i.kind != Kind::File {
            return Ok(false);
        }
        let (perm, fgid) = {
            let st = i.st.lock();
            (st.attr.perm, st.attr.gid)
        };
        if perm & 0o6000 == 0 {
            return Ok(false);
        }
        let in_group = fgid == gid || (perm & 0o2010 == 0o2000 && groups().contains(&fgid));
        let kill = |perm: u16| {
            let mut k = perm & 0o4000;
            if perm & 0o2000 != 0 && (perm & 0o010 != 0 || !in_group) {
                k |= 0o2000;
            }
            k
        };
        if kill(perm) == 0 {
            return Ok(false);
        }
        self.writable()?;
        let _bkl = self.names.bkl();
        let g = self.committer.enter()?;
        let mut st = i.st.lock();
        let k = kill(st.attr.perm);
        if st.destroyed || k == 0 || st.attr.gid != fgid {
            return Ok(false);
        }
        st.attr.perm &= !k;
        st.attr.ctime = now();
        self.finish_inode_change(g, st)?;
        Ok(true)
    }

    pub fn fallocate(&self, ino: Ino, off: u64, len: u64, mode: u32) -> Result<()> {
        self.writable()?;
        let end = off.checked_add(len).ok_or(Error::FileTooBig)?;
        if len == 0 {
            return Err(Error::Invalid);
        }
        if end > MAX_FILE_SIZE {
            return Err(Error::FileTooBig);
        }
        let i = self.inode(ino)?;
        if i.kind != Kind::File {
            return Err(if i.kind == Kind::Dir {
                Error::IsDir
            } else {
                Error::NotSupported
            });
        }
        let size = i.st.lock().attr.size;
        let keep = mode & FALLOC_KEEP_SIZE != 0;
        match mode & !FALLOC_KEEP_SIZE {
            0 => {
                // Blocks are not reserved ahead (they are written when data
                // is), but a request the disk cannot hold fails now, as on
                // ext4: a program that preallocates relies on ENOSPC here.
                let (_, free) = self.store.space();
                if end.saturating_sub(if keep { 0 } else { size }) > free {
                    return Err(Error::NoSpace);
                }
                if !keep && end > size {
                    self.setattr(
                        &Ctx::root(),
                        ino,
                        &SetAttr {
                            size: Some(end),
                            ..Default::default()
                        },
                    )?;
                }
                Ok(())
            }
            FALLOC_PUNCH_HOLE if keep => self.zero_range(&i, off, end.min(size)),
            FALLOC_ZERO_RANGE => {
                self.zero_range(&i, off, end.min(size))?;
                if !keep && end > size {
                    self.setattr(
                        &Ctx::root(),
                        ino,
                        &SetAttr {
                            size: Some(end),
                            ..Default::default()
                        },
                    )?;
                }
                Ok(())
            }
            _ => Err(Error::NotSupported),
        }
    }

    /// Make `off..end` (within the size) read as zeros: whole blocks are
    /// deleted (they become holes and free their space), partial ones
    /// are written with zeros.
    pub(super) fn zero_range(&self, i: &Inode, off: u64, end: u64) -> Result<()> {
        if off >= end {
            return Ok(());
        }
        let (first_whole, end_whole) = (off.div_ceil(BLOCK), end / BLOCK);
        let inline = i.st.lock().attr.size <= INLINE_MAX;
        if inline || first_whole >= end_whole {
            return self
                .write(i.ino, off, &vec![0u8; (end - off) as usize])
                .map(|_| ());
        }
        if off < first_whole * BLOCK {
            self.write(i.ino, off, &vec![0u8; (first_whole * BLOCK - off) as usize])?;
        }
        if end > end_whole * BLOCK {
            self.write(
                i.ino,
                end_whole * BLOCK,
                &vec![0u8; (end - end_whole * BLOCK) as usize],
            )?;
        }
        let _bkl = self.names.bkl();
        let mut g = self.committer.enter()?;
        let mut st = i.st.lock();
        if st.destroyed || st.attr.size <= INLINE_MAX {
            return Ok(());
        }
        Self::bump(&mut st);
        let ver = st.attr.version;
        for b in first_whole..end_whole {
            g.del(schema::data_key(i.ino, b), ver);
            // An empty cached block is a hole the store must not be asked
            // about until this delete is committed (reclaim drops it then).
            if let Some(v) = st.blocks.insert(b, Vec::new()) {
                self.cached_data.add(-(v.len() as i64));
            }
        }
        let t = now();
        st.attr.mtime = t;
        st.attr.ctime = t;
        self.emit_inode(&mut g, &mut st);
        drop(st);
        self.leave(g)
    }

    /// Wait until every change to `ino`, and every operation acknowledged
    /// before this call, is durable. fsync is a barrier for the whole history
    /// before it (a stronger promise than POSIX's, and free with group commit:
    /// it is the same commit).
    pub fn fsync(&self, ino: Ino) -> Result<()> {
        let _t = self.stats.start(Op::Fsync);
        let _ = ino;
        self.committer.sync_all()
    }

    /// syncfs / sync: everything so far.
    pub fn sync(&self) -> Result<()> {
        self.committer.sync_all()
    }
}
