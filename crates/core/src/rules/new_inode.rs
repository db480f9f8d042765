//! A new inode: which types mknod makes, a symlink's target, and the new
//! inode's owner, group and mode (`inode_init_owner`, `mode_strip_sgid`,
//! `posix_acl_create`). The umask is the kernel's: it arrives in the
//! request (`Ctx::umask`) and is applied here unless the directory's
//! default ACL replaces it.

use crate::acl;
use crate::error::{Error, Result};
use crate::types::{Ctx, Kind};

/// The type mknod(2) makes from `mode`'s type bits: 0 is a regular file; a
/// directory or symlink is EINVAL (mkdir and symlink make those), unknown
/// type bits EINVAL.
pub fn mknod_kind(mode: u32) -> Result<Kind> {
    match Kind::from_mode(mode) {
        Some(Kind::Dir | Kind::Symlink) | None => Err(Error::Invalid),
        Some(k) => Ok(k),
    }
}

/// The longest symlink target (PATH_MAX less its NUL).
pub const SYMLINK_MAX: usize = 4095;

/// A symlink's target: empty is ENOENT, longer than 4095 bytes ENAMETOOLONG.
pub fn symlink_target(target: &[u8]) -> Result<()> {
    if target.is_empty() {
        return Err(Error::NotFound);
    }
    if target.len() > SYMLINK_MAX {
        return Err(Error::NameTooLong);
    }
    Ok(())
}

/// The directory a new inode is made in, as far as its owner and mode go.
#[derive(Clone, Copy, Debug)]
pub struct Parent<'a> {
    pub gid: u32,
    /// The directory's setgid bit.
    pub setgid: bool,
    /// Its default ACL (`system.posix_acl_default`), if it has one.
    pub default_acl: Option<&'a [u8]>,
}

/// A new inode's owner, mode and the ACLs it inherits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewInode {
    pub uid: u32,
    pub gid: u32,
    pub perm: u16,
    pub xattrs: acl::Xattrs,
}

/// The owner, group and mode of an inode of `kind` made with permission
/// bits `perm` by `ctx` in `parent`:
/// - the caller's uid; the caller's gid, or in a setgid directory the
///   directory's gid, and a subdirectory there is setgid too;
/// - the umask, unless the directory has a default ACL, which replaces it
///   and is inherited (acl(5)); a default ACL that does not decode is an
///   error (EINVAL), as ext4's `posix_acl_create` fails on one it cannot read;
/// - a setgid, group-executable non-directory made in a setgid directory of
///   a group the caller is not in (nor root) loses setgid
///   (`mode_strip_sgid`; the kernel has done it already when it checks
///   permissions, so only then is it done here).
pub fn new_inode(ctx: &Ctx, parent: Parent<'_>, kind: Kind, perm: u16) -> Result<NewInode> {
    let (mut perm, xattrs) = acl::create(parent.default_acl, kind, perm & 0o7777, ctx.umask)?;
    let gid = if parent.setgid { parent.gid } else { ctx.gid };
    if parent.setgid {
        if kind == Kind::Dir {
            perm |= 0o2000;
        } else if ctx.check_perms
            && perm & 0o2010 == 0o2010
            && !super::perm::in_group_or_root(ctx, parent.gid)
        {
            perm &= !0o2000;
        }
    }
    Ok(NewInode {
        uid: ctx.uid,
        gid,
        perm,
        xattrs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::perm::tests::user;

    fn plain(gid: u32) -> Parent<'static> {
        Parent {
            gid,
            setgid: false,
            default_acl: None,
        }
    }

    fn sgid(gid: u32) -> Parent<'static> {
        Parent {
            setgid: true,
            ..plain(gid)
        }
    }

    #[test]
    fn mknod_makes_files_devices_fifos_and_sockets_but_not_directories_or_symlinks() {
        assert_eq!(mknod_kind(0o644), Ok(Kind::File));
        assert_eq!(mknod_kind(0o100644), Ok(Kind::File));
        assert_eq!(mknod_kind(0o010644), Ok(Kind::Fifo));
        assert_eq!(mknod_kind(0o140644), Ok(Kind::Socket));
        assert_eq!(mknod_kind(0o020644), Ok(Kind::CharDev));
        assert_eq!(mknod_kind(0o060644), Ok(Kind::BlockDev));
        assert_eq!(mknod_kind(0o040755), Err(Error::Invalid));
        assert_eq!(mknod_kind(0o120777), Err(Error::Invalid));
        assert_eq!(mknod_kind(0o170000), Err(Error::Invalid));
    }

    #[test]
    fn an_empty_symlink_target_is_enoent_and_one_past_4095_bytes_enametoolong() {
        assert_eq!(symlink_target(b""), Err(Error::NotFound));
        assert_eq!(symlink_target(&[b'a'; 4095]), Ok(()));
        assert_eq!(symlink_target(&[b'a'; 4096]), Err(Error::NameTooLong));
    }

    #[test]
    fn a_new_inode_has_the_callers_uid_and_gid_and_the_umask_applied() {
        let ctx = Ctx {
            umask: 0o022,
            ..user(1000, 100, &[])
        };
        let n = new_inode(&ctx, plain(7), Kind::File, 0o666).unwrap();
        assert_eq!((n.uid, n.gid, n.perm), (1000, 100, 0o644));
        assert!(n.xattrs.is_empty());
    }

    #[test]
    fn in_a_setgid_directory_the_group_is_the_directorys_and_subdirectories_are_setgid() {
        let ctx = user(1000, 100, &[7]);
        let f = new_inode(&ctx, sgid(7), Kind::File, 0o644).unwrap();
        assert_eq!((f.gid, f.perm), (7, 0o644));
        let d = new_inode(&ctx, sgid(7), Kind::Dir, 0o755).unwrap();
        assert_eq!((d.gid, d.perm), (7, 0o2755));
    }

    #[test]
    fn a_setgid_group_executable_file_made_in_a_setgid_directory_of_a_foreign_group_loses_setgid() {
        let outsider = user(1000, 100, &[]);
        let f = new_inode(&outsider, sgid(7), Kind::File, 0o2755).unwrap();
        assert_eq!(f.perm, 0o755);
        // Without group exec it keeps it (mode_strip_sgid's first test).
        let f = new_inode(&outsider, sgid(7), Kind::File, 0o2745).unwrap();
        assert_eq!(f.perm, 0o2745);
        // A member keeps it.
        let f = new_inode(&user(1000, 100, &[7]), sgid(7), Kind::File, 0o2755).unwrap();
        assert_eq!(f.perm, 0o2755);
    }

    #[test]
    fn a_default_acl_replaces_the_umask() {
        // user::rwx group::r-x other::--- (the mode 750 says it all).
        let mut v = 2u32.to_le_bytes().to_vec();
        for (tag, perm) in [(1u16, 7u16), (4, 5), (0x20, 0)] {
            v.extend_from_slice(&tag.to_le_bytes());
            v.extend_from_slice(&perm.to_le_bytes());
            v.extend_from_slice(&u32::MAX.to_le_bytes());
        }
        let ctx = Ctx {
            umask: 0o077,
            ..user(1000, 100, &[])
        };
        let p = Parent {
            default_acl: Some(&v),
            ..plain(7)
        };
        let d = new_inode(&ctx, p, Kind::Dir, 0o777).unwrap();
        assert_eq!(d.perm, 0o750);
    }

    #[test]
    fn a_default_acl_that_does_not_decode_fails_the_create() {
        let p = Parent {
            default_acl: Some(b"junk"),
            ..plain(7)
        };
        assert_eq!(
            new_inode(&user(1, 1, &[]), p, Kind::File, 0o644),
            Err(Error::Invalid)
        );
    }
}
