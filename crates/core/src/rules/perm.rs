//! Who may do what: the access check, adding and removing names in a
//! directory (the sticky bit), setattr's ownership rules, and the setgid
//! bit a chmod by a caller outside the file's group loses. Each answers
//! `Ok` (or leaves the mode as asked) when `ctx.check_perms` is off: the
//! kernel checked (`default_permissions`).

use crate::engine::{SetAttr, TimeSet};
use crate::error::{Error, Result};
use crate::types::{Attr, Ctx, Kind};

/// Access mask bits (access(2)'s).
pub const R_OK: u32 = 4;
pub const W_OK: u32 = 2;
pub const X_OK: u32 = 1;

/// The open(2) flags `open_access` reads, Linux's values
/// (`asm-generic/fcntl.h`, the same on x86-64 and arm64; a test in
/// shoal-fuse compares them with libc's).
pub const O_ACCMODE: i32 = 0o3;
pub const O_WRONLY: i32 = 0o1;
pub const O_TRUNC: i32 = 0o1000;

/// The access an open with `flags` asks for (`build_open_flags`'
/// `ACC_MODE`): O_RDONLY read, O_WRONLY write, O_RDWR and the ioctl-only
/// mode 3 both; O_TRUNC write too.
pub fn open_access(flags: i32) -> u32 {
    let m = match flags & O_ACCMODE {
        0 => R_OK,
        O_WRONLY => W_OK,
        _ => R_OK | W_OK,
    };
    if flags & O_TRUNC != 0 {
        m | W_OK
    } else {
        m
    }
}

/// Linux's `in_group_or_capable`: the caller is root (CAP_FSETID) or in
/// group `gid`. Whether a caller keeps a setgid bit.
pub fn in_group_or_root(ctx: &Ctx, gid: u32) -> bool {
    ctx.uid == 0 || ctx.in_group(gid)
}

/// Linux's `inode_owner_or_capable`: the caller owns the inode or is root
/// (CAP_FOWNER).
pub fn owner_or_root(ctx: &Ctx, a: &Attr) -> bool {
    ctx.uid == 0 || ctx.uid == a.uid
}

/// POSIX permission check of `mask` (R_OK | W_OK | X_OK) against one
/// inode's mode (`generic_permission`; ACLs are not evaluated, which is why
/// the engine refuses to store them when it checks: `xattr::check_name`).
/// Root may do anything but execute a non-directory with no x bit at all.
pub fn access(ctx: &Ctx, a: &Attr, mask: u32) -> Result<()> {
    if !ctx.check_perms || mask == 0 {
        return Ok(());
    }
    if ctx.uid == 0 {
        if mask & X_OK != 0 && a.kind != Kind::Dir && a.perm & 0o111 == 0 {
            return Err(Error::PermissionDenied);
        }
        return Ok(());
    }
    let bits = if ctx.uid == a.uid {
        (a.perm >> 6) & 7
    } else if ctx.in_group(a.gid) {
        (a.perm >> 3) & 7
    } else {
        a.perm & 7
    } as u32;
    if bits & mask == mask {
        Ok(())
    } else {
        Err(Error::PermissionDenied)
    }
}

/// Whoever asks may search directory `dir` by its mode alone: x in the
/// owner's, the group's and the others' class (the class that applies to a
/// caller is the first that matches, so one missing x closes it to some).
/// Root may always. A mount whose daemon checks permissions lets the kernel
/// keep names only in such a directory (the FUSE adapter's `name_ttl`).
pub fn all_may_search(dir: &Attr) -> bool {
    dir.perm & 0o111 == 0o111
}

/// A name may be added to directory `dir` (`may_create`): write and search.
pub fn may_add(ctx: &Ctx, dir: &Attr) -> Result<()> {
    access(ctx, dir, W_OK | X_OK)
}

/// The part of `may_delete` that needs only the directory: write and
/// search on it. Returns whether the child's owner matters too (a sticky
/// directory the caller does not own, nor is root): then `sticky` decides.
pub fn may_delete_in(ctx: &Ctx, dir: &Attr) -> Result<bool> {
    if !ctx.check_perms {
        return Ok(false);
    }
    access(ctx, dir, W_OK | X_OK)?;
    Ok(dir.perm & 0o1000 != 0 && ctx.uid != 0 && ctx.uid != dir.uid)
}

/// The sticky bit's rule (`check_sticky`), once `may_delete_in` said the
/// child's owner matters: only the child's owner may remove or rename it.
pub fn sticky(ctx: &Ctx, child_uid: u32) -> Result<()> {
    if ctx.uid != child_uid {
        return Err(Error::NotPermitted);
    }
    Ok(())
}

/// A name of `child` may be removed from `dir` (unlink, rmdir, the source
/// and a replaced target of rename): `may_delete`.
pub fn may_delete(ctx: &Ctx, dir: &Attr, child: &Attr) -> Result<()> {
    if may_delete_in(ctx, dir)? {
        sticky(ctx, child.uid)?;
    }
    Ok(())
}

/// setattr's ownership rules (`setattr_prepare`, `chown_ok`, `chgrp_ok`):
/// chmod and setting times to a given value only by the owner (or root);
/// chown only by root; chgrp by the owner to a group of its own; truncate
/// with write access (not through an open handle, whose open checked);
/// times to now with write access or by the owner.
pub fn may_setattr(ctx: &Ctx, a: &Attr, sa: &SetAttr) -> Result<()> {
    if !ctx.check_perms {
        return Ok(());
    }
    let owner = owner_or_root(ctx, a);
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
        access(ctx, a, W_OK)?;
    }
    for ts in [sa.atime, sa.mtime].into_iter().flatten() {
        match ts {
            TimeSet::At(_) if !owner => return Err(Error::NotPermitted),
            TimeSet::Now if !owner => access(ctx, a, W_OK)?,
            _ => {}
        }
    }
    Ok(())
}

/// The permission bits a chmod to `perm` leaves (`setattr_prepare`): a
/// caller neither in the file's group nor root loses the setgid bit it
/// asked for. When the kernel checks permissions it has done this already.
pub fn chmod_perm(ctx: &Ctx, a: &Attr, perm: u16) -> u16 {
    if ctx.check_perms && !in_group_or_root(ctx, a.gid) {
        perm & !0o2000
    } else {
        perm
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::types::Ts;

    #[test]
    fn an_open_asks_read_write_or_both_and_truncate_asks_write() {
        assert_eq!(open_access(0), R_OK);
        assert_eq!(open_access(1), W_OK);
        assert_eq!(open_access(2), R_OK | W_OK);
        // Mode 3 (ioctl only) asks both, as Linux's ACC_MODE table.
        assert_eq!(open_access(3), R_OK | W_OK);
        assert_eq!(open_access(O_TRUNC), R_OK | W_OK);
        assert_eq!(open_access(O_WRONLY | O_TRUNC), W_OK);
    }

    pub(crate) fn attr(kind: Kind, perm: u16, uid: u32, gid: u32) -> Attr {
        let mut a = Attr::root(Ts::default());
        a.kind = kind;
        a.perm = perm;
        a.uid = uid;
        a.gid = gid;
        a
    }

    pub(crate) fn user(uid: u32, gid: u32, groups: &[u32]) -> Ctx {
        Ctx {
            groups: groups.to_vec(),
            ..Ctx::user(uid, gid)
        }
    }

    #[test]
    fn all_may_search_only_with_x_in_every_class() {
        assert!(all_may_search(&attr(Kind::Dir, 0o755, 0, 0)));
        assert!(all_may_search(&attr(Kind::Dir, 0o711, 0, 0)));
        assert!(!all_may_search(&attr(Kind::Dir, 0o700, 0, 0)));
        assert!(!all_may_search(&attr(Kind::Dir, 0o750, 0, 0)));
        // x for others but not for the group: a member is refused.
        assert!(!all_may_search(&attr(Kind::Dir, 0o705, 0, 0)));
    }

    #[test]
    fn the_owner_class_decides_for_the_owner_even_when_others_may_more() {
        let a = attr(Kind::File, 0o077, 1000, 1000);
        assert_eq!(
            access(&user(1000, 1000, &[]), &a, R_OK),
            Err(Error::PermissionDenied)
        );
        assert_eq!(access(&user(1001, 1000, &[]), &a, R_OK), Ok(()));
    }

    #[test]
    fn a_supplementary_group_picks_the_group_class() {
        let a = attr(Kind::File, 0o640, 1, 50);
        assert_eq!(access(&user(1000, 1000, &[50]), &a, R_OK), Ok(()));
        assert_eq!(
            access(&user(1000, 1000, &[]), &a, R_OK),
            Err(Error::PermissionDenied)
        );
    }

    #[test]
    fn root_may_not_execute_a_file_with_no_x_bit_but_may_search_any_directory() {
        let root = Ctx {
            check_perms: true,
            ..Ctx::root()
        };
        assert_eq!(
            access(&root, &attr(Kind::File, 0o666, 1, 1), X_OK),
            Err(Error::PermissionDenied)
        );
        assert_eq!(access(&root, &attr(Kind::File, 0o100, 1, 1), X_OK), Ok(()));
        assert_eq!(access(&root, &attr(Kind::Dir, 0o000, 1, 1), X_OK), Ok(()));
        assert_eq!(
            access(&root, &attr(Kind::File, 0o000, 1, 1), R_OK | W_OK),
            Ok(())
        );
    }

    #[test]
    fn without_daemon_checks_every_access_is_the_kernels() {
        let ctx = Ctx {
            check_perms: false,
            ..user(1000, 1000, &[])
        };
        assert_eq!(
            access(&ctx, &attr(Kind::File, 0, 1, 1), R_OK | W_OK),
            Ok(())
        );
        assert_eq!(
            may_delete(
                &ctx,
                &attr(Kind::Dir, 0o1777, 1, 1),
                &attr(Kind::File, 0o644, 2, 2)
            ),
            Ok(())
        );
    }

    #[test]
    fn adding_a_name_needs_write_and_search_on_the_directory() {
        let u = user(1000, 1000, &[]);
        assert_eq!(may_add(&u, &attr(Kind::Dir, 0o700, 1000, 1)), Ok(()));
        assert_eq!(
            may_add(&u, &attr(Kind::Dir, 0o500, 1000, 1)),
            Err(Error::PermissionDenied)
        );
        assert_eq!(
            may_add(&u, &attr(Kind::Dir, 0o600, 1000, 1)),
            Err(Error::PermissionDenied)
        );
    }

    #[test]
    fn in_a_sticky_directory_only_the_childs_owner_the_directorys_owner_or_root_removes() {
        let dir = attr(Kind::Dir, 0o1777, 10, 10);
        let child = attr(Kind::File, 0o666, 20, 20);
        assert_eq!(may_delete(&user(20, 1, &[]), &dir, &child), Ok(()));
        assert_eq!(may_delete(&user(10, 1, &[]), &dir, &child), Ok(()));
        let root = Ctx {
            check_perms: true,
            ..Ctx::root()
        };
        assert_eq!(may_delete(&root, &dir, &child), Ok(()));
        assert_eq!(
            may_delete(&user(30, 1, &[]), &dir, &child),
            Err(Error::NotPermitted)
        );
        // Not sticky: write on the directory is enough.
        let plain = attr(Kind::Dir, 0o777, 10, 10);
        assert_eq!(may_delete(&user(30, 1, &[]), &plain, &child), Ok(()));
    }

    #[test]
    fn removing_a_name_needs_write_and_search_before_the_sticky_bit() {
        let dir = attr(Kind::Dir, 0o1755, 10, 10);
        let child = attr(Kind::File, 0o666, 20, 20);
        assert_eq!(
            may_delete(&user(20, 1, &[]), &dir, &child),
            Err(Error::PermissionDenied)
        );
    }

    #[test]
    fn chmod_is_for_the_owner_or_root() {
        let a = attr(Kind::File, 0o644, 1000, 1000);
        let sa = SetAttr {
            mode: Some(0o600),
            ..Default::default()
        };
        assert_eq!(may_setattr(&user(1000, 1, &[]), &a, &sa), Ok(()));
        assert_eq!(
            may_setattr(&user(1001, 1000, &[]), &a, &sa),
            Err(Error::NotPermitted)
        );
    }

    #[test]
    fn chown_to_another_user_is_for_root_only_and_to_oneself_a_no_op() {
        let a = attr(Kind::File, 0o644, 1000, 1000);
        let give = SetAttr {
            uid: Some(1001),
            ..Default::default()
        };
        assert_eq!(
            may_setattr(&user(1000, 1000, &[]), &a, &give),
            Err(Error::NotPermitted)
        );
        let same = SetAttr {
            uid: Some(1000),
            ..Default::default()
        };
        assert_eq!(may_setattr(&user(1000, 1000, &[]), &a, &same), Ok(()));
    }

    #[test]
    fn chgrp_by_the_owner_only_to_a_group_it_is_in() {
        let a = attr(Kind::File, 0o644, 1000, 1000);
        let to = |g| SetAttr {
            gid: Some(g),
            ..Default::default()
        };
        assert_eq!(may_setattr(&user(1000, 1000, &[50]), &a, &to(50)), Ok(()));
        assert_eq!(
            may_setattr(&user(1000, 1000, &[50]), &a, &to(51)),
            Err(Error::NotPermitted)
        );
        assert_eq!(
            may_setattr(&user(1001, 1001, &[50]), &a, &to(50)),
            Err(Error::NotPermitted)
        );
    }

    #[test]
    fn truncate_needs_write_access_unless_through_an_open_handle() {
        let a = attr(Kind::File, 0o444, 1000, 1000);
        let mut sa = SetAttr {
            size: Some(0),
            ..Default::default()
        };
        assert_eq!(
            may_setattr(&user(1000, 1000, &[]), &a, &sa),
            Err(Error::PermissionDenied)
        );
        sa.by_handle = true;
        assert_eq!(may_setattr(&user(1000, 1000, &[]), &a, &sa), Ok(()));
    }

    #[test]
    fn times_to_now_need_write_access_and_to_a_given_time_ownership() {
        let a = attr(Kind::File, 0o666, 1000, 1000);
        let now = SetAttr {
            mtime: Some(TimeSet::Now),
            ..Default::default()
        };
        let at = SetAttr {
            mtime: Some(TimeSet::At(crate::types::Ts::default())),
            ..Default::default()
        };
        assert_eq!(may_setattr(&user(1001, 1001, &[]), &a, &now), Ok(()));
        assert_eq!(
            may_setattr(&user(1001, 1001, &[]), &a, &at),
            Err(Error::NotPermitted)
        );
        assert_eq!(may_setattr(&user(1000, 1, &[]), &a, &at), Ok(()));
    }

    #[test]
    fn chmod_by_a_caller_outside_the_files_group_drops_setgid() {
        let a = attr(Kind::File, 0o755, 1000, 50);
        assert_eq!(chmod_perm(&user(1000, 1000, &[]), &a, 0o2755), 0o0755);
        assert_eq!(chmod_perm(&user(1000, 1000, &[50]), &a, 0o2755), 0o2755);
        assert_eq!(chmod_perm(&user(1000, 50, &[]), &a, 0o2755), 0o2755);
        let root = Ctx {
            check_perms: true,
            ..Ctx::root()
        };
        assert_eq!(chmod_perm(&root, &a, 0o2755), 0o2755);
        // The kernel did it already when it checks.
        let kernel = Ctx {
            check_perms: false,
            ..user(1000, 1000, &[])
        };
        assert_eq!(chmod_perm(&kernel, &a, 0o2755), 0o2755);
    }
}
