//! One rule set (`shoal_core::rules`), two mechanisms: the same caller and
//! the same attributes get the same answer from the embedded engine and
//! from the namespace on a shared store (here the simulator), except in the
//! rows of docs/rules.md's differences table (`rules::modes`), which the
//! last test checks each mode against. The answers changed to Linux's when
//! the rules were written once are pinned here: each such test failed
//! before (the test's comment says how).

use shoal_cluster::ns::{self, ClusterFs, SessionOpts};
use shoal_cluster::sim::SimStore;
use shoal_cluster::ClusterStore;
use shoal_core::rules::modes;
use shoal_core::{Ctx, Engine, Error, Namespace, SetAttr, RENAME_NOREPLACE, ROOT_INO};
use shoal_testkit::setup;
use std::sync::Arc;

fn engine() -> Arc<Engine> {
    setup::fresh().1
}

fn shared() -> Arc<ClusterFs> {
    let s = SimStore::new();
    ns::mkfs(&*s).unwrap();
    ClusterFs::open(s as Arc<dyn ClusterStore>, SessionOpts::default()).unwrap()
}

fn long() -> Vec<u8> {
    vec![b'a'; 256]
}

/// The name cases: (what, name, errno of a create, of an unlink, of an
/// rmdir, of a rename from it).
fn name_cases() -> Vec<(&'static str, Vec<u8>, [Error; 4])> {
    use Error::*;
    vec![
        (
            "empty",
            b"".to_vec(),
            [NotFound, NotFound, NotFound, NotFound],
        ),
        (".", b".".to_vec(), [Exists, IsDir, Invalid, Invalid]),
        ("..", b"..".to_vec(), [Exists, IsDir, NotEmpty, Invalid]),
        (
            "slash",
            b"a/b".to_vec(),
            [Invalid, Invalid, Invalid, Invalid],
        ),
        (
            "nul",
            b"a\0b".to_vec(),
            [Invalid, Invalid, Invalid, Invalid],
        ),
        (
            "long",
            long(),
            [NameTooLong, NameTooLong, NameTooLong, NameTooLong],
        ),
    ]
}

/// Before: the shared namespace answered EINVAL for an empty name and for
/// `.` (the engine ENOENT and EEXIST), checked no name on unlink and rmdir
/// (so `.` was ENOENT there), and let a NUL through.
#[test]
fn a_bad_name_gets_the_same_errno_from_both_modes() {
    let e = engine();
    let fs = shared();
    let ctx = Ctx::root();
    let f = e.create(&ctx, ROOT_INO, b"f", 0o644).unwrap();
    let g = fs.create(ROOT_INO, b"f", 0o644).unwrap();
    for (what, name, [create, unlink, rmdir, rename]) in name_cases() {
        let n = &name[..];
        assert_eq!(
            e.create(&ctx, ROOT_INO, n, 0o644).err(),
            Some(create.clone()),
            "engine create {what}"
        );
        assert_eq!(
            fs.create(ROOT_INO, n, 0o644).err(),
            Some(create.clone()),
            "shared create {what}"
        );
        assert_eq!(
            e.mkdir(&ctx, ROOT_INO, n, 0o755).err(),
            Some(create.clone()),
            "engine mkdir {what}"
        );
        assert_eq!(
            fs.mkdir(ROOT_INO, n, 0o755).err(),
            Some(create.clone()),
            "shared mkdir {what}"
        );
        assert_eq!(
            e.link(&ctx, f.ino, ROOT_INO, n).err(),
            Some(create.clone()),
            "engine link {what}"
        );
        assert_eq!(
            fs.link(g.ino, ROOT_INO, n).err(),
            Some(create),
            "shared link {what}"
        );
        assert_eq!(
            e.unlink(&ctx, ROOT_INO, n),
            Err(unlink.clone()),
            "engine unlink {what}"
        );
        assert_eq!(fs.unlink(ROOT_INO, n), Err(unlink), "shared unlink {what}");
        assert_eq!(
            e.rmdir(&ctx, ROOT_INO, n),
            Err(rmdir.clone()),
            "engine rmdir {what}"
        );
        assert_eq!(fs.rmdir(ROOT_INO, n), Err(rmdir), "shared rmdir {what}");
        assert_eq!(
            e.rename(&ctx, ROOT_INO, n, ROOT_INO, b"x", 0),
            Err(rename.clone()),
            "engine rename {what}"
        );
        assert_eq!(
            fs.rename(ROOT_INO, n, ROOT_INO, b"x"),
            Err(rename.clone()),
            "shared rename {what}"
        );
        assert_eq!(
            e.rename(&ctx, ROOT_INO, b"f", ROOT_INO, n, 0),
            Err(rename.clone()),
            "engine rename to {what}"
        );
        assert_eq!(
            fs.rename(ROOT_INO, b"f", ROOT_INO, n),
            Err(rename),
            "shared rename to {what}"
        );
    }
}

fn chmod(e: &Engine, fs: &ClusterFs, fi: u64, gi: u64, perm: u32) {
    let sa = SetAttr {
        mode: Some(perm),
        ..Default::default()
    };
    e.setattr(&Ctx::root(), fi, &sa).unwrap();
    fs.setattr(gi, &sa).unwrap();
}

/// Before: the engine spared root (and every caller when the kernel
/// checked): a root chown left setuid; Linux clears it whoever asks.
#[test]
fn chown_by_root_clears_setuid_in_both_modes() {
    let e = engine();
    let fs = shared();
    let f = e.create(&Ctx::root(), ROOT_INO, b"f", 0o644).unwrap();
    let g = fs.create(ROOT_INO, b"f", 0o644).unwrap();
    chmod(&e, &fs, f.ino, g.ino, 0o4755);
    let to = SetAttr {
        uid: Some(5),
        ..Default::default()
    };
    assert_eq!(e.setattr(&Ctx::root(), f.ino, &to).unwrap().perm, 0o755);
    assert_eq!(fs.setattr(g.ino, &to).unwrap().perm, 0o755);
    // Setgid with group exec goes too; a directory keeps both.
    chmod(&e, &fs, f.ino, g.ino, 0o6755);
    assert_eq!(e.setattr(&Ctx::root(), f.ino, &to).unwrap().perm, 0o755);
    assert_eq!(fs.setattr(g.ino, &to).unwrap().perm, 0o755);
    let d = e.mkdir(&Ctx::root(), ROOT_INO, b"d", 0o6775).unwrap();
    let h = fs.mkdir(ROOT_INO, b"d", 0o6775).unwrap();
    chmod(&e, &fs, d.ino, h.ino, 0o6775);
    assert_eq!(e.setattr(&Ctx::root(), d.ino, &to).unwrap().perm, 0o6775);
    assert_eq!(fs.setattr(h.ino, &to).unwrap().perm, 0o6775);
}

/// Before: the engine cleared setgid on every chown by a non-root caller
/// it checked, group exec or not; Linux keeps it for a member of the
/// file's group when the file is not group-executable, and clears it for
/// a caller outside the group.
#[test]
fn chgrp_keeps_setgid_without_group_exec_only_for_a_member_of_the_files_group() {
    let e = engine();
    let fs = shared();
    let root = Ctx::root();
    let f = e.create(&root, ROOT_INO, b"f", 0o644).unwrap();
    let g = fs.create(ROOT_INO, b"f", 0o644).unwrap();
    let own = SetAttr {
        uid: Some(1000),
        gid: Some(50),
        mode: Some(0o2745),
        ..Default::default()
    };
    e.setattr(&root, f.ino, &own).unwrap();
    fs.setattr(g.ino, &own).unwrap();
    let member = Ctx {
        groups: vec![50, 60],
        ..Ctx::user(1000, 1000)
    };
    let to60 = SetAttr {
        gid: Some(60),
        ..Default::default()
    };
    assert_eq!(e.setattr(&member, f.ino, &to60).unwrap().perm, 0o2745);
    assert_eq!(fs.setattr_as(&member, g.ino, &to60).unwrap().perm, 0o2745);
    // Now in group 60; a caller not in 60 (but in 50) chgrps back.
    let outsider = Ctx {
        groups: vec![50],
        ..Ctx::user(1000, 1000)
    };
    let to50 = SetAttr {
        gid: Some(50),
        ..Default::default()
    };
    assert_eq!(e.setattr(&outsider, f.ino, &to50).unwrap().perm, 0o745);
    assert_eq!(fs.setattr_as(&outsider, g.ino, &to50).unwrap().perm, 0o745);
}

/// Before: both modes linked an inode with no name left when it was open
/// (a file unlinked while open: the engine could not tell it from an
/// O_TMPFILE, and relied on the kernel), which Linux refuses (ENOENT).
#[test]
fn link_of_a_file_unlinked_while_open_is_enoent_in_both_modes() {
    let e = engine();
    let fs = shared();
    let root = Ctx::root();
    let f = e.create_open(&root, ROOT_INO, b"f", 0o644).unwrap();
    e.unlink(&root, ROOT_INO, b"f").unwrap();
    assert_eq!(
        e.link(&root, f.ino, ROOT_INO, b"g").err(),
        Some(Error::NotFound)
    );
    let g = fs.create(ROOT_INO, b"f", 0o644).unwrap();
    fs.open_file(g.ino).unwrap();
    fs.unlink(ROOT_INO, b"f").unwrap();
    assert_eq!(fs.link(g.ino, ROOT_INO, b"g").err(), Some(Error::NotFound));
    fs.release(g.ino).unwrap();
}

/// Before: an empty xattr name was EINVAL on the engine (ERANGE on the
/// shared namespace), and `user.` alone EOPNOTSUPP on the shared namespace
/// (EINVAL on the engine). Linux: ERANGE and EINVAL.
#[test]
fn a_bad_xattr_name_gets_the_same_errno_from_both_modes() {
    let e = engine();
    let fs = shared();
    let root = Ctx::root();
    let f = e.create(&root, ROOT_INO, b"f", 0o644).unwrap();
    let g = fs.create(ROOT_INO, b"f", 0o644).unwrap();
    let mut long = b"user.".to_vec();
    long.resize(256, b'a');
    for (name, want) in [
        (&b""[..], Error::Range),
        (&long[..], Error::Range),
        (b"user.", Error::Invalid),
        (b"trusted.", Error::Invalid),
        (b"nonamespace", Error::NotSupported),
        (b"system.other", Error::NotSupported),
    ] {
        let what = String::from_utf8_lossy(name);
        assert_eq!(
            e.setxattr(&root, f.ino, name, b"v", 0),
            Err(want.clone()),
            "engine set {what}"
        );
        assert_eq!(
            fs.setxattr(g.ino, name, b"v", 0),
            Err(want.clone()),
            "shared set {what}"
        );
        assert_eq!(
            e.getxattr(&root, f.ino, name),
            Err(want.clone()),
            "engine get {what}"
        );
        assert_eq!(
            fs.getxattr(g.ino, name),
            Err(want.clone()),
            "shared get {what}"
        );
        assert_eq!(
            e.removexattr(&root, f.ino, name),
            Err(want.clone()),
            "engine remove {what}"
        );
        assert_eq!(
            fs.removexattr(g.ino, name),
            Err(want),
            "shared remove {what}"
        );
    }
    let big = vec![0; shoal_core::XATTR_SIZE_MAX + 1];
    assert_eq!(
        e.setxattr(&root, f.ino, b"user.x", &big, 0),
        Err(Error::Range)
    );
    assert_eq!(fs.setxattr(g.ino, b"user.x", &big, 0), Err(Error::Range));
}

/// A setxattr of one mode.
type Set<'a> = dyn Fn(&[u8], &[u8]) -> Result<(), Error> + 'a;

/// Before: the engine checked its xattr total only when a name was added,
/// so a replacement could grow an inode's xattrs past it. Each mode's
/// total is its row of the differences table.
#[test]
fn an_xattr_replaced_past_the_modes_total_is_enospc() {
    let e = engine();
    let fs = shared();
    let root = Ctx::root();
    let f = e.create(&root, ROOT_INO, b"f", 0o644).unwrap();
    let g = fs.create(ROOT_INO, b"f", 0o644).unwrap();
    // Fill to 100 bytes under the total with names of 6 bytes ("user.a"...).
    let fill = |total: usize, set: &Set| {
        let mut left = total - 100;
        for c in b'a'..=b'z' {
            let v = (left - 6).min(60000);
            set(&[b'u', b's', b'e', b'r', b'.', c], &vec![1; v]).unwrap();
            left -= v + 6;
            if left < 100 {
                break;
            }
        }
        // The last 100 (and a bit) in "user.z".
        set(b"user.z", &vec![1; left + 94]).unwrap();
        assert_eq!(set(b"user.z", &vec![1; left + 95]), Err(Error::NoSpace));
    };
    fill(modes::EMBEDDED.xattr_total, &|n, v| {
        e.setxattr(&root, f.ino, n, v, 0)
    });
    fill(modes::SHARED.xattr_total, &|n, v| {
        fs.setxattr(g.ino, n, v, 0)
    });
}

/// The differences table, as each mode answers it: a shared namespace
/// keeps fewer xattr bytes per inode and counts no subdirectories in a
/// directory's link count (docs/rules.md says why).
#[test]
fn each_mode_answers_its_row_of_the_differences_table() {
    let e = engine();
    let fs = shared();
    let root = Ctx::root();
    let f = e.create(&root, ROOT_INO, b"f", 0o644).unwrap();
    let g = fs.create(ROOT_INO, b"f", 0o644).unwrap();
    // One value as large as the shared total allows less its name.
    let v = vec![0; modes::SHARED.xattr_total - b"user.big".len()];
    assert_eq!(e.setxattr(&root, f.ino, b"user.big", &v, 0), Ok(()));
    assert_eq!(fs.setxattr(g.ino, b"user.big", &v, 0), Ok(()));
    assert_eq!(
        fs.setxattr(g.ino, b"user.more", b"x", 0),
        Err(Error::NoSpace)
    );
    assert_eq!(e.setxattr(&root, f.ino, b"user.more", b"x", 0), Ok(()));
    e.mkdir(&root, ROOT_INO, b"d", 0o755).unwrap();
    fs.mkdir(ROOT_INO, b"d", 0o755).unwrap();
    let nlink = |counts: bool| if counts { 3 } else { 1 };
    assert_eq!(
        e.getattr(ROOT_INO).unwrap().nlink,
        nlink(modes::EMBEDDED.dir_nlink_counts_subdirs)
    );
    assert_eq!(
        fs.getattr(ROOT_INO).unwrap().nlink,
        nlink(modes::SHARED.dir_nlink_counts_subdirs)
    );
}

/// Before: the engine compared inodes first, so RENAME_NOREPLACE onto
/// another name of the source's own inode succeeded; Linux looks at the
/// name first (EEXIST), as the shared namespace did.
#[test]
fn rename_noreplace_onto_a_name_of_the_same_inode_is_eexist_in_both_modes() {
    let e = engine();
    let fs = shared();
    let root = Ctx::root();
    let f = e.create(&root, ROOT_INO, b"f", 0o644).unwrap();
    e.link(&root, f.ino, ROOT_INO, b"g").unwrap();
    let g = fs.create(ROOT_INO, b"f", 0o644).unwrap();
    fs.link(g.ino, ROOT_INO, b"g").unwrap();
    assert_eq!(
        e.rename(&root, ROOT_INO, b"f", ROOT_INO, b"g", RENAME_NOREPLACE),
        Err(Error::Exists)
    );
    assert_eq!(
        fs.rename_flags(ROOT_INO, b"f", ROOT_INO, b"g", true),
        Err(Error::Exists)
    );
    // Without it, a rename onto another name of the same inode does nothing.
    assert_eq!(e.rename(&root, ROOT_INO, b"f", ROOT_INO, b"g", 0), Ok(()));
    assert_eq!(fs.rename(ROOT_INO, b"f", ROOT_INO, b"g"), Ok(()));
    assert!(e.lookup(&root, ROOT_INO, b"f").is_ok());
    assert!(fs.lookup(ROOT_INO, b"f").is_ok());
}

/// A directory moved onto a file inside itself: the loop is found first
/// (EINVAL), before the kinds are compared (ENOTDIR), in both modes.
#[test]
fn a_directory_moved_under_itself_is_einval_before_the_kinds_are_compared() {
    let e = engine();
    let fs = shared();
    let root = Ctx::root();
    let d = e.mkdir(&root, ROOT_INO, b"d", 0o755).unwrap();
    e.create(&root, d.ino, b"f", 0o644).unwrap();
    let h = fs.mkdir(ROOT_INO, b"d", 0o755).unwrap();
    fs.create(h.ino, b"f", 0o644).unwrap();
    assert_eq!(
        e.rename(&root, ROOT_INO, b"d", d.ino, b"f", 0),
        Err(Error::Invalid)
    );
    assert_eq!(fs.rename(ROOT_INO, b"d", h.ino, b"f"), Err(Error::Invalid));
}

/// Before: the shared namespace checked no permissions whatever the
/// caller (most of its operations took none), so a library caller with
/// `Ctx::user` could create in root's 0755 directory, remove another's file
/// from a sticky one, chmod another's file and read its xattrs there, where
/// the engine refused. Through the one surface (`Namespace`) both refuse,
/// with the same errno, and let the owner.
#[test]
fn a_checked_caller_is_refused_the_same_by_both_modes() {
    let e = engine();
    let fs = shared();
    let root = Ctx::root();
    let alice = Ctx::user(1000, 1000);
    let bob = Ctx::user(1001, 1001);
    for ns in [&*e as &dyn Namespace, &*fs] {
        let chmod = |_: u64, mode| SetAttr {
            mode: Some(mode),
            ..Default::default()
        };
        let closed = ns.mkdir(&root, ROOT_INO, b"closed", 0o755).unwrap();
        let private = ns.mkdir(&root, ROOT_INO, b"private", 0o700).unwrap();
        let tmp = ns.mkdir(&root, ROOT_INO, b"tmp", 0o777).unwrap();
        ns.setattr(&root, tmp.ino, &chmod(tmp.ino, 0o1777)).unwrap();
        let f = ns.create(&alice, tmp.ino, b"f", 0o600).unwrap();
        assert_eq!(f.uid, 1000);
        ns.setxattr(&alice, f.ino, b"user.k", b"v", 0).unwrap();
        let denied = Err(Error::PermissionDenied);
        let not_permitted = Err(Error::NotPermitted);
        assert_eq!(ns.create(&bob, closed.ino, b"x", 0o644).map(|_| ()), denied);
        assert_eq!(ns.mkdir(&bob, closed.ino, b"x", 0o755).map(|_| ()), denied);
        assert_eq!(ns.lookup(&bob, private.ino, b"x").map(|_| ()), denied);
        assert_eq!(ns.unlink(&bob, tmp.ino, b"f"), not_permitted, "sticky");
        assert_eq!(
            ns.rename(&bob, tmp.ino, b"f", tmp.ino, b"g", 0),
            not_permitted,
            "sticky"
        );
        assert_eq!(
            ns.setattr(&bob, f.ino, &chmod(f.ino, 0o644)).map(|_| ()),
            not_permitted
        );
        assert_eq!(ns.getxattr(&bob, f.ino, b"user.k").map(|_| ()), denied);
        assert_eq!(ns.setxattr(&bob, f.ino, b"user.k", b"w", 0), denied);
        assert_eq!(ns.open(&bob, f.ino, 4).map(|_| ()), denied);
        assert_eq!(ns.access(&bob, f.ino, 4), denied);
        assert_eq!(ns.link(&bob, f.ino, closed.ino, b"l").map(|_| ()), denied);
        // An existing name: EEXIST before EACCES, as Linux answers.
        ns.create(&root, closed.ino, b"there", 0o644).unwrap();
        assert_eq!(
            ns.create(&bob, closed.ino, b"there", 0o644).map(|_| ()),
            Err(Error::Exists)
        );
        // The same for link, whose existing name Linux finds
        // (`filename_create`) before it asks for write on the directory
        // (`may_create` in `vfs_link`); search on the directory comes
        // first of all (the path walk's `may_lookup`).
        assert_eq!(
            ns.link(&bob, f.ino, closed.ino, b"there").map(|_| ()),
            Err(Error::Exists)
        );
        ns.create(&root, private.ino, b"there", 0o644).unwrap();
        assert_eq!(
            ns.link(&bob, f.ino, private.ino, b"there").map(|_| ()),
            denied
        );
        assert_eq!(
            ns.create(&bob, private.ino, b"there", 0o644).map(|_| ()),
            denied
        );
        assert_eq!(
            ns.mkdir(&bob, private.ino, b"there", 0o755).map(|_| ()),
            denied
        );
        assert_eq!(
            ns.symlink(&bob, private.ino, b"there", b"t").map(|_| ()),
            denied
        );
        // The owner may; the kernel-checked caller (`Ctx::root`) is not
        // checked at all.
        assert_eq!(ns.getxattr(&alice, f.ino, b"user.k"), Ok(b"v".to_vec()));
        ns.setattr(&alice, f.ino, &chmod(f.ino, 0o644)).unwrap();
        ns.rename(&alice, tmp.ino, b"f", tmp.ino, b"g", 0).unwrap();
        ns.unlink(&alice, tmp.ino, b"g").unwrap();
        ns.create(&root, closed.ino, b"k", 0o644).unwrap();
    }
}

/// One operation on a file `f` (or, for the `dir` ones, in a directory
/// `d` holding `c`), in either mode: its error, if any.
#[derive(Clone, Copy, Debug)]
enum FlagOp {
    Unlink,
    Rename,
    Link,
    Chmod,
    Truncate,
    TimesNow,
    SetXattr,
    OpenWrite,
    OpenAppend,
    OpenRead,
    CreateIn,
    UnlinkIn,
}

const FLAG_OPS: [FlagOp; 12] = [
    FlagOp::Unlink,
    FlagOp::Rename,
    FlagOp::Link,
    FlagOp::Chmod,
    FlagOp::Truncate,
    FlagOp::TimesNow,
    FlagOp::SetXattr,
    FlagOp::OpenWrite,
    FlagOp::OpenAppend,
    FlagOp::OpenRead,
    FlagOp::CreateIn,
    FlagOp::UnlinkIn,
];

fn flag_op_engine(e: &Engine, op: FlagOp, flags: u32) -> Option<Error> {
    use shoal_core::engine::{OPEN_APPEND, OPEN_TRUNC};
    let _ = OPEN_TRUNC;
    let root = Ctx::root();
    let f = e.create(&root, ROOT_INO, b"f", 0o644).unwrap();
    let d = e.mkdir(&root, ROOT_INO, b"d", 0o755).unwrap();
    e.create(&root, d.ino, b"c", 0o644).unwrap();
    e.set_flags(&root, f.ino, flags).unwrap();
    e.set_flags(&root, d.ino, flags).unwrap();
    let sa = |sa: SetAttr| e.setattr(&root, f.ino, &sa).map(|_| ());
    let r = match op {
        FlagOp::Unlink => e.unlink(&root, ROOT_INO, b"f"),
        FlagOp::Rename => e.rename(&root, ROOT_INO, b"f", ROOT_INO, b"g", 0),
        FlagOp::Link => e.link(&root, f.ino, ROOT_INO, b"g").map(|_| ()),
        FlagOp::Chmod => sa(SetAttr {
            mode: Some(0o600),
            ..Default::default()
        }),
        FlagOp::Truncate => sa(SetAttr {
            size: Some(0),
            ..Default::default()
        }),
        FlagOp::TimesNow => sa(SetAttr {
            mtime: Some(shoal_core::TimeSet::Now),
            ..Default::default()
        }),
        FlagOp::SetXattr => e.setxattr(&root, f.ino, b"user.x", b"1", 0),
        FlagOp::OpenWrite => e.open_file(&root, f.ino, 2).map(|_| ()),
        FlagOp::OpenAppend => e.open_file(&root, f.ino, 2 | OPEN_APPEND).map(|_| ()),
        FlagOp::OpenRead => e.open_file(&root, f.ino, 4).map(|_| ()),
        FlagOp::CreateIn => e.create(&root, d.ino, b"n", 0o644).map(|_| ()),
        FlagOp::UnlinkIn => e.unlink(&root, d.ino, b"c"),
    };
    r.err()
}

fn flag_op_shared(fs: &ClusterFs, op: FlagOp, flags: u32) -> Option<Error> {
    let root = Ctx::root();
    let f = fs.create(ROOT_INO, b"f", 0o644).unwrap();
    let d = fs.mkdir(ROOT_INO, b"d", 0o755).unwrap();
    fs.create(d.ino, b"c", 0o644).unwrap();
    fs.set_flags(&root, f.ino, flags).unwrap();
    fs.set_flags(&root, d.ino, flags).unwrap();
    let sa = |sa: SetAttr| fs.setattr(f.ino, &sa).map(|_| ());
    let r = match op {
        FlagOp::Unlink => fs.unlink(ROOT_INO, b"f"),
        FlagOp::Rename => fs.rename(ROOT_INO, b"f", ROOT_INO, b"g"),
        FlagOp::Link => fs.link(f.ino, ROOT_INO, b"g").map(|_| ()),
        FlagOp::Chmod => sa(SetAttr {
            mode: Some(0o600),
            ..Default::default()
        }),
        FlagOp::Truncate => sa(SetAttr {
            size: Some(0),
            ..Default::default()
        }),
        FlagOp::TimesNow => sa(SetAttr {
            mtime: Some(shoal_core::TimeSet::Now),
            ..Default::default()
        }),
        FlagOp::SetXattr => fs.setxattr(f.ino, b"user.x", b"1", 0),
        FlagOp::OpenWrite => fs
            .open_for(&Ctx::root(), f.ino, 2, false, false)
            .map(|_| ()),
        FlagOp::OpenAppend => fs.open_for(&Ctx::root(), f.ino, 2, true, false).map(|_| ()),
        FlagOp::OpenRead => fs
            .open_for(&Ctx::root(), f.ino, 4, false, false)
            .map(|_| ()),
        FlagOp::CreateIn => fs.create(d.ino, b"n", 0o644).map(|_| ()),
        FlagOp::UnlinkIn => fs.unlink(d.ino, b"c"),
    };
    r.err()
}

/// chattr's immutable and append-only flags: every operation the
/// embedded engine refuses on them, the shared namespace refuses with the
/// same errno, and what one allows the other does (`rules::flags`). Before
/// (issue 45): a shared namespace kept no flags at all.
#[test]
fn chattr_flags_get_the_same_answers_in_both_modes() {
    use shoal_core::rules::flags::{APPEND, IMMUTABLE, NOATIME, NODUMP};
    for flags in [IMMUTABLE, APPEND, NOATIME | NODUMP, 0] {
        for op in FLAG_OPS {
            let e = flag_op_engine(&engine(), op, flags);
            let s = flag_op_shared(&shared(), op, flags);
            assert_eq!(e, s, "{op:?} with flags {flags:#x}");
            if flags & (IMMUTABLE | APPEND) == 0 {
                assert_eq!(s, None, "{op:?} with flags {flags:#x}");
            }
        }
    }
    // What flags are kept, and on what.
    let fs = shared();
    let e = engine();
    let root = Ctx::root();
    let l = fs
        .mknod(
            &root,
            ROOT_INO,
            b"l",
            &ns::NewNode {
                kind: shoal_core::Kind::Symlink,
                perm: 0o777,
                rdev: 0,
                target: b"t",
            },
        )
        .unwrap();
    let el = e.symlink(&root, ROOT_INO, b"l", b"t").unwrap();
    assert_eq!(
        fs.set_flags(&root, l.ino, NODUMP).err(),
        e.set_flags(&root, el.ino, NODUMP).err()
    );
    let f = fs.create(ROOT_INO, b"f", 0o644).unwrap();
    let ef = e.create(&root, ROOT_INO, b"f", 0o644).unwrap();
    assert_eq!(
        fs.set_flags(&root, f.ino, 0x4).err(),
        e.set_flags(&root, ef.ino, 0x4).err()
    );
    assert_eq!(
        fs.set_flags(&root, f.ino, 0x4).err(),
        Some(Error::NotSupported)
    );
}

/// O_TMPFILE in both modes: an unnamed file with no links, which link
/// names once; a file unlinked while open is not linkable (above). Before
/// (issue 45): a shared namespace had no O_TMPFILE (EOPNOTSUPP).
#[test]
fn an_o_tmpfile_is_named_by_link_in_both_modes() {
    let e = engine();
    let fs = shared();
    let root = Ctx::root();
    let et = e.tmpfile(&root, ROOT_INO, 0o600).unwrap();
    let st = fs.tmpfile(&root, ROOT_INO, 0o600).unwrap();
    assert_eq!((et.nlink, et.perm), (st.nlink, st.perm));
    assert_eq!(st.nlink, 0);
    e.link(&root, et.ino, ROOT_INO, b"t").unwrap();
    fs.link(st.ino, ROOT_INO, b"t").unwrap();
    assert_eq!(fs.lookup(ROOT_INO, b"t").unwrap().nlink, 1);
    e.release(et.ino).unwrap();
    fs.release(st.ino).unwrap();
    // Named: it stays after its last close.
    assert_eq!(fs.lookup(ROOT_INO, b"t").unwrap().ino, st.ino);
    assert_eq!(e.lookup(&root, ROOT_INO, b"t").unwrap().ino, et.ino);
}

/// renameat2's EXCHANGE and WHITEOUT in both modes. Before (issue 45): a
/// shared namespace took NOREPLACE only (the etcd adapter said EINVAL).
#[test]
fn rename_exchange_and_whiteout_answer_alike_in_both_modes() {
    use shoal_core::{Kind, RENAME_EXCHANGE};
    const WHITEOUT: u32 = shoal_core::engine::RENAME_WHITEOUT;
    let e = engine();
    let fs = shared();
    let root = Ctx::root();
    for flags in [
        RENAME_EXCHANGE,
        RENAME_EXCHANGE | RENAME_NOREPLACE,
        RENAME_EXCHANGE | WHITEOUT,
        8,
    ] {
        // No target: ENOENT for an exchange; bad flags EINVAL.
        e.create(&root, ROOT_INO, b"a", 0o644).unwrap();
        fs.create(ROOT_INO, b"a", 0o644).unwrap();
        assert_eq!(
            e.rename(&root, ROOT_INO, b"a", ROOT_INO, b"zz", flags)
                .err(),
            fs.rename_as(&root, ROOT_INO, b"a", ROOT_INO, b"zz", flags)
                .err(),
            "flags {flags:#x}"
        );
        e.unlink(&root, ROOT_INO, b"a").unwrap();
        fs.unlink(ROOT_INO, b"a").unwrap();
    }
    // A file and a directory exchanged across directories.
    let ea = e.create(&root, ROOT_INO, b"a", 0o644).unwrap();
    let sa = fs.create(ROOT_INO, b"a", 0o644).unwrap();
    let ed = e.mkdir(&root, ROOT_INO, b"d", 0o755).unwrap();
    let sd = fs.mkdir(ROOT_INO, b"d", 0o755).unwrap();
    let eb = e.mkdir(&root, ed.ino, b"b", 0o755).unwrap();
    let sb = fs.mkdir(sd.ino, b"b", 0o755).unwrap();
    e.rename(&root, ROOT_INO, b"a", ed.ino, b"b", RENAME_EXCHANGE)
        .unwrap();
    fs.rename_as(&root, ROOT_INO, b"a", sd.ino, b"b", RENAME_EXCHANGE)
        .unwrap();
    assert_eq!(e.lookup(&root, ROOT_INO, b"a").unwrap().ino, eb.ino);
    assert_eq!(e.lookup(&root, ed.ino, b"b").unwrap().ino, ea.ino);
    assert_eq!(fs.lookup(ROOT_INO, b"a").unwrap().ino, sb.ino);
    assert_eq!(fs.lookup(sd.ino, b"b").unwrap().ino, sa.ino);
    // The directory moved: its parent is the root now.
    assert_eq!(fs.lookup(sb.ino, b"..").unwrap().ino, ROOT_INO);
    // A directory exchanged into its own subtree: EINVAL.
    let ec = e.mkdir(&root, eb.ino, b"c", 0o755).unwrap();
    let sc = fs.mkdir(sb.ino, b"c", 0o755).unwrap();
    e.create(&root, ec.ino, b"x", 0o644).unwrap();
    fs.create(sc.ino, b"x", 0o644).unwrap();
    assert_eq!(
        e.rename(&root, ROOT_INO, b"a", ec.ino, b"x", RENAME_EXCHANGE)
            .err(),
        Some(Error::Invalid)
    );
    assert_eq!(
        fs.rename_as(&root, ROOT_INO, b"a", sc.ino, b"x", RENAME_EXCHANGE)
            .err(),
        Some(Error::Invalid)
    );
    // A whiteout: the old name a character device 0:0, the file moved.
    e.create(&root, ROOT_INO, b"w", 0o644).unwrap();
    let sw = fs.create(ROOT_INO, b"w", 0o644).unwrap();
    e.rename(&root, ROOT_INO, b"w", ROOT_INO, b"w2", WHITEOUT)
        .unwrap();
    fs.rename_as(&root, ROOT_INO, b"w", ROOT_INO, b"w2", WHITEOUT)
        .unwrap();
    let ew = e.lookup(&root, ROOT_INO, b"w").unwrap();
    let sww = fs.lookup(ROOT_INO, b"w").unwrap();
    assert_eq!(
        (ew.kind, ew.rdev, ew.perm, ew.nlink),
        (sww.kind, sww.rdev, sww.perm, sww.nlink)
    );
    assert_eq!(sww.kind, Kind::CharDev);
    assert_eq!(fs.lookup(ROOT_INO, b"w2").unwrap().ino, sw.ino);
}

/// fallocate(2) in both modes: the sizes and bytes after a growth, a
/// KEEP_SIZE allocation, a punched hole and a zeroed range, and the
/// errors of chattr's flags and of the largest file. Before (issue 45): an
/// etcd mount had no fallocate (EOPNOTSUPP).
#[test]
fn fallocate_answers_alike_in_both_modes() {
    use shoal_core::engine::{
        FALLOC_KEEP_SIZE as K, FALLOC_PUNCH_HOLE as P, FALLOC_ZERO_RANGE as Z,
    };
    use shoal_core::rules::flags::{APPEND, IMMUTABLE};
    let e = engine();
    let fs = shared();
    let root = Ctx::root();
    let ef = e.create(&root, ROOT_INO, b"f", 0o644).unwrap();
    let sf = fs.create(ROOT_INO, b"f", 0o644).unwrap();
    let both = |off: u64, len: u64, mode: u32| {
        let a = e.fallocate(ef.ino, off, len, mode).err();
        let b = fs.fallocate(sf.ino, off, len, mode).err();
        assert_eq!(a, b, "fallocate {off} {len} {mode:#x}");
        let ea = e.getattr(ef.ino).unwrap().size;
        let sa = fs.getattr(sf.ino).unwrap().size;
        assert_eq!(ea, sa, "size after fallocate {off} {len} {mode:#x}");
        let er = e.read(ef.ino, 0, ea as u32).unwrap();
        let sr = fs.read(sf.ino, 0, sa as u32).unwrap();
        assert_eq!(er, sr, "bytes after fallocate {off} {len} {mode:#x}");
        b
    };
    e.write(ef.ino, 0, &[7u8; 3000]).unwrap();
    fs.write(sf.ino, 0, &[7u8; 3000]).unwrap();
    assert_eq!(both(0, 2000, K), None);
    assert_eq!(both(1000, 3000, 0), None);
    assert_eq!(both(100, 200, P | K), None);
    assert_eq!(both(3900, 150, Z), None);
    assert_eq!(both(0, 10, P), Some(Error::NotSupported));
    assert_eq!(both(0, 0, 0), Some(Error::Invalid));
    assert_eq!(both(1 << 50, 1, 0), Some(Error::FileTooBig));
    e.set_flags(&root, ef.ino, APPEND).unwrap();
    fs.set_flags(&root, sf.ino, APPEND).unwrap();
    // vfs_fallocate: on an append-only file, only modes without bits
    // but KEEP_SIZE.
    assert_eq!(both(0, 10, K), None);
    assert_eq!(both(0, 10, 0), None);
    assert_eq!(both(0, 10, Z), Some(Error::NotPermitted));
    e.set_flags(&root, ef.ino, IMMUTABLE).unwrap();
    fs.set_flags(&root, sf.ino, IMMUTABLE).unwrap();
    assert_eq!(both(0, 10, K), Some(Error::NotPermitted));
}

/// The limits the review found only in the embedded engine (issue 45),
/// answered alike by both modes: a symlink's target (empty ENOENT, past
/// 4095 bytes ENAMETOOLONG), the largest file (a write or truncate past
/// 2^50 EFBIG), LINK_MAX (ext4's 65000; the shared namespace's count is
/// set in the record, as no test makes 65000 names).
#[test]
fn symlink_targets_and_the_largest_file_answer_alike_in_both_modes() {
    use shoal_core::Kind;
    let e = engine();
    let fs = shared();
    let root = Ctx::root();
    for target in [vec![], vec![b'a'; 4096], vec![b'a'; 4095]] {
        let new = ns::NewNode {
            kind: Kind::Symlink,
            perm: 0o777,
            rdev: 0,
            target: &target,
        };
        assert_eq!(
            e.symlink(&root, ROOT_INO, b"l", &target).map(|_| ()),
            fs.mknod(&root, ROOT_INO, b"l", &new).map(|_| ()),
            "a symlink to {} bytes",
            target.len()
        );
    }
    let ef = e.create(&root, ROOT_INO, b"f", 0o644).unwrap();
    let sf = fs.create(ROOT_INO, b"f", 0o644).unwrap();
    let past = SetAttr {
        size: Some((1 << 50) + 1),
        ..Default::default()
    };
    assert_eq!(
        e.setattr(&root, ef.ino, &past).err(),
        fs.setattr(sf.ino, &past).err()
    );
    assert_eq!(
        e.write(ef.ino, 1 << 50, b"x").err(),
        fs.write(sf.ino, 1 << 50, b"x").err()
    );
    assert_eq!(
        fs.write(sf.ino, 1 << 50, b"x").err(),
        Some(Error::FileTooBig)
    );
}

/// Before a fallocate by a user, setuid goes, and setgid too when the
/// user is not in the file's group (or it is group-executable), in both
/// modes (`rules::privs::write_kills`). Before: an etcd mount kept setgid
/// (xfstests generic/683-685).
#[test]
fn a_fallocate_by_a_user_clears_setgid_alike_in_both_modes() {
    let e = engine();
    let fs = shared();
    let root = Ctx::root();
    for (groups, want) in [(vec![], 0o666), (vec![100], 0o2666)] {
        let name = format!("f{}", groups.len());
        let ef = e.create(&root, ROOT_INO, name.as_bytes(), 0o644).unwrap();
        let sf = fs.create(ROOT_INO, name.as_bytes(), 0o644).unwrap();
        let sa = SetAttr {
            mode: Some(0o2666),
            gid: Some(100),
            ..Default::default()
        };
        e.setattr(&root, ef.ino, &sa).unwrap();
        fs.setattr(sf.ino, &sa).unwrap();
        let g = groups.clone();
        e.drop_privileges(1000, 1000, move || g, ef.ino).unwrap();
        let g = groups.clone();
        fs.drop_privileges(1000, 1000, move || g, sf.ino).unwrap();
        assert_eq!(
            e.getattr(ef.ino).unwrap().perm,
            want,
            "engine, groups {groups:?}"
        );
        assert_eq!(
            fs.getattr(sf.ino).unwrap().perm,
            want,
            "shared, groups {groups:?}"
        );
    }
}
