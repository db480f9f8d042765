//! loom models of the three protocols the engine's concurrency rests on, run
//! on the engine's own code through the seam in `sync.rs`, which takes loom's
//! locks and atomics under `--cfg loom` (`scripts/loom.sh`). loom runs each
//! model under every interleaving of its threads (up to a preemption bound)
//! and fails on a data race, a deadlock or a lost wake-up, as well as on the
//! models' own assertions.
//!
//! - the name lock (`BitLocks`, written by hand: 31 mutexes in one word and
//!   a parked bit): excludes, and never loses a wake-up, also when waiters
//!   for two bits of one word park together (docs/locking.md, "name");
//! - the commit gate (`Committer`): an epoch closes only while every shard is
//!   held, so once an epoch is durable every record queued in it is in the
//!   store, which is what `fsync` and `durability=sync` wait on;
//! - reclaim against fills and probes (`Dir`): eviction puts a name's hash in
//!   the evicted filter before it removes the entry, under the shard's write
//!   lock, so a probe never takes an evicted name for a definite miss (rule 7
//!   of docs/locking.md); a fill during eviction is neither lost nor evicted
//!   while dirty.

use crate::cache::{dir_shard, Dent, Dir};
use crate::commit::Committer;
use crate::schema::name_hash;
use crate::store::{MemStore, Store};
use crate::sync::Arc;
use crate::sync::{AtomicU64, BitLocks, LockClass, Ordering};
use crate::types::{Durability, Kind};
use loom::thread;

/// Every interleaving with up to `bound` preemptions (loom's advice: 2-3
/// finds the known bugs of this size at a cost that stays in seconds).
fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(bound);
    b.check(f);
}

/// Two threads on one bit and a third on another bit of the same word: the
/// counter under each bit is read and written with no atomic step between
/// (a lost update would show), and the holder of the other bit releases it
/// while the first two may be parked, which must wake them (the parked bit
/// is the word's, not the bit's).
#[test]
fn name_lock_excludes_and_wakes() {
    model(3, || {
        let word = Arc::new(BitLocks::default());
        let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let run = |bit: u32, c: usize| {
            let (word, counts) = (word.clone(), counts.clone());
            thread::spawn(move || {
                let _g = word.lock(bit, LockClass::Name);
                let v = counts[c].load(Ordering::Relaxed);
                thread::yield_now();
                counts[c].store(v + 1, Ordering::Relaxed);
            })
        };
        let ts = [run(3, 0), run(3, 0), run(17, 1)];
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(
            counts[0].load(Ordering::Relaxed),
            2,
            "an update under bit 3 was lost"
        );
        assert_eq!(counts[1].load(Ordering::Relaxed), 1);
    });
}

/// Operations queue records through the gate while the committer closes
/// epochs. Whenever an operation sees its epoch durable, its record must be
/// in the store; at the end every record is, exactly once.
#[test]
fn commit_gate_durable_epoch_holds_its_records() {
    model(2, || {
        let store = MemStore::new();
        let c = Committer::new(store.clone() as Arc<dyn Store>, Durability::Group, 1);
        let op = |k: u8| {
            let (c, store) = (c.clone(), store.clone());
            thread::spawn(move || {
                let mut g = c.enter().unwrap();
                let e = g.epoch;
                g.put(vec![k], 1, vec![k]);
                drop(g);
                if c.durable_epoch() >= e {
                    assert_eq!(
                        store.get(&[k]).unwrap(),
                        Some(vec![k]),
                        "epoch {e} durable without key {k}"
                    );
                }
            })
        };
        let ops = [op(1), op(2)];
        let committer = {
            let c = c.clone();
            thread::spawn(move || c.commit_once().unwrap())
        };
        for t in ops {
            t.join().unwrap();
        }
        committer.join().unwrap();
        c.commit_once().unwrap();
        for k in [1u8, 2] {
            assert_eq!(store.get(&[k]).unwrap(), Some(vec![k]));
        }
    });
}

fn dent(ino: u64, dirty_epoch: u64) -> Dent {
    Dent {
        ino,
        kind: Kind::File,
        sole: true,
        ver: 1,
        dirty_epoch,
    }
}

/// Two names in one shard of a complete directory, whose entries are clean
/// (in the store). Reclaim evicts the shard while one thread probes the
/// first name (a lookup or a create's existence check) and another makes a
/// third name (dirty, epoch 5) in the same shard. The probe sees the entry or
/// "maybe evicted", never a definite miss; the new name survives the
/// eviction, which leaves it alone as dirty.
#[test]
fn reclaim_never_makes_a_stored_name_a_definite_miss() {
    // Three names whose hashes share a shard.
    let mut names = Vec::new();
    let mut i = 0u32;
    let shard = dir_shard(name_hash(b"n0"));
    while names.len() < 3 {
        let n = format!("n{i}").into_bytes();
        if dir_shard(name_hash(&n)) == shard {
            names.push(n);
        }
        i += 1;
    }
    let names = Arc::new(names);
    // Executions in which reclaim evicted something: the model must reach
    // the evicting interleavings, not only those where the probe came first.
    static EVICTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    model(2, move || {
        let d = Arc::new(Dir::new(true, 0, false, None));
        for (k, n) in names[..2].iter().enumerate() {
            d.fill(name_hash(n), n, dent(10 + k as u64, 0));
        }
        let prober = {
            let (d, names) = (d.clone(), names.clone());
            thread::spawn(move || {
                let n = &names[0];
                let (got, _, definite) = d.probe(name_hash(n), n, false);
                assert!(
                    got.is_some() || !definite,
                    "a stored name evicted and then reported definitely absent"
                );
            })
        };
        let maker = {
            let (d, names) = (d.clone(), names.clone());
            thread::spawn(move || {
                let n = &names[2];
                d.fill(name_hash(n), n, dent(12, 5));
            })
        };
        let reclaim = {
            let d = d.clone();
            thread::spawn(move || {
                let (ev, _, _) = d.evict_clean_chunk(shard, 4, 0, usize::MAX);
                EVICTED.fetch_add((ev > 0) as u64, Ordering::Relaxed);
            })
        };
        for t in [prober, maker, reclaim] {
            t.join().unwrap();
        }
        let n = &names[2];
        let (got, _, _) = d.probe(name_hash(n), n, false);
        assert_eq!(
            got.map(|d| d.ino),
            Some(12),
            "a dirty entry was evicted or lost"
        );
        for n in &names[..2] {
            let (got, _, definite) = d.probe(name_hash(n), n, false);
            assert!(got.is_some() || !definite);
        }
    });
    assert!(EVICTED.load(Ordering::Relaxed) > 0, "no execution evicted");
}
