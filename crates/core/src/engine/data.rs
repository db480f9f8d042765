//! The data path: open, release, read, write, fallocate, fsync and sync.
//! A file of at most INLINE_MAX bytes keeps them in its inode record (and
//! in the cache as block 0); past that they are in its data object
//! (`crate::data`), written in place.

use super::*;
use crate::data;

/// The file's bytes are in its data object, not inline: past INLINE_MAX,
/// or at any size while passthrough handles are open.
pub(super) fn is_ext(st: &InodeState) -> bool {
    st.attr.kind == Kind::File && (st.attr.size > INLINE_MAX || st.pinned > 0)
}

impl Engine {
    /// Open a file for I/O: the inode stays alive (even unlinked) until `release`.
    /// `mask`: the access wanted (R_OK, W_OK), with `OPEN_APPEND` and
    /// `OPEN_TRUNC` for those open flags (checked against the file's flags).
    pub fn open_file(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<Attr> {
        let _t = self.stats.start(Op::Open);
        let i = self.inode(ino)?;
        let a = i.st.lock().attr;
        if ctx.check_perms {
            check_access(ctx, &a, mask & (R_OK | W_OK | X_OK))?;
        }
        // may_open's rules for immutable and append-only files.
        rules::flags::may_open(
            i.flags.load(Ordering::Relaxed),
            mask & W_OK != 0,
            mask & OPEN_APPEND != 0,
            mask & OPEN_TRUNC != 0,
        )?;
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
        if is_ext(&st) {
            // The object's bytes past its end (or of no object) read as
            // zeros: `out` is zeroed. Read under the inode's lock, so a
            // concurrent truncate cannot cut the object between the size
            // read above and the bytes read here.
            self.data
                .read(ino, off, &mut out)
                .map_err(|e| data::about(e, ino))?;
        } else if let Some(blk) = st.blocks.get(&0) {
            copy_from_block(blk, off as usize, &mut out);
        }
        drop(st);
        self.touch_atime(&i)?;
        Ok(out)
    }

    /// Move an inline file's bytes into its data object: the file grows
    /// past INLINE_MAX. The object is cut first: it may hold bytes from an
    /// earlier time the file was this large (a shrink keeps the object,
    /// emptied) or from writes a crash lost the size of.
    ///
    /// On ext4 the cut has a second effect, measured and kept: a file
    /// truncated to 0 is written back when it is closed (auto_da_alloc),
    /// so an untar's objects reach the disk as the object cache closes
    /// them rather than all at once later. Skipping the cut when the object
    /// is empty made the tree's untar 10-25% slower (docs/perf-log/23-...,
    /// addendum 2).
    pub(super) fn externalize(&self, st: &mut InodeState) -> Result<()> {
        let ino = st.attr.ino;
        st.object = true;
        let mut bytes = st.blocks.remove(&0).unwrap_or_default();
        self.cached_data.add(-(bytes.len() as i64));
        st.blocks.clear();
        bytes.truncate(st.attr.size as usize);
        self.data.set_len(ino, 0).map_err(|e| data::about(e, ino))?;
        if !bytes.is_empty() {
            self.data
                .write(ino, 0, &bytes)
                .map_err(|e| data::about(e, ino))?;
        }
        Ok(())
    }

    /// The access time after a read or a listing, per `Config::atime`.
    pub(super) fn touch_atime(&self, i: &Inode) -> Result<()> {
        // After a store failure reads go on without access times, as on a
        // read-only mount (XFS after a shutdown fails them; ext4 after
        // errors=remount-ro reads on).
        if self.cfg.atime == Atime::Never
            || self.cfg.read_only
            || self.committer.is_poisoned()
            || i.flags.load(Ordering::Relaxed) & flags::NOATIME != 0
        {
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
        self.write_as(ino, off, data, false)
    }

    /// The kernel's writeback of pages it cached (FUSE's writeback cache):
    /// accepted before any chattr +i since (the kernel cannot know the
    /// flag), so written whatever the flags now, as ext4 writes back pages
    /// dirtied before the flag was set. Only opens are refused after it.
    pub fn write_back(&self, ino: Ino, off: u64, data: &[u8]) -> Result<u32> {
        self.write_as(ino, off, data, true)
    }

    fn write_as(&self, ino: Ino, off: u64, data: &[u8], cached: bool) -> Result<u32> {
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
        // Through a handle opened before chattr +i too (as Linux since 5.3).
        if !cached && flags::immutable(&i) {
            return Err(Error::NotPermitted);
        }
        let end = off
            .checked_add(data.len() as u64)
            .ok_or(Error::FileTooBig)?;
        rules::link::check_size(end)?;
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
        let size0 = st.attr.size;
        self.take_pinned_size(&mut st)?;
        let old = st.attr.size;
        if end > old {
            self.resize(&mut g, &mut st, end)?;
        }
        // Bytes written inside a data object's length, nothing else.
        let in_object = is_ext(&st) && end <= size0 && old == size0 && size0 > INLINE_MAX;
        Self::bump(&mut st);
        let sync_each = self.cfg.durability == Durability::SyncEach;
        let to_object = is_ext(&st);
        if to_object {
            self.data
                .write(ino, off, data)
                .map_err(|e| data::about(e, ino))?;
            if !sync_each {
                self.data_written(ino);
            }
            if st.attr.size <= INLINE_MAX {
                // Pinned and small: the record carries the bytes too.
                self.copy_inline(&mut st)?;
            }
        } else {
            // Inline: block 0 holds the file (end <= INLINE_MAX).
            let blk = st.blocks.entry(0).or_default();
            let before = blk.len();
            if blk.len() < end as usize {
                blk.resize(end as usize, 0);
            }
            blk[off as usize..end as usize].copy_from_slice(data);
            let grew = blk.len() - before;
            self.cached_data.add(grew as i64);
        }
        st.attr.mtime = t;
        st.attr.ctime = t;
        if in_object {
            self.emit_times(&mut g, &mut st);
        } else {
            self.emit_inode(&mut g, &mut st);
        }
        drop(st);
        let e = g.epoch;
        drop(g);
        if sync_each {
            // Durable as O_DSYNC makes a write (and as ext4 mounted `sync`
            // does): the bytes, and the size when it grew, not the times.
            // The commit and the object's flush run at once, as in fsync.
            if !in_object {
                self.committer.kick();
            }
            if to_object {
                self.sync_object(ino)?;
            }
            if !in_object {
                self.committer.wait(e)?;
            }
        }
        Ok(data.len() as u32)
    }

    /// Clear setuid and setgid before a caller modifies a regular file's
    /// data, as Linux does for every filesystem (`rules::privs::write_kills`).
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
        let (perm, fgid) = {
            let st = i.st.lock();
            (st.attr.perm, st.attr.gid)
        };
        // Whether the caller is in the file's group, asked once, and only
        // if the rule asks (normally here, before any lock is taken).
        let mut in_group = rules::privs::caller_in_group(gid, groups);
        if rules::privs::write_kills(uid, i.kind, perm, fgid, &mut in_group) == 0 {
            return Ok(false);
        }
        self.writable()?;
        let _bkl = self.names.bkl();
        let g = self.committer.enter()?;
        let mut st = i.st.lock();
        let k = rules::privs::write_kills(uid, i.kind, st.attr.perm, fgid, &mut in_group);
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
        rules::link::check_size(end)?;
        let i = self.inode(ino)?;
        if i.kind != Kind::File {
            return Err(if i.kind == Kind::Dir {
                Error::IsDir
            } else {
                Error::NotSupported
            });
        }
        rules::flags::may_fallocate(
            i.flags.load(Ordering::Relaxed),
            mode & !FALLOC_KEEP_SIZE == 0,
        )?;
        let size = {
            let mut st = i.st.lock();
            self.take_pinned_size(&mut st)?;
            st.attr.size
        };
        let keep = mode & FALLOC_KEEP_SIZE != 0;
        // Without KEEP_SIZE a range past the end makes the file that long.
        let grow = || -> Result<()> {
            if !keep && end > size {
                let sa = SetAttr {
                    size: Some(end),
                    ..Default::default()
                };
                self.setattr(&Ctx::root(), ino, &sa)?;
            }
            Ok(())
        };
        match mode & !FALLOC_KEEP_SIZE {
            0 => {
                // A request the disk cannot hold fails now, as on ext4: a
                // program that preallocates relies on ENOSPC here. A file
                // in its data object gets the space reserved there too.
                let (_, free) = self.store.space();
                if end.saturating_sub(if keep { 0 } else { size }) > free {
                    return Err(Error::NoSpace);
                }
                grow()?;
                let st = i.st.lock();
                if is_ext(&st) && !st.destroyed {
                    self.data
                        .allocate(ino, off, len)
                        .map_err(|e| data::about(e, ino))?;
                }
                Ok(())
            }
            FALLOC_PUNCH_HOLE if keep => self.zero_range(&i, off, end.min(size)),
            FALLOC_ZERO_RANGE => {
                self.zero_range(&i, off, end.min(size))?;
                grow()
            }
            _ => Err(Error::NotSupported),
        }
    }

    /// Make `off..end` (within the size) read as zeros: punched in the data
    /// object (its space freed where the filesystem can), zeros written
    /// into an inline file.
    pub(super) fn zero_range(&self, i: &Inode, off: u64, end: u64) -> Result<()> {
        if off >= end {
            return Ok(());
        }
        if i.st.lock().attr.size <= INLINE_MAX {
            return self
                .write(i.ino, off, &vec![0u8; (end - off) as usize])
                .map(|_| ());
        }
        let _bkl = self.names.bkl();
        let mut g = self.committer.enter()?;
        let mut st = i.st.lock();
        if st.destroyed {
            return Ok(());
        }
        self.take_pinned_size(&mut st)?;
        if !is_ext(&st) {
            // Shrunk to inline meanwhile.
            drop(st);
            drop(g);
            return self.zero_range(i, off, end.min(INLINE_MAX));
        }
        let end = end.min(st.attr.size);
        if off < end {
            self.data
                .punch(i.ino, off, end - off)
                .map_err(|e| data::about(e, i.ino))?;
            self.data_written(i.ino);
        }
        Self::bump(&mut st);
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
        // The commit and the file's bytes are flushed at once: the committer
        // writes the journal while this thread syncs the data object, and
        // the block layer merges the two flushes. Neither is acknowledged
        // before both are done (the crash argument: docs/design.md, "File data").
        self.committer.kick();
        self.sync_if_dirty(ino)?;
        self.sync_commits()
    }

    /// fdatasync: `ino`'s bytes durable, and of its metadata what reading
    /// them back needs (its size, its existence and name when new), not its
    /// times; like ext4, which waits for the inode's `i_datasync_tid`. A
    /// database overwriting pages inside its file's length, syncing after
    /// each transaction, then costs one flush of the object and no commit.
    pub fn fdatasync(&self, ino: Ino) -> Result<()> {
        let _t = self.stats.start(Op::Fsync);
        let i = self.inode(ino)?;
        let e = i.st.lock().data_epoch;
        let commit = e > self.committer.durable_epoch()
            || self.cfg.durability == Durability::Buffered
            || self.committer.is_poisoned();
        if commit {
            self.committer.kick();
        }
        self.sync_if_dirty(ino)?;
        if !commit {
            return Ok(());
        }
        if self.cfg.durability == Durability::Buffered {
            return self.sync_commits();
        }
        self.committer.wait(e)
    }

    /// Make every commit durable; under Buffered durability that is when
    /// the data objects of inodes deleted so far can go.
    fn sync_commits(&self) -> Result<()> {
        let e = self.committer.epoch();
        self.committer.sync_all()?;
        if self.cfg.durability == Durability::Buffered {
            self.remove_doomed(e);
        }
        Ok(())
    }

    /// Note that `ino`'s data object has bytes not yet synced.
    pub(super) fn data_written(&self, ino: Ino) {
        let mut d = self.dirty_data[ino as usize % 16].lock();
        if !d.contains(&ino) {
            d.insert(ino);
        }
    }

    /// Sync `ino`'s data object if it has bytes not yet synced.
    fn sync_if_dirty(&self, ino: Ino) -> Result<()> {
        if self.dirty_data[ino as usize % 16].lock().remove(&ino) {
            if let Err(e) = self.sync_object(ino) {
                // Still dirty: a later fsync must not succeed without a
                // sync that did (the fsyncgate lesson).
                self.dirty_data[ino as usize % 16].lock().insert(ino);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Sync `ino`'s data object. A failure other than a full disk shuts
    /// the filesystem down, as a failed commit does: the kernel may have
    /// dropped the pages it could not write, so nothing after can promise
    /// they are there.
    fn sync_object(&self, ino: Ino) -> Result<()> {
        self.data.sync(ino).map_err(|e| {
            let e = data::about(e, ino);
            if e != Error::NoSpace {
                self.committer.fail(format!("syncing a data object: {e}"));
            }
            e
        })
    }

    /// The file the kernel can read and write `ino`'s bytes through (FUSE
    /// passthrough), when they are in a data object the store can hand out
    /// as a file; the caller holds it until `unpin_data`. Meanwhile the bytes
    /// stay in the object even if a truncate makes the file small. The
    /// object is made its file's length first (a file moved from format 2,
    /// or grown by a truncate, may have none or a shorter one, and a
    /// passthrough read must not end before the file does).
    pub fn pin_data(&self, ino: Ino) -> Result<Option<std::sync::Arc<std::fs::File>>> {
        let i = self.inode(ino)?;
        let mut st = i.st.lock();
        if !is_ext(&st) || st.destroyed {
            return Ok(None);
        }
        let err = |e| data::about(e, ino);
        if self.data.len(ino).map_err(err)? < st.attr.size && !self.cfg.read_only {
            self.data.set_len(ino, st.attr.size).map_err(err)?;
        }
        let f = self.data.backing_file(ino);
        if f.is_some() {
            st.pinned += 1;
        }
        Ok(f)
    }

    /// `pin_data` for a client's open (docs/client.md, "File data"), at
    /// every size: a file whose bytes are inline has them copied into its
    /// data object first, so that the descriptor handed out is the file.
    /// The record keeps carrying the bytes while the file is small (as for
    /// a pinned file a truncate made small); `unpin_data` empties the
    /// object again. None for anything but a regular file, an unlinked and
    /// closed one, or one on a read-only mount that has no object.
    pub fn pin_object(&self, ino: Ino) -> Result<Option<std::sync::Arc<std::fs::File>>> {
        let i = self.inode(ino)?;
        let mut st = i.st.lock();
        if st.destroyed || st.attr.kind != Kind::File {
            return Ok(None);
        }
        if !is_ext(&st) {
            if self.cfg.read_only {
                return Ok(None);
            }
            let err = |e| data::about(e, ino);
            let size = st.attr.size as usize;
            let mut bytes = st.blocks.get(&0).cloned().unwrap_or_default();
            bytes.resize(size, 0);
            st.object = true;
            // Cut first: the object may hold bytes of an earlier, larger
            // file. Not when it is empty (a new one): ext4 journals a
            // truncate even then, 7% of the daemon's time under the shim's
            // crunl (perf, 2026-11-29). `externalize` cuts always, for
            // ext4's write-back at close (its comment).
            if self.data.len(ino).map_err(err)? != 0 {
                self.data.set_len(ino, 0).map_err(err)?;
            } else {
                // Makes it if missing (a write of nothing).
                self.data.write(ino, 0, &[]).map_err(err)?;
            }
            if !bytes.is_empty() {
                self.data.write(ino, 0, &bytes).map_err(err)?;
            }
        }
        // Under the same lock as the copy: no write lands inline between
        // the copy and the pin that sends writes to the object.
        let err = |e| data::about(e, ino);
        if self.data.len(ino).map_err(err)? < st.attr.size && !self.cfg.read_only {
            self.data.set_len(ino, st.attr.size).map_err(err)?;
        }
        let f = self.data.backing_file(ino);
        if f.is_some() {
            st.pinned += 1;
        }
        Ok(f)
    }

    /// A passthrough handle closed. When it was the last and the file is at
    /// most INLINE_MAX now, its bytes go back into the inode record.
    pub fn unpin_data(&self, ino: Ino) -> Result<()> {
        let i = self.inode(ino)?;
        let _bkl = self.names.bkl();
        let mut g = self.committer.enter()?;
        let mut st = i.st.lock();
        st.pinned = st.pinned.saturating_sub(1);
        if st.pinned > 0 || st.destroyed || st.attr.kind != Kind::File {
            return Ok(());
        }
        if st.attr.size <= INLINE_MAX {
            self.take_inline(&mut st)?;
            Self::bump(&mut st);
            self.emit_inode(&mut g, &mut st);
        }
        drop(st);
        self.leave(g)
    }

    /// While passthrough handles are open the kernel extends the object
    /// without the daemon: before a size is decided from the inode's, take
    /// the object's when it is longer (a fallocate or a truncate up would
    /// otherwise cut what the kernel wrote).
    pub(super) fn take_pinned_size(&self, st: &mut InodeState) -> Result<()> {
        if st.pinned > 0 && st.attr.kind == Kind::File {
            let ino = st.attr.ino;
            let len = self.data.len(ino).map_err(|e| data::about(e, ino))?;
            if len > st.attr.size {
                st.attr.size = len;
            }
        }
        Ok(())
    }

    /// Read a small file's bytes (at most INLINE_MAX) out of its data object
    /// into block 0, which the inode record carries.
    pub(super) fn copy_inline(&self, st: &mut InodeState) -> Result<()> {
        let ino = st.attr.ino;
        let mut b = vec![0u8; st.attr.size as usize];
        self.data
            .read(ino, 0, &mut b)
            .map_err(|e| data::about(e, ino))?;
        if let Some(old) = st.blocks.insert(0, b) {
            self.cached_data.add(-(old.len() as i64));
        }
        self.cached_data.add(st.attr.size as i64);
        Ok(())
    }

    /// `copy_inline`, then empty the object: the file is inline again.
    pub(super) fn take_inline(&self, st: &mut InodeState) -> Result<()> {
        self.copy_inline(st)?;
        let ino = st.attr.ino;
        let err = |e| data::about(e, ino);
        // An empty object stays as it is (no journalled truncate: above).
        if st.attr.size == 0 && self.data.len(ino).map_err(err)? == 0 {
            return Ok(());
        }
        self.data.set_len(ino, 0).map_err(err)
    }

    /// Take into the inode what the kernel changed writing through the
    /// backing file: the size, and the modification time when the object's
    /// differs from `seen` (the object's time at the last call, which this
    /// updates). Called for files with passthrough handles before their
    /// attributes are answered, and when a handle closes or syncs.
    ///
    /// `writer`: a handle that can write through the backing file is, or
    /// was until now, open. The object is then noted as unsynced even when
    /// its length and time are unchanged: a write within one tick of a
    /// coarse clock changes neither (kernels without multigrain timestamps,
    /// 6.9-6.12 among those with passthrough), and the next fsync or sync
    /// must still reach its bytes.
    pub fn refresh_from_data(&self, ino: Ino, seen: &mut Option<Ts>, writer: bool) -> Result<()> {
        let i = self.inode(ino)?;
        let Some((len, mtime)) = self.data.modified(ino).map_err(|e| data::about(e, ino))? else {
            return Ok(());
        };
        let written = seen.is_some_and(|s| s != mtime);
        *seen = Some(mtime);
        {
            let st = i.st.lock();
            if !is_ext(&st) || st.destroyed {
                return Ok(());
            }
            if len == st.attr.size && !written {
                // Nothing to take in, but a writer may still have written
                // inside the object without changing its time.
                drop(st);
                if writer {
                    self.data_written(ino);
                }
                return Ok(());
            }
        }
        let _bkl = self.names.bkl();
        let mut g = self.committer.enter()?;
        let mut st = i.st.lock();
        if !is_ext(&st) || st.destroyed {
            return Ok(());
        }
        let grew = len > st.attr.size;
        if grew {
            st.attr.size = len;
        }
        // Shorter while pinned: a holder of the object's descriptor (a
        // client through the shim) cut it, since `resize` keeps a pinned
        // object as long as the file. Its length is read again under the
        // inode's lock, which a resize holds: one between the first read
        // and here moved both, and nothing is taken then.
        let shrunk = !grew && st.pinned > 0 && {
            let now = self.data.len(ino).map_err(|e| data::about(e, ino))?;
            let cut = now < st.attr.size;
            if cut {
                st.attr.size = now;
            }
            cut
        };
        if written {
            st.attr.mtime = mtime;
            st.attr.ctime = mtime;
        }
        let small = st.attr.size <= INLINE_MAX;
        if small {
            // Small while pinned: the record carries the bytes (a commit
            // after this, an fsync's, must hold what the kernel wrote).
            self.copy_inline(&mut st)?;
        }
        Self::bump(&mut st);
        self.data_written(ino);
        if grew || shrunk || small {
            self.emit_inode(&mut g, &mut st);
        } else {
            self.emit_times(&mut g, &mut st);
        }
        drop(st);
        self.leave(g)
    }

    /// SEEK_DATA (`data`) or SEEK_HOLE from `off`: holes are the data
    /// object's (an inline file is all data).
    pub fn seek(&self, ino: Ino, off: u64, data: bool) -> Result<u64> {
        let i = self.inode(ino)?;
        if i.kind == Kind::Dir {
            return Err(Error::IsDir);
        }
        let st = i.st.lock();
        let size = st.attr.size;
        if off >= size {
            return Err(Error::PastEnd);
        }
        if !is_ext(&st) {
            return Ok(if data { off } else { size });
        }
        match self
            .data
            .seek(ino, off, data)
            .map_err(|e| data::about(e, ino))?
        {
            Some(x) if x < size => Ok(x),
            _ if data => Err(Error::PastEnd),
            _ => Ok(size),
        }
    }

    /// Bytes the file takes on disk (st_blocks * 512): its data object's
    /// allocation, or its size rounded up for an inline file.
    pub fn allocated(&self, a: &Attr) -> u64 {
        if a.kind == Kind::File && a.size > INLINE_MAX {
            if let Ok(n) = self.data.allocated(a.ino) {
                return n;
            }
        }
        a.blocks() * 512
    }

    /// `ino` was destroyed in `epoch`: its data object goes once that is
    /// durable; at once in memory only (no commit would ever remove it,
    /// and the queue grew by every unlink).
    pub(super) fn doom_data(&self, ino: Ino, epoch: u64) {
        if self.store.is_null() {
            self.remove_object(ino);
            return;
        }
        self.doomed[(ino as usize) % self.doomed.len()]
            .lock()
            .push((ino, epoch));
    }

    /// Remove the data objects of inodes whose deletion is durable
    /// (called after each commit).
    pub(super) fn remove_doomed(&self, durable: u64) {
        let mut due = Vec::new();
        for d in &self.doomed {
            let mut d = d.lock();
            if d.is_empty() {
                continue;
            }
            d.retain(|&(ino, e)| {
                let now = e <= durable;
                if now {
                    due.push(ino);
                }
                !now
            });
        }
        for ino in due {
            self.remove_object(ino);
        }
    }

    /// Remove `ino`'s data object; one that cannot be is left as an orphan
    /// (the next mount's sweep, or fsck --repair, removes it).
    fn remove_object(&self, ino: Ino) {
        if let Err(e) = self.data.remove(ino) {
            tracing::warn!("{}", data::about(e, ino));
        }
    }

    /// Format 1 and 2 kept file data in `K_DATA` records, one per 4 KiB
    /// block: move them into data objects, a chunk of records at a time.
    /// Each chunk's objects are synced before its records are deleted, so a
    /// crash part way loses nothing and the next open goes on where this
    /// stopped (writing a block again is harmless). Then every moved
    /// object's length is set to its file's size.
    pub(super) fn move_data_records(store: &dyn Store) -> Result<()> {
        let data = store.data();
        let (mut lo, hi) = schema::data_records();
        let mut moved = std::collections::BTreeSet::new();
        loop {
            let got = store.scan(&lo, &hi, 4096)?;
            let Some((last, _)) = got.last() else { break };
            lo = last.clone();
            lo.push(0);
            let mut inos = std::collections::BTreeSet::new();
            for (k, v) in &got {
                let (ino, blk) = schema::parse_data_key(k)?;
                data.write(ino, blk * BLOCK, schema::decode_data(v)?)
                    .map_err(|e| data::about(e, ino))?;
                inos.insert(ino);
            }
            for &ino in &inos {
                data.sync(ino).map_err(|e| data::about(e, ino))?;
            }
            let dels: Vec<_> = got.into_iter().map(|(k, _)| (k, None)).collect();
            store.write(&dels, true)?;
            moved.extend(inos);
        }
        for ino in moved {
            if let Some(v) = store.get(&schema::inode_key(ino))? {
                let (a, _) = schema::decode_inode(ino, &v)?;
                data.set_len(ino, a.size).map_err(|e| data::about(e, ino))?;
                data.sync(ino).map_err(|e| data::about(e, ino))?;
            }
        }
        Ok(())
    }

    /// At mount: remove data objects no inode uses (a crash between an
    /// inode's deletion and its object's removal), and cut objects longer
    /// than their file (bytes written before a crash lost the size that
    /// covered them), so bytes past a file's end never come back.
    pub(super) fn sweep_data(&self) -> Result<()> {
        for ino in self.data.list()? {
            let keep = match self.store.get(&schema::inode_key(ino))? {
                Some(v) => {
                    let (a, _) = schema::decode_inode(ino, &v)?;
                    (a.kind == Kind::File).then_some(a.size)
                }
                None => None,
            };
            let err = |e| data::about(e, ino);
            match keep {
                None => self.data.remove(ino).map_err(err)?,
                Some(size) => {
                    let want = if size > INLINE_MAX { size } else { 0 };
                    if self.data.len(ino).map_err(err)? != want {
                        self.data.set_len(ino, want).map_err(err)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// syncfs / sync: everything so far, file data included.
    pub fn sync(&self) -> Result<()> {
        for shard in &self.dirty_data {
            let inos: Vec<Ino> = shard.lock().drain().collect();
            for ino in inos {
                self.sync_object(ino)?;
            }
        }
        self.sync_commits()
    }
}
