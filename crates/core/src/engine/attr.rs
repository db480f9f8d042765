//! Attributes: setattr (mode, owners, size, times) and access checks.

use super::*;
use crate::data;

impl Engine {
    pub fn setattr(&self, ctx: &Ctx, ino: Ino, sa: &SetAttr) -> Result<Attr> {
        self.throttle();
        let _t = self.stats.start(Op::Setattr);
        self.writable()?;
        let i = self.inode(ino)?;
        if sa.size.is_some() {
            match i.kind {
                Kind::Dir => return Err(Error::IsDir),
                Kind::File => {}
                _ => return Err(Error::Invalid),
            }
        }
        if let Some(sz) = sa.size {
            rules::link::check_size(sz)?;
            if sz > INLINE_MAX {
                self.unshare(&i)?;
            }
        }
        // After `unshare`, which takes and releases a name lock of its own.
        let _bkl = self.names.bkl();
        let mut g = self.committer.enter()?;
        let t = now();
        let mut st = i.st.lock();
        if st.destroyed {
            // Its last name and last handle are gone (the kernel may still
            // send a SETATTR, e.g. the writeback cache flushing times after
            // an unlink): nothing is left to change.
            return Ok(st.attr);
        }
        // Immutable: nothing changes; append-only: only times, to now
        // (notify_change's and do_truncate's rules, for every caller).
        rules::flags::may_setattr(i.flags.load(Ordering::Relaxed), sa)?;
        // A directory's pending stripe deltas first, so the record is whole.
        Self::dir_fold(&i, &mut st);
        let before = st.attr;
        rules::perm::may_setattr(ctx, &before, sa)?;
        if let Some(m) = sa.mode {
            st.attr.perm = rules::perm::chmod_perm(ctx, &before, (m & 0o7777) as u16);
            // chmod rewrites the access ACL's owner, mask and other entries.
            let perm = st.attr.perm;
            acl::chmod(&mut st.xattrs, perm)?;
        } else if sa.uid.is_some() || sa.gid.is_some() {
            // A chown with no mode of the caller's clears setuid/setgid as
            // Linux's does (the caller's groups decide setgid: the adapter
            // passes them for a chown).
            st.attr.perm = rules::privs::chown_perm(ctx, &before);
        }
        if let Some(u) = sa.uid {
            st.attr.uid = u;
        }
        if let Some(x) = sa.gid {
            st.attr.gid = x;
        }
        if let Some(sz) = sa.size {
            // truncate(2) updates mtime and ctime even when the size is unchanged.
            self.resize(&mut g, &mut st, sz)?;
            st.attr.mtime = t;
        }
        match sa.atime {
            Some(TimeSet::Now) => st.attr.atime = t,
            Some(TimeSet::At(x)) => st.attr.atime = x,
            None => {}
        }
        match sa.mtime {
            Some(TimeSet::Now) => st.attr.mtime = t,
            Some(TimeSet::At(x)) => st.attr.mtime = x,
            None => {}
        }
        st.attr.ctime = sa.ctime.unwrap_or(t);
        Self::bump(&mut st);
        self.emit_inode(&mut g, &mut st);
        let a = st.attr;
        if let Some(dir) = &i.dir {
            dir.gid.store(a.gid, Ordering::Relaxed);
            dir.sgid.store(a.perm & 0o2000 != 0, Ordering::Relaxed);
        }
        drop(st);
        self.leave(g)?;
        Ok(a)
    }

    /// Change a file's size. Inline (at most INLINE_MAX) the bytes are
    /// block 0 of the cache and go to the inode record; past it the data
    /// object's length is kept equal to the size (FUSE passthrough reads
    /// the object directly, so a shorter object would end the file early).
    /// Crossing INLINE_MAX moves the bytes between the two; a shrink keeps
    /// the object, emptied, until the inode is destroyed.
    pub(super) fn resize(&self, g: &mut Gate<'_>, st: &mut InodeState, new: u64) -> Result<()> {
        let _ = g;
        self.take_pinned_size(st)?;
        let old = st.attr.size;
        let ino = st.attr.ino;
        Self::bump(st);
        if st.attr.kind != Kind::File {
            st.attr.size = new;
            return Ok(());
        }
        let err = |e| data::about(e, ino);
        // Pinned (passthrough handles open), the bytes stay in the object.
        let pinned = st.pinned > 0;
        let (was, will) = (old > INLINE_MAX || pinned, new > INLINE_MAX || pinned);
        if was || will {
            self.data_written(ino);
        }
        match (was, will) {
            (true, true) => self.data.set_len(ino, new).map_err(err)?,
            (false, true) => {
                self.externalize(st)?;
                self.data.set_len(ino, new).map_err(err)?;
            }
            (true, false) => {
                let mut b = vec![0u8; new as usize];
                self.data.read(ino, 0, &mut b).map_err(err)?;
                self.data.set_len(ino, 0).map_err(err)?;
                if !b.is_empty() {
                    self.cached_data.add(b.len() as i64);
                    st.blocks.insert(0, b);
                }
            }
            (false, false) => {
                // Shrinking cuts block 0; growing, the bytes past the old
                // size must read as zero, so nothing past it may stay.
                if let Some(b) = st.blocks.get_mut(&0) {
                    let keep = new.min(old) as usize;
                    if b.len() > keep {
                        self.cached_data.add(-((b.len() - keep) as i64));
                        b.truncate(keep);
                    }
                }
            }
        }
        st.attr.size = new;
        if pinned && new <= INLINE_MAX {
            // The record carries a small file's bytes, pinned or not.
            self.copy_inline(st)?;
        }
        Ok(())
    }
}
