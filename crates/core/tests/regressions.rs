//! Wrong answers found outside our own suites (xfstests, real programs), each
//! pinned by a test that failed before its fix. Engine-level: a `MemStore`,
//! reopened where the bug was in what reached the store, and fsck'ed.

use shoal_core::{Config, Ctx, Engine, MemStore, SetAttr, Store, BLOCK, ROOT_INO};
use shoal_testkit::setup::{self, assert_fsck_clean, fresh};
use std::sync::Arc;

fn engine(store: &Arc<MemStore>) -> Arc<Engine> {
    setup::open(store, Config::default())
}

fn truncate(e: &Engine, ino: u64, size: u64) {
    e.setattr(
        &Ctx::root(),
        ino,
        &SetAttr {
            size: Some(size),
            ..Default::default()
        },
    )
    .unwrap();
}

/// Run `check` on the engine, then on a fresh engine over the same store
/// (what reached the store alone), then fsck the store.
fn check_before_and_after_reopen(store: &Arc<MemStore>, e: Arc<Engine>, check: impl Fn(&Engine)) {
    check(&e);
    e.shutdown().unwrap();
    drop(e);
    let e = engine(store);
    check(&e);
    e.shutdown().unwrap();
    assert_fsck_clean(store);
}

/// xfstests generic/091 and friends: `pwrite 0 8k; truncate 0; truncate 64k`
/// read the old bytes back at offset 0, and the growth wrote them to the store.
#[test]
fn truncate_to_zero_then_grow_reads_zeros() {
    for (first, grow_by_write) in [
        (8192u64, false),
        (8192, true),
        (BLOCK + 1, false),
        (3 * BLOCK, true),
    ] {
        let (store, e) = fresh();
        let f = e.create(&Ctx::root(), ROOT_INO, b"f", 0o644).unwrap();
        e.write(f.ino, 0, &vec![0xa7; first as usize]).unwrap();
        truncate(&e, f.ino, 0);
        if grow_by_write {
            e.write(f.ino, 64 << 10, b"end").unwrap();
        } else {
            truncate(&e, f.ino, 64 << 10);
        }
        // Zeros from the cache, and from the store alone after a reopen.
        check_before_and_after_reopen(&store, e, |e| {
            let got = e.read(f.ino, 0, 16384).unwrap();
            assert!(
                got.iter().all(|&b| b == 0),
                "first={first} write={grow_by_write}: stale bytes after truncate 0"
            );
        });
    }
}

/// Shrinking to a size inside the first block keeps exactly those bytes, and
/// growing again reads zeros past them, from the cache and from the store.
#[test]
fn truncate_into_the_first_block_then_grow() {
    let (store, e) = fresh();
    let f = e.create(&Ctx::root(), ROOT_INO, b"f", 0o644).unwrap();
    e.write(f.ino, 0, &vec![0x5a; 3 * BLOCK as usize]).unwrap();
    truncate(&e, f.ino, 100);
    truncate(&e, f.ino, 2 * BLOCK + 10);
    let check = |e: &Engine| {
        let got = e.read(f.ino, 0, 3 * BLOCK as u32).unwrap();
        assert_eq!(got.len(), 2 * BLOCK as usize + 10);
        assert!(got[..100].iter().all(|&b| b == 0x5a));
        assert!(
            got[100..].iter().all(|&b| b == 0),
            "stale bytes past the truncation point"
        );
    };
    check_before_and_after_reopen(&store, e, check);
}

/// With `-o writeback_cache` the kernel sends SETATTR (and may send WRITE)
/// after the UNLINK that destroyed a file: it rewrote the inode's record, and
/// the store then held an inode no name reaches (fsck refused the mount).
#[test]
fn setattr_and_write_after_the_last_unlink_leave_nothing() {
    let (store, e) = fresh();
    // The kernel holds it, as through a mount.
    let kernel = Ctx {
        kernel_ref: true,
        ..Ctx::root()
    };
    let f = e.create(&kernel, ROOT_INO, b"f", 0o644).unwrap();
    e.write(f.ino, 0, &vec![1u8; 3 * BLOCK as usize]).unwrap();
    e.unlink(&Ctx::root(), ROOT_INO, b"f").unwrap();
    let sa = SetAttr {
        mtime: Some(shoal_core::TimeSet::Now),
        ..Default::default()
    };
    e.setattr(&Ctx::root(), f.ino, &sa).unwrap();
    e.write(f.ino, 5 * BLOCK, b"late writeback").unwrap();
    e.forget(f.ino, 1);
    e.shutdown().unwrap();
    drop(e);
    assert_fsck_clean(&store);
}

/// Punching a hole frees whole blocks (it wrote zeros before, so a punched
/// file kept its space) and reads zeros at once and after a reopen; zero
/// range does the same and can extend the file; a preallocation larger than
/// the free space is ENOSPC (xfstests generic/213).
#[test]
fn punch_hole_and_zero_range_free_blocks() {
    use shoal_core::engine::{FALLOC_KEEP_SIZE, FALLOC_PUNCH_HOLE, FALLOC_ZERO_RANGE};
    let (store, e) = fresh();
    let f = e.create(&Ctx::root(), ROOT_INO, b"f", 0o644).unwrap();
    e.write(f.ino, 0, &vec![0x33; 8 * BLOCK as usize]).unwrap();
    e.fsync(f.ino).unwrap();
    // The bytes are in the data object, not in records (whose space a
    // punch freed before format 3; the object's is freed by the
    // filesystem: `shoal_store::data_files` tests it).
    let data_keys = |s: &MemStore| {
        s.dump()
            .iter()
            .filter(|(k, _)| k.first() == Some(&b'D'))
            .count()
    };
    assert_eq!(data_keys(&store), 0);
    // Blocks 2..6 whole, parts of 1 and 6.
    e.fallocate(
        f.ino,
        BLOCK + 100,
        5 * BLOCK,
        FALLOC_PUNCH_HOLE | FALLOC_KEEP_SIZE,
    )
    .unwrap();
    let check = |e: &Engine| {
        // Blocks 0..7 (block 7 is zeroed below).
        let got = e.read(f.ino, 0, 7 * BLOCK as u32).unwrap();
        assert_eq!(got.len(), 7 * BLOCK as usize);
        let (a, z) = ((BLOCK + 100) as usize, (6 * BLOCK + 100) as usize);
        assert!(got[..a].iter().all(|&b| b == 0x33));
        assert!(
            got[a..z].iter().all(|&b| b == 0),
            "punched range is not zeros"
        );
        assert!(
            got[z..].iter().all(|&b| b == 0x33),
            "bytes after the hole changed"
        );
    };
    check(&e);
    e.fsync(f.ino).unwrap();
    e.fallocate(f.ino, 7 * BLOCK, 4 * BLOCK, FALLOC_ZERO_RANGE)
        .unwrap();
    assert_eq!(e.getattr(f.ino).unwrap().size, 11 * BLOCK);
    assert!(e
        .read(f.ino, 7 * BLOCK, BLOCK as u32)
        .unwrap()
        .iter()
        .all(|&b| b == 0));
    assert_eq!(
        e.fallocate(f.ino, 0, 1 << 50, 0),
        Err(shoal_core::Error::NoSpace)
    );
    check_before_and_after_reopen(&store, e, check);
}

/// open(2) with O_CREAT through a mount was two engine calls, create and
/// then open: another process's unlink of the new name between them
/// destroyed the file, and the open failed with ENOENT for a file the same
/// call had just made (Linux returns a descriptor to the unlinked file).
/// `create_open` counts the open under the name's lock.
#[test]
fn create_open_holds_the_file_against_an_unlink_at_once() {
    let (store, e) = fresh();
    // The two calls, with the unlink between them: the open is lost.
    let f = e.create(&Ctx::root(), ROOT_INO, b"a", 0o644).unwrap();
    e.unlink(&Ctx::root(), ROOT_INO, b"a").unwrap();
    assert!(e.open_file(&Ctx::root(), f.ino, 0).is_err());
    // One call: the file stays open, unlinked, until its release.
    let kernel = Ctx {
        kernel_ref: true,
        ..Ctx::root()
    };
    let f = e.create_open(&kernel, ROOT_INO, b"b", 0o100644).unwrap();
    e.unlink(&Ctx::root(), ROOT_INO, b"b").unwrap();
    assert_eq!(e.write(f.ino, 0, b"still open").unwrap(), 10);
    assert_eq!(e.getattr(f.ino).unwrap().nlink, 0);
    e.release(f.ino).unwrap();
    e.forget(f.ino, 1);
    assert!(e.getattr(f.ino).is_err());
    e.sync().unwrap();
    assert_fsck_clean(&store);
    // Types a create cannot make.
    assert!(e.create_open(&kernel, ROOT_INO, b"d", 0o040755).is_err());
}

/// Stores of format 1 and 2 kept file data in 4 KiB block records. Opened
/// read-write, the records move into data objects and the store becomes
/// format 3; opened read-only, it is refused with the way out, never read
/// as zeros.
#[test]
fn format_2_data_records_move_to_data_objects() {
    use shoal_core::schema;
    let (store, e) = fresh();
    let f = e.create(&Ctx::root(), ROOT_INO, b"big", 0o644).unwrap();
    let small = e.create(&Ctx::root(), ROOT_INO, b"small", 0o644).unwrap();
    e.write(small.ino, 0, b"inline bytes").unwrap();
    // The file's size past INLINE_MAX, with no data object yet: what a
    // format-2 store's inode says, beside its block records.
    truncate(&e, f.ino, 3 * BLOCK + 100);
    e.shutdown().unwrap();
    drop(e);
    store.data().remove(f.ino).unwrap();
    let block = |b: u8| vec![b; BLOCK as usize];
    store
        .write(
            &[
                (
                    schema::data_key(f.ino, 0),
                    Some(schema::encode_data(&block(1))),
                ),
                (
                    schema::data_key(f.ino, 2),
                    Some(schema::encode_data(&block(3))),
                ),
                (
                    schema::data_key(f.ino, 3),
                    Some(schema::encode_data(&[4; 100])),
                ),
                (schema::super_key(), Some(schema::encode_super_format(4, 2))),
            ],
            true,
        )
        .unwrap();
    let want = [block(1), vec![0; BLOCK as usize], block(3), vec![4; 100]].concat();
    let ro = Config {
        read_only: true,
        ..Config::default()
    };
    let refused = Engine::open(store.clone() as Arc<dyn shoal_core::Store>, ro.clone());
    assert!(
        matches!(&refused, Err(shoal_core::Error::Io(m)) if m.contains("read-write once")),
        "a read-only open of a format-2 store with data records"
    );
    check_before_and_after_reopen(&store, engine(&store), |e| {
        assert_eq!(e.read(f.ino, 0, 4 * BLOCK as u32).unwrap(), want);
        assert_eq!(e.read(small.ino, 0, 100).unwrap(), b"inline bytes");
    });
    let (lo, hi) = schema::data_records();
    assert!(store.scan(&lo, &hi, 1).unwrap().is_empty(), "records left");
    let sb = store.get(&schema::super_key()).unwrap().unwrap();
    assert_eq!(schema::decode_super_format(&sb).unwrap().1, schema::FORMAT);
    assert!(Engine::open(store.clone() as Arc<dyn shoal_core::Store>, ro).is_ok());
}

/// renameat2(RENAME_WHITEOUT), which overlayfs uses on its upper layer
/// (xfstests generic/078, 626 and 700 did not run without it): the old name
/// becomes a character device 0:0 in the rename's commit, in the same or
/// another directory, over a target or not; with RENAME_EXCHANGE it is EINVAL.
#[test]
fn rename_whiteout_leaves_a_whiteout_at_the_old_name() {
    use shoal_core::engine::{RENAME_EXCHANGE, RENAME_NOREPLACE, RENAME_WHITEOUT};
    use shoal_core::{Error, Kind};
    let (store, e) = fresh();
    let r = Ctx::user(1000, 1000);
    let root = Ctx::root();
    let d = e.mkdir(&root, ROOT_INO, b"d", 0o777).unwrap();
    e.setattr(
        &root,
        ROOT_INO,
        &SetAttr {
            mode: Some(0o777),
            ..Default::default()
        },
    )
    .unwrap();
    let a = e.create(&r, ROOT_INO, b"a", 0o644).unwrap();
    e.write(a.ino, 0, b"aaa").unwrap();
    e.create(&r, ROOT_INO, b"b", 0o644).unwrap();
    e.create(&r, ROOT_INO, b"c", 0o644).unwrap();
    // Same directory, over a target; then across directories, no target.
    e.rename(&r, ROOT_INO, b"a", ROOT_INO, b"b", RENAME_WHITEOUT)
        .unwrap();
    e.rename(
        &r,
        ROOT_INO,
        b"c",
        d.ino,
        b"c",
        RENAME_WHITEOUT | RENAME_NOREPLACE,
    )
    .unwrap();
    assert!(matches!(
        e.rename(
            &r,
            ROOT_INO,
            b"b",
            d.ino,
            b"c",
            RENAME_WHITEOUT | RENAME_EXCHANGE
        ),
        Err(Error::Invalid)
    ));
    check_before_and_after_reopen(&store, e, |e| {
        for name in [&b"a"[..], b"c"] {
            let w = e.lookup(&root, ROOT_INO, name).unwrap();
            assert_eq!(
                (w.kind, w.rdev, w.perm, w.nlink, w.uid),
                (Kind::CharDev, 0, 0, 1, 1000)
            );
        }
        let b = e.lookup(&root, ROOT_INO, b"b").unwrap();
        assert_eq!(
            (b.ino, e.read(b.ino, 0, 10).unwrap()),
            (a.ino, b"aaa".to_vec())
        );
        assert_eq!(e.lookup(&root, d.ino, b"c").unwrap().kind, Kind::File);
        // The directory counts the whiteouts: a, b, c, d.
        let names = e.readdir(ROOT_INO, 0, 100).unwrap().len();
        assert_eq!(e.getattr(ROOT_INO).unwrap().nlink, 3);
        assert!(names >= 4, "{names}");
    });
}

/// open(O_TMPFILE) (xfstests generic/004, 389, 509, 531 did not run without
/// it): an unnamed open file, nlink 0, that linkat names; one closed
/// unnamed is gone, and one still open when the engine stops is reclaimed
/// at the next open, like a file unlinked while open.
#[test]
fn tmpfile_is_an_orphan_until_linked() {
    use shoal_core::Error;
    let (store, e) = fresh();
    let r = Ctx::root();
    let named = e.tmpfile(&r, ROOT_INO, 0o600).unwrap();
    assert_eq!(named.nlink, 0);
    assert!(e.readdir(ROOT_INO, 0, 100).unwrap().is_empty());
    e.write(named.ino, 0, &vec![7u8; 3 * BLOCK as usize])
        .unwrap();
    assert_eq!(e.link(&r, named.ino, ROOT_INO, b"n").unwrap().nlink, 1);
    e.release(named.ino).unwrap();
    let closed = e.tmpfile(&r, ROOT_INO, 0o600).unwrap();
    e.write(closed.ino, 0, b"gone").unwrap();
    e.release(closed.ino).unwrap();
    assert!(matches!(e.getattr(closed.ino), Err(Error::NotFound)));
    // Unlinked and closed: linkat would be refused by the kernel; the
    // engine says ENOENT too.
    let f = e.create(&r, ROOT_INO, b"f", 0o644).unwrap();
    e.unlink(&r, ROOT_INO, b"f").unwrap();
    assert!(matches!(
        e.link(&r, f.ino, ROOT_INO, b"f2"),
        Err(Error::NotFound)
    ));
    let open = e.tmpfile(&r, ROOT_INO, 0o600).unwrap();
    e.write(open.ino, 0, &vec![1u8; 2 * BLOCK as usize])
        .unwrap();
    check_before_and_after_reopen(&store, e, |e| {
        let n = e.lookup(&r, ROOT_INO, b"n").unwrap();
        assert_eq!((n.ino, n.nlink, n.size), (named.ino, 1, 3 * BLOCK));
        assert_eq!(e.readdir(ROOT_INO, 0, 100).unwrap().len(), 1);
    });
    let e = engine(&store);
    assert!(matches!(e.getattr(open.ino), Err(Error::NotFound)));
}

/// An unlinked file's data object goes with it, however the file came by
/// it: written past INLINE_MAX here, shrunk back inline (the object stays,
/// emptied), or known only from the store after a reopen. (A file made
/// here and never past INLINE_MAX has none: its unlink removes nothing.)
#[test]
fn an_unlinked_files_data_object_goes_with_it() {
    let (store, e) = fresh();
    let big = 3 * BLOCK as usize;
    let mut inos = vec![];
    for (name, shrink) in [(&b"big"[..], false), (b"shrunk", true), (b"reopened", true)] {
        let f = e.create(&Ctx::root(), ROOT_INO, name, 0o644).unwrap();
        e.write(f.ino, 0, &vec![7; big]).unwrap();
        if shrink {
            truncate(&e, f.ino, 10);
        }
        inos.push(f.ino);
    }
    e.create(&Ctx::root(), ROOT_INO, b"small", 0o644).unwrap();
    e.unlink(&Ctx::root(), ROOT_INO, b"big").unwrap();
    e.unlink(&Ctx::root(), ROOT_INO, b"shrunk").unwrap();
    e.unlink(&Ctx::root(), ROOT_INO, b"small").unwrap();
    e.shutdown().unwrap();
    drop(e);
    let left = store.data().list().unwrap();
    assert_eq!(left, vec![inos[2]], "objects left beside the open one");
    let e = engine(&store);
    e.unlink(&Ctx::root(), ROOT_INO, b"reopened").unwrap();
    e.shutdown().unwrap();
    assert_eq!(
        store.data().list().unwrap(),
        Vec::<u64>::new(),
        "objects left"
    );
    assert_fsck_clean(&store);
}

/// 9,709 xattr names of 16 bytes on one file, then listxattr could not
/// answer (E2BIG past XATTR_LIST_MAX): `getfattr -d`, `cp -a`, `rsync -X`
/// failed on it (issue 43). A name that would pass the list's limit is
/// refused with ENOSPC; on a namespace on etcd too (one rule,
/// `xattr_list_fits`).
#[test]
fn xattr_names_stop_at_what_one_listing_holds() {
    let (_store, e) = fresh();
    let c = Ctx::root();
    let f = e.create(&c, ROOT_INO, b"f", 0o644).unwrap();
    let mut n = 0;
    let err = loop {
        let name = format!("user.name{n:011}");
        match e.setxattr(&c, f.ino, name.as_bytes(), b"", 0) {
            Ok(()) => n += 1,
            Err(err) => break err,
        }
        assert!(n < 10_000, "no limit on xattr names");
    };
    assert_eq!(err, shoal_core::Error::NoSpace);
    let listed: usize = e
        .listxattr(f.ino)
        .unwrap()
        .iter()
        .map(|n| n.len() + 1)
        .sum();
    assert!(
        listed <= shoal_core::XATTR_LIST_MAX,
        "{listed} bytes of names"
    );
    assert!(
        listed > shoal_core::XATTR_LIST_MAX - 21,
        "stopped early: {listed}"
    );
    // On a namespace on a shared store, the same.
    use shoal_cluster::ns::{self, ClusterFs, SessionOpts};
    let s = shoal_cluster::sim::SimStore::new();
    ns::mkfs(&*s).unwrap();
    let fs = ClusterFs::open(s.clone(), SessionOpts::default()).unwrap();
    let g = fs.create(ROOT_INO, b"g", 0o644).unwrap();
    let mut m = 0;
    while fs
        .setxattr(g.ino, format!("user.name{m:011}").as_bytes(), b"", 0)
        .is_ok()
    {
        m += 1;
        assert!(m < 10_000, "no limit on xattr names on a shared store");
    }
    assert_eq!(m, n, "the two stores stop at the same count");
}
