//! Extended attributes: which names exist (xattr(7)'s namespaces, as ext4
//! has them), how big a value and an inode's whole set may be, and who may
//! read or change one (`xattr_permission`).

use super::perm::{access, owner_or_root, R_OK, W_OK};
use crate::acl;
use crate::error::{Error, Result};
use crate::types::{xattr_list_fits, Attr, Ctx, Kind, XATTR_SIZE_MAX};

/// The longest xattr name (XATTR_NAME_MAX).
pub const NAME_MAX: usize = 255;

/// The namespaces kept besides the two POSIX ACLs.
const PREFIXES: [&[u8]; 3] = [b"user.", b"trusted.", b"security."];

/// Whether `name` names an xattr shoal keeps, with Linux's errno otherwise:
/// empty or longer than 255 bytes ERANGE (the syscall's own check); a
/// namespace prefix with nothing after it EINVAL (`xattr_resolve_name`);
/// a name in no namespace kept EOPNOTSUPP. The POSIX ACLs are refused
/// (EOPNOTSUPP) when the daemon checks permissions (`ctx.check_perms`):
/// its checks (`perm::access`) do not evaluate them, and an ACL stored but
/// not enforced is worse than none. The kernel enforces them through a
/// mount (FUSE_POSIX_ACL).
pub fn check_name(ctx: &Ctx, name: &[u8]) -> Result<()> {
    if name.is_empty() || name.len() > NAME_MAX {
        return Err(Error::Range);
    }
    if name == acl::ACCESS || name == acl::DEFAULT {
        return if ctx.check_perms {
            Err(Error::NotSupported)
        } else {
            Ok(())
        };
    }
    for ns in PREFIXES {
        if let Some(rest) = name.strip_prefix(ns) {
            return if rest.is_empty() {
                Err(Error::Invalid)
            } else {
                Ok(())
            };
        }
    }
    Err(Error::NotSupported)
}

/// A value longer than XATTR_SIZE_MAX (64 KiB) is ERANGE (E2BIG in the
/// syscall before it reaches a filesystem; ERANGE to a library caller).
pub fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > XATTR_SIZE_MAX {
        return Err(Error::Range);
    }
    Ok(())
}

/// Whether `xattrs` with `name` set to `value` (replaced if there, added
/// if not) still fits: names and values at most `total` bytes in all (the
/// mode's limit, `modes::Limits::xattr_total`), and the names one
/// listxattr(2) answer (XATTR_LIST_MAX). ENOSPC otherwise, as ext4 answers
/// when an inode's xattr space is full. Checked on every set, as ext4
/// checks: a replacement may grow past the space too.
pub fn check_fits(
    total: usize,
    xattrs: &[(Vec<u8>, Vec<u8>)],
    name: &[u8],
    value: &[u8],
) -> Result<()> {
    let mut sum = name.len() + value.len();
    let mut there = false;
    for (n, v) in xattrs {
        if n == name {
            there = true;
        } else {
            sum += n.len() + v.len();
        }
    }
    if sum > total || !there && !xattr_list_fits(xattrs.iter().map(|(n, _)| n.as_slice()), name) {
        return Err(Error::NoSpace);
    }
    Ok(())
}

/// Who may read (`write` false) or set and remove (`write` true) xattr
/// `name` of inode `a` (`xattr_permission`): `trusted.` only root
/// (CAP_SYS_ADMIN; to others a read finds nothing, ENODATA, and a change
/// is EPERM); `user.` only on regular files and directories (elsewhere
/// ENODATA or EPERM, root too), and in a sticky directory only its owner
/// changes them; otherwise the inode's read or write permission. Through a
/// mount the kernel's VFS has done the first two and, with
/// `default_permissions`, the last.
pub fn may_access(ctx: &Ctx, a: &Attr, name: &[u8], write: bool) -> Result<()> {
    if !ctx.check_perms {
        return Ok(());
    }
    let refused = if write {
        Error::NotPermitted
    } else {
        Error::NoAttr
    };
    if name.starts_with(b"trusted.") {
        return if ctx.uid == 0 { Ok(()) } else { Err(refused) };
    }
    if name.starts_with(b"user.") {
        if !matches!(a.kind, Kind::File | Kind::Dir) {
            return Err(refused);
        }
        if a.kind == Kind::Dir && a.perm & 0o1000 != 0 && write && !owner_or_root(ctx, a) {
            return Err(Error::NotPermitted);
        }
    }
    access(ctx, a, if write { W_OK } else { R_OK })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::perm::tests::{attr, user};

    fn kernel() -> Ctx {
        Ctx::root()
    }

    #[test]
    fn an_empty_or_overlong_xattr_name_is_erange() {
        assert_eq!(check_name(&kernel(), b""), Err(Error::Range));
        let mut long = b"user.".to_vec();
        long.resize(256, b'a');
        assert_eq!(check_name(&kernel(), &long), Err(Error::Range));
        long.truncate(255);
        assert_eq!(check_name(&kernel(), &long), Ok(()));
    }

    #[test]
    fn a_namespace_prefix_alone_is_einval() {
        for n in [&b"user."[..], b"trusted.", b"security."] {
            assert_eq!(check_name(&kernel(), n), Err(Error::Invalid));
        }
    }

    #[test]
    fn a_name_in_no_kept_namespace_is_eopnotsupp() {
        for n in [&b"system.foo"[..], b"os2.x", b"user", b"nonamespace"] {
            assert_eq!(check_name(&kernel(), n), Err(Error::NotSupported));
        }
    }

    #[test]
    fn acls_are_kept_when_the_kernel_checks_and_refused_when_the_daemon_does() {
        assert_eq!(check_name(&kernel(), acl::ACCESS), Ok(()));
        assert_eq!(check_name(&kernel(), acl::DEFAULT), Ok(()));
        let d = user(1, 1, &[]);
        assert_eq!(check_name(&d, acl::ACCESS), Err(Error::NotSupported));
        assert_eq!(check_name(&d, acl::DEFAULT), Err(Error::NotSupported));
    }

    #[test]
    fn a_value_past_64_kib_is_erange() {
        assert_eq!(check_value(&vec![0; XATTR_SIZE_MAX]), Ok(()));
        assert_eq!(check_value(&vec![0; XATTR_SIZE_MAX + 1]), Err(Error::Range));
    }

    #[test]
    fn the_total_counts_names_and_values_after_the_change() {
        let xs = vec![(b"user.a".to_vec(), vec![0; 50])];
        // 6 + 50 + 6 + 38 = 100.
        assert_eq!(check_fits(100, &xs, b"user.b", &[0; 38]), Ok(()));
        assert_eq!(
            check_fits(100, &xs, b"user.b", &[0; 39]),
            Err(Error::NoSpace)
        );
    }

    #[test]
    fn a_replacement_that_grows_past_the_total_is_enospc() {
        let xs = vec![(b"user.a".to_vec(), vec![0; 50])];
        assert_eq!(check_fits(100, &xs, b"user.a", &[0; 94]), Ok(()));
        assert_eq!(
            check_fits(100, &xs, b"user.a", &[0; 95]),
            Err(Error::NoSpace)
        );
    }

    #[test]
    fn a_name_that_would_overflow_one_listxattr_answer_is_enospc() {
        let xs: Vec<_> = (0..300)
            .map(|i| (format!("user.{i:0>250}").into_bytes(), vec![]))
            .collect();
        assert_eq!(
            check_fits(usize::MAX, &xs, b"user.new", b""),
            Err(Error::NoSpace)
        );
        // Replacing one that is there adds no name.
        let there = xs[0].0.clone();
        assert_eq!(check_fits(usize::MAX, &xs, &there, b"x"), Ok(()));
    }

    #[test]
    fn trusted_xattrs_are_roots_a_read_by_others_finds_nothing_a_change_is_eperm() {
        let a = attr(Kind::File, 0o666, 1000, 1000);
        let u = user(1000, 1000, &[]);
        assert_eq!(may_access(&u, &a, b"trusted.x", false), Err(Error::NoAttr));
        assert_eq!(
            may_access(&u, &a, b"trusted.x", true),
            Err(Error::NotPermitted)
        );
        let root = Ctx {
            check_perms: true,
            ..Ctx::root()
        };
        assert_eq!(may_access(&root, &a, b"trusted.x", true), Ok(()));
    }

    #[test]
    fn user_xattrs_follow_the_files_read_and_write_bits() {
        let a = attr(Kind::File, 0o644, 1000, 1000);
        let other = user(1001, 1001, &[]);
        assert_eq!(may_access(&other, &a, b"user.x", false), Ok(()));
        assert_eq!(
            may_access(&other, &a, b"user.x", true),
            Err(Error::PermissionDenied)
        );
        assert_eq!(may_access(&user(1000, 1, &[]), &a, b"user.x", true), Ok(()));
    }

    #[test]
    fn user_xattrs_exist_only_on_files_and_directories_even_for_root() {
        let root = Ctx {
            check_perms: true,
            ..Ctx::root()
        };
        for k in [Kind::Symlink, Kind::Fifo, Kind::CharDev] {
            let a = attr(k, 0o777, 0, 0);
            assert_eq!(may_access(&root, &a, b"user.x", false), Err(Error::NoAttr));
            assert_eq!(
                may_access(&root, &a, b"user.x", true),
                Err(Error::NotPermitted)
            );
        }
    }

    #[test]
    fn in_a_sticky_directory_only_its_owner_changes_user_xattrs() {
        let d = attr(Kind::Dir, 0o1777, 1000, 1000);
        assert_eq!(
            may_access(&user(1001, 1001, &[]), &d, b"user.x", true),
            Err(Error::NotPermitted)
        );
        assert_eq!(
            may_access(&user(1001, 1001, &[]), &d, b"user.x", false),
            Ok(())
        );
        assert_eq!(may_access(&user(1000, 1, &[]), &d, b"user.x", true), Ok(()));
    }

    #[test]
    fn security_xattrs_need_the_inodes_write_permission() {
        let a = attr(Kind::File, 0o644, 1000, 1000);
        assert_eq!(
            may_access(&user(1001, 1001, &[]), &a, b"security.x", true),
            Err(Error::PermissionDenied)
        );
    }

    #[test]
    fn without_daemon_checks_xattr_access_is_the_kernels() {
        let a = attr(Kind::Fifo, 0, 1000, 1000);
        let ctx = Ctx {
            check_perms: false,
            ..user(1001, 1001, &[])
        };
        assert_eq!(may_access(&ctx, &a, b"trusted.x", true), Ok(()));
    }
}
