//! File flags (chattr +i, +a, +A...): what immutable and append-only forbid,
//! for root too, on files and directories; that they survive a reopen (where
//! a created file's sole entry would otherwise be deleted unread); who may
//! set them; and the `fsx_xflags` spelling xfs_io uses. xfstests generic/079,
//! 545, 553 and 555 run the same rules through a mount.

use shoal_core::engine::flags::{self, APPEND, IMMUTABLE, NOATIME, NODUMP};
use shoal_core::engine::{
    FALLOC_KEEP_SIZE, FALLOC_PUNCH_HOLE, OPEN_APPEND, OPEN_TRUNC, R_OK, W_OK,
};
use shoal_core::{Config, Ctx, Engine, Error, SetAttr, TimeSet, ROOT_INO};
use shoal_testkit::setup::{self, assert_fsck_clean, fresh};

fn eperm<T: std::fmt::Debug>(r: Result<T, Error>, what: &str) {
    assert!(
        matches!(r, Err(Error::NotPermitted)),
        "{what}: {r:?}, want EPERM"
    );
}

fn set(e: &Engine, ino: u64, f: u32) {
    e.set_flags(&Ctx::root(), ino, f).unwrap();
}

/// Everything that changes an immutable file or its names fails with EPERM
/// for root; reads, stat and opening for reading still work.
fn immutable_file_refuses(e: &Engine, ino: u64) {
    let r = Ctx::root();
    eperm(e.open_file(&r, ino, W_OK), "open for write");
    eperm(e.open_file(&r, ino, R_OK | OPEN_TRUNC), "open O_TRUNC");
    eperm(e.write(ino, 0, b"x"), "write through an older handle");
    eperm(e.fallocate(ino, 0, 4096, 0), "fallocate");
    for sa in [
        SetAttr {
            size: Some(0),
            ..Default::default()
        },
        SetAttr {
            mode: Some(0o600),
            ..Default::default()
        },
        SetAttr {
            uid: Some(5),
            ..Default::default()
        },
        SetAttr {
            mtime: Some(TimeSet::Now),
            ..Default::default()
        },
    ] {
        eperm(e.setattr(&r, ino, &sa), &format!("setattr {sa:?}"));
    }
    eperm(e.setxattr(&r, ino, b"user.a", b"1", 0), "setxattr");
    eperm(e.removexattr(&r, ino, b"user.k"), "removexattr");
    eperm(e.unlink(&r, ROOT_INO, b"f"), "unlink");
    eperm(e.rename(&r, ROOT_INO, b"f", ROOT_INO, b"g", 0), "rename");
    eperm(e.link(&r, ino, ROOT_INO, b"h"), "link");
    e.create(&r, ROOT_INO, b"other", 0o644).unwrap();
    eperm(
        e.rename(&r, ROOT_INO, b"other", ROOT_INO, b"f", 0),
        "rename over it",
    );
    e.unlink(&r, ROOT_INO, b"other").unwrap();
    e.open_file(&r, ino, R_OK).unwrap();
    e.release(ino).unwrap();
    assert_eq!(e.read(ino, 0, 10).unwrap(), b"hello");
    assert_eq!(e.getxattr(&Ctx::root(), ino, b"user.k").unwrap(), b"v");
}

#[test]
fn immutable_file_is_kept_for_root_and_after_a_reopen() {
    let (store, e) = fresh();
    let r = Ctx::root();
    // Created and never read again: its entry is sole, which unlink would
    // delete unread after a reopen if chattr left it so.
    let f = e.create(&r, ROOT_INO, b"f", 0o644).unwrap();
    e.write(f.ino, 0, b"hello").unwrap();
    e.setxattr(&r, f.ino, b"user.k", b"v", 0).unwrap();
    e.open_file(&r, f.ino, W_OK).unwrap();
    let ctime = e.getattr(f.ino).unwrap().ctime;
    std::thread::sleep(std::time::Duration::from_millis(5));
    set(&e, f.ino, IMMUTABLE);
    assert!(
        e.getattr(f.ino).unwrap().ctime > ctime,
        "chattr changes ctime"
    );
    immutable_file_refuses(&e, f.ino);
    e.release(f.ino).unwrap();
    e.shutdown().unwrap();
    drop(e);
    let e = setup::open(&store, Config::default());
    // First, before anything loads the inode into the cache.
    eperm(e.unlink(&r, ROOT_INO, b"f"), "unlink of an uncached inode");
    assert_eq!(e.flags(f.ino).unwrap(), IMMUTABLE);
    immutable_file_refuses(&e, f.ino);
    set(&e, f.ino, 0);
    e.write(f.ino, 5, b"!").unwrap();
    e.unlink(&r, ROOT_INO, b"f").unwrap();
    e.shutdown().unwrap();
    assert_fsck_clean(&store);
}

#[test]
fn append_only_file_grows_only_by_appending() {
    let (store, e) = fresh();
    let r = Ctx::root();
    let f = e.create(&r, ROOT_INO, b"f", 0o644).unwrap();
    e.write(f.ino, 0, b"log1\n").unwrap();
    set(&e, f.ino, APPEND);
    eperm(
        e.open_file(&r, f.ino, W_OK),
        "open for write without O_APPEND",
    );
    eperm(
        e.open_file(&r, f.ino, W_OK | OPEN_APPEND | OPEN_TRUNC),
        "O_APPEND|O_TRUNC",
    );
    e.open_file(&r, f.ino, W_OK | OPEN_APPEND).unwrap();
    e.write(f.ino, 5, b"log2\n").unwrap();
    e.release(f.ino).unwrap();
    eperm(
        e.setattr(
            &r,
            f.ino,
            &SetAttr {
                size: Some(0),
                ..Default::default()
            },
        ),
        "truncate",
    );
    eperm(
        e.setattr(
            &r,
            f.ino,
            &SetAttr {
                mode: Some(0o600),
                ..Default::default()
            },
        ),
        "chmod",
    );
    eperm(
        e.setattr(
            &r,
            f.ino,
            &SetAttr {
                mtime: Some(TimeSet::At(f.mtime)),
                ..Default::default()
            },
        ),
        "utimes to a given time",
    );
    // touch (times to now) is allowed, as is plain allocation.
    e.setattr(
        &r,
        f.ino,
        &SetAttr {
            mtime: Some(TimeSet::Now),
            ..Default::default()
        },
    )
    .unwrap();
    e.fallocate(f.ino, 0, 8192, FALLOC_KEEP_SIZE).unwrap();
    eperm(
        e.fallocate(f.ino, 0, 4096, FALLOC_PUNCH_HOLE | FALLOC_KEEP_SIZE),
        "punch hole",
    );
    eperm(e.unlink(&r, ROOT_INO, b"f"), "unlink");
    eperm(e.setxattr(&r, f.ino, b"user.a", b"1", 0), "setxattr");
    assert_eq!(e.read(f.ino, 0, 100).unwrap(), b"log1\nlog2\n");
    set(&e, f.ino, 0);
    e.unlink(&r, ROOT_INO, b"f").unwrap();
    e.shutdown().unwrap();
    assert_fsck_clean(&store);
}

#[test]
fn directories_immutable_and_append_only() {
    let (store, e) = fresh();
    let r = Ctx::root();
    let d = e.mkdir(&r, ROOT_INO, b"d", 0o755).unwrap();
    let a = e.create(&r, d.ino, b"a", 0o644).unwrap();
    let out = e.create(&r, ROOT_INO, b"out", 0o644).unwrap();
    set(&e, d.ino, IMMUTABLE);
    eperm(
        e.create(&r, d.ino, b"b", 0o644),
        "create in an immutable directory",
    );
    eperm(e.mkdir(&r, d.ino, b"b", 0o755), "mkdir in it");
    eperm(e.unlink(&r, d.ino, b"a"), "unlink in it");
    eperm(
        e.rename(&r, ROOT_INO, b"out", d.ino, b"in", 0),
        "rename into it",
    );
    eperm(e.link(&r, out.ino, d.ino, b"in"), "link into it");
    eperm(e.rmdir(&r, ROOT_INO, b"d"), "rmdir of it");
    // Its files themselves may change.
    e.write(a.ino, 0, b"ok").unwrap();
    // Append-only: names may be added, not removed.
    set(&e, d.ino, APPEND);
    e.create(&r, d.ino, b"b", 0o644).unwrap();
    e.rename(&r, ROOT_INO, b"out", d.ino, b"in", 0).unwrap();
    eperm(
        e.unlink(&r, d.ino, b"a"),
        "unlink in an append-only directory",
    );
    eperm(
        e.rename(&r, d.ino, b"a", ROOT_INO, b"a", 0),
        "rename out of it",
    );
    eperm(
        e.rename(&r, d.ino, b"a", d.ino, b"c", 0),
        "rename inside it",
    );
    set(&e, d.ino, 0);
    for n in [&b"a"[..], b"b", b"in"] {
        e.unlink(&r, d.ino, n).unwrap();
    }
    e.rmdir(&r, ROOT_INO, b"d").unwrap();
    e.shutdown().unwrap();
    assert_fsck_clean(&store);
}

#[test]
fn who_may_set_which_flags() {
    let (_store, e) = fresh();
    let r = Ctx::root();
    let f = e.create(&r, ROOT_INO, b"f", 0o666).unwrap();
    e.setattr(
        &r,
        f.ino,
        &SetAttr {
            uid: Some(1000),
            ..Default::default()
        },
    )
    .unwrap();
    let owner = Ctx::user(1000, 1000);
    let other = Ctx::user(1001, 1001);
    e.set_flags(&owner, f.ino, NODUMP | NOATIME).unwrap();
    eperm(e.set_flags(&other, f.ino, 0), "a non-owner");
    eperm(
        e.set_flags(&owner, f.ino, IMMUTABLE),
        "+i without CAP_LINUX_IMMUTABLE",
    );
    set(&e, f.ino, APPEND);
    eperm(
        e.set_flags(&owner, f.ino, 0),
        "-a without CAP_LINUX_IMMUTABLE",
    );
    // Flags shoal cannot keep (compression, 0x4) are refused, as ext4 does.
    assert!(matches!(
        e.set_flags(&r, f.ino, 0x4),
        Err(Error::NotSupported)
    ));
    assert_eq!(e.flags(f.ino).unwrap(), APPEND);
    // Symlinks have no flags (lsattr does not ask; the ioctl needs an open).
    let s = e.symlink(&r, ROOT_INO, b"s", b"f").unwrap();
    assert!(matches!(
        e.set_flags(&r, s.ino, NODUMP),
        Err(Error::NotSupported)
    ));
}

#[test]
fn xflags_spell_the_same_flags() {
    let all = IMMUTABLE | APPEND | NODUMP | NOATIME | flags::SYNC;
    assert_eq!(flags::to_xflags(all), 0x8 | 0x10 | 0x20 | 0x40 | 0x80);
    assert_eq!(flags::from_xflags(flags::to_xflags(all), 0).unwrap(), all);
    // dirsync has no xflag: kept across an FSSETXATTR.
    assert_eq!(
        flags::from_xflags(0x8, flags::DIRSYNC | APPEND).unwrap(),
        IMMUTABLE | flags::DIRSYNC
    );
    // The DAX flag (0x8000, chattr +x) and the rest are not kept.
    assert!(flags::from_xflags(0x8000, 0).is_err());
}

#[test]
fn noatime_flag_keeps_atime() {
    let store = setup::fresh_store();
    let e = setup::open(
        &store,
        Config {
            atime: shoal_core::Atime::Strict,
            ..Config::default()
        },
    );
    let r = Ctx::root();
    let f = e.create(&r, ROOT_INO, b"f", 0o644).unwrap();
    e.write(f.ino, 0, b"data").unwrap();
    set(&e, f.ino, NOATIME);
    let before = e.getattr(f.ino).unwrap().atime;
    std::thread::sleep(std::time::Duration::from_millis(5));
    e.read(f.ino, 0, 4).unwrap();
    assert_eq!(e.getattr(f.ino).unwrap().atime, before);
    set(&e, f.ino, 0);
    e.read(f.ino, 0, 4).unwrap();
    assert!(e.getattr(f.ino).unwrap().atime > before);
}
