//! Reads of the namespace: getattr and lookup.

use super::*;

impl Engine {
    pub fn getattr(&self, ino: Ino) -> Result<Attr> {
        let _t = self.stats.start(Op::Getattr);
        let i = self.inode(ino)?;
        Ok(self.attr_of(&i))
    }

    /// `getattr` for an entry handed to the kernel (readdirplus): takes the
    /// kernel's lookup reference when `ctx.kernel_ref`, on the inode in hand.
    pub fn getattr_entry(&self, ctx: &Ctx, ino: Ino) -> Result<Attr> {
        let _t = self.stats.start(Op::Getattr);
        let i = self.inode(ino)?;
        let a = self.attr_of(&i);
        self.hand_out(ctx, &i);
        Ok(a)
    }

    /// The kernel keeps a reference to each inode an entry reply names
    /// (FUSE's lookup count, given back by FORGET). Taken inside the
    /// operation on the inode it holds, when the caller says it hands the
    /// entry to the kernel (`Ctx::kernel_ref`): a count taken after the
    /// operation returned would look the inode up again, and miss it if
    /// reclaim or an unlink and FORGET had let it go in between.
    pub(super) fn hand_out(&self, ctx: &Ctx, i: &Inode) {
        if ctx.kernel_ref {
            i.lookups.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn lookup(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<Attr> {
        let _t = self.stats.start(Op::Lookup);
        let _bkl = self.names.bkl();
        if name == b"." {
            // Of any inode, not only a directory: the kernel looks up "." of
            // a file handle's inode number (open_by_handle_at, NFS export).
            let i = self.inode(parent)?;
            if i.st.lock().destroyed {
                return Err(Error::NotFound);
            }
            let a = self.attr_of(&i);
            self.hand_out(ctx, &i);
            return Ok(a);
        }
        let p = self.dir_ref(parent)?;
        if name == b".." {
            let pp = p.st.lock().parent();
            return self.getattr_entry(ctx, pp);
        }
        names::check(NameOp::Lookup, name)?;
        if ctx.check_perms {
            check_access(ctx, &p.st.lock().attr, X_OK)?;
        }
        let (ino, _, _, node) = self.find_in(&p, name, true)?.ok_or(Error::NotFound)?;
        let i = match node {
            Some(i) => i,
            None => {
                // First lookup of an entry filled from the store: pin the
                // inode in the entry, so the next lookup skips the table.
                let i = self.inode(ino)?;
                if self.cfg.dir_index == DirIndex::Indexed {
                    p.dir
                        .as_ref()
                        .expect("directory")
                        .attach(name_hash(name), name, &i);
                }
                i
            }
        };
        let a = self.attr_of(&i);
        self.hand_out(ctx, &i);
        Ok(a)
    }

    pub fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let _t = self.stats.start(Op::Readlink);
        let i = self.inode(ino)?;
        let st = i.st.lock();
        if st.attr.kind != Kind::Symlink {
            return Err(Error::Invalid);
        }
        Ok(st.blob.clone())
    }

    /// Check access for a library caller (FUSE leaves this to the kernel).
    pub fn access(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<()> {
        let i = self.inode(ino)?;
        let a = i.st.lock().attr;
        check_access(
            &Ctx {
                check_perms: true,
                ..ctx.clone()
            },
            &a,
            mask,
        )
    }

    /// Drop `n` kernel references; an unreferenced, unlinked, closed inode leaves the cache.
    pub fn forget(&self, ino: Ino, n: u64) {
        let _t = self.stats.start(Op::Forget);
        if let Some(i) = self.inodes.get(ino) {
            let prev = i
                .lookups
                .fetch_sub(n.min(i.lookups.load(Ordering::Relaxed)), Ordering::Relaxed);
            if prev <= n && i.opens.load(Ordering::Relaxed) == 0 && i.st.lock().destroyed {
                drop(i);
                self.inodes.remove_if(ino, |x| {
                    x.lookups.load(Ordering::Relaxed) == 0 && x.opens.load(Ordering::Relaxed) == 0
                });
            }
        }
    }
}
