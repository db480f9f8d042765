//! File flags (chattr) on a shared namespace: kept in the inode record
//! (`Node::flags`, the record's flags trailer, as the embedded engine
//! keeps them), set in one transaction, and enforced by `rules::flags`
//! inside the transaction of every operation the embedded engine enforces
//! them on (`ns.rs`: create, unlink, rmdir, link, rename, setattr,
//! setxattr, removexattr; `data.rs`: writes and their commits; here:
//! opens). Each check reads the record it rests on as a condition of the
//! commit, so a flag set on one mount holds on every other from the
//! commit that set it.
//!
//! NOATIME is kept and shown; access times are not kept on a shared
//! namespace at all (docs/rules.md), so it changes nothing here.

use super::ns::{ikey, ClusterFs, Node};
use shoal_core::error::{Error, Result};
use shoal_core::rules;
use shoal_core::types::{Attr, Ctx, Ino, Ts};

impl ClusterFs {
    /// The inode's flags (`FS_IOC_GETFLAGS`), from the record cache if it
    /// knows the record.
    pub fn flags(&self, ino: Ino) -> Result<u32> {
        Ok(self.load_known(ino, false)?.flags)
    }

    /// Set the inode's flags (`FS_IOC_SETFLAGS`): every flag at once, as
    /// the ioctl does; which flags are kept and who may change them are
    /// `rules::flags::check` and `may_change` (who may, when
    /// `ctx.check_perms`; otherwise the kernel checked). Changes ctime, as ext4 does.
    pub fn set_flags(&self, ctx: &Ctx, ino: Ino, flags: u32) -> Result<Attr> {
        let set = |n: &mut Node| -> Result<Attr> {
            rules::flags::check(n.attr.kind, flags)?;
            rules::flags::may_change(ctx, n.attr.uid, n.flags, flags)?;
            n.flags = flags;
            n.attr.ctime = Ts::now();
            Ok(n.attr)
        };
        // A file created from memory and not committed yet: set there.
        if let Some(r) = self.amend_queued(ino, set) {
            return r;
        }
        self.run(|tx| {
            let mut n = tx.node(ino)?;
            let a = set(&mut n)?;
            tx.put_node(&mut n)?;
            Ok(a)
        })
    }

    /// open(2) by `ctx` for `mask` (R_OK, W_OK; `open_as` checks it),
    /// appending or truncating as asked, refused as
    /// `rules::flags::may_open` says on the record the open read from the
    /// store (`open_as` reads it fresh; the record cache learns it).
    pub fn open_for(
        &self,
        ctx: &Ctx,
        ino: Ino,
        mask: u32,
        append: bool,
        trunc: bool,
    ) -> Result<Attr> {
        let a = self.open_as(ctx, ino, mask)?;
        let write = mask & 2 != 0;
        if write || trunc {
            if let Err(e) = self
                .flags(ino)
                .and_then(|f| rules::flags::may_open(f, write, append, trunc))
            {
                self.release(ino)?;
                return Err(e);
            }
        }
        Ok(a)
    }

    /// A write into `n`: none into an immutable file (through a handle
    /// opened before chattr +i too, as Linux since 5.3).
    pub(super) fn may_write(n: &Node) -> Result<()> {
        if rules::flags::immutable(n.flags) {
            return Err(Error::NotPermitted);
        }
        Ok(())
    }

    /// `may_write` on the record as the record cache knows it (nothing
    /// read: a write that is only buffered; its commit checks again).
    pub(super) fn may_write_known(&self, ino: Ino) -> Result<()> {
        match self.cache.get(&ikey(ino)) {
            Some(Some(v)) => Self::may_write(&Node::decode(ino, &v)?),
            _ => Ok(()),
        }
    }
}
