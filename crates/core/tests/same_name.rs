//! Races on the same names: what the per-name locks exist for. The model
//! tests give each thread names of its own; here threads meet on one name
//! at a time, released together by a barrier, round after round:
//! - create vs create of one name: exactly one succeeds, the rest EEXIST;
//! - unlink vs unlink: exactly one succeeds, the rest ENOENT;
//! - rename vs rename onto one new name (RENAME_NOREPLACE): exactly one;
//! - rename vs unlink of one name: never both, and the name ends where the
//!   winner left it;
//! - link vs unlink of one file: if the link won, the file lives on under
//!   the new name with nlink 1;
//! - rmdir vs create inside: never both (a create in a removed directory, or
//!   an rmdir of a directory with an entry, would be a lost or a leaked
//!   inode).
//!
//! After all rounds fsck finds nothing, and a reopened engine lists the same
//! tree.

use shoal_core::{Config, Ctx, Engine, Error, Ino, MemStore, Store, RENAME_NOREPLACE, ROOT_INO};
use std::sync::{Arc, Barrier};

const THREADS: usize = 4;
const ROUNDS: usize = 300;

use shoal_testkit::setup::{assert_fsck_clean, fresh as engine};

/// Run `f(thread, round)` on every thread, all released together each round.
fn race<T: Send>(f: impl Fn(usize, usize) -> T + Sync) -> Vec<Vec<T>> {
    let b = Barrier::new(THREADS);
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let (b, f) = (&b, &f);
                sc.spawn(move || {
                    (0..ROUNDS)
                        .map(|r| {
                            b.wait();
                            f(t, r)
                        })
                        .collect::<Vec<T>>()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The results of round `r` across threads.
fn round<T: Clone>(all: &[Vec<T>], r: usize) -> Vec<T> {
    all.iter().map(|v| v[r].clone()).collect()
}

fn ok_count<T>(v: &[Result<T, Error>]) -> usize {
    v.iter().filter(|x| x.is_ok()).count()
}

fn check_store(store: &Arc<MemStore>, e: Arc<Engine>) {
    e.sync().unwrap();
    assert_fsck_clean(store);
    let before = listing(&e, ROOT_INO);
    e.shutdown().unwrap();
    drop(e);
    let e2 = Engine::open(store.clone() as Arc<dyn Store>, Config::default()).unwrap();
    assert_eq!(
        listing(&e2, ROOT_INO),
        before,
        "the tree differs after a reopen"
    );
}

fn listing(e: &Engine, dir: Ino) -> Vec<(Vec<u8>, u32)> {
    let mut out = Vec::new();
    let mut cookie = 0;
    loop {
        let page = e.readdir(dir, cookie, 256).unwrap();
        if page.is_empty() {
            break;
        }
        for d in &page {
            if d.name != b"." && d.name != b".." {
                out.push((d.name.clone(), e.getattr(d.ino).unwrap().nlink));
            }
        }
        cookie = page.last().unwrap().cookie;
    }
    out.sort();
    out
}

#[test]
fn create_and_unlink_of_one_name_have_one_winner() {
    let (store, e) = engine();
    let c = Ctx::root();
    let all = race(|_, r| {
        let name = format!("n{r}");
        let made = e.create(&c, ROOT_INO, name.as_bytes(), 0o644).map(|_| ());
        // The unlinks race the slower threads' creates too. Each thread
        // unlinks after its own create, so the name is gone at the end and
        // every create that won is matched by one unlink that won.
        let gone = e.unlink(&c, ROOT_INO, name.as_bytes());
        (made, gone)
    });
    for r in 0..ROUNDS {
        let v = round(&all, r);
        let made: Vec<_> = v.iter().map(|x| x.0.clone()).collect();
        let gone: Vec<_> = v.iter().map(|x| x.1.clone()).collect();
        for x in made.iter().chain(gone.iter()) {
            assert!(
                matches!(x, Ok(()) | Err(Error::Exists) | Err(Error::NotFound)),
                "round {r}: {x:?}"
            );
        }
        // Every create that won was undone by exactly one unlink, and the
        // name is gone at the end.
        assert_eq!(
            ok_count(&made),
            ok_count(&gone),
            "round {r}: creates {made:?} unlinks {gone:?}"
        );
        assert!(ok_count(&made) >= 1, "round {r}: no create won");
        assert!(matches!(
            e.lookup(&c, ROOT_INO, format!("n{r}").as_bytes()),
            Err(Error::NotFound)
        ));
    }
    check_store(&store, e);
}

#[test]
fn renames_onto_one_name_have_one_winner() {
    let (store, e) = engine();
    let c = Ctx::root();
    for t in 0..THREADS {
        for r in 0..ROUNDS {
            e.create(&c, ROOT_INO, format!("src{t}.{r}").as_bytes(), 0o644)
                .unwrap();
        }
    }
    let all = race(|t, r| {
        e.rename(
            &c,
            ROOT_INO,
            format!("src{t}.{r}").as_bytes(),
            ROOT_INO,
            format!("dst{r}").as_bytes(),
            RENAME_NOREPLACE,
        )
    });
    for r in 0..ROUNDS {
        let v = round(&all, r);
        assert_eq!(ok_count(&v), 1, "round {r}: {v:?}");
        assert!(
            v.iter().all(|x| matches!(x, Ok(()) | Err(Error::Exists))),
            "round {r}: {v:?}"
        );
        let winner = v.iter().position(|x| x.is_ok()).unwrap();
        let dst = e
            .lookup(&c, ROOT_INO, format!("dst{r}").as_bytes())
            .unwrap();
        assert_eq!(dst.nlink, 1);
        for t in 0..THREADS {
            let src = e.lookup(&c, ROOT_INO, format!("src{t}.{r}").as_bytes());
            assert_eq!(src.is_ok(), t != winner, "round {r} thread {t}");
        }
    }
    check_store(&store, e);
}

#[test]
fn rename_against_unlink_of_one_name() {
    let (store, e) = engine();
    let c = Ctx::root();
    for r in 0..ROUNDS {
        e.create(&c, ROOT_INO, format!("x{r}").as_bytes(), 0o644)
            .unwrap();
    }
    // Threads 0 and 1 rename x -> y{t}, threads 2 and 3 unlink x.
    let all = race(|t, r| {
        let x = format!("x{r}");
        if t < 2 {
            e.rename(
                &c,
                ROOT_INO,
                x.as_bytes(),
                ROOT_INO,
                format!("y{r}.{t}").as_bytes(),
                0,
            )
        } else {
            e.unlink(&c, ROOT_INO, x.as_bytes())
        }
    });
    for r in 0..ROUNDS {
        let v = round(&all, r);
        assert_eq!(ok_count(&v), 1, "round {r}: one of the four owns x: {v:?}");
        assert!(
            v.iter().all(|x| matches!(x, Ok(()) | Err(Error::NotFound))),
            "round {r}: {v:?}"
        );
        assert!(e.lookup(&c, ROOT_INO, format!("x{r}").as_bytes()).is_err());
        for (t, won) in v.iter().take(2).enumerate() {
            let y = e.lookup(&c, ROOT_INO, format!("y{r}.{t}").as_bytes());
            assert_eq!(
                y.is_ok(),
                won.is_ok(),
                "round {r}: y.{t} exists exactly when its rename won"
            );
        }
    }
    check_store(&store, e);
}

#[test]
fn link_against_unlink_of_one_file() {
    let (store, e) = engine();
    let c = Ctx::root();
    let inos: Vec<Ino> = (0..ROUNDS)
        .map(|r| {
            e.create(&c, ROOT_INO, format!("f{r}").as_bytes(), 0o644)
                .unwrap()
                .ino
        })
        .collect();
    // Thread 0 links f -> l, thread 1 unlinks f, the others look f up.
    let all = race(|t, r| match t {
        0 => e
            .link(&c, inos[r], ROOT_INO, format!("l{r}").as_bytes())
            .map(|_| ()),
        1 => e.unlink(&c, ROOT_INO, format!("f{r}").as_bytes()),
        _ => e
            .lookup(&c, ROOT_INO, format!("f{r}").as_bytes())
            .map(|_| ()),
    });
    for (r, &ino) in inos.iter().enumerate() {
        let v = round(&all, r);
        assert!(
            v[1].is_ok(),
            "round {r}: the unlink of an existing name failed: {:?}",
            v[1]
        );
        match &v[0] {
            Ok(()) => {
                let l = e.lookup(&c, ROOT_INO, format!("l{r}").as_bytes()).unwrap();
                assert_eq!((l.ino, l.nlink), (ino, 1), "round {r}");
            }
            // Linking a file whose last name is gone: ENOENT, as on Linux.
            Err(Error::NotFound) => {
                assert!(e.lookup(&c, ROOT_INO, format!("l{r}").as_bytes()).is_err())
            }
            Err(x) => panic!("round {r}: link gave {x:?}"),
        }
    }
    check_store(&store, e);
}

#[test]
fn rmdir_against_create_inside() {
    let (store, e) = engine();
    let c = Ctx::root();
    let dirs: Vec<Ino> = (0..ROUNDS)
        .map(|r| {
            e.mkdir(&c, ROOT_INO, format!("d{r}").as_bytes(), 0o755)
                .unwrap()
                .ino
        })
        .collect();
    // Thread 0 removes d, the others create a file in it.
    let all = race(|t, r| {
        if t == 0 {
            e.rmdir(&c, ROOT_INO, format!("d{r}").as_bytes())
        } else {
            e.create(&c, dirs[r], format!("in{t}").as_bytes(), 0o644)
                .map(|_| ())
        }
    });
    for r in 0..ROUNDS {
        let v = round(&all, r);
        let created = ok_count(&v[1..]);
        match &v[0] {
            Ok(()) => assert_eq!(
                created, 0,
                "round {r}: rmdir won but files were created in it: {v:?}"
            ),
            Err(Error::NotEmpty) => assert!(
                created >= 1,
                "round {r}: rmdir saw entries nobody made: {v:?}"
            ),
            Err(x) => panic!("round {r}: rmdir gave {x:?}"),
        }
        for x in &v[1..] {
            assert!(
                matches!(x, Ok(()) | Err(Error::NotFound)),
                "round {r}: create in a removed directory: {x:?}"
            );
        }
    }
    check_store(&store, e);
}
