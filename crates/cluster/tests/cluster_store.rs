//! The shared-store seam (`shoal_cluster`): the conformance suite on
//! the simulator in etcd and TiKV modes, and the simulator's faults, which
//! the daemons' tests lean on: a commit whose result is lost, a store that
//! is unavailable or full, a change stream that lags or was compacted.

use shoal_cluster::sim::{Fault, SimStore};
use shoal_cluster::{ClusterStore, Cond, KvError, Op, Outcome};
use shoal_testkit::conformance::{run_all, Harness};
use std::sync::Arc;
use std::time::Duration;

fn harness(s: Arc<SimStore>) -> Harness {
    let clock = s.clone();
    Harness {
        store: s,
        advance: Box::new(move |d| clock.advance(d)),
        prefix: b"t/".to_vec(),
        lease_ttl: Duration::from_secs(2),
    }
}

#[test]
fn conformance_sim_etcd() {
    run_all(&harness(SimStore::new()));
}

#[test]
fn conformance_sim_tikv() {
    run_all(&harness(SimStore::tikv()));
}

fn put(k: &[u8]) -> Op {
    Op::Put(k.to_vec(), b"v".to_vec(), None)
}

#[test]
fn unknown_results_may_or_may_not_have_applied() {
    let s = SimStore::new();
    s.fail_next(Fault::Unknown { applied: true });
    assert!(matches!(
        s.commit(&[Cond::Absent(b"a".to_vec())], &[put(b"a")]),
        Err(KvError::Unknown(_))
    ));
    assert!(s.get(b"a").unwrap().is_some(), "applied, answer lost");
    s.fail_next(Fault::Unknown { applied: false });
    assert!(matches!(
        s.commit(&[], &[put(b"b")]),
        Err(KvError::Unknown(_))
    ));
    assert!(s.get(b"b").unwrap().is_none(), "not applied");
    // A retry after an unknown result must read first: blind, it conflicts with itself.
    assert_eq!(
        s.commit(&[Cond::Absent(b"a".to_vec())], &[put(b"a")])
            .unwrap(),
        Outcome::Conflict(vec![0])
    );
}

#[test]
fn unavailable_and_full_apply_nothing() {
    let s = SimStore::new();
    s.fail_next(Fault::Unavailable);
    assert!(matches!(
        s.commit(&[], &[put(b"a")]),
        Err(KvError::Unavailable(_))
    ));
    assert!(s.get(b"a").unwrap().is_none());
    s.set_quota(Some(64));
    assert!(matches!(
        s.commit(&[], &[Op::Put(b"big".to_vec(), vec![0; 100], None)]),
        Err(KvError::NoSpace)
    ));
    assert!(s.get(b"big").unwrap().is_none());
    // Deletes still go through on a full store (how a user frees it).
    s.set_quota(None);
    s.commit(&[], &[Op::Put(b"x".to_vec(), vec![0; 50], None)])
        .unwrap();
    s.set_quota(Some(60));
    assert!(matches!(
        s.commit(&[], &[Op::Delete(b"x".to_vec())]),
        Ok(Outcome::Committed(_))
    ));
}

#[test]
fn a_paused_stream_lags_then_catches_up_and_a_compacted_one_says_so() {
    let s = SimStore::new();
    let from = s.revision().unwrap() + 1;
    let mut w = s.watch(b"", from).unwrap();
    s.pause_watches(true);
    s.commit(&[], &[put(b"a")]).unwrap();
    assert!(
        w.next(Duration::from_millis(20)).unwrap().is_empty(),
        "a paused stream delivered"
    );
    s.pause_watches(false);
    assert_eq!(w.next(Duration::from_millis(20)).unwrap().len(), 1);
    s.compact();
    assert!(matches!(
        s.watch(b"", from).unwrap().next(Duration::ZERO),
        Err(KvError::Compacted(_))
    ));
}
