//! Which of setuid and setgid a change clears (ext4 is Linux's reference:
//! `should_remove_suid`, `setattr_should_drop_sgid`, `chown_common`).

use crate::types::{Attr, Ctx, Kind};

/// The permission bits a chown leaves on `a` (uid or gid given, with no
/// mode of the caller's: `chown_common` sets ATTR_KILL_SUID and
/// `setattr_should_drop_sgid`): on a non-directory setuid is cleared,
/// whoever asks, root too; setgid when the file is group-executable, or
/// when the caller is neither in the file's group (its group before the
/// chown) nor root. A directory keeps both. Done even when the owner does
/// not change (`chown(f, uid, gid)` with its own ids).
pub fn chown_perm(ctx: &Ctx, a: &Attr) -> u16 {
    if a.kind == Kind::Dir {
        return a.perm;
    }
    let mut perm = a.perm & !0o4000;
    if perm & 0o2000 != 0 && (perm & 0o010 != 0 || !super::perm::in_group_or_root(ctx, a.gid)) {
        perm &= !0o2000;
    }
    perm
}

/// `write_kills`' `in_group` for a caller of group `gid` whose other groups
/// `groups` gives: asked at most once, and only when a rule asks (the
/// FUSE adapters read the groups from /proc), the answer kept for the
/// rule's second look under the lock.
pub fn caller_in_group(gid: u32, groups: impl FnOnce() -> Vec<u32>) -> impl FnMut(u32) -> bool {
    let mut groups = Some(groups);
    let mut member: Option<bool> = None;
    move |g: u32| {
        *member.get_or_insert_with(|| g == gid || groups.take().is_some_and(|f| f().contains(&g)))
    }
}

/// The bits a write, fallocate or truncate by `uid` clears from a file of
/// `kind` with permission bits `perm` and group `gid`
/// (`should_remove_suid`, `file_remove_privs`): for a regular file, setuid,
/// and setgid when group-executable or the caller is not in the file's
/// group; root (CAP_FSETID) keeps both, and so do other types.
/// `in_group(gid)` says whether the caller is in the group, and is called
/// only when the answer depends on it (the FUSE adapter reads the groups
/// from /proc).
pub fn write_kills(
    uid: u32,
    kind: Kind,
    perm: u16,
    gid: u32,
    in_group: impl FnOnce(u32) -> bool,
) -> u16 {
    if uid == 0 || kind != Kind::File || perm & 0o6000 == 0 {
        return 0;
    }
    let mut kill = perm & 0o4000;
    if perm & 0o2000 != 0 && (perm & 0o010 != 0 || !in_group(gid)) {
        kill |= 0o2000;
    }
    kill
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::perm::tests::{attr, user};

    #[test]
    fn chown_clears_setuid_even_for_root() {
        let a = attr(Kind::File, 0o4755, 1000, 1000);
        assert_eq!(chown_perm(&Ctx::root(), &a), 0o755);
        assert_eq!(chown_perm(&user(1000, 1000, &[]), &a), 0o755);
    }

    #[test]
    fn chown_clears_setgid_of_a_group_executable_file_even_for_root() {
        let a = attr(Kind::File, 0o6755, 1000, 1000);
        assert_eq!(chown_perm(&Ctx::root(), &a), 0o755);
    }

    #[test]
    fn chown_by_root_keeps_setgid_without_group_exec() {
        let a = attr(Kind::File, 0o2745, 1000, 1000);
        assert_eq!(chown_perm(&Ctx::root(), &a), 0o2745);
    }

    #[test]
    fn chown_by_a_member_of_the_files_group_keeps_setgid_without_group_exec() {
        let a = attr(Kind::File, 0o2745, 1000, 50);
        assert_eq!(chown_perm(&user(1000, 1000, &[50]), &a), 0o2745);
    }

    #[test]
    fn chown_by_a_caller_outside_the_files_group_clears_setgid_without_group_exec() {
        let a = attr(Kind::File, 0o2745, 1000, 50);
        assert_eq!(chown_perm(&user(1000, 1000, &[]), &a), 0o745);
    }

    #[test]
    fn chown_leaves_a_directorys_setuid_and_setgid() {
        let a = attr(Kind::Dir, 0o6775, 1000, 1000);
        assert_eq!(chown_perm(&user(1000, 1, &[]), &a), 0o6775);
    }

    #[test]
    fn a_write_by_root_clears_nothing() {
        assert_eq!(write_kills(0, Kind::File, 0o6755, 5, |_| false), 0);
    }

    #[test]
    fn a_write_clears_setuid_and_setgid_with_group_exec() {
        assert_eq!(write_kills(1000, Kind::File, 0o6755, 5, |_| true), 0o6000);
        assert_eq!(write_kills(1000, Kind::File, 0o4755, 5, |_| true), 0o4000);
    }

    #[test]
    fn a_write_by_a_group_member_keeps_setgid_without_group_exec() {
        assert_eq!(write_kills(1000, Kind::File, 0o2746, 5, |g| g == 5), 0);
    }

    #[test]
    fn a_write_by_an_outsider_clears_setgid_without_group_exec() {
        assert_eq!(write_kills(1000, Kind::File, 0o2746, 5, |_| false), 0o2000);
    }

    #[test]
    fn a_write_asks_for_the_groups_only_when_they_decide() {
        let ask = |_: u32| -> bool { panic!("groups asked for") };
        assert_eq!(write_kills(1000, Kind::File, 0o4755, 5, ask), 0o4000);
        assert_eq!(write_kills(1000, Kind::File, 0o0755, 5, ask), 0);
        assert_eq!(write_kills(1000, Kind::File, 0o2775, 5, ask), 0o2000);
    }

    #[test]
    fn a_write_to_anything_but_a_regular_file_clears_nothing() {
        assert_eq!(write_kills(1000, Kind::Dir, 0o6775, 5, |_| false), 0);
    }
}
