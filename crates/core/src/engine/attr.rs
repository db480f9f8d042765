//! Attributes: setattr (mode, owners, size, times) and access checks.

use super::*;

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
            if sz > MAX_FILE_SIZE {
                return Err(Error::FileTooBig);
            }
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
        // A directory's pending stripe deltas first, so the record is whole.
        Self::dir_fold(&i, &mut st);
        if ctx.check_perms {
            let a = st.attr;
            let owner = ctx.uid == 0 || ctx.uid == a.uid;
            if sa.mode.is_some() && !owner {
                return Err(Error::NotPermitted);
            }
            if let Some(u) = sa.uid {
                if ctx.uid != 0 && u != a.uid {
                    return Err(Error::NotPermitted);
                }
            }
            if let Some(gid) = sa.gid {
                if ctx.uid != 0 && (ctx.uid != a.uid || !ctx.in_group(gid)) && gid != a.gid {
                    return Err(Error::NotPermitted);
                }
            }
            if sa.size.is_some() && !sa.by_handle {
                check_access(ctx, &a, W_OK)?;
            }
            for ts in [sa.atime, sa.mtime].into_iter().flatten() {
                match ts {
                    TimeSet::At(_) if !owner => return Err(Error::NotPermitted),
                    TimeSet::Now if !owner => check_access(ctx, &a, W_OK)?,
                    _ => {}
                }
            }
        }
        if let Some(m) = sa.mode {
            st.attr.perm = (m & 0o7777) as u16;
            // chmod rewrites the access ACL's owner, mask and other entries.
            let perm = st.attr.perm;
            if let Some(x) = st.xattrs.iter_mut().find(|(n, _)| n == acl::ACCESS) {
                let mut a = acl::Acl::decode(&x.1)?;
                a.chmod(perm);
                x.1 = a.encode();
            }
        }
        let chown =
            sa.uid.is_some_and(|u| u != st.attr.uid) || sa.gid.is_some_and(|x| x != st.attr.gid);
        if let Some(u) = sa.uid {
            st.attr.uid = u;
        }
        if let Some(x) = sa.gid {
            st.attr.gid = x;
        }
        if chown
            && sa.mode.is_none()
            && ctx.check_perms
            && ctx.uid != 0
            && st.attr.kind != Kind::Dir
        {
            st.attr.perm &= !0o6000;
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

    /// Change a file's size: drop blocks past the end, zero the tail of the
    /// last block, and move data between inline and block records across INLINE_MAX.
    pub(super) fn resize(&self, g: &mut Gate<'_>, st: &mut InodeState, new: u64) -> Result<()> {
        let old = st.attr.size;
        Self::bump(st);
        if new < old {
            let keep_blocks = new.div_ceil(BLOCK);
            if old > INLINE_MAX {
                if new <= INLINE_MAX {
                    // Going inline: keep block 0's bytes cached (they become the
                    // inline data) only if the new size keeps any of them, then
                    // delete every block record.
                    let b0 = if keep_blocks > 0 {
                        self.load_block(st, 0)?;
                        st.blocks.remove(&0)
                    } else {
                        None
                    };
                    self.delete_blocks_from(g, st, 0)?;
                    // Block 0 may have been taken out of the cache above, so delete its record here.
                    g.del(schema::data_key(st.attr.ino, 0), st.attr.version);
                    if let Some(b) = b0 {
                        st.blocks.insert(0, b);
                    }
                } else {
                    self.delete_blocks_from(g, st, keep_blocks)?;
                }
            }
            // No cached block past the new end may survive: a later growth
            // would write its old bytes back (truncate to 0, then extend).
            let gone: Vec<u64> = st.blocks.range(keep_blocks..).map(|(b, _)| *b).collect();
            for b in gone {
                if let Some(v) = st.blocks.remove(&b) {
                    self.cached_data.add(-(v.len() as i64));
                }
            }
            // Zero the tail of the new last block.
            if !new.is_multiple_of(BLOCK) {
                let lb = new / BLOCK;
                self.load_block(st, lb)?;
                if let Some(b) = st.blocks.get_mut(&lb) {
                    b.truncate((new % BLOCK) as usize);
                }
                if new > INLINE_MAX {
                    if let Some(b) = st.blocks.get(&lb) {
                        g.put(
                            schema::data_key(st.attr.ino, lb),
                            st.attr.version,
                            schema::encode_data(b),
                        );
                    }
                }
            }
            st.attr.size = new;
        } else if new > old {
            // Growing: the bytes past the old size must read as zero.
            if !old.is_multiple_of(BLOCK) {
                let lb = old / BLOCK;
                self.load_block(st, lb)?;
                if let Some(b) = st.blocks.get_mut(&lb) {
                    b.truncate((old % BLOCK) as usize);
                }
            }
            if old <= INLINE_MAX && new > INLINE_MAX {
                if let Some(b) = st.blocks.get(&0) {
                    g.put(
                        schema::data_key(st.attr.ino, 0),
                        st.attr.version,
                        schema::encode_data(b),
                    );
                }
            } else if new > INLINE_MAX && !old.is_multiple_of(BLOCK) {
                let lb = old / BLOCK;
                if let Some(b) = st.blocks.get(&lb) {
                    g.put(
                        schema::data_key(st.attr.ino, lb),
                        st.attr.version,
                        schema::encode_data(b),
                    );
                }
            }
            st.attr.size = new;
        }
        Ok(())
    }

    /// Make block `b` cached if it exists in the store.
    pub(super) fn load_block(&self, st: &mut InodeState, b: u64) -> Result<()> {
        if st.blocks.contains_key(&b)
            || st.blocks_complete
            || b >= st.holes_from
            || self.store.is_null()
        {
            return Ok(());
        }
        if let Some(v) = self
            .store
            .get(&schema::data_key(st.attr.ino, b))
            .map_err(|e| e.about(format_args!("inode {} data block {b}", st.attr.ino)))?
        {
            let d = schema::decode_data(&v)?.to_vec();
            self.cached_data.add(d.len() as i64);
            st.blocks.insert(b, d);
        }
        Ok(())
    }
}
