//! fsck in bounded memory finds what the in-memory walk found: on stores
//! damaged at random (records deleted, flipped, recounted, added), the
//! bounded walk with a budget small enough to spill every sort to many
//! runs reports the same problems as `fsck::reference` (the walk it
//! replaced) and leaves the same store after `--repair`.

use rand::{Rng, SeedableRng};
use shoal_core::fsck::{self, Options};
use shoal_core::schema;
use shoal_core::{Config, Engine, Kind, MemStore, Store};
use shoal_testkit::model::{self, EngineTarget, Gen, Model, Op, Target};
use std::sync::Arc;

/// Small enough that a few hundred entries spill to several runs.
fn tiny(dir: &std::path::Path) -> Options {
    Options {
        memory: 16 << 10,
        scratch: dir.to_path_buf(),
    }
}

fn build(seed: u64) -> Arc<MemStore> {
    let store = shoal_testkit::setup::fresh_store();
    let e = Engine::open(store.clone() as Arc<dyn Store>, Config::default()).unwrap();
    let t = EngineTarget { e: &e };
    let mut m = Model::default();
    for s in ["s0", "s1"] {
        m.apply(&Op::Mkdir(s.into())).unwrap();
        t.mkdir(s).unwrap();
    }
    for i in 0..300 {
        t.create(&format!("s1/f{i}")).unwrap();
    }
    t.write("s1/f0", 0, &[7u8; 9000]).unwrap();
    let mut g = Gen::new(seed, 0);
    for _ in 0..800 {
        let op = g.next(&m);
        let _ = m.apply(&op);
        let _ = model::run(&t, &op);
    }
    e.shutdown().unwrap();
    store
}

/// A copy of the records and the data objects.
fn copy(s: &MemStore) -> Arc<MemStore> {
    let c = MemStore::new();
    for (k, v) in s.dump() {
        c.poke(&k, Some(v));
    }
    let (from, to) = (s.data(), c.data());
    for ino in from.list().unwrap() {
        let mut buf = vec![0u8; from.len(ino).unwrap() as usize];
        from.read(ino, 0, &mut buf).unwrap();
        to.set_len(ino, buf.len() as u64).unwrap();
        to.write(ino, 0, &buf).unwrap();
    }
    c
}

fn objects(s: &MemStore) -> Vec<(u64, u64)> {
    let d = s.data();
    let mut v: Vec<_> = d
        .list()
        .unwrap()
        .into_iter()
        .map(|i| (i, d.len(i).unwrap()))
        .collect();
    v.sort();
    v
}

/// One random damage of the kinds fsck checks for.
fn damage(s: &MemStore, rng: &mut rand::rngs::SmallRng) -> String {
    let recs = s.dump();
    let pick = |rng: &mut rand::rngs::SmallRng, tag: u8| -> Option<(Vec<u8>, Vec<u8>)> {
        let of: Vec<_> = recs
            .iter()
            .filter(|(k, _)| k[0] == tag && *k != schema::inode_key(1))
            .collect();
        (!of.is_empty()).then(|| of[rng.gen_range(0..of.len())].clone())
    };
    let tag = [b'I', b'E', b'A', b'O', b'D'][rng.gen_range(0..5)];
    let inos: Vec<u64> = recs
        .iter()
        .filter(|(k, _)| k[0] == b'I')
        .map(|(k, _)| schema::parse_inode_key(k).unwrap())
        .collect();
    let some_ino = |rng: &mut rand::rngs::SmallRng| {
        if rng.gen_bool(0.8) {
            inos[rng.gen_range(0..inos.len())]
        } else {
            rng.gen_range(2..5000)
        }
    };
    match rng.gen_range(0..10) {
        0 => match pick(rng, tag) {
            Some((k, _)) => {
                s.poke(&k, None);
                format!("deleted {:?}", k[0] as char)
            }
            None => "nothing".into(),
        },
        1 => match pick(rng, tag) {
            Some((k, mut v)) if !v.is_empty() => {
                let i = rng.gen_range(0..v.len());
                v[i] ^= 1 << rng.gen_range(0..8);
                s.poke(&k, Some(v));
                format!("flipped {:?}", k[0] as char)
            }
            _ => "nothing".into(),
        },
        2 | 3 => {
            let Some((k, v)) = pick(rng, b'I') else {
                return "nothing".into();
            };
            let ino = schema::parse_inode_key(&k).unwrap();
            let (mut a, x) = schema::decode_inode(ino, &v).unwrap();
            match rng.gen_range(0..3) {
                0 => a.nlink = a.nlink.wrapping_add(1),
                1 => a.nlink = a.nlink.saturating_sub(1),
                _ => a.size = rng.gen_range(0..20000),
            }
            let primary = if rng.gen_bool(0.2) && a.kind != Kind::Dir {
                Some((1, rng.gen()))
            } else {
                x.primary
            };
            s.poke(
                &k,
                Some(schema::encode_inode(
                    &a, &x.blob, &x.xattrs, primary, x.flags,
                )),
            );
            format!("recounted inode {ino}")
        }
        4 => {
            // A new entry, to a live or missing inode, in a live or missing
            // directory, of the right kind or not, sole or not.
            let parent = if rng.gen_bool(0.8) { 1 } else { some_ino(rng) };
            let child = some_ino(rng);
            let kind = [Kind::File, Kind::Dir, Kind::Symlink][rng.gen_range(0..3)];
            let sole = kind != Kind::Dir && rng.gen_bool(0.3);
            let name = format!("x{}", rng.gen::<u32>()).into_bytes();
            s.poke(
                &schema::entry_key(parent, schema::name_hash(&name), &name),
                Some(schema::encode_entry(child, kind, sole)),
            );
            format!("entry {parent} -> {child}")
        }
        5 => {
            let ino = some_ino(rng);
            s.poke(&schema::orphan_key(ino), Some(vec![]));
            format!("orphan {ino}")
        }
        6 => {
            let ino = some_ino(rng);
            let blk = rng.gen_range(0..4);
            s.poke(
                &schema::data_key(ino, blk),
                Some(schema::encode_data(&[1u8; 100])),
            );
            format!("data block {ino}:{blk}")
        }
        7 => {
            let ino = some_ino(rng);
            s.data().write(ino, rng.gen_range(0..20000), b"x").unwrap();
            format!("data object {ino}")
        }
        8 => {
            let ag = rng.gen_range(0..4u32);
            s.poke(
                &schema::ag_key(ag),
                Some(schema::encode_u64(rng.gen_range(0..3))),
            );
            format!("allocation group {ag} lowered")
        }
        _ => {
            // Flip an entry's sole flag or kind.
            let Some((k, v)) = pick(rng, b'E') else {
                return "nothing".into();
            };
            let Ok((child, kind, sole)) = schema::decode_entry(&v) else {
                return "nothing".into();
            };
            let (kind, sole) = if rng.gen_bool(0.5) && kind != Kind::Dir {
                (kind, !sole)
            } else {
                (
                    [Kind::File, Kind::Dir, Kind::Fifo][rng.gen_range(0..3)],
                    false,
                )
            };
            s.poke(&k, Some(schema::encode_entry(child, kind, sole)));
            "entry flag or kind".into()
        }
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// The bounded walk (spilling) against the reference on `s`: the same
/// problems and counts; after `--repair`, the same records and objects.
fn agree(s: &MemStore, scratch: &std::path::Path, what: &str) -> u64 {
    let want = fsck::reference::fsck(s, false);
    let got = fsck::check(s, false, &tiny(scratch));
    let (want, got) = match (want, got) {
        (Ok(w), Ok(g)) => (w, g),
        (Err(w), Err(g)) => {
            assert_eq!(w.to_string(), g.to_string(), "{what}");
            return 0;
        }
        (w, g) => panic!("{what}: reference {w:?}, bounded {g:?}"),
    };
    assert_eq!(
        sorted(got.problems.clone()),
        sorted(want.problems.clone()),
        "{what}"
    );
    assert_eq!(
        (
            got.inodes,
            got.entries,
            got.data_blocks,
            got.data_objects,
            got.leftover_objects
        ),
        (
            want.inodes,
            want.entries,
            want.data_blocks,
            want.data_objects,
            want.leftover_objects
        ),
        "{what}"
    );
    let (a, b) = (copy(s), copy(s));
    let ra = fsck::reference::fsck(&*a, true).unwrap();
    let rb = fsck::check(&*b, true, &tiny(scratch)).unwrap();
    assert_eq!(ra.repaired, rb.repaired, "{what}: repaired");
    assert!(a.dump() == b.dump(), "{what}: the repaired stores differ");
    assert_eq!(objects(&a), objects(&b), "{what}: data objects");
    // And the repair leaves nothing to find, in both.
    let again = fsck::check(&*b, false, &tiny(scratch)).unwrap();
    let again_ref = fsck::reference::fsck(&*a, false).unwrap();
    assert_eq!(
        sorted(again.problems),
        sorted(again_ref.problems),
        "{what}: after repair"
    );
    assert!(
        std::fs::read_dir(scratch).unwrap().next().is_none(),
        "scratch files left"
    );
    got.scratch_bytes
}

#[test]
fn bounded_fsck_finds_what_the_in_memory_walk_found() {
    for seed in shoal_testkit::setup::seeds(2) {
        let scratch = tempfile::tempdir().unwrap();
        let base = build(seed);
        // Clean: nothing found, and the sorts spilled.
        let clean = fsck::check(&*base, false, &tiny(scratch.path())).unwrap();
        assert!(clean.is_clean(), "seed={seed}: {:?}", clean.problems);
        assert!(clean.scratch_bytes > 0, "seed={seed}: nothing spilled");
        assert!(agree(&base, scratch.path(), "clean") > 0);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        for trial in 0..60 {
            let s = copy(&base);
            let n = rng.gen_range(1..6);
            let what: Vec<String> = (0..n).map(|_| damage(&s, &mut rng)).collect();
            agree(
                &s,
                scratch.path(),
                &format!("seed={seed} trial {trial}: {what:?}"),
            );
        }
    }
}

#[test]
fn bounded_fsck_of_a_store_without_its_root() {
    let scratch = tempfile::tempdir().unwrap();
    let base = build(7);
    for bad in [None, Some(vec![1, 2, 3])] {
        let s = copy(&base);
        s.poke(&schema::inode_key(1), bad.clone());
        let want = fsck::reference::fsck(&*s, false).unwrap();
        let got = fsck::check(&*s, false, &tiny(scratch.path())).unwrap();
        assert_eq!(sorted(got.problems), sorted(want.problems.clone()));
        assert_eq!(got.inodes, want.inodes);
        // Repaired: a new root (its times are now's, so compared by what
        // fsck finds after) with everything under it again.
        let (a, b) = (copy(&s), copy(&s));
        let ra = fsck::reference::fsck(&*a, true).unwrap();
        let rb = fsck::check(&*b, true, &tiny(scratch.path())).unwrap();
        assert_eq!(sorted(ra.problems), sorted(rb.problems));
        assert_eq!(ra.repaired, rb.repaired);
        let strip = |s: &MemStore| -> Vec<_> {
            s.dump()
                .into_iter()
                .filter(|(k, _)| *k != schema::inode_key(1))
                .collect()
        };
        assert!(
            strip(&a) == strip(&b),
            "{bad:?}: the repaired stores differ"
        );
        assert!(fsck::check(&*b, false, &tiny(scratch.path()))
            .unwrap()
            .is_clean());
    }
}

#[test]
fn bounded_fsck_fails_as_before_on_keys_too_short() {
    let scratch = tempfile::tempdir().unwrap();
    let base = build(11);
    for key in [
        &b"I\x01"[..],
        b"D\x00\x01",
        b"O",
        b"I\x00\x00\x00\x00\x00\x00\x00\x05\x01",
    ] {
        let s = copy(&base);
        s.poke(key, Some(vec![1, 2, 3, 4]));
        let want = fsck::reference::fsck(&*s, false).map(|r| sorted(r.problems));
        let got = fsck::check(&*s, false, &tiny(scratch.path())).map(|r| sorted(r.problems));
        assert_eq!(format!("{got:?}"), format!("{want:?}"), "a key {key:?}");
    }
}
