//! File flags, as chattr(1) sets them (`FS_IOC_SETFLAGS`, or xfs_io's
//! `FS_IOC_FSSETXATTR`), and the rules two of them impose: an immutable
//! inode cannot be changed, renamed, linked or deleted, nor can entries be
//! added to or removed from an immutable directory; an append-only file can
//! only grow by appending, and an append-only directory only gain entries.
//!
//! FUSE keeps no `i_flags` in the kernel, so the VFS cannot enforce them (as
//! it does for ext4): the daemon does, for every caller, root included, in
//! whichever permission mode. The kernel has already checked who may change
//! them (the owner; `CAP_LINUX_IMMUTABLE` for these two) before a FUSE
//! request arrives; a library caller is checked here the same way.
//!
//! The other flags kept are promises shoal keeps anyway or that carry none:
//! sync and dirsync (`Durability`), noatime (honoured by `touch_atime`),
//! nodump (for dump(8)). Any other flag is refused with EOPNOTSUPP, as ext4
//! refuses compression.

use crate::engine::{SetAttr, TimeSet};
use crate::error::{Error, Result};
use crate::types::{Ctx, Kind};

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
/// (`FS_XFLAG_*`).
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
pub fn pinned(flags: u32) -> bool {
    flags & (IMMUTABLE | APPEND) != 0
}

pub fn immutable(flags: u32) -> bool {
    flags & IMMUTABLE != 0
}

pub fn append_only(flags: u32) -> bool {
    flags & APPEND != 0
}

/// A name may be added to a directory with flags `dir` (not immutable).
pub fn may_add(dir: u32) -> Result<()> {
    if immutable(dir) {
        return Err(Error::NotPermitted);
    }
    Ok(())
}

/// A name of a child with flags `child` may be removed from a directory
/// with flags `dir`: neither immutable nor append-only (`child` None when
/// the caller deletes it unread, which only an inode with flags 0 can be).
pub fn may_remove(dir: u32, child: Option<u32>) -> Result<()> {
    if pinned(dir) || child.is_some_and(pinned) {
        return Err(Error::NotPermitted);
    }
    Ok(())
}

/// A setattr on an inode with `flags` (notify_change's and do_truncate's
/// rules): immutable, nothing changes; append-only, only times, to now.
pub fn may_setattr(flags: u32, sa: &SetAttr) -> Result<()> {
    if immutable(flags)
        || append_only(flags)
            && (sa.mode.is_some()
                || sa.uid.is_some()
                || sa.gid.is_some()
                || sa.size.is_some()
                || matches!(sa.atime, Some(TimeSet::At(_)))
                || matches!(sa.mtime, Some(TimeSet::At(_))))
    {
        return Err(Error::NotPermitted);
    }
    Ok(())
}

/// An open for writing (`write`), appending (`append`) or truncating
/// (`trunc`) of an inode with `flags` (`may_open`): none on an immutable
/// one; on an append-only one only appending, never truncating.
pub fn may_open(flags: u32, write: bool, append: bool, trunc: bool) -> Result<()> {
    if (write || trunc) && (immutable(flags) || append_only(flags) && (!append || trunc)) {
        return Err(Error::NotPermitted);
    }
    Ok(())
}

/// fallocate(2) with `keep_size_only` (no mode bit but KEEP_SIZE) on an
/// inode with `flags` (`vfs_fallocate`): nothing on an immutable file,
/// only allocation within the size on an append-only one.
pub fn may_fallocate(flags: u32, keep_size_only: bool) -> Result<()> {
    if immutable(flags) || append_only(flags) && !keep_size_only {
        return Err(Error::NotPermitted);
    }
    Ok(())
}

/// Flags `new` may be set on an inode of `kind`: only flags kept, only on
/// files and directories (EOPNOTSUPP otherwise, as ext4 for others).
pub fn check(kind: Kind, new: u32) -> Result<()> {
    if new & !KEPT != 0 || !matches!(kind, Kind::File | Kind::Dir) {
        return Err(Error::NotSupported);
    }
    Ok(())
}

/// `ctx` may change an inode's flags from `old` to `new` when the daemon
/// checks: the owner or root, and only root changes immutable or
/// append-only (`CAP_LINUX_IMMUTABLE`).
pub fn may_change(ctx: &Ctx, owner: u32, old: u32, new: u32) -> Result<()> {
    if ctx.check_perms && ctx.uid != 0 {
        if ctx.uid != owner {
            return Err(Error::NotPermitted);
        }
        if (old ^ new) & (IMMUTABLE | APPEND) != 0 {
            return Err(Error::NotPermitted);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::perm::tests::user;
    use crate::types::Ts;

    #[test]
    fn an_immutable_directory_takes_no_new_name_an_append_only_one_does() {
        assert_eq!(may_add(IMMUTABLE), Err(Error::NotPermitted));
        assert_eq!(may_add(APPEND), Ok(()));
        assert_eq!(may_add(0), Ok(()));
    }

    #[test]
    fn no_name_leaves_an_immutable_or_append_only_directory_nor_names_such_a_child() {
        assert_eq!(may_remove(IMMUTABLE, None), Err(Error::NotPermitted));
        assert_eq!(may_remove(APPEND, Some(0)), Err(Error::NotPermitted));
        assert_eq!(may_remove(0, Some(IMMUTABLE)), Err(Error::NotPermitted));
        assert_eq!(may_remove(0, Some(APPEND)), Err(Error::NotPermitted));
        assert_eq!(may_remove(NODUMP, Some(NOATIME)), Ok(()));
    }

    #[test]
    fn an_immutable_inode_takes_no_setattr_at_all() {
        let now = SetAttr {
            atime: Some(TimeSet::Now),
            ..Default::default()
        };
        assert_eq!(may_setattr(IMMUTABLE, &now), Err(Error::NotPermitted));
    }

    #[test]
    fn an_append_only_inode_takes_only_times_to_now() {
        let now = SetAttr {
            atime: Some(TimeSet::Now),
            mtime: Some(TimeSet::Now),
            ..Default::default()
        };
        assert_eq!(may_setattr(APPEND, &now), Ok(()));
        let at = SetAttr {
            mtime: Some(TimeSet::At(Ts::default())),
            ..Default::default()
        };
        assert_eq!(may_setattr(APPEND, &at), Err(Error::NotPermitted));
        for sa in [
            SetAttr {
                mode: Some(0o600),
                ..Default::default()
            },
            SetAttr {
                size: Some(0),
                ..Default::default()
            },
            SetAttr {
                uid: Some(1),
                ..Default::default()
            },
        ] {
            assert_eq!(may_setattr(APPEND, &sa), Err(Error::NotPermitted));
        }
    }

    #[test]
    fn an_immutable_file_opens_for_reading_only() {
        assert_eq!(may_open(IMMUTABLE, false, false, false), Ok(()));
        assert_eq!(
            may_open(IMMUTABLE, true, true, false),
            Err(Error::NotPermitted)
        );
        assert_eq!(
            may_open(IMMUTABLE, false, false, true),
            Err(Error::NotPermitted)
        );
    }

    #[test]
    fn an_append_only_file_opens_for_appending_and_never_for_truncating() {
        assert_eq!(may_open(APPEND, true, true, false), Ok(()));
        assert_eq!(
            may_open(APPEND, true, false, false),
            Err(Error::NotPermitted)
        );
        assert_eq!(may_open(APPEND, true, true, true), Err(Error::NotPermitted));
        assert_eq!(may_open(APPEND, false, false, false), Ok(()));
    }

    #[test]
    fn fallocate_of_an_immutable_file_is_eperm_of_an_append_only_one_only_within_its_size() {
        assert_eq!(may_fallocate(IMMUTABLE, true), Err(Error::NotPermitted));
        assert_eq!(may_fallocate(APPEND, true), Ok(()));
        assert_eq!(may_fallocate(APPEND, false), Err(Error::NotPermitted));
        assert_eq!(may_fallocate(0, false), Ok(()));
    }

    #[test]
    fn unknown_flags_and_flags_on_other_types_are_eopnotsupp() {
        assert_eq!(check(Kind::File, 0x4), Err(Error::NotSupported));
        assert_eq!(check(Kind::Symlink, NODUMP), Err(Error::NotSupported));
        assert_eq!(check(Kind::Dir, KEPT), Ok(()));
    }

    #[test]
    fn the_owner_sets_ordinary_flags_and_only_root_immutable_or_append_only() {
        let owner = user(1000, 1000, &[]);
        assert_eq!(may_change(&owner, 1000, 0, NODUMP), Ok(()));
        assert_eq!(
            may_change(&owner, 1000, 0, IMMUTABLE),
            Err(Error::NotPermitted)
        );
        assert_eq!(
            may_change(&owner, 1000, APPEND, 0),
            Err(Error::NotPermitted)
        );
        // Keeping them as they are is no change of them.
        assert_eq!(may_change(&owner, 1000, APPEND, APPEND | NODUMP), Ok(()));
        assert_eq!(
            may_change(&user(1001, 1, &[]), 1000, 0, NODUMP),
            Err(Error::NotPermitted)
        );
    }

    #[test]
    fn xflags_round_trip_and_unknown_xflags_are_refused() {
        let all = IMMUTABLE | APPEND | SYNC | NOATIME | NODUMP;
        assert_eq!(to_xflags(all), 0x8 | 0x10 | 0x20 | 0x40 | 0x80);
        assert_eq!(from_xflags(to_xflags(all), 0).unwrap(), all);
        assert_eq!(
            from_xflags(0x8, DIRSYNC | APPEND).unwrap(),
            IMMUTABLE | DIRSYNC
        );
        assert!(from_xflags(0x8000, 0).is_err());
    }
}
