//! Extended attributes, POSIX ACLs among them (kept in step with the mode, `acl.rs`).

use super::*;

impl Engine {
    pub fn setxattr(
        &self,
        ctx: &Ctx,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        flags: u32,
    ) -> Result<()> {
        let _t = self.stats.start(Op::Xattr);
        self.writable()?;
        rules::xattr::check_name(ctx, name)?;
        rules::xattr::check_value(value)?;
        self.room(RECORD_ROOM + (name.len() + value.len()) as u64)?;
        let i = self.inode(ino)?;
        let is_default = name == acl::DEFAULT;
        let acl = if name == acl::ACCESS || is_default {
            Some(acl::Acl::decode(value)?)
        } else {
            None
        };
        if flags::pinned(&i) {
            return Err(Error::NotPermitted);
        }
        let g = self.committer.enter()?;
        let mut st = i.st.lock();
        if st.destroyed {
            return Ok(());
        }
        // Under the state lock, on the attributes it changes.
        rules::xattr::may_access(ctx, &st.attr, name, true)?;
        // An access ACL sets the mode's permission bits; one the mode alone
        // expresses is not stored, and an empty default ACL removes it.
        let mut remove = false;
        if let Some(a) = &acl {
            let keeps_setgid = rules::perm::in_group_or_root(ctx, st.attr.gid);
            match acl::set(name, a, i.kind, &mut st.attr.perm, keeps_setgid)? {
                None => return Ok(()),
                Some(r) => remove = r,
            }
        }
        let pos = st.xattrs.iter().position(|(n, _)| n == name);
        match (pos, flags) {
            (Some(_), XATTR_CREATE) => return Err(Error::Exists),
            (None, XATTR_REPLACE) => return Err(Error::NoAttr),
            (Some(p), _) if remove => {
                st.xattrs.remove(p);
            }
            (None, _) if remove => {}
            (pos, _) => {
                rules::xattr::check_fits(
                    rules::modes::EMBEDDED.xattr_total,
                    &st.xattrs,
                    name,
                    value,
                )?;
                match pos {
                    Some(p) => st.xattrs[p].1 = value.to_vec(),
                    None => st.xattrs.push((name.to_vec(), value.to_vec())),
                }
            }
        }
        if let (true, Some(d)) = (is_default, &i.dir) {
            d.default_acl.store(!remove, Ordering::Relaxed);
        }
        st.attr.ctime = now();
        self.finish_inode_change(g, st)
    }

    pub fn getxattr(&self, ctx: &Ctx, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        let _t = self.stats.start(Op::Xattr);
        // A read of an ACL's name is no error whoever checks: none is kept.
        rules::xattr::check_name(&Ctx::root(), name)?;
        let i = self.inode(ino)?;
        let st = i.st.lock();
        rules::xattr::may_access(ctx, &st.attr, name, false)?;
        st.xattrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .ok_or(Error::NoAttr)
    }

    pub fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        let _t = self.stats.start(Op::Xattr);
        let i = self.inode(ino)?;
        let st = i.st.lock();
        Ok(st.xattrs.iter().map(|(n, _)| n.clone()).collect())
    }

    pub fn removexattr(&self, ctx: &Ctx, ino: Ino, name: &[u8]) -> Result<()> {
        let _t = self.stats.start(Op::Xattr);
        self.writable()?;
        rules::xattr::check_name(ctx, name)?;
        let i = self.inode(ino)?;
        if flags::pinned(&i) {
            return Err(Error::NotPermitted);
        }
        let g = self.committer.enter()?;
        let mut st = i.st.lock();
        if st.destroyed {
            return Err(Error::NoAttr);
        }
        rules::xattr::may_access(ctx, &st.attr, name, true)?;
        let pos = st
            .xattrs
            .iter()
            .position(|(n, _)| n == name)
            .ok_or(Error::NoAttr)?;
        st.xattrs.remove(pos);
        if let (true, Some(d)) = (name == acl::DEFAULT, &i.dir) {
            d.default_acl.store(false, Ordering::Relaxed);
        }
        st.attr.ctime = now();
        self.finish_inode_change(g, st)
    }

    pub fn statfs(&self) -> Result<StatFs> {
        let _t = self.stats.start(Op::Statfs);
        let (total, free) = self.store.space();
        let bsize = BLOCK as u32;
        let used_ags: u64 = self.ag_next.iter().map(|a| a.load(Ordering::Relaxed)).sum();
        Ok(StatFs {
            blocks: total / BLOCK,
            bfree: free / BLOCK,
            bavail: free / BLOCK,
            files: (1u64 << 32) + used_ags,
            ffree: 1u64 << 32,
            bsize,
            namelen: NAME_MAX as u32,
        })
    }
}
