//! Several daemons' namespaces (`shoal_core::shared::ns::SharedFs`) on one
//! shared store, racing on the same names: exactly one winner where POSIX
//! says one, never a lost update, a namespace that checks clean after every
//! race; creates of different names in one directory never conflict;
//! a daemon whose session ended cannot commit; a lost answer neither loses
//! nor doubles an operation.

use shoal_core::shared::ns::{self, SessionOpts, SharedFs};
use shoal_core::shared::sim::{Fault, SimStore};
use shoal_core::shared::SharedStore;
use shoal_core::{Error, Kind, ROOT_INO};
use std::sync::Arc;
use std::time::Duration;

fn daemons(n: usize) -> (Arc<SimStore>, Vec<Arc<SharedFs>>) {
    let s = SimStore::new();
    // A round trip per call, so that the daemons' operations interleave.
    s.set_delay(Duration::from_micros(100));
    ns::mkfs(&*s).unwrap();
    let fss = (0..n)
        .map(|_| SharedFs::open(s.clone() as Arc<dyn SharedStore>, SessionOpts::default()).unwrap())
        .collect();
    (s, fss)
}

fn assert_clean(s: &SimStore) {
    let r = ns::check(s).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}

#[test]
fn one_daemon_answers_as_posix_does() {
    let (s, fs) = daemons(1);
    let a = &fs[0];
    let d = a.mkdir(ROOT_INO, b"d", 0o755).unwrap();
    let f = a.create(d.ino, b"f", 0o644).unwrap();
    assert_eq!(a.create(d.ino, b"f", 0o644), Err(Error::Exists));
    assert_eq!(a.lookup(d.ino, b"f").unwrap().ino, f.ino);
    a.write(f.ino, 0, b"hello").unwrap();
    a.write(f.ino, 10, b"!").unwrap();
    assert_eq!(a.read(f.ino, 0, 100).unwrap(), b"hello\0\0\0\0\0!");
    assert_eq!(a.rmdir(ROOT_INO, b"d"), Err(Error::NotEmpty));
    a.link(f.ino, ROOT_INO, b"g").unwrap();
    assert_eq!(a.getattr(f.ino).unwrap().nlink, 2);
    a.unlink(d.ino, b"f").unwrap();
    assert_eq!(a.getattr(f.ino).unwrap().nlink, 1);
    a.rmdir(ROOT_INO, b"d").unwrap();
    assert_eq!(a.lookup(ROOT_INO, b"d"), Err(Error::NotFound));
    // Renames: over a file, a directory not into itself, over an empty one only.
    let x = a.mkdir(ROOT_INO, b"x", 0o755).unwrap();
    let y = a.mkdir(x.ino, b"y", 0o755).unwrap();
    assert_eq!(a.rename(ROOT_INO, b"x", y.ino, b"z"), Err(Error::Invalid));
    a.create(ROOT_INO, b"h", 0o644).unwrap();
    a.rename(ROOT_INO, b"g", ROOT_INO, b"h").unwrap();
    assert_eq!(a.lookup(ROOT_INO, b"h").unwrap().ino, f.ino);
    assert_eq!(a.rename(ROOT_INO, b"h", ROOT_INO, b"x"), Err(Error::IsDir));
    a.mkdir(ROOT_INO, b"empty", 0o755).unwrap();
    a.rename(x.ino, b"y", ROOT_INO, b"empty").unwrap();
    assert_eq!(a.lookup(ROOT_INO, b"empty").unwrap().ino, y.ino);
    let names: Vec<Vec<u8>> = a
        .readdir(ROOT_INO, None, 100)
        .unwrap()
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(names, vec![b"empty".to_vec(), b"h".to_vec(), b"x".to_vec()]);
    let after = a.readdir(ROOT_INO, Some(b"empty"), 1).unwrap();
    assert_eq!(after[0].0, b"h");
    assert_eq!(a.getattr(ROOT_INO).unwrap().kind, Kind::Dir);
    assert_clean(&s);
}

#[test]
fn one_mount_sees_another_mounts_changes() {
    let (s, fs) = daemons(2);
    let (a, b) = (&fs[0], &fs[1]);
    let f = a.create(ROOT_INO, b"f", 0o644).unwrap();
    assert_eq!(b.lookup(ROOT_INO, b"f").unwrap().ino, f.ino);
    b.write(f.ino, 0, b"from b").unwrap();
    assert_eq!(a.read(f.ino, 0, 10).unwrap(), b"from b");
    a.rename(ROOT_INO, b"f", ROOT_INO, b"g").unwrap();
    assert_eq!(b.lookup(ROOT_INO, b"f"), Err(Error::NotFound));
    assert_eq!(b.lookup(ROOT_INO, b"g").unwrap().ino, f.ino);
    // A directory removed on A cannot get new entries from B.
    let d = a.mkdir(ROOT_INO, b"d", 0o755).unwrap();
    a.rmdir(ROOT_INO, b"d").unwrap();
    assert_eq!(b.create(d.ino, b"late", 0o644), Err(Error::NotFound));
    assert_clean(&s);
}

/// `threads` threads over `fss` run `op(i, fs)` at once; the results.
fn race<T: Send>(
    fss: &[Arc<SharedFs>],
    threads: usize,
    op: impl Fn(usize, &SharedFs) -> T + Sync,
) -> Vec<T> {
    let start = std::sync::Barrier::new(threads);
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|i| {
                let (fs, op, start) = (&fss[i % fss.len()], &op, &start);
                sc.spawn(move || {
                    start.wait();
                    op(i, fs)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn races_between_daemons_have_posix_answers() {
    let (s, fss) = daemons(3);
    let a = &fss[0];
    for round in 0..30 {
        // create/create: one winner.
        let name = format!("c{round}");
        let r = race(&fss, 6, |_, fs| fs.create(ROOT_INO, name.as_bytes(), 0o644));
        assert_eq!(r.iter().filter(|x| x.is_ok()).count(), 1, "{r:?}");
        assert!(r.iter().all(|x| x.is_ok() || *x == Err(Error::Exists)));
        // rmdir vs create inside: never both.
        let d = a
            .mkdir(ROOT_INO, format!("d{round}").as_bytes(), 0o755)
            .unwrap();
        // The create starts a little later each round, to land inside the
        // rmdir's window between its emptiness check and its commit.
        let r = race(&fss, 2, |i, fs| {
            if i == 0 {
                fs.rmdir(ROOT_INO, format!("d{round}").as_bytes())
                    .map(|_| ())
            } else {
                std::thread::sleep(Duration::from_micros(40 * round as u64));
                fs.create(d.ino, b"inside", 0o644).map(|_| ())
            }
        });
        assert!(
            !(r[0].is_ok() && r[1].is_ok()),
            "rmdir and a create inside both succeeded"
        );
        // rename/rename of two directories into each other: never both (a cycle).
        let x = a
            .mkdir(ROOT_INO, format!("x{round}").as_bytes(), 0o755)
            .unwrap();
        let y = a
            .mkdir(ROOT_INO, format!("y{round}").as_bytes(), 0o755)
            .unwrap();
        let r = race(&fss, 2, |i, fs| {
            if i == 0 {
                fs.rename(ROOT_INO, format!("x{round}").as_bytes(), y.ino, b"in")
            } else {
                fs.rename(ROOT_INO, format!("y{round}").as_bytes(), x.ino, b"in")
            }
        });
        assert!(!(r[0].is_ok() && r[1].is_ok()), "both renames made a cycle");
        // unlink vs link of one file: its link count stays exact (checked below).
        let f = a
            .create(ROOT_INO, format!("l{round}").as_bytes(), 0o644)
            .unwrap();
        race(&fss, 4, |i, fs| {
            if i == 0 {
                let _ = fs.unlink(ROOT_INO, format!("l{round}").as_bytes());
            } else {
                let _ = fs.link(f.ino, ROOT_INO, format!("l{round}-{i}").as_bytes());
            }
        });
        assert_clean(&s);
    }
}

/// Random operations from several daemons on a few names, then the
/// namespace checks clean: entries, link counts, parents, no cycles.
#[test]
fn random_races_leave_a_consistent_namespace() {
    use rand::{Rng, SeedableRng};
    for seed in shoal_testkit::setup::seeds(4) {
        println!("seed={seed}");
        let (s, fss) = daemons(3);
        let dirs: Vec<u64> = std::iter::once(ROOT_INO)
            .chain((0..3).map(|i| {
                fss[0]
                    .mkdir(ROOT_INO, format!("d{i}").as_bytes(), 0o755)
                    .unwrap()
                    .ino
            }))
            .collect();
        race(&fss, 6, |t, fs| {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ t as u64);
            for _ in 0..150 {
                let p = dirs[rng.gen_range(0..dirs.len())];
                let q = dirs[rng.gen_range(0..dirs.len())];
                let n = format!("n{}", rng.gen_range(0..6));
                let m = format!("n{}", rng.gen_range(0..6));
                let _ = match rng.gen_range(0..7) {
                    0 => fs.create(p, n.as_bytes(), 0o644).map(|_| ()),
                    1 => fs.mkdir(p, n.as_bytes(), 0o755).map(|_| ()),
                    2 => fs.unlink(p, n.as_bytes()),
                    3 => fs.rmdir(p, n.as_bytes()),
                    4 => fs.rename(p, n.as_bytes(), q, m.as_bytes()),
                    5 => match fs.lookup(p, n.as_bytes()) {
                        Ok(a) => fs.link(a.ino, q, m.as_bytes()).map(|_| ()),
                        Err(e) => Err(e),
                    },
                    _ => fs.readdir(p, None, 100).map(|_| ()),
                };
            }
        });
        let r = ns::check(&*s).unwrap();
        assert!(r.problems.is_empty(), "seed={seed}: {:?}", r.problems);
        let (commits, conflicts) = s.counts();
        println!("seed={seed}: {commits} commits, {conflicts} conflicts");
    }
}

#[test]
fn creates_of_different_names_in_one_directory_never_conflict() {
    let (s, fss) = daemons(2);
    let d = fss[0].mkdir(ROOT_INO, b"shared", 0o755).unwrap();
    let (_, before) = s.counts();
    race(&fss, 4, |t, fs| {
        for i in 0..200 {
            fs.create(d.ino, format!("t{t}-{i}").as_bytes(), 0o644)
                .unwrap();
        }
    });
    let (_, after) = s.counts();
    assert_eq!(after - before, 0, "creates in one directory conflicted");
    assert_eq!(fss[1].readdir(d.ino, None, 10_000).unwrap().len(), 800);
    assert_clean(&s);
}

#[test]
fn a_daemon_whose_session_ended_cannot_commit() {
    let (s, fss) = daemons(2);
    let (a, b) = (&fss[0], &fss[1]);
    a.create(ROOT_INO, b"before", 0o644).unwrap();
    // A stops renewing (frozen, cut off); its lease runs out; B renews.
    a.stop_renewing();
    for _ in 0..10 {
        s.advance(Duration::from_secs(2));
        b.getattr(ROOT_INO).unwrap();
        // B's keeper renews every ttl/3 of real time: renew by hand here,
        // since the fake clock moves faster than the thread.
        s.lease_renew(b.session() as i64).unwrap();
    }
    let e = a.create(ROOT_INO, b"after", 0o644).unwrap_err();
    assert!(matches!(&e, Error::Io(m) if m.contains("remount")), "{e:?}");
    assert_eq!(b.lookup(ROOT_INO, b"after"), Err(Error::NotFound));
    b.create(ROOT_INO, b"b-after", 0o644).unwrap();
    assert_clean(&s);
}

#[test]
fn a_lost_answer_neither_loses_nor_doubles_an_operation() {
    let (s, fss) = daemons(1);
    let a = &fss[0];
    s.fail_next(Fault::Unknown { applied: true });
    let f = a.create(ROOT_INO, b"f", 0o644).unwrap();
    assert_eq!(a.lookup(ROOT_INO, b"f").unwrap().ino, f.ino);
    s.fail_next(Fault::Unknown { applied: false });
    let g = a.create(ROOT_INO, b"g", 0o644).unwrap();
    assert_eq!(a.lookup(ROOT_INO, b"g").unwrap().ino, g.ino);
    // A link whose answer is lost is not made twice.
    s.fail_next(Fault::Unknown { applied: true });
    a.link(f.ino, ROOT_INO, b"f2").unwrap();
    assert_eq!(a.getattr(f.ino).unwrap().nlink, 2);
    assert_clean(&s);
}
