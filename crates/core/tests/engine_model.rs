//! Randomized multi-threaded model test: threads run seeded random operations
//! on their own names inside shared directories (so they contend for the same
//! directories, name slots and gate shards), each checked op by op against a
//! sequential model; then the whole tree is compared with the models and the
//! store is checked by fsck (nlink = entries, no dangling entries, no leaked
//! inodes). The seed is printed on failure; rerun with SHOAL_SEED=... .

use shoal_core::{Config, Ctx, Engine, MemStore, Store, ROOT_INO};
use shoal_testkit::model::{self, EngineTarget, Gen, Model, Op, Target};
use std::sync::Arc;

fn seeds() -> Vec<u64> {
    shoal_testkit::setup::seeds(4)
}

fn run_seed(seed: u64, threads: usize, ops: usize, cfg: Config) {
    let store = shoal_testkit::setup::fresh_store();
    let e = Engine::open(store.clone() as Arc<dyn Store>, cfg.clone()).unwrap();
    for s in ["s0", "s1", "s2"] {
        e.mkdir(&Ctx::root(), ROOT_INO, s.as_bytes(), 0o755)
            .unwrap();
    }
    let models: Vec<Model> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|tid| {
                let e = &e;
                sc.spawn(move || {
                    let t = EngineTarget { e };
                    let mut m = Model::default();
                    for s in ["s0", "s1", "s2"] {
                        m.apply(&Op::Mkdir(s.into())).unwrap();
                    }
                    let mut g = Gen::new(seed, tid);
                    let mut ok = 0;
                    for i in 0..ops {
                        let op = g.next(&m);
                        let want = m.apply(&op);
                        let got = model::run(&t, &op);
                        assert_eq!(got, want, "seed={seed} thread={tid} op#{i} {op:?}");
                        ok += got.is_ok() as usize;
                    }
                    // A generator whose ops mostly fail would test little.
                    assert!(
                        ok * 5 > ops,
                        "seed={seed} thread={tid}: only {ok} of {ops} ops succeeded"
                    );
                    m
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| panic!("seed={seed}: a worker failed"))
            })
            .collect()
    });
    let t = EngineTarget { e: &e };
    for (tid, m) in models.iter().enumerate() {
        let g = Gen::new(seed, tid);
        let own = g.own();
        let want = m.state(&own);
        let got = model::target_state(&t, &own).unwrap();
        assert!(
            got == want,
            "seed={seed} thread={tid}: tree differs from the model (want/got):\n{}",
            model::diff(&got, &want)
        );
    }
    e.sync().unwrap();
    let r = shoal_core::fsck::fsck(&*store, false).unwrap();
    assert!(r.is_clean(), "seed={seed}: fsck found {:?}", r.problems);
    // The same tree must come back from the store alone.
    e.shutdown().unwrap();
    drop(e);
    let e2 = Engine::open(store.clone() as Arc<dyn Store>, cfg).unwrap();
    let t2 = EngineTarget { e: &e2 };
    for (tid, m) in models.iter().enumerate() {
        let g = Gen::new(seed, tid);
        let own = g.own();
        let got = model::target_state(&t2, &own).unwrap();
        assert!(
            got == m.state(&own),
            "seed={seed} thread={tid}: after reopen:\n{}",
            model::diff(&got, &m.state(&own))
        );
    }
}

#[test]
fn concurrent_ops_match_model() {
    for seed in seeds() {
        println!("seed={seed}");
        run_seed(seed, 4, 1500, Config::default());
    }
}

#[test]
fn concurrent_ops_match_model_with_tiny_cache() {
    // A cache budget so small that reclaim runs after every commit: every path
    // through store fills and eviction is exercised.
    for seed in seeds().into_iter().take(2) {
        println!("seed={seed}");
        let cfg = Config {
            cache_bytes: 1,
            commit_interval_ms: 1,
            ..Config::default()
        };
        run_seed(seed, 3, 1000, cfg);
    }
}

#[test]
fn concurrent_ops_match_model_all_switches_off() {
    for seed in seeds().into_iter().take(1) {
        println!("seed={seed}");
        let cfg = Config {
            lock_scope: shoal_core::LockScope::Global,
            dir_index: shoal_core::DirIndex::Linear,
            name_cache: shoal_core::NameCache::Off,
            placement: shoal_core::Placement::Spread,
            durability: shoal_core::Durability::SyncEach,
            ..Config::default()
        };
        run_seed(seed, 2, 500, cfg);
    }
}

#[test]
fn memory_only_engine_matches_model() {
    let seed = seeds()[0];
    println!("seed={seed}");
    let e = Engine::open(Arc::new(shoal_core::NullStore), Config::default()).unwrap();
    let t = EngineTarget { e: &e };
    let mut m = Model::default();
    for s in ["s0", "s1", "s2"] {
        m.apply(&Op::Mkdir(s.into())).unwrap();
        t.mkdir(s).unwrap();
    }
    let mut g = Gen::new(seed, 0);
    for i in 0..3000 {
        let op = g.next(&m);
        assert_eq!(
            model::run(&t, &op),
            m.apply(&op),
            "seed={seed} op#{i} {op:?}"
        );
    }
    let own = g.own();
    let got = model::target_state(&t, &own).unwrap();
    assert!(
        got == m.state(&own),
        "seed={seed}:\n{}",
        model::diff(&got, &m.state(&own))
    );
}

/// An engine on a memory store with a 1-byte cache budget and a 1 ms commit
/// interval (reclaim after every commit), and a directory `d` holding
/// `files` files `f0`, `f1`, ...
fn tiny_cache_dir(files: usize) -> (Arc<Engine>, shoal_core::Ino) {
    let store = shoal_testkit::setup::fresh_store();
    let cfg = Config {
        cache_bytes: 1,
        commit_interval_ms: 1,
        ..Config::default()
    };
    let e = Engine::open(store as Arc<dyn Store>, cfg).unwrap();
    let ctx = Ctx::root();
    let d = e.mkdir(&ctx, ROOT_INO, b"d", 0o755).unwrap().ino;
    for i in 0..files {
        e.create(&ctx, d, format!("f{i}").as_bytes(), 0o644)
            .unwrap();
    }
    (e, d)
}

/// Every name a paged readdir of `d` returns, `page` entries per call.
fn list_all(e: &Engine, d: shoal_core::Ino, page: usize) -> Vec<Vec<u8>> {
    let (mut names, mut cookie) = (Vec::new(), 0);
    loop {
        let ents = e.readdir(d, cookie, page).unwrap();
        let Some(last) = ents.last() else {
            return names;
        };
        cookie = last.cookie;
        names.extend(ents.into_iter().map(|en| en.name));
    }
}

/// Regression: eviction of a directory's entries used to clear the directory's
/// "complete" flag only after removing them, so a lookup in between took a
/// miss for a definite "absent" (ENOENT for an existing file; found by
/// postmark through the mount). Lookups of existing names must never fail
/// while reclaim runs after every commit.
#[test]
fn lookups_never_miss_during_eviction() {
    let (e, d) = tiny_cache_dir(2000);
    let ctx = Ctx::root();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let result = std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                e.create(&ctx, d, format!("churn{}", i % 7).as_bytes(), 0o644)
                    .ok();
                e.unlink(&ctx, d, format!("churn{}", i % 7).as_bytes()).ok();
                i += 1;
            }
        });
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for round in 0..30 {
                for i in (0..2000).step_by(7) {
                    let name = format!("f{i}");
                    e.lookup(&ctx, d, name.as_bytes())
                        .unwrap_or_else(|err| panic!("round {round}: lookup {name}: {err}"));
                }
                // Raw readdir (entries of the churning names may vanish between
                // listing and stat): every f* name exactly once.
                let mut seen = std::collections::BTreeMap::new();
                for name in list_all(&e, d, 100) {
                    if name.starts_with(b"f") {
                        *seen.entry(name).or_insert(0) += 1;
                    }
                }
                let dup = seen.values().filter(|c| **c > 1).count();
                assert!(
                    seen.len() == 2000 && dup == 0,
                    "round {round}: readdir saw {} names, {dup} twice",
                    seen.len()
                );
            }
        }));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    });
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

/// A directory whose evicted-name sets outgrow the budget gives up
/// "complete" (`Dir::demote`): every name must still be found, absent names
/// must still be absent, a create over an evicted name must still fail with
/// EEXIST, and a listing must still be whole.
#[test]
fn demoted_directory_keeps_every_answer() {
    let n = 12_000;
    let (e, d) = tiny_cache_dir(n);
    let ctx = Ctx::root();
    e.sync().unwrap();
    e.maybe_reclaim();
    assert!(
        e.demoted_hashes.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the directory was not demoted"
    );
    for i in (0..n).step_by(13) {
        e.lookup(&ctx, d, format!("f{i}").as_bytes()).unwrap();
        let err = e
            .create(&ctx, d, format!("f{i}").as_bytes(), 0o644)
            .unwrap_err();
        assert_eq!(err, shoal_core::Error::Exists, "create over f{i}");
    }
    assert_eq!(
        e.lookup(&ctx, d, b"absent").unwrap_err(),
        shoal_core::Error::NotFound
    );
    let seen: std::collections::BTreeSet<_> = list_all(&e, d, 500).into_iter().collect();
    assert_eq!(seen.len(), n);
}

/// An engine on a memory store whose committer waits ten minutes between
/// commits: an epoch closes only when a test syncs or the open epoch fills.
fn slow_commit_engine() -> (Arc<MemStore>, Config, Arc<Engine>) {
    let store = shoal_testkit::setup::fresh_store();
    let cfg = Config {
        commit_interval_ms: 600_000,
        ..Config::default()
    };
    let e = Engine::open(store.clone() as Arc<dyn Store>, cfg.clone()).unwrap();
    (store, cfg, e)
}

/// Writers wait for a commit when the open epoch passes
/// `Committer::MAX_OPEN` records, so a commit batch (and the memory it
/// takes to write it) stays bounded even when the interval is long.
#[test]
fn open_epoch_is_bounded() {
    let (_, _, e) = slow_commit_engine();
    let ctx = Ctx::root();
    let d = e.mkdir(&ctx, ROOT_INO, b"d", 0o755).unwrap().ino;
    let mut peak = 0;
    for i in 0..200_000 {
        e.create(&ctx, d, format!("f{i}").as_bytes(), 0o644)
            .unwrap();
        peak = peak.max(e.committer.open_records());
    }
    let commits = e
        .committer
        .stats
        .commits
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        commits >= 3,
        "{commits} commits for 200K creates with a 10-minute interval"
    );
    assert!(
        peak <= shoal_core::commit::Committer::MAX_OPEN + 64 * 4,
        "open epoch reached {peak} records"
    );
}

/// Keys absent when an epoch opened and deleted by its end are not written
/// (delayed logging keeps short-lived objects out of the store), and nothing
/// else is lost: a name that was in the store before the epoch and is deleted
/// in it must still be deleted in the store, even if it was re-created in between.
#[test]
fn short_lived_keys_are_not_written() {
    use std::sync::atomic::Ordering::Relaxed;
    let (store, cfg, e) = slow_commit_engine();
    let ctx = Ctx::root();
    let d = e.mkdir(&ctx, ROOT_INO, b"d", 0o755).unwrap().ino;
    e.create(&ctx, d, b"old", 0o644).unwrap();
    e.create(&ctx, d, b"target", 0o644).unwrap();
    e.committer.sync_all().unwrap();
    let elided0 = e.committer.stats.keys_elided.load(Relaxed);
    // One epoch (the interval is ten minutes; nothing else commits):
    let f = e.create(&ctx, d, b"tmp", 0o644).unwrap().ino;
    e.write(f, 0, &[7u8; 10_000]).unwrap();
    e.rename(&ctx, d, b"tmp", d, b"tmp2", 0).unwrap();
    e.unlink(&ctx, d, b"tmp2").unwrap();
    e.unlink(&ctx, d, b"old").unwrap();
    e.create(&ctx, d, b"old", 0o644).unwrap();
    e.unlink(&ctx, d, b"old").unwrap();
    let s = e.create(&ctx, d, b"src", 0o644).unwrap().ino;
    e.rename(&ctx, d, b"src", d, b"target", 0).unwrap();
    e.unlink(&ctx, d, b"target").unwrap();
    let kept = e.create(&ctx, d, b"kept", 0o644).unwrap().ino;
    e.committer.sync_all().unwrap();
    let elided = e.committer.stats.keys_elided.load(Relaxed) - elided0;
    // tmp: inode, two names (its data is in a data object, not in keys);
    // old's second life is a delete of a stored key; src: inode.
    assert!(elided >= 4, "only {elided} keys elided");
    let gone = [&b"tmp"[..], b"tmp2", b"old", b"src", b"target"];
    for (k, _) in store.dump() {
        for ino in [f, s] {
            assert_ne!(
                shoal_core::schema::owner_ino(&k),
                Some(ino),
                "a key of short-lived inode {ino} reached the store"
            );
        }
        if let Ok((p, _, name)) = shoal_core::schema::parse_entry_key(&k) {
            assert!(
                p != d || !gone.contains(&name),
                "entry {} is still in the store",
                String::from_utf8_lossy(name)
            );
        }
    }
    drop(e);
    let e2 = Engine::open(store.clone() as Arc<dyn Store>, cfg).unwrap();
    for gone in gone {
        assert!(
            matches!(e2.lookup(&ctx, d, gone), Err(shoal_core::Error::NotFound)),
            "{} survived",
            String::from_utf8_lossy(gone)
        );
    }
    assert_eq!(e2.lookup(&ctx, d, b"kept").unwrap().ino, kept);
    assert_eq!(e2.getattr(d).unwrap().size, 1, "entry count of d");
}

/// unlink deletes an inode without reading it only when its entry is sole
/// (its only name, no data blocks): link, a write past the inline size and
/// rename keep flag and inode in step, each checked on a cold cache (a
/// reopened engine, so the inodes are not cached and the flag is all unlink
/// has), and fsck checks the flag against the records after each phase.
#[test]
fn sole_entries_are_deleted_unread_and_only_they() {
    use std::sync::atomic::Ordering::Relaxed;
    let store = shoal_testkit::setup::fresh_store();
    let cfg = Config::default();
    let ctx = Ctx::root();
    let reopen = |e: Arc<Engine>| {
        e.shutdown().unwrap();
        drop(e);
        let r = shoal_core::fsck::fsck(&*store, false).unwrap();
        assert!(r.is_clean(), "fsck: {:?}", r.problems);
        Engine::open(store.clone() as Arc<dyn Store>, cfg.clone()).unwrap()
    };
    let e = Engine::open(store.clone() as Arc<dyn Store>, cfg.clone()).unwrap();
    let d = e.mkdir(&ctx, ROOT_INO, b"d", 0o755).unwrap().ino;
    let mut ino = std::collections::HashMap::new();
    for n in ["plain", "linked", "big", "moved", "small", "late"] {
        ino.insert(n, e.create(&ctx, d, n.as_bytes(), 0o644).unwrap().ino);
    }
    e.link(&ctx, ino["linked"], d, b"linked2").unwrap();
    e.write(ino["big"], 0, &[3u8; 10_000]).unwrap();
    e.rename(&ctx, d, b"moved", ROOT_INO, b"moved2", 0).unwrap();
    e.write(ino["small"], 0, b"tiny").unwrap();
    // Cold cache: link and grow files whose inodes come from the store.
    let e = reopen(e);
    let late = e.lookup(&ctx, d, b"late").unwrap().ino;
    e.link(&ctx, late, ROOT_INO, b"late2").unwrap();
    e.write(ino["small"], 4, &[1u8; 5000]).unwrap();
    let e = reopen(e);
    for (dir, n) in [
        (d, "plain"),
        (ROOT_INO, "moved2"),
        (d, "linked"),
        (d, "big"),
        (d, "small"),
        (d, "late"),
    ] {
        e.unlink(&ctx, dir, n.as_bytes()).unwrap();
    }
    // plain and moved2 were sole; the others had a second name or data blocks.
    assert_eq!(e.unread_unlinks.load(Relaxed), 2);
    assert_eq!(
        e.read(e.lookup(&ctx, d, b"linked2").unwrap().ino, 0, 10)
            .unwrap(),
        b""
    );
    assert_eq!(e.getattr(ino["linked"]).unwrap().nlink, 1);
    assert_eq!(e.getattr(late).unwrap().nlink, 1);
    let e = reopen(e);
    for gone in ["plain", "big", "small", "moved"] {
        for (k, _) in store.dump() {
            assert_ne!(
                shoal_core::schema::owner_ino(&k),
                Some(ino[gone]),
                "a record of {gone} survived its unlink"
            );
        }
    }
    assert_eq!(e.lookup(&ctx, ROOT_INO, b"late2").unwrap().nlink, 1);
    // fsck catches a flag that breaks its promise: mark linked2 sole while
    // its inode has no primary pointer, and repair clears it.
    let h = shoal_core::schema::name_hash(b"linked2");
    let k = shoal_core::schema::entry_key(d, h, b"linked2");
    store
        .write(
            &[(
                k,
                Some(shoal_core::schema::encode_entry(
                    ino["linked"],
                    shoal_core::Kind::File,
                    true,
                )),
            )],
            true,
        )
        .unwrap();
    drop(e);
    let r = shoal_core::fsck::fsck(&*store, false).unwrap();
    assert!(
        r.problems.iter().any(|p| p.contains("sole")),
        "fsck missed a false sole flag: {:?}",
        r.problems
    );
    shoal_core::fsck::fsck(&*store, true).unwrap();
    let r = shoal_core::fsck::fsck(&*store, false).unwrap();
    assert!(r.is_clean(), "after repair: {:?}", r.problems);
}

/// Reads of a file in its data object give what a model file gives: data,
/// zeros for holes, the latest bytes after an overwrite, and zeros past a
/// truncation that a later write extends over, before and after a reopen.
#[test]
fn reads_mix_stored_cached_and_hole_blocks() {
    use shoal_core::engine::SetAttr;
    const B: usize = 4096;
    let store = shoal_testkit::setup::fresh_store();
    let cfg = Config {
        commit_interval_ms: 600_000,
        ..Config::default()
    };
    let ctx = Ctx::root();
    let mut model = vec![0u8; 0];
    let put = |model: &mut Vec<u8>, off: usize, data: &[u8]| {
        if model.len() < off + data.len() {
            model.resize(off + data.len(), 0);
        }
        model[off..off + data.len()].copy_from_slice(data);
    };
    let pattern = |seed: u8, n: usize| {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect::<Vec<u8>>()
    };
    let ino = {
        let e = Engine::open(store.clone() as Arc<dyn Store>, cfg.clone()).unwrap();
        let ino = e.create(&ctx, ROOT_INO, b"f", 0o644).unwrap().ino;
        // Blocks 0-2 full, 3-4 holes, 5 full, 6 partly, 7-9 holes, 10 partly.
        for (off, data) in [
            (0, pattern(1, 3 * B)),
            (5 * B, pattern(2, B)),
            (6 * B, pattern(3, 100)),
            (10 * B, pattern(4, 50)),
        ] {
            e.write(ino, off as u64, &data).unwrap();
            put(&mut model, off, &data);
        }
        e.shutdown().unwrap();
        ino
    };
    // A new engine: nothing of the file is cached.
    let e = Engine::open(store.clone() as Arc<dyn Store>, cfg.clone()).unwrap();
    let check = |e: &Engine, model: &[u8], what: &str| {
        for (off, len) in [
            (0, model.len() + 10),
            (100, 3 * B),
            (4 * B + 10, 3 * B),
            (B - 1, 2),
            (6 * B, 5 * B),
            (9 * B, 4 * B),
        ] {
            let got = e.read(ino, off as u64, len as u32).unwrap();
            let want = &model[off.min(model.len())..(off + len).min(model.len())];
            assert!(
                got == want,
                "{what}: read({off}, {len}) differs from the model"
            );
        }
    };
    check(&e, &model, "all blocks in the data object");
    // A cached, dirty block between stored ones wins over the store.
    let d = pattern(5, 300);
    e.write(ino, (B + 1000) as u64, &d).unwrap();
    put(&mut model, B + 1000, &d);
    check(&e, &model, "a dirty block among stored ones");
    // Truncate into block 5, then extend by a write at block 8: blocks 6-7
    // are holes now, though the store still holds block 6 until the commit.
    e.setattr(
        &ctx,
        ino,
        &SetAttr {
            size: Some((5 * B + 10) as u64),
            ..SetAttr::default()
        },
    )
    .unwrap();
    model.truncate(5 * B + 10);
    let d = pattern(6, 20);
    e.write(ino, (8 * B) as u64, &d).unwrap();
    put(&mut model, 8 * B, &d);
    check(&e, &model, "after truncate and extend, before the commit");
    e.shutdown().unwrap();
    drop(e);
    let e = Engine::open(store.clone() as Arc<dyn Store>, cfg).unwrap();
    check(&e, &model, "after the commit, from the store");
}

/// Reclaim drops clean file data before names and inodes: after writing
/// twice the budget in file data, every name and inode is still cached, the
/// cache is back under budget, and the data reads back from the store.
#[test]
fn reclaim_drops_data_before_metadata() {
    let store = shoal_testkit::setup::fresh_store();
    let budget = 16u64 << 20;
    let cfg = Config {
        cache_bytes: budget,
        ..Config::default()
    };
    let e = Engine::open(store.clone() as Arc<dyn Store>, cfg).unwrap();
    let ctx = Ctx::root();
    let d = e.mkdir(&ctx, ROOT_INO, b"d", 0o755).unwrap().ino;
    let data = |i: usize| (0..8192).map(|j| (i * 7 + j) as u8).collect::<Vec<u8>>();
    let n = 4000; // 32 MiB of data, about 4 MiB of names and inodes
    let mut inos = vec![];
    for i in 0..n {
        let ino = e
            .create(&ctx, d, format!("f{i}").as_bytes(), 0o644)
            .unwrap()
            .ino;
        e.write(ino, 0, &data(i)).unwrap();
        inos.push(ino);
    }
    e.sync().unwrap();
    e.maybe_reclaim();
    assert!(
        e.cache_usage() <= budget,
        "cache at {} of {budget} bytes",
        e.cache_usage()
    );
    assert_eq!(
        e.cached_dents.get(),
        n as i64 + 1,
        "names were evicted while data was cached"
    );
    assert_eq!(
        e.cached_inodes(),
        n + 2,
        "inodes were evicted while data was cached"
    );
    let fills = e.fills.load(std::sync::atomic::Ordering::Relaxed);
    for (i, &ino) in inos.iter().enumerate() {
        assert_eq!(
            e.lookup(&ctx, d, format!("f{i}").as_bytes()).unwrap().ino,
            ino
        );
        assert!(
            e.read(ino, 0, 8192).unwrap() == data(i),
            "f{i} reads back wrong"
        );
    }
    assert_eq!(
        e.fills.load(std::sync::atomic::Ordering::Relaxed),
        fills,
        "lookups went to the store"
    );
}

/// Inode numbers come in chunks that start on multiples of the chunk size
/// (each chunk then lies in one inode-table shard), also after a reopen of
/// a store whose high-water mark was not a multiple: the allocator rounds
/// it up and never hands out the numbers it skips.
#[test]
fn inode_chunks_start_aligned_across_reopen() {
    let store = shoal_testkit::setup::fresh_store();
    let mut seen = std::collections::HashSet::new();
    for round in 0..3 {
        let e = Engine::open(store.clone() as Arc<dyn Store>, Config::default()).unwrap();
        let inos: Vec<u64> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..2)
                .map(|t| {
                    let e = &e;
                    sc.spawn(move || {
                        (0..100)
                            .map(|i| {
                                e.create(
                                    &Ctx::root(),
                                    ROOT_INO,
                                    format!("r{round}t{t}f{i}").as_bytes(),
                                    0o644,
                                )
                                .unwrap()
                                .ino
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        // Each thread's first number, and every 64th after it, opens a chunk.
        for t in 0..2 {
            let mine = &inos[t * 100..(t + 1) * 100];
            for k in (0..mine.len()).step_by(64) {
                assert_eq!(
                    mine[k] % 64,
                    0,
                    "round {round} thread {t}: inode #{k} is {}",
                    mine[k]
                );
            }
            assert!(
                mine.windows(2).all(|w| w[1] > w[0]),
                "round {round} thread {t}: numbers go down"
            );
        }
        for i in &inos {
            assert!(seen.insert(*i), "inode {i} handed out twice");
        }
        e.sync().unwrap();
        drop(e);
    }
}
