//! File flags (chattr): the engine's side. The flags and their rules are
//! `rules::flags` (re-exported here); this file keeps them on the engine's
//! inodes (`Inode::flags`, mirrored from the record for lock-free reads)
//! and sets them.

use super::*;
pub use crate::rules::flags::{
    from_xflags, to_xflags, APPEND, DIRSYNC, IMMUTABLE, KEPT, NOATIME, NODUMP, SYNC,
};

fn of(i: &Inode) -> u32 {
    i.flags.load(Ordering::Relaxed)
}

/// Immutable or append-only (`rules::flags::pinned`).
pub(super) fn pinned(i: &Inode) -> bool {
    rules::flags::pinned(of(i))
}

pub(super) fn immutable(i: &Inode) -> bool {
    rules::flags::immutable(of(i))
}

/// A name may be added to directory `p` (`rules::flags::may_add`).
pub(super) fn check_add(p: &Inode) -> Result<()> {
    rules::flags::may_add(of(p))
}

/// A name of `c` in directory `p` may be removed (`rules::flags::may_remove`;
/// `c` unknown when the caller deletes it unread, which only an inode with
/// flags 0 can be: see `set_flags`).
pub(super) fn check_remove(p: &Inode, c: Option<&Inode>) -> Result<()> {
    rules::flags::may_remove(of(p), c.map(of))
}

impl Engine {
    /// The inode's flags (`FS_IOC_GETFLAGS`).
    pub fn flags(&self, ino: Ino) -> Result<u32> {
        Ok(self.inode(ino)?.st.lock().flags)
    }

    /// Set the inode's flags (`FS_IOC_SETFLAGS`): every flag at once, as
    /// the ioctl does. Changes ctime, as ext4 does.
    pub fn set_flags(&self, ctx: &Ctx, ino: Ino, flags: u32) -> Result<()> {
        let _t = self.stats.start(Op::Setattr);
        self.writable()?;
        let i = self.inode(ino)?;
        rules::flags::check(i.kind, flags)?;
        if flags & (IMMUTABLE | APPEND) != 0 {
            // unlink deletes a sole entry's inode unread (`Engine::unlink`):
            // an inode with these flags must be read first, so it is never sole.
            self.unshare(&i)?;
        }
        let g = self.committer.enter()?;
        let mut st = i.st.lock();
        if st.destroyed {
            return Err(Error::NotFound);
        }
        rules::flags::may_change(ctx, st.attr.uid, st.flags, flags)?;
        st.flags = flags;
        i.flags.store(flags, Ordering::Relaxed);
        st.attr.ctime = now();
        self.finish_inode_change(g, st)
    }
}
