//! Power-cut tests at the storage seam: run seeded operations with group
//! commit over a MemStore, cut the power at a random point (dropping, or
//! keeping a random prefix of, the batches written since the last sync),
//! recover, and check that the tree equals the model after some operation at
//! or after the last fsync (a prefix of the acknowledged history), and that
//! fsck is clean. Seeds are printed; rerun one with SHOAL_SEED=... .

use shoal_core::{Config, Ctx, Engine, Error, Store, ROOT_INO};
use shoal_testkit::model::{self, EngineTarget, Gen, Model, Op, Target, E};
use std::collections::BTreeSet;
use std::sync::Arc;

use shoal_testkit::crash;
use shoal_testkit::setup::base_seed;

type State = BTreeSet<(String, model::K, u32, Vec<u8>)>;

/// Cut the power under a running engine: nothing more reaches the store,
/// the engine stops, then the store keeps `keep` of the batches written
/// since its last sync (and data objects only what was synced). Returns the
/// engine recovered from what is left.
fn cut_power(
    store: &Arc<shoal_core::MemStore>,
    e: Arc<Engine>,
    keep: usize,
    cfg: &Config,
) -> Result<Arc<Engine>, Error> {
    store.fail_writes(true);
    e.halt();
    drop(e);
    store.fail_writes(false);
    store.power_cut(keep);
    Engine::open(store.clone() as Arc<dyn Store>, cfg.clone())
}

fn one_cut(seed: u64, cfg: &Config) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let store = shoal_testkit::setup::fresh_store();
    let e = Engine::open(store.clone() as Arc<dyn Store>, cfg.clone()).unwrap();
    let t = EngineTarget { e: &e };
    let mut m = Model::default();
    for s in ["s0", "s1"] {
        m.apply(&Op::Mkdir(s.into())).unwrap();
        t.mkdir(s).unwrap();
    }
    e.sync().unwrap();
    let g = Gen::new(seed, 0);
    let own = g.own();
    let own: &dyn Fn(&str) -> bool = &own;
    let mut states: Vec<State> = vec![m.state(own)];
    let mut inos: Vec<crash::Nodes> = vec![crash::nodes_of(&m, &states[0])];
    let mut synced = 0usize;
    let mut fsynced: Vec<(usize, String)> = Vec::new();
    let n = rng.gen_range(20..400);
    let mut gen = Gen::new(seed, 0);
    for i in 0..n {
        let op = gen.next(&m);
        let want = m.apply(&op);
        let got = model::run(&t, &op);
        assert_eq!(got, want, "seed={seed} op#{i} {op:?}");
        states.push(m.state(own));
        inos.push(crash::nodes_of(&m, states.last().unwrap()));
        if let (Op::Fsync(p), Ok(_)) = (&op, &got) {
            synced = states.len() - 1;
            fsynced.push((synced, p.clone()));
        }
        if rng.gen_bool(0.01) {
            // Everything, file data included.
            e.sync().unwrap();
            synced = states.len() - 1;
            for (path, k, _, _) in states[synced].iter() {
                if *k == model::K::File {
                    fsynced.push((synced, path.clone()));
                }
            }
        }
    }

    // Cut the power: nothing more reaches the store, then drop the unsynced tail.
    store.fail_writes(true);
    e.halt();
    drop(e);
    store.fail_writes(false);
    let pending = store.unsynced_batches();
    let keep = if pending == 0 {
        0
    } else {
        rng.gen_range(0..=pending)
    };
    store.power_cut(keep);
    let e2 = Engine::open(store.clone() as Arc<dyn Store>, cfg.clone())
        .unwrap_or_else(|err| panic!("seed={seed}: recovery failed: {err}"));
    let t2 = EngineTarget { e: &e2 };
    let got = model::target_state(&t2, own).unwrap();
    let at = (0..states.len())
        .rev()
        .find(|&j| crash::may_be(&got, &states, &inos, j, &fsynced));
    match at {
        Some(j) if j >= synced => {}
        Some(j) => panic!("seed={seed}: recovered state {j} is older than the last fsync {synced}"),
        None => {
            // The latest state whose names and sizes match, to say which bytes do not.
            let shape = |s: &State| {
                s.iter()
                    .map(|e| (e.0.clone(), e.1, e.2, e.3.len()))
                    .collect::<Vec<_>>()
            };
            let near = (0..states.len())
                .rev()
                .find(|&j| shape(&states[j]) == shape(&got));
            panic!(
                "seed={seed}: recovered tree is no prefix state (synced {synced}, ops {n}, same names and sizes as state {near:?}, fsynced {fsynced:?}); vs {}:\n{}",
                if near.is_some() { "that state" } else { "the last state" },
                model::diff(&got, &states[near.unwrap_or(states.len() - 1)])
            )
        }
    }
    let r = shoal_core::fsck::fsck(&*store, false).unwrap();
    assert!(
        r.is_clean(),
        "seed={seed}: fsck after recovery: {:?}",
        r.problems
    );
}

/// `runs` power cuts with consecutive seeds from `base`.
fn cuts(base: u64, runs: u64, cfg: &Config) {
    for i in 0..runs {
        let seed = base.wrapping_add(i);
        println!("seed={seed}");
        one_cut(seed, cfg);
    }
}

#[test]
fn power_cut_recovers_a_prefix() {
    let cfg = Config {
        commit_interval_ms: 1,
        ..Config::default()
    };
    let runs = std::env::var("SHOAL_CRASH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60u64);
    cuts(base_seed(), runs, &cfg);
}

#[test]
fn power_cut_with_buffered_durability() {
    let cfg = Config {
        commit_interval_ms: 1,
        durability: shoal_core::Durability::Buffered,
        ..Config::default()
    };
    cuts(base_seed() ^ 0xbf, 20, &cfg);
}

#[test]
fn power_cut_with_long_epochs() {
    // Many operations per epoch: names and files created and removed within
    // one epoch are elided from the batch, and recovery must not notice.
    let cfg = Config {
        commit_interval_ms: 40,
        ..Config::default()
    };
    cuts(base_seed() ^ 0x1e, 300, &cfg);
}

#[test]
fn power_cut_with_tiny_cache() {
    // Reclaim after every commit: recovery must not depend on what was cached.
    let cfg = Config {
        commit_interval_ms: 1,
        cache_bytes: 1,
        ..Config::default()
    };
    cuts(base_seed() ^ 0x7c, 30, &cfg);
}

#[test]
fn unlinked_open_file_is_reclaimed_after_crash() {
    let store = shoal_testkit::setup::fresh_store();
    let e = Engine::open(store.clone() as Arc<dyn Store>, Config::default()).unwrap();
    let ctx = Ctx::root();
    let a = e.create(&ctx, ROOT_INO, b"f", 0o644).unwrap();
    e.open_file(&ctx, a.ino, 0).unwrap();
    e.write(a.ino, 0, &vec![7u8; 100_000]).unwrap();
    e.unlink(&ctx, ROOT_INO, b"f").unwrap();
    // Still readable and writable while open.
    assert_eq!(e.read(a.ino, 99_999, 10).unwrap(), vec![7u8]);
    e.write(a.ino, 0, b"x").unwrap();
    e.sync().unwrap();
    let r = shoal_core::fsck::fsck(&*store, false).unwrap();
    assert!(r.is_clean(), "orphan is legal while open: {:?}", r.problems);
    // Crash with the file still open.
    let _e2 = cut_power(&store, e, 0, &Config::default()).unwrap();
    let dump = store.dump();
    assert!(
        dump.iter().all(|(k, _)| k[0] != b'D' && k[0] != b'O'),
        "orphan's data and orphan record are gone"
    );
    let r = shoal_core::fsck::fsck(&*store, false).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    assert_eq!(r.inodes, 1, "only the root is left");
}

#[test]
fn failed_commit_turns_read_only_and_fsync_reports_it() {
    let store = shoal_testkit::setup::fresh_store();
    let e = Engine::open(store.clone() as Arc<dyn Store>, Config::default()).unwrap();
    let ctx = Ctx::root();
    let a = e.create(&ctx, ROOT_INO, b"f", 0o644).unwrap();
    e.sync().unwrap();
    store.fail_writes(true);
    e.write(a.ino, 0, b"data").unwrap();
    assert!(
        matches!(e.fsync(a.ino), Err(Error::Io(_))),
        "fsync must not succeed after a failed commit"
    );
    assert!(
        matches!(e.create(&ctx, ROOT_INO, b"g", 0o644), Err(Error::Io(_))),
        "read-only after a failed commit"
    );
    // What was acknowledged before is still there.
    store.fail_writes(false);
    drop(e);
    let e2 = Engine::open(store.clone() as Arc<dyn Store>, Config::default()).unwrap();
    assert!(e2.lookup(&ctx, ROOT_INO, b"f").is_ok());
    let t = EngineTarget { e: &e2 };
    assert_eq!(t.read_all("g"), Err(E::NotFound));
}

/// fdatasync keeps a file's bytes and what reading them needs (its name
/// when new, its size when it grew) and skips the commit when only times
/// changed, as ext4 does: SQLite overwriting pages inside its file pays one
/// flush, not two. After a power cut the fdatasync'ed bytes and sizes are back.
#[test]
fn fdatasync_keeps_bytes_and_size_and_skips_time_only_commits() {
    let store = shoal_testkit::setup::fresh_store();
    let cfg = Config {
        commit_interval_ms: 600_000,
        ..Config::default()
    };
    let e = Engine::open(store.clone() as Arc<dyn Store>, cfg.clone()).unwrap();
    let commits = || {
        e.committer
            .stats
            .commits
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let b = shoal_core::INLINE_MAX as usize;
    let a = e.create(&Ctx::root(), ROOT_INO, b"f", 0o644).unwrap();
    e.write(a.ino, 0, &vec![1u8; 3 * b]).unwrap();
    let c0 = commits();
    e.fdatasync(a.ino).unwrap();
    assert!(commits() > c0, "a new file's name and size need a commit");
    // Inside the object: bytes only.
    e.write(a.ino, 0, &vec![2u8; b]).unwrap();
    let c1 = commits();
    e.fdatasync(a.ino).unwrap();
    assert_eq!(commits(), c1, "an overwrite's fdatasync committed");
    // Growing: the size must be committed.
    e.write(a.ino, 3 * b as u64, &vec![3u8; 2 * b]).unwrap();
    e.fdatasync(a.ino).unwrap();
    assert!(commits() > c1, "a grown file's fdatasync did not commit");
    // A small file's bytes are in its record: they need a commit too.
    let s = e.create(&Ctx::root(), ROOT_INO, b"s", 0o644).unwrap();
    e.write(s.ino, 0, b"small").unwrap();
    e.fsync(s.ino).unwrap();
    e.write(s.ino, 0, b"SMALL").unwrap();
    let c2 = commits();
    e.fdatasync(s.ino).unwrap();
    assert!(commits() > c2, "an inline file's fdatasync did not commit");
    // One more overwrite, synced, then the power goes.
    e.write(a.ino, b as u64, &vec![4u8; b]).unwrap();
    e.fdatasync(a.ino).unwrap();
    let e2 = cut_power(&store, e, 0, &cfg).unwrap();
    let f = e2.lookup(&Ctx::root(), ROOT_INO, b"f").unwrap();
    assert_eq!(f.size, 5 * b as u64);
    let got = e2.read(f.ino, 0, 5 * b as u32).unwrap();
    let want: Vec<u8> = [2u8, 4, 1, 3, 3].iter().flat_map(|&x| vec![x; b]).collect();
    assert!(got == want, "fdatasync'ed bytes lost");
    let s = e2.lookup(&Ctx::root(), ROOT_INO, b"s").unwrap();
    assert_eq!(e2.read(s.ino, 0, 10).unwrap(), b"SMALL");
    let r = shoal_core::fsck::fsck(&*store, false).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

/// With FUSE passthrough the kernel writes a file's object without the
/// daemon, which learns of it from the object's length and time
/// (`refresh_from_data`, at each FSYNC). A write inside the object within
/// one tick of a coarse clock changes neither (a kernel without multigrain
/// timestamps, such as 6.9-6.12, which have passthrough): the fsync must
/// sync the object all the same, or the fsync'ed bytes are lost to a power
/// cut. MemData's clock never ticks.
#[test]
fn fsync_keeps_what_the_kernel_wrote_through_the_backing_file() {
    let store = shoal_testkit::setup::fresh_store();
    let cfg = Config {
        commit_interval_ms: 600_000,
        ..Config::default()
    };
    let e = Engine::open(store.clone() as Arc<dyn Store>, cfg.clone()).unwrap();
    let b = shoal_core::INLINE_MAX as usize;
    let a = e.create(&Ctx::root(), ROOT_INO, b"f", 0o644).unwrap();
    e.write(a.ino, 0, &vec![1u8; 3 * b]).unwrap();
    e.fsync(a.ino).unwrap();
    // An open in passthrough mode: the FUSE layer refreshes the inode from
    // the object before it answers attributes, and keeps the time it saw.
    let mut seen = None;
    e.refresh_from_data(a.ino, &mut seen, true).unwrap();
    // The kernel writes through the backing file, then fsyncs (and fdatasyncs).
    let data = store.data();
    data.write(a.ino, b as u64, &vec![7u8; b]).unwrap();
    e.refresh_from_data(a.ino, &mut seen, true).unwrap();
    e.fsync(a.ino).unwrap();
    data.write(a.ino, 2 * b as u64, &vec![8u8; b]).unwrap();
    e.refresh_from_data(a.ino, &mut seen, true).unwrap();
    e.fdatasync(a.ino).unwrap();
    let e2 = cut_power(&store, e, 0, &cfg).unwrap();
    let f = e2.lookup(&Ctx::root(), ROOT_INO, b"f").unwrap();
    assert_eq!(f.size, 3 * b as u64);
    let got = e2.read(f.ino, 0, 3 * b as u32).unwrap();
    let want: Vec<u8> = [1u8, 7, 8].iter().flat_map(|&x| vec![x; b]).collect();
    assert!(
        got == want,
        "bytes written through the backing file and fsync'ed were lost"
    );
}
