//! File flags, as chattr(1) sets them (`FS_IOC_SETFLAGS`, or xfs_io's
//! `FS_IOC_FSSETXATTR`), and the rules two of them impose: an immutable
//! inode cannot be changed, renamed, linked or deleted, nor can entries be
//! added to or removed from an immutable directory; an append-only file can
//! only grow by appending, and an append-only directory only gain entries.
//!
//! FUSE keeps no `i_flags` in the kernel, so the VFS cannot enforce them (as
//! it does for ext4): the engine does, for every caller, root included, in
//! whichever permission mode. The kernel has already checked who may change
//! them (the owner; `CAP_LINUX_IMMUTABLE` for these two) before a FUSE
//! request arrives; a library caller is checked here the same way.
//!
//! The other flags kept are promises shoal keeps anyway or that carry none:
//! sync and dirsync (`Durability`), noatime (honoured by `touch_atime`),
//! nodump (for dump(8)). Any other flag is refused with EOPNOTSUPP, as ext4
//! refuses compression.

use super::*;

/// `FS_SYNC_FL`: writes are synchronous (shoal: as the store's durability).
pub const SYNC: u32 = 0x8;
/// `FS_IMMUTABLE_FL`.
pub const IMMUTABLE: u32 = 0x10;
/// `FS_APPEND_FL`.
pub const APPEND: u32 = 0x20;
/// `FS_NODUMP_FL`.
pub const NODUMP: u32 = 0x40;
/// `FS_NOATIME_FL`.
pub const NOATIME: u32 = 0x80;
/// `FS_DIRSYNC_FL`.
pub const DIRSYNC: u32 = 0x10000;
/// Every flag shoal keeps.
pub const KEPT: u32 = SYNC | IMMUTABLE | APPEND | NODUMP | NOATIME | DIRSYNC;

/// The same flags as `FS_IOC_FSGETXATTR`'s `fsx_xflags` spells them
/// (`FS_XFLAG_*`), in the order of `XFLAGS_OF`.
const XFLAGS: [(u32, u32); 5] = [
    (IMMUTABLE, 0x8),
    (APPEND, 0x10),
    (SYNC, 0x20),
    (NOATIME, 0x40),
    (NODUMP, 0x80),
];

/// `FS_*_FL` flags as `fsx_xflags`.
pub fn to_xflags(flags: u32) -> u32 {
    XFLAGS
        .iter()
        .filter(|(f, _)| flags & f != 0)
        .fold(0, |x, (_, xf)| x | xf)
}

/// `fsx_xflags` as `FS_*_FL` flags, keeping `others` (flags xflags cannot
/// express: dirsync). Unknown xflags are an error (EOPNOTSUPP).
pub fn from_xflags(xflags: u32, others: u32) -> Result<u32> {
    let known = XFLAGS.iter().fold(0, |x, (_, xf)| x | xf);
    if xflags & !known != 0 {
        return Err(Error::NotSupported);
    }
    Ok(XFLAGS
        .iter()
        .filter(|(_, xf)| xflags & xf != 0)
        .fold(others & DIRSYNC, |x, (f, _)| x | f))
}

/// Immutable or append-only: the inode may not be deleted, renamed, linked,
/// chmod'ed or chown'ed, nor have its extended attributes changed.
pub(super) fn pinned(i: &Inode) -> bool {
    i.flags.load(Ordering::Relaxed) & (IMMUTABLE | APPEND) != 0
}

pub(super) fn immutable(i: &Inode) -> bool {
    i.flags.load(Ordering::Relaxed) & IMMUTABLE != 0
}

pub(super) fn append_only(i: &Inode) -> bool {
    i.flags.load(Ordering::Relaxed) & APPEND != 0
}

/// A name may be added to directory `p` (not immutable).
pub(super) fn check_add(p: &Inode) -> Result<()> {
    if immutable(p) {
        return Err(Error::NotPermitted);
    }
    Ok(())
}

/// A name of `c` in directory `p` may be removed (neither `p` nor `c`
/// immutable or append-only; `c` unknown when the caller deletes it unread,
/// which only an inode with flags 0 can be: see `set_flags`).
pub(super) fn check_remove(p: &Inode, c: Option<&Inode>) -> Result<()> {
    if pinned(p) || c.is_some_and(pinned) {
        return Err(Error::NotPermitted);
    }
    Ok(())
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
        if flags & !KEPT != 0 {
            return Err(Error::NotSupported);
        }
        let i = self.inode(ino)?;
        if !matches!(i.kind, Kind::File | Kind::Dir) {
            return Err(Error::NotSupported);
        }
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
        if ctx.check_perms {
            if ctx.uid != 0 && ctx.uid != st.attr.uid {
                return Err(Error::NotPermitted);
            }
            if (st.flags ^ flags) & (IMMUTABLE | APPEND) != 0 && ctx.uid != 0 {
                return Err(Error::NotPermitted);
            }
        }
        st.flags = flags;
        i.flags.store(flags, Ordering::Relaxed);
        st.attr.ctime = now();
        self.finish_inode_change(g, st)
    }
}
