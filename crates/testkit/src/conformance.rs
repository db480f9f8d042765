//! One conformance suite for every shared store (`shoal_cluster`): the
//! simulator in etcd and TiKV modes, a real etcd cluster, and the TiKV
//! backend on its model of TiKV's transactions. What the
//! daemons' correctness rests on is checked here, each point with the
//! threads racing for real: versions that move with every change, commits
//! that apply whole or not at all, exactly one winner of a name, no lost
//! update, a change stream in revision order that can resume, leases whose
//! keys go with them and which fence their holder's later commits.

use shoal_cluster::{ClusterStore, Cond, KvError, Op, Outcome, Rev};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A store under test and how to let time pass for its leases.
pub struct Harness {
    pub store: Arc<dyn ClusterStore>,
    /// Let `d` pass for lease deadlines: the simulator's fake clock, a
    /// sleep on a real store.
    pub advance: Box<dyn Fn(Duration) + Send + Sync>,
    /// Keys of this run start with it (a real store outlives runs).
    pub prefix: Vec<u8>,
    /// The shortest lease the store grants (etcd: about 1.5 s by default).
    pub lease_ttl: Duration,
}

impl Harness {
    fn k(&self, s: &str) -> Vec<u8> {
        let mut k = self.prefix.clone();
        k.extend_from_slice(s.as_bytes());
        k
    }
    fn put(&self, k: &[u8], v: &[u8]) -> Rev {
        match self
            .store
            .commit(&[], &[Op::Put(k.to_vec(), v.to_vec(), None)])
        {
            Ok(Outcome::Committed(r)) => r,
            other => panic!("unconditional put: {other:?}"),
        }
    }
    fn has_watch(&self) -> bool {
        !matches!(
            self.store.watch(&self.prefix, 1).err(),
            Some(KvError::Unsupported(_))
        )
    }
}

/// Every check, in order; each panics with what it found.
pub fn run_all(h: &Harness) {
    type Check = (&'static str, fn(&Harness));
    let checks: [Check; 9] = [
        ("versions", versions),
        ("conditions", conditions),
        ("atomic commits", atomic_commits),
        ("scans", scans),
        ("limits", limits),
        ("one winner per name", one_winner_per_name),
        ("no lost update", no_lost_update),
        ("change stream", change_stream),
        ("leases and fencing", leases_and_fencing),
    ];
    for (name, check) in checks {
        let t = Instant::now();
        check(h);
        println!("conformance: {name}: ok ({:?})", t.elapsed());
    }
}

fn versions(h: &Harness) {
    let s = &h.store;
    let k = h.k("versions/a");
    assert_eq!(s.get(&k).unwrap(), None);
    let r1 = h.put(&k, b"1");
    let got = s.get(&k).unwrap().expect("a put is read back");
    assert_eq!((got.value.as_slice(), got.mod_rev), (&b"1"[..], r1));
    let r2 = h.put(&k, b"2");
    assert!(r2 > r1, "revisions grow: {r1} then {r2}");
    assert_eq!(s.get(&k).unwrap().unwrap().mod_rev, r2);
    assert!(s.revision().unwrap() >= r2);
    match s.commit(&[], &[Op::Delete(k.clone())]).unwrap() {
        Outcome::Committed(r3) => assert!(r3 > r2),
        o => panic!("delete: {o:?}"),
    }
    assert_eq!(s.get(&k).unwrap(), None);
}

fn conditions(h: &Harness) {
    let s = &h.store;
    let (a, b) = (h.k("cond/a"), h.k("cond/b"));
    let put = |k: &[u8], v: &[u8]| Op::Put(k.to_vec(), v.to_vec(), None);
    // Absent holds, then does not.
    assert!(matches!(
        s.commit(&[Cond::Absent(a.clone())], &[put(&a, b"x")])
            .unwrap(),
        Outcome::Committed(_)
    ));
    assert_eq!(
        s.commit(&[Cond::Absent(a.clone())], &[put(&a, b"y")])
            .unwrap(),
        Outcome::Conflict(vec![0])
    );
    assert_eq!(s.get(&a).unwrap().unwrap().value, b"x");
    // A version read, then changed by another: the stale one conflicts.
    let seen = s.get(&a).unwrap().unwrap().mod_rev;
    h.put(&a, b"z");
    assert_eq!(
        s.commit(&[Cond::ModRev(a.clone(), seen)], &[put(&b, b"w")])
            .unwrap(),
        Outcome::Conflict(vec![0])
    );
    assert_eq!(s.get(&b).unwrap(), None, "a conflicting commit wrote");
    let now = s.get(&a).unwrap().unwrap().mod_rev;
    assert!(matches!(
        s.commit(
            &[Cond::ModRev(a.clone(), now), Cond::Absent(b.clone())],
            &[put(&b, b"w")]
        )
        .unwrap(),
        Outcome::Committed(_)
    ));
    // An empty range: holds until a key lands in it.
    let (lo, hi) = (h.k("cond/dir/"), h.k("cond/dir0"));
    let inside = h.k("cond/dir/x");
    assert!(matches!(
        s.commit(
            &[Cond::Empty(lo.clone(), hi.clone())],
            &[put(&inside, b"1")]
        )
        .unwrap(),
        Outcome::Committed(_)
    ));
    assert_eq!(
        s.commit(
            &[Cond::Empty(lo.clone(), hi.clone())],
            &[put(&h.k("cond/y"), b"1")]
        )
        .unwrap(),
        Outcome::Conflict(vec![0])
    );
    assert_eq!(s.get(&h.k("cond/y")).unwrap(), None);
    // Exists, and which of several conditions failed.
    let c = h.k("cond/c");
    assert_eq!(
        s.commit(
            &[Cond::Exists(a.clone()), Cond::Exists(c.clone())],
            &[put(&c, b"v")]
        )
        .unwrap(),
        Outcome::Conflict(vec![1])
    );
}

fn atomic_commits(h: &Harness) {
    let s = &h.store;
    let keys: Vec<Vec<u8>> = (0..4).map(|i| h.k(&format!("atomic/{i}"))).collect();
    h.put(&keys[3], b"old");
    let ops = vec![
        Op::Put(keys[0].clone(), b"a".to_vec(), None),
        Op::Put(keys[1].clone(), b"b".to_vec(), None),
        Op::Put(keys[2].clone(), b"c".to_vec(), None),
        Op::Delete(keys[3].clone()),
    ];
    let Outcome::Committed(r) = s.commit(&[], &ops).unwrap() else {
        panic!("unconditional commit conflicted")
    };
    for k in &keys[..3] {
        assert_eq!(
            s.get(k).unwrap().unwrap().mod_rev,
            r,
            "one revision per commit"
        );
    }
    assert_eq!(s.get(&keys[3]).unwrap(), None);
    let (many, at) = s.get_many(&keys).unwrap();
    assert!(
        at >= r,
        "get_many's revision {at} is before the commit's {r}"
    );
    assert!(many[..3]
        .iter()
        .all(|v| v.as_ref().is_some_and(|v| v.mod_rev == r)));
    assert_eq!(many[3], None, "get_many of a deleted key");
}

fn scans(h: &Harness) {
    let s = &h.store;
    for i in [3, 1, 4, 0, 2] {
        h.put(&h.k(&format!("scan/{i}")), format!("v{i}").as_bytes());
    }
    h.put(&h.k("scan0"), b"outside");
    let (lo, hi) = (h.k("scan/"), h.k("scan0"));
    let (all, rev) = s.scan(&lo, &hi, 100).unwrap();
    let names: Vec<Vec<u8>> = all.iter().map(|(k, _)| k.clone()).collect();
    let want: Vec<Vec<u8>> = (0..5).map(|i| h.k(&format!("scan/{i}"))).collect();
    assert_eq!(names, want, "ascending, [lo, hi)");
    assert!(all.iter().all(|(_, v)| v.mod_rev <= rev));
    let (two, _) = s.scan(&lo, &hi, 2).unwrap();
    assert_eq!(two.len(), 2);
    let (rest, _) = s.scan(&h.k("scan/2"), &hi, 100).unwrap();
    assert_eq!(rest.len(), 3, "a scan starts at its lower bound, inclusive");
}

fn limits(h: &Harness) {
    let s = &h.store;
    let l = s.limits();
    let ops: Vec<Op> = (0..=l.max_ops)
        .map(|i| Op::Put(h.k(&format!("limits/{i}")), vec![1], None))
        .collect();
    match s.commit(&[], &ops) {
        Err(KvError::TooLarge { .. }) => {}
        other => panic!("{} operations (limit {}): {other:?}", ops.len(), l.max_ops),
    }
    assert_eq!(
        s.get(&h.k("limits/0")).unwrap(),
        None,
        "a refused commit wrote"
    );
    let ok = &ops[..l.max_ops.min(100)];
    assert!(matches!(s.commit(&[], ok).unwrap(), Outcome::Committed(_)));
}

/// Threads create one name at once: exactly one wins, and its value stays.
fn one_winner_per_name(h: &Harness) {
    for round in 0..10 {
        let k = h.k(&format!("race/{round}"));
        let wins: Vec<bool> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4u8)
                .map(|t| {
                    let (s, k) = (&h.store, &k);
                    sc.spawn(move || {
                        match s
                            .commit(
                                &[Cond::Absent(k.clone())],
                                &[Op::Put(k.clone(), vec![t], None)],
                            )
                            .unwrap()
                        {
                            Outcome::Committed(_) => true,
                            Outcome::Conflict(_) => false,
                        }
                    })
                })
                .collect();
            hs.into_iter().map(|j| j.join().unwrap()).collect()
        });
        let winners: Vec<usize> = (0..4).filter(|&i| wins[i]).collect();
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        assert_eq!(
            h.store.get(&k).unwrap().unwrap().value,
            vec![winners[0] as u8]
        );
    }
}

/// Read-modify-write loops from several threads on one counter: every
/// successful commit is one increment, none is lost.
fn no_lost_update(h: &Harness) {
    let k = h.k("counter");
    h.put(&k, &0u64.to_le_bytes());
    let (threads, each) = (4, 40);
    let conflicts: u64 = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let (s, k) = (&h.store, &k);
                sc.spawn(move || {
                    let mut conflicts = 0u64;
                    for _ in 0..each {
                        loop {
                            let v = s.get(k).unwrap().unwrap();
                            let n = u64::from_le_bytes(v.value[..8].try_into().unwrap());
                            let op = Op::Put(k.clone(), (n + 1).to_le_bytes().to_vec(), None);
                            match s
                                .commit(&[Cond::ModRev(k.clone(), v.mod_rev)], &[op])
                                .unwrap()
                            {
                                Outcome::Committed(_) => break,
                                Outcome::Conflict(_) => conflicts += 1,
                            }
                        }
                    }
                    conflicts
                })
            })
            .collect();
        hs.into_iter().map(|j| j.join().unwrap()).sum()
    });
    let v = h.store.get(&k).unwrap().unwrap().value;
    assert_eq!(
        u64::from_le_bytes(v[..8].try_into().unwrap()),
        threads * each,
        "lost updates ({conflicts} conflicts retried)"
    );
}

fn change_stream(h: &Harness) {
    let s = &h.store;
    if !h.has_watch() {
        println!("conformance: change stream: the store has none (TiKV): skipped by design");
        return;
    }
    let p = h.k("watch/");
    let from = s.revision().unwrap() + 1;
    let mut w = s.watch(&p, from).unwrap();
    let (a, b) = (h.k("watch/a"), h.k("watch/b"));
    let r1 = h.put(&a, b"1");
    h.put(&h.k("unwatched"), b"-");
    let Outcome::Committed(r2) = s
        .commit(
            &[],
            &[
                Op::Put(b.clone(), b"2".to_vec(), None),
                Op::Delete(a.clone()),
            ],
        )
        .unwrap()
    else {
        panic!()
    };
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < 3 && Instant::now() < deadline {
        got.extend(w.next(Duration::from_millis(200)).unwrap());
    }
    type Seen = (Vec<u8>, Option<Vec<u8>>, Rev);
    let seen: Vec<Seen> = got
        .iter()
        .map(|e| (e.key.clone(), e.value.clone(), e.rev))
        .collect();
    assert_eq!(seen.len(), 3, "events: {seen:?}");
    assert_eq!(seen[0], (a.clone(), Some(b"1".to_vec()), r1));
    // One commit's events together, at its revision, in any order.
    let mut last = seen[1..].to_vec();
    last.sort();
    assert_eq!(
        last,
        vec![(a.clone(), None, r2), (b.clone(), Some(b"2".to_vec()), r2)]
    );
    // Resumed from the second commit: only it.
    let mut w2 = s.watch(&p, r1 + 1).unwrap();
    let mut again = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while again.len() < 2 && Instant::now() < deadline {
        again.extend(w2.next(Duration::from_millis(200)).unwrap());
    }
    assert_eq!(again.len(), 2);
    assert!(again.iter().all(|e| e.rev == r2));
}

fn leases_and_fencing(h: &Harness) {
    let s = &h.store;
    let ttl = h.lease_ttl;
    let l = s.lease_grant(ttl).unwrap();
    let (sess, owned) = (h.k("lease/session"), h.k("lease/owned"));
    s.commit(
        &[],
        &[
            Op::Put(sess.clone(), b"me".to_vec(), Some(l)),
            Op::Put(owned.clone(), b"x".to_vec(), Some(l)),
        ],
    )
    .unwrap();
    // Renewed, it lives.
    for _ in 0..3 {
        (h.advance)(ttl / 2);
        s.lease_renew(l).unwrap();
    }
    assert!(
        s.get(&sess).unwrap().is_some(),
        "a renewed lease's key went"
    );
    // A fenced commit: only while the session key is there.
    let f = h.k("lease/fenced");
    assert!(matches!(
        s.commit(
            &[Cond::Exists(sess.clone())],
            &[Op::Put(f.clone(), b"1".to_vec(), None)]
        )
        .unwrap(),
        Outcome::Committed(_)
    ));
    // Not renewed, it ends and takes its keys.
    let deadline = Instant::now() + ttl * 10 + Duration::from_secs(5);
    (h.advance)(ttl * 2);
    while s.get(&sess).unwrap().is_some() {
        assert!(
            Instant::now() < deadline,
            "an expired lease's key is still there"
        );
        (h.advance)(Duration::from_millis(250));
    }
    assert_eq!(s.get(&owned).unwrap(), None);
    let renewed = s.lease_renew(l);
    assert!(
        matches!(renewed, Err(KvError::LeaseExpired(_))),
        "renewing an expired lease: {renewed:?}"
    );
    assert_eq!(
        s.commit(
            &[Cond::Exists(sess.clone())],
            &[Op::Put(f.clone(), b"2".to_vec(), None)]
        )
        .unwrap(),
        Outcome::Conflict(vec![0]),
        "a commit fenced by an expired session went through"
    );
    assert!(matches!(
        s.commit(&[], &[Op::Put(h.k("lease/late"), b"x".to_vec(), Some(l))]),
        Err(KvError::LeaseExpired(_))
    ));
    // Revoked, its keys go at once.
    let l2 = s.lease_grant(ttl).unwrap();
    let k2 = h.k("lease/revoked");
    s.commit(&[], &[Op::Put(k2.clone(), b"x".to_vec(), Some(l2))])
        .unwrap();
    s.lease_revoke(l2).unwrap();
    assert_eq!(s.get(&k2).unwrap(), None);
}
