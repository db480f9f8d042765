//! The conformance suite (`shoal_testkit::conformance`) on the TiKV
//! translation over the model of TiKV's transactions, and what only this
//! backend can get wrong: a commit whose answer is lost, and the traces an
//! ended lease leaves.

use shoal_cluster::{ClusterStore, Cond, KvError, Op, Outcome};
use shoal_testkit::conformance::{run_all, Harness};
use shoal_tikv::model::{Fault, MemTikv};
use shoal_tikv::TikvStore;
use std::sync::Arc;
use std::time::Duration;

fn store() -> (Arc<MemTikv>, Arc<TikvStore<Arc<MemTikv>>>) {
    let kv = MemTikv::new();
    (
        kv.clone(),
        Arc::new(TikvStore::new(kv, b"/shoal/t/".to_vec())),
    )
}

#[test]
fn conformance_on_the_tikv_model() {
    let (kv, s) = store();
    run_all(&Harness {
        store: s,
        advance: Box::new(move |d| kv.advance(d)),
        prefix: b"c/".to_vec(),
        lease_ttl: Duration::from_secs(2),
    });
}

fn put(k: &[u8]) -> Op {
    Op::Put(k.to_vec(), b"v".to_vec(), None)
}

#[test]
fn an_undetermined_commit_is_unknown_and_may_have_applied() {
    let (kv, s) = store();
    kv.fail_next(Fault::Undetermined { applied: true });
    assert!(matches!(
        s.commit(&[Cond::Absent(b"a".to_vec())], &[put(b"a")]),
        Err(KvError::Unknown(_))
    ));
    assert!(s.get(b"a").unwrap().is_some(), "applied, answer lost");
    kv.fail_next(Fault::Undetermined { applied: false });
    assert!(matches!(
        s.commit(&[], &[put(b"b")]),
        Err(KvError::Unknown(_))
    ));
    assert!(s.get(b"b").unwrap().is_none(), "not applied");
    kv.fail_next(Fault::Unavailable);
    assert!(matches!(
        s.commit(&[], &[put(b"c")]),
        Err(KvError::Unavailable(_))
    ));
    assert!(s.get(b"c").unwrap().is_none());
}

/// Two unconditional writers of one key both apply (one after the other),
/// as on etcd: a lost write race is run again, not reported.
#[test]
fn a_lost_write_race_is_run_again_not_reported() {
    let (kv, s) = store();
    std::thread::scope(|sc| {
        for t in 0..4u8 {
            let s = &s;
            sc.spawn(move || {
                for i in 0..50u8 {
                    let out = s
                        .commit(&[], &[Op::Put(b"hot".to_vec(), vec![t, i], None)])
                        .unwrap();
                    assert!(matches!(out, Outcome::Committed(_)));
                }
            });
        }
    });
    let (commits, conflicts) = kv.counts();
    println!("200 puts of one key: {commits} commits, {conflicts} write conflicts run again");
    assert_eq!(commits, 200);
}

/// A key put with a lease reads as absent from the lease's deadline on,
/// before anything deleted it; a later renewal deletes the lease, its keys
/// and their index entries; a key taken over by another lease since is
/// left alone.
#[test]
fn an_ended_lease_leaves_nothing() {
    let (kv, s) = store();
    let ttl = Duration::from_secs(2);
    let old = s.lease_grant(ttl).unwrap();
    let keeper = s.lease_grant(ttl).unwrap();
    s.commit(
        &[],
        &[
            Op::Put(b"mine".to_vec(), b"1".to_vec(), Some(old)),
            Op::Put(b"moved".to_vec(), b"1".to_vec(), Some(old)),
        ],
    )
    .unwrap();
    s.commit(
        &[],
        &[Op::Put(b"moved".to_vec(), b"2".to_vec(), Some(keeper))],
    )
    .unwrap();
    kv.advance(ttl + Duration::from_millis(1));
    assert_eq!(s.get(b"mine").unwrap(), None, "past its deadline");
    assert_eq!(s.get(b"moved").unwrap(), None, "the keeper expired too");
    // Renew nothing of old; a new lease's renewals sweep.
    let fresh = s.lease_grant(ttl).unwrap();
    s.commit(
        &[],
        &[Op::Put(b"moved".to_vec(), b"3".to_vec(), Some(fresh))],
    )
    .unwrap();
    kv.advance(Duration::from_secs(1));
    s.lease_renew(fresh).unwrap();
    assert_eq!(s.get(b"moved").unwrap().unwrap().value, b"3");
    // Only the fresh lease's record and its one key with its index entry
    // are left in the store.
    let mut t = shoal_tikv::txn::TxnKv::begin(&kv).unwrap();
    let all = shoal_tikv::txn::Txn::scan(&mut t, b"", b"\xff", 100).unwrap();
    let names: Vec<String> = all
        .iter()
        .map(|(k, _)| String::from_utf8_lossy(&k[9..10]).into_owned())
        .collect();
    assert_eq!(names, vec!["k", "l", "o"], "{all:?}");
    assert!(matches!(s.lease_renew(old), Err(KvError::LeaseExpired(_))));
}

/// Write skew, which snapshot isolation allows and etcd's serial commits do
/// not: one commit puts `x` if `y` is absent, a racing one puts `y` if `x`
/// is absent. At most one may win; without the condition keys locked, both
/// would (each read its snapshot, and they write different keys).
#[test]
fn conditions_on_keys_not_written_are_serial() {
    let (kv, s) = store();
    kv.set_delay(Duration::from_micros(300));
    for round in 0..20 {
        let x = format!("skew/{round}/x").into_bytes();
        let y = format!("skew/{round}/y").into_bytes();
        let wins: Vec<bool> = std::thread::scope(|sc| {
            let a = sc.spawn(|| s.commit(&[Cond::Absent(y.clone())], &[put(&x)]).unwrap());
            let b = sc.spawn(|| s.commit(&[Cond::Absent(x.clone())], &[put(&y)]).unwrap());
            [a, b]
                .map(|j| matches!(j.join().unwrap(), Outcome::Committed(_)))
                .to_vec()
        });
        assert!(
            !(wins[0] && wins[1]),
            "round {round}: both commits won (write skew)"
        );
        assert!(wins[0] || wins[1], "round {round}: neither won");
    }
}

/// An expired lease behind more live ones than one sweep reads is still
/// swept: each sweep goes on where the last stopped.
#[test]
fn an_expired_lease_past_a_sweeps_page_is_swept() {
    use shoal_tikv::{SWEEP_EVERY, SWEEP_PAGE};
    let (kv, s) = store();
    let live: Vec<_> = (0..SWEEP_PAGE + 5)
        .map(|_| s.lease_grant(Duration::from_secs(600)).unwrap())
        .collect();
    let late = s.lease_grant(Duration::from_secs(1)).unwrap();
    s.commit(&[], &[Op::Put(b"late".to_vec(), b"1".to_vec(), Some(late))])
        .unwrap();
    kv.advance(Duration::from_secs(2));
    let leases = || {
        let mut t = shoal_tikv::txn::TxnKv::begin(&kv).unwrap();
        let all = shoal_tikv::txn::Txn::scan(&mut t, b"", b"\xff", 10_000).unwrap();
        all.iter().filter(|(k, _)| k[9] == b'l').count()
    };
    assert_eq!(leases(), live.len() + 1);
    // Renewals sweep at most once a SWEEP_EVERY: the first reads a page
    // of live leases, the second the rest.
    for _ in 0..2 {
        s.lease_renew(live[0]).unwrap();
        std::thread::sleep(SWEEP_EVERY);
    }
    s.lease_renew(live[0]).unwrap();
    assert_eq!(
        leases(),
        live.len(),
        "the expired lease past the first page"
    );
    assert!(matches!(s.lease_renew(late), Err(KvError::LeaseExpired(_))));
}
