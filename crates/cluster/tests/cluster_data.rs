//! File data of a shared namespace (`shoal_cluster::filedata`): files past
//! the inline size in an object store, as two daemons see them. Bytes
//! written on one daemon read back on another after the writer's flush
//! (close-to-open), sparse and overwritten chunks, truncates across the
//! inline size that never bring back old bytes, objects deleted with their
//! file or when replaced, and the collection of objects no inode names.

use rand::{Rng, SeedableRng};
use shoal_cluster::blob::{Blobs, MemBlobs};
use shoal_cluster::filedata::{self, DATA_CHUNK};
use shoal_cluster::ns::{self, ClusterFs, SessionOpts, SHARED_INLINE_MAX};
use shoal_cluster::sim::SimStore;
use shoal_cluster::ClusterStore;
use shoal_core::{SetAttr, ROOT_INO};
use shoal_testkit::cluster_ns::{assert_clean, soon};
use std::sync::Arc;

const GRACE: std::time::Duration = std::time::Duration::from_millis(100);

fn daemons(n: usize) -> (Arc<SimStore>, Arc<MemBlobs>, Vec<Arc<ClusterFs>>) {
    let s = SimStore::new();
    ns::mkfs_with_data(&*s, Some("mem:")).unwrap();
    let b = Arc::new(MemBlobs::default());
    let fss = (0..n)
        .map(|_| {
            ClusterFs::open_with_data(
                s.clone() as Arc<dyn ClusterStore>,
                Some(b.clone() as Arc<dyn Blobs>),
                SessionOpts {
                    // An unlinked file goes (objects and all) after this
                    // (`shoal_cluster::holds`; 10 s by default).
                    unlinked_grace: GRACE,
                    ..SessionOpts::default()
                },
            )
            .unwrap()
        })
        .collect::<Vec<_>>();
    // Their record caches answer (the streams follow): the checks of what
    // a daemon knows without reading depend on it.
    for fs in &fss {
        soon("the change stream follows", true, || fs.stream_follows());
    }
    (s, b, fss)
}

fn truncate(fs: &ClusterFs, ino: u64, size: u64) {
    let sa = SetAttr {
        size: Some(size),
        ..Default::default()
    };
    fs.setattr(ino, &sa).unwrap();
}

/// The file's bytes as a program on `fs` sees them: open (which reads the
/// record from the store: another daemon's committed changes are there at
/// once, where a stat may lag by the change stream's delay), read, close.
fn read_all(fs: &ClusterFs, ino: u64) -> Vec<u8> {
    let size = open_size(fs, ino);
    let mut out = vec![];
    while (out.len() as u64) < size {
        let v = fs.read(ino, out.len() as u64, 1 << 20).unwrap();
        assert!(!v.is_empty(), "short read at {}", out.len());
        out.extend(v);
    }
    out
}

/// The size an open on `fs` finds (close-to-open).
fn open_size(fs: &ClusterFs, ino: u64) -> u64 {
    let size = fs.open_file(ino).unwrap().size;
    fs.release(ino).unwrap();
    size
}

#[test]
fn bytes_written_on_one_daemon_read_back_on_another_after_flush() {
    let (s, blobs, fss) = daemons(2);
    assert_eq!(ns::data_url(&*s).unwrap().as_deref(), Some("mem:"));
    let (a, b) = (&fss[0], &fss[1]);
    let f = a.create(ROOT_INO, b"f", 0o644).unwrap().ino;
    let mut model = vec![];
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    // Sequential 1 MiB writes across chunks, then random overwrites and a
    // sparse write far out.
    for i in 0..10u8 {
        let v = vec![i + 1; 1 << 20];
        a.write(f, model.len() as u64, &v).unwrap();
        model.extend(v);
    }
    for _ in 0..50 {
        let off = rng.gen_range(0..model.len() as u64 + 100_000);
        let len = rng.gen_range(1..300_000usize);
        let v: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        a.write(f, off, &v).unwrap();
        let end = off as usize + len;
        if model.len() < end {
            model.resize(end, 0);
        }
        model[off as usize..end].copy_from_slice(&v);
    }
    let far = 3 * DATA_CHUNK + 17 + model.len() as u64;
    a.write(f, far, b"tail").unwrap();
    model.resize(far as usize, 0);
    model.extend_from_slice(b"tail");
    // The writer sees its writes before the flush; the other daemon does not.
    assert_eq!(a.getattr(f).unwrap().size, model.len() as u64);
    assert_eq!(read_all(a, f), model);
    assert_eq!(b.getattr(f).unwrap().size, 0);
    a.flush(f).unwrap();
    assert_eq!(open_size(b, f), model.len() as u64);
    let gets = blobs.gets.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(read_all(b, f), model);
    // A chunk is fetched once, not once per read (the cache of whole chunks).
    let fetched = blobs.gets.load(std::sync::atomic::Ordering::Relaxed) - gets;
    let with_data = model.len().div_ceil(DATA_CHUNK as usize);
    assert!(
        fetched as usize <= with_data,
        "{fetched} GETs for {with_data} chunks"
    );
    // One object per chunk with data: the chunks between are holes.
    let chunks: std::collections::BTreeSet<u64> = (0..model.len() as u64)
        .step_by(4096)
        .filter(|&o| {
            model[o as usize..(o as usize + 4096).min(model.len())]
                .iter()
                .any(|&x| x != 0)
        })
        .map(|o| o / DATA_CHUNK)
        .collect();
    assert!(
        blobs.len() <= chunks.len() + 1,
        "{} objects for {} chunks",
        blobs.len(),
        chunks.len()
    );
    // An overwrite on the other daemon replaces one chunk's object; the
    // old one goes.
    let before = blobs.len();
    b.write(f, 5, b"xyz").unwrap();
    b.flush(f).unwrap();
    model[5..8].copy_from_slice(b"xyz");
    assert_eq!(blobs.len(), before);
    assert_eq!(read_all(a, f), model);
    assert_clean(&*s);
    let c = filedata::collect(&*s, &*blobs, true).unwrap();
    assert_eq!(
        (c.unnamed, c.in_flight, c.missing.len()),
        (0, 0, 0),
        "{c:?}"
    );
    // Unlinked: its objects go with it, after the grace in which another
    // daemon that has it open may hold it.
    a.unlink(ROOT_INO, b"f").unwrap();
    shoal_testkit::cluster_ns::soon("objects after the unlink", 0, || blobs.len());
    assert_clean(&*s);
}

/// The "stale bytes after truncate" class: cutting a file and extending it
/// again reads zeros, within a chunk, across chunks, and across the inline
/// size both ways.
#[test]
fn truncate_and_extend_read_zeros_never_old_bytes() {
    let (s, blobs, fss) = daemons(2);
    let (a, b) = (&fss[0], &fss[1]);
    let f = a.create(ROOT_INO, b"f", 0o644).unwrap().ino;
    let size = 2 * DATA_CHUNK + 5000;
    a.write(f, 0, &vec![0xab; size as usize]).unwrap();
    a.flush(f).unwrap();
    for cut in [DATA_CHUNK + 100, 300, SHARED_INLINE_MAX + 1, 0] {
        truncate(b, f, cut);
        truncate(b, f, size);
        let v = read_all(a, f);
        assert_eq!(v.len() as u64, size);
        assert!(v[..cut as usize].iter().all(|&x| x == 0xab), "cut {cut}");
        assert!(
            v[cut as usize..].iter().all(|&x| x == 0),
            "cut {cut}: old bytes past the cut at {:?}",
            v[cut as usize..].iter().position(|&x| x != 0)
        );
        a.write(f, 0, &vec![0xab; size as usize]).unwrap();
        a.flush(f).unwrap();
    }
    // The same with the chunk in the reading daemon's cache, and a write
    // past the cut that reads the cut chunk back (found by fsx on a mount).
    a.write(f, 0, &vec![0xcd; 50_000]).unwrap();
    a.flush(f).unwrap();
    assert_eq!(read_all(a, f)[..50_000], vec![0xcd; 50_000][..]);
    truncate(a, f, 10_000);
    a.write(f, 20_000, b"y").unwrap();
    a.flush(f).unwrap();
    for v in [read_all(a, f), read_all(b, f)] {
        assert_eq!(v.len(), 20_001);
        assert!(v[..10_000].iter().all(|&x| x == 0xcd));
        assert!(
            v[10_000..20_000].iter().all(|&x| x == 0),
            "old bytes past a cut, at {:?}",
            v[10_000..20_000].iter().position(|&x| x != 0)
        );
    }
    // An inline file grown by truncate keeps its bytes, then reads zeros.
    let g = a.create(ROOT_INO, b"g", 0o644).unwrap().ino;
    a.write(g, 0, b"small").unwrap();
    truncate(a, g, 3 * DATA_CHUNK);
    let v = read_all(b, g);
    assert_eq!(&v[..5], b"small");
    assert!(v[5..].iter().all(|&x| x == 0));
    truncate(a, g, 2);
    assert_eq!(read_all(b, g), b"sm");
    // A write past the inline size into a file with buffered writes, then a
    // truncate: the truncate applies to the buffered size.
    a.write(g, 10_000, b"x").unwrap();
    truncate(a, g, 9_000);
    assert_eq!(open_size(b, g), 9_000);
    assert_clean(&*s);
    a.unlink(ROOT_INO, b"f").unwrap();
    a.unlink(ROOT_INO, b"g").unwrap();
    shoal_testkit::cluster_ns::soon("objects after the unlinks", 0, || blobs.len());
}

/// Objects no inode names: those of a session that is gone are collected,
/// a live session's are kept (its uploads may be about to commit), and an
/// object a table names but the store lost is reported.
#[test]
fn objects_named_by_nothing_are_collected_and_missing_ones_reported() {
    let (s, blobs, fss) = daemons(2);
    let a = &fss[0];
    let f = a.create(ROOT_INO, b"f", 0o644).unwrap().ino;
    a.write(f, 0, &vec![1; 100_000]).unwrap();
    a.flush(f).unwrap();
    let live = format!("{f:016x}/00000005-{:016x}-99", a.session());
    let dead = format!("{f:016x}/00000005-{:016x}-98", 0xdead_u64);
    blobs.put(&live, b"in flight").unwrap();
    blobs.put(&dead, b"left by a crash").unwrap();
    let c = filedata::collect(&*s, &*blobs, false).unwrap();
    assert_eq!(
        (c.unnamed, c.in_flight, c.missing.len()),
        (1, 1, 0),
        "{c:?}"
    );
    let names: Vec<String> = blobs.list().unwrap().into_iter().map(|x| x.0).collect();
    assert!(names.contains(&live) && !names.contains(&dead));
    blobs.delete(&live).unwrap();
    // Lose the file's object: reported, and a read says what is wrong.
    let (obj, _) = blobs.list().unwrap().remove(0);
    blobs.delete(&obj).unwrap();
    let c = filedata::collect(&*s, &*blobs, true).unwrap();
    assert_eq!(c.missing, vec![obj]);
    // Read by another daemon: the writer keeps the chunk it committed
    // (`commit_buffer`), as a reader keeps what it fetched.
    // (Once B's change stream, which may lag, has brought the record.)
    soon("B's read says the object is missing", true, || {
        fss[1]
            .read(f, 0, 10)
            .is_err_and(|e| e.to_string().contains("missing"))
    });
}

/// Without an object store, a file stays within the inline size: larger
/// writes and truncates get EFBIG, as before.
#[test]
fn without_an_object_store_large_writes_are_refused() {
    let s = SimStore::new();
    ns::mkfs(&*s).unwrap();
    let a = ClusterFs::open(s.clone() as Arc<dyn ClusterStore>, SessionOpts::default()).unwrap();
    let f = a.create(ROOT_INO, b"f", 0o644).unwrap().ino;
    a.write(f, 0, b"ok").unwrap();
    assert_eq!(
        a.write(f, SHARED_INLINE_MAX, b"x"),
        Err(shoal_core::Error::FileTooBig)
    );
    assert_eq!(read_all(&a, f), b"ok");
}

/// Buffered writes of many files stay within the daemon's bound: each file
/// alone stays under its own 32 MiB, together they pass `dirty_max`, and the
/// write that crosses it commits its file. After a flush of all, nothing is
/// buffered and every byte reads back on the other daemon.
#[test]
fn buffered_writes_of_many_files_stay_within_the_bound() {
    let s = SimStore::new();
    ns::mkfs_with_data(&*s, Some("mem:")).unwrap();
    let b = Arc::new(MemBlobs::default());
    let bound = 8 << 20;
    let open = |dirty_max| {
        ClusterFs::open_with_data(
            s.clone() as Arc<dyn ClusterStore>,
            Some(b.clone() as Arc<dyn Blobs>),
            SessionOpts {
                dirty_max,
                ..SessionOpts::default()
            },
        )
        .unwrap()
    };
    let (a, other) = (open(bound), open(256 << 20));
    let chunk = vec![0x5au8; 1 << 20];
    let mut files = vec![];
    let mut peak = 0;
    for i in 0..20 {
        let f = a
            .create(ROOT_INO, format!("f{i}").as_bytes(), 0o644)
            .unwrap();
        for m in 0..2u64 {
            a.write(f.ino, m << 20, &chunk).unwrap();
            peak = peak.max(a.dirty_bytes());
        }
        files.push(f.ino);
    }
    // The bound, plus at most the one write that crossed it.
    assert!(
        peak <= bound + (1 << 20),
        "{peak} bytes buffered, bound {bound}"
    );
    assert!(
        a.dirty_bytes() > 0,
        "nothing buffered: the bound is not what flushed"
    );
    a.flush_all().unwrap();
    assert_eq!(a.dirty_bytes(), 0);
    for ino in files {
        assert_eq!(
            read_all(&other, ino),
            [chunk.clone(), chunk.clone()].concat()
        );
    }
    assert_clean(&*s);
}

/// Waits up to 10 s for `f` to hold.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let t = std::time::Instant::now();
    while !f() {
        assert!(t.elapsed().as_secs() < 10, "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A sequential writer's whole chunks are uploaded while it writes, not all
/// at its close; a chunk written over after its upload started is uploaded
/// again at the flush and the early object goes (nothing left unnamed). A
/// sequential reader on another daemon finds the next chunks fetched ahead,
/// each fetched once.
#[test]
fn whole_chunks_upload_while_writing_and_reads_fetch_ahead() {
    use std::sync::atomic::Ordering::Relaxed;
    let (s, blobs, fss) = daemons(2);
    let (a, b) = (&fss[0], &fss[1]);
    let f = a.create(ROOT_INO, b"f", 0o644).unwrap().ino;
    let mut model = vec![];
    for i in 0..3 * (DATA_CHUNK >> 20) as u8 {
        let v = vec![i + 1; 1 << 20];
        a.write(f, model.len() as u64, &v).unwrap();
        model.extend(v);
    }
    eventually("three whole chunks uploaded before the flush", || {
        blobs.puts.load(Relaxed) == 3
    });
    assert_eq!(open_size(b, f), 0, "uploaded, not committed");
    // Written over: chunk 1's early object is not this version.
    a.write(f, DATA_CHUNK + 10, b"over").unwrap();
    model[DATA_CHUNK as usize + 10..DATA_CHUNK as usize + 14].copy_from_slice(b"over");
    a.flush(f).unwrap();
    assert_eq!(blobs.puts.load(Relaxed), 4, "only chunk 1 again");
    assert_eq!(blobs.len(), 3, "the early object of chunk 1 is gone");
    let c = filedata::collect(&*s, &*blobs, true).unwrap();
    assert_eq!((c.unnamed, c.missing.len()), (0, 0), "{c:?}");

    // Two reads in order on b: the second is sequential, so chunks 1 and
    // 2 come before the reader asks for them.
    assert_eq!(open_size(b, f), model.len() as u64);
    let gets = blobs.gets.load(Relaxed);
    assert_eq!(b.read(f, 0, 1 << 20).unwrap(), model[..1 << 20]);
    assert_eq!(
        b.read(f, 1 << 20, 1 << 20).unwrap(),
        model[1 << 20..2 << 20]
    );
    eventually("chunks 1 and 2 fetched ahead", || {
        blobs.gets.load(Relaxed) == gets + 3
    });
    assert_eq!(read_all(b, f), model);
    assert_eq!(
        blobs.gets.load(Relaxed),
        gets + 3,
        "each chunk fetched once"
    );
    assert_clean(&*s);
}

/// Writes racing flushes of the same file on one daemon (a close or fsync
/// on another descriptor, or the dirty bound reached by another thread):
/// every acknowledged write is in the file after the last flush. A write
/// that waited for the buffer while a flush committed and dropped it went
/// into a buffer no map named: acknowledged, never committed.
#[test]
fn writes_racing_flushes_are_all_kept() {
    let (_s, _blobs, fss) = daemons(1);
    let a = &fss[0];
    for round in 0..8u8 {
        let f = a
            .create(ROOT_INO, &[b'r', b'a' + round], 0o644)
            .unwrap()
            .ino;
        const N: u64 = 3000;
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    a.flush(f).unwrap();
                }
            });
            for i in 0..N {
                a.write(f, i * 4096, &i.to_le_bytes()).unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        a.flush(f).unwrap();
        let bytes = read_all(a, f);
        let lost: Vec<u64> = (0..N)
            .filter(|&i| bytes[(i * 4096) as usize..][..8] != i.to_le_bytes())
            .collect();
        assert!(
            lost.is_empty(),
            "{} of {N} acknowledged writes lost, the first at page {}",
            lost.len(),
            lost[0]
        );
    }
}

/// A file synced and written again (a database's next transaction) starts
/// from the chunk its daemon just uploaded, not from a fetch of it: no
/// object read, the bytes right, and another daemon reads the same.
#[test]
fn a_write_after_a_sync_fetches_no_object() {
    use std::sync::atomic::Ordering::Relaxed;
    let (_s, _blobs, fss) = daemons(2);
    let a = &fss[0];
    let f = a.create(ROOT_INO, b"db", 0o644).unwrap().ino;
    a.write(f, 0, &vec![1; 100_000]).unwrap();
    a.flush(f).unwrap();
    for i in 0..5u8 {
        a.write(f, 4096 * i as u64, &[i + 2; 10]).unwrap();
        a.flush(f).unwrap();
    }
    assert_eq!(
        a.stats.blob_gets.load(Relaxed),
        0,
        "objects fetched by the writer"
    );
    // B knows the file through its change stream, which may lag (the
    // simulator's does): it reads the last commit once it has seen it.
    let read_b = || fss[1].read(f, 0, 100_000).unwrap_or_default();
    soon("B reads the last write", 6, || {
        read_b().get(4096 * 4).copied().unwrap_or(0)
    });
    let got = read_b();
    assert_eq!(
        &got[4096 * 4..4096 * 4 + 11],
        &[6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 1]
    );
    assert_eq!(got.iter().filter(|&&x| x == 1).count(), 100_000 - 50);
}

/// A file synced and written again (a database's next transaction) reads
/// no record: the buffer starts from the record as its daemon committed
/// it, and the commit requires that record at its revision instead of
/// reading it first; a small write at the start of a large file (a
/// database's page 1) does not read the record to find the file large.
#[test]
fn a_write_after_a_sync_reads_no_record() {
    use std::sync::atomic::Ordering::Relaxed;
    let (_s, _blobs, fss) = daemons(1);
    let a = &fss[0];
    let f = a.create(ROOT_INO, b"db", 0o644).unwrap().ino;
    a.write(f, 0, &vec![1; 100_000]).unwrap();
    a.flush(f).unwrap();
    let reads = a.stats.reads.load(Relaxed);
    for i in 0..5u8 {
        a.write(f, 0, &[i + 2; 100]).unwrap();
        a.write(f, 8192 * i as u64 + 8192, &[i + 2; 4096]).unwrap();
        a.flush(f).unwrap();
    }
    assert_eq!(a.stats.reads.load(Relaxed) - reads, 0, "records read");
    assert!(a.stats.guesses.load(Relaxed) >= 10);
    let got = read_all(a, f);
    assert_eq!(got.len(), 100_000);
    assert_eq!(&got[..101], &[[6; 100].as_slice(), &[1]].concat()[..]);
    assert_eq!(got[8192 * 5], 6);
    assert_eq!(got[8192 * 5 + 4096], 1);
}

/// A file of 100,000 bytes of 1 made by A, whose first byte B made 9 and
/// committed, each daemon having seen the other's commit: each knows the
/// file's record as the other's stream brought it or its own commit left it.
fn committed_by_both(a: &ClusterFs, b: &ClusterFs) -> u64 {
    let f = a.create(ROOT_INO, b"f", 0o644).unwrap().ino;
    a.write(f, 0, &vec![1; 100_000]).unwrap();
    a.flush(f).unwrap();
    soon("B sees the file", 100_000, || {
        b.getattr(f).map(|x| x.size).unwrap_or(0)
    });
    b.write(f, 0, &[9]).unwrap();
    b.flush(f).unwrap();
    soon("A sees B's commit", 9, || {
        a.read(f, 0, 1).map(|v| v[0]).unwrap_or(0)
    });
    f
}

/// Two daemons, B's change stream held: B's next buffer starts from its
/// own last commit of the file, older than A's since. B's commit finds
/// that (its guess of the record fails, the record read shows A's chunk)
/// and merges: A's bytes and B's, byte by byte, in one chunk.
#[test]
fn a_write_on_a_stale_base_keeps_the_other_daemons_bytes() {
    use std::sync::atomic::Ordering::Relaxed;
    let (s, _blobs, fss) = daemons(2);
    let (a, b) = (&fss[0], &fss[1]);
    let f = committed_by_both(a, b);
    s.pause_watches(true);
    // A writes the start of the chunk and grows the file; B, which has
    // not seen that, writes further on in the same chunk.
    a.write(f, 0, &[2; 10]).unwrap();
    a.write(f, 100_000, &[2; 10]).unwrap();
    a.flush(f).unwrap();
    b.write(f, 5000, &[3; 10]).unwrap();
    b.flush(f).unwrap();
    s.pause_watches(false);
    assert_eq!(b.stats.data_merges.load(Relaxed), 1);
    let got = read_all(a, f);
    assert_eq!(got.len(), 100_010, "A's growth kept");
    assert_eq!(
        &got[..11],
        &[2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1],
        "A's bytes kept"
    );
    assert_eq!(&got[5000..5011], &[3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1]);
    assert_eq!(read_all(b, f), got);
}

/// Two daemons writing one chunk at once, each from the same committed
/// base: the second commit merges instead of putting its base's bytes
/// over the first's (the last commit won the whole chunk before).
#[test]
fn two_daemons_writing_one_chunk_at_once_keep_both_writes() {
    let (_s, _blobs, fss) = daemons(2);
    let (a, b) = (&fss[0], &fss[1]);
    let f = a.create(ROOT_INO, b"f", 0o644).unwrap().ino;
    a.write(f, 0, &vec![1; 20_000]).unwrap();
    a.flush(f).unwrap();
    soon("B sees the file", 20_000, || {
        b.getattr(f).map(|x| x.size).unwrap_or(0)
    });
    a.write(f, 100, &[4; 100]).unwrap();
    b.write(f, 10_000, &[5; 100]).unwrap();
    a.flush(f).unwrap();
    b.flush(f).unwrap();
    let got = read_all(a, f);
    assert_eq!(
        &got[99..201],
        &[[1].as_slice(), &[4; 100], &[1]].concat()[..]
    );
    assert_eq!(
        &got[9_999..10_101],
        &[[1].as_slice(), &[5; 100], &[1]].concat()[..]
    );
}

/// More separate writes into one chunk than a buffer keeps apart: on a
/// guessed base the buffer reads the record then and merges, so the other
/// daemon's bytes between them stay.
#[test]
fn many_scattered_writes_on_a_stale_base_keep_the_other_daemons_bytes() {
    use std::sync::atomic::Ordering::Relaxed;
    let (s, _blobs, fss) = daemons(2);
    let (a, b) = (&fss[0], &fss[1]);
    let f = committed_by_both(a, b);
    s.pause_watches(true);
    a.write(f, 1001, &[2; 10]).unwrap();
    a.flush(f).unwrap();
    let reads = b.stats.reads.load(Relaxed);
    for i in 0..100u64 {
        b.write(f, i * 1000, &[3]).unwrap();
    }
    assert!(b.stats.reads.load(Relaxed) > reads, "B confirmed its base");
    b.flush(f).unwrap();
    s.pause_watches(false);
    let got = read_all(a, f);
    assert_eq!(&got[1000..1012], &[3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1]);
    assert!((0..100).all(|i| got[i * 1000] == 3));
}

/// A stale base of a large file, and the file cut to the inline size on
/// the other daemon meanwhile: the writes merge into the cut file's
/// bytes, which stay in its record.
#[test]
fn a_write_on_a_stale_base_after_a_cut_to_the_inline_size() {
    let (s, _blobs, fss) = daemons(2);
    let (a, b) = (&fss[0], &fss[1]);
    let f = committed_by_both(a, b);
    s.pause_watches(true);
    a.write(f, 20, &[5; 10]).unwrap();
    a.flush(f).unwrap();
    truncate(a, f, 100);
    b.write(f, 50, &[3; 10]).unwrap();
    b.flush(f).unwrap();
    s.pause_watches(false);
    let got = read_all(a, f);
    let mut want = vec![1u8; 100];
    want[0] = 9;
    want[20..30].fill(5);
    want[50..60].fill(3);
    assert_eq!(got, want);
    assert_eq!(read_all(b, f), want);
    const { assert!(SHARED_INLINE_MAX >= 100) };
}
