//! A partition inside the etcd cluster (ports 23900-23913): one member cut
//! off from the other two by nftables (its peer traffic dropped both ways,
//! on open connections too, with no reset), while its client port still
//! answers, so a daemon talking to it reaches a member that has lost the
//! cluster. Twice: first the leader, which daemon A talks to; then a
//! follower, which daemon B (opened again for it) talks to. What must hold, as long as two of
//! three members hold together (docs/design.md, "When etcd fails"):
//! - no operation of either daemon fails: a member without a leader
//!   refuses at once (the client asks for a leader on every call), the
//!   daemon moves to the next member, and a stall is bounded;
//! - each daemon keeps seeing the other's changes during the cut (its
//!   change stream, if it was on the cut member, is ended by etcd and
//!   opened again on another);
//! - after the heal the namespace is consistent (fsck).
//!
//! Needs root and `nft` (scripts/install-deps.sh installs nftables); CI sets
//! SHOAL_REQUIRE_ETCD=1, which makes a missing `nft` a failure too.

use shoal_cluster::ns::{self, ClusterFs, SessionOpts};
use shoal_cluster::ClusterStore;
use shoal_core::{Ino, SetAttr, ROOT_INO};
use shoal_etcd::{EtcdStore, EtcdUrl};
use shoal_testkit::cluster_ns::{assert_clean, soon};
use shoal_testkit::etcd::{self, Cluster};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long each cut lasts.
const CUT: Duration = Duration::from_secs(8);
/// The longest one operation may wait through a cut: the call that hangs
/// on the cut member before it notices (the client's 2 s deadline), and
/// the election among the other two.
const STALL: Duration = Duration::from_secs(8);
struct Worked {
    names: BTreeSet<String>,
    ops: usize,
    slowest: Duration,
}

/// Create names in `dir` (an fsync every tenth) until `stop`; any error
/// fails the test, naming the operation.
fn work(fs: &ClusterFs, dir: Ino, tag: &str, stop: &AtomicBool) -> Worked {
    let mut w = Worked {
        names: BTreeSet::new(),
        ops: 0,
        slowest: Duration::ZERO,
    };
    let mut time = |what: &str, f: &mut dyn FnMut() -> shoal_core::Result<()>| {
        let t = Instant::now();
        if let Err(e) = f() {
            panic!("{tag}: {what} failed during the cut: {e}");
        }
        w.slowest = w.slowest.max(t.elapsed());
        w.ops += 1;
    };
    let mut k = 0;
    while !stop.load(Ordering::Relaxed) {
        let n = format!("{tag}-{k:04}");
        time(&format!("create {n}"), &mut || {
            fs.create(dir, n.as_bytes(), 0o644).map(|_| ())
        });
        w.names.insert(n);
        if k % 10 == 9 {
            time("fsync", &mut || fs.fsyncdir());
        }
        k += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    w
}

struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn names(fs: &ClusterFs, dir: Ino) -> BTreeSet<String> {
    fs.readdir(dir, None, 100_000)
        .unwrap()
        .into_iter()
        .map(|(n, _, _)| String::from_utf8(n).unwrap())
        .collect()
}

fn chmod(m: u32) -> SetAttr {
    SetAttr {
        mode: Some(m),
        ..Default::default()
    }
}

#[test]
fn daemons_carry_on_when_one_etcd_member_is_cut_off() {
    if !etcd::can_isolate() {
        assert!(
            !etcd::required(),
            "SHOAL_REQUIRE_ETCD=1 but nftables cannot be used (needs root and `nft`: apt-get install nftables)"
        );
        eprintln!("no nft or not root: skipping");
        return;
    }
    let dir = std::env::temp_dir().join(format!("shoal-etcd-members-{}", std::process::id()));
    let Some(mut cluster) = Cluster::start(&dir, 23900) else {
        return;
    };
    let leader = {
        let t = Instant::now();
        loop {
            if let Some(l) = cluster.leader() {
                break l;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "no leader");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // A's calls go to the leader first, B's to the member after it.
    let eps = cluster.endpoints();
    let from = |m: usize| EtcdUrl {
        endpoints: (0..3).map(|j| eps[(m + j) % 3].clone()).collect(),
        name: "members".into(),
        ..Default::default()
    };
    let connect = |u: &EtcdUrl| EtcdStore::connect(u, Duration::from_secs(2)).unwrap();
    let s: Arc<dyn ClusterStore> = connect(&from(0));
    ns::mkfs(&*s).unwrap();
    let opts = SessionOpts {
        ttl: Duration::from_secs(6),
        unavailable_wait: Duration::from_secs(20),
        ..SessionOpts::default()
    };
    let a = ClusterFs::open(connect(&from(leader)), opts.clone()).unwrap();
    let mut b = ClusterFs::open(connect(&from(leader + 1)), opts.clone()).unwrap();
    let da = a.mkdir(ROOT_INO, b"a", 0o755).unwrap().ino;
    let db = b.mkdir(ROOT_INO, b"b", 0o755).unwrap().ino;
    let f = a.create(ROOT_INO, b"f", 0o644).unwrap().ino;
    a.fsync(f).unwrap();
    let g = b.create(ROOT_INO, b"g", 0o644).unwrap().ino;
    b.fsync(g).unwrap();
    soon("B's lookup of A's file", Ok(f), || {
        b.lookup(ROOT_INO, b"f").map(|x| x.ino)
    });
    soon("A's lookup of B's file", Ok(g), || {
        a.lookup(ROOT_INO, b"g").map(|x| x.ino)
    });
    // Both stat both files: from here on they answer from their caches,
    // which only the change stream updates.
    for fs in [&a, &b] {
        fs.getattr(f).unwrap();
        fs.getattr(g).unwrap();
    }

    let mut all_a = BTreeSet::new();
    let mut all_b = BTreeSet::new();
    for round in 0..2 {
        // First the leader, A's first member; then a follower, B's first
        // member: B is opened again on it (A's calls went to another member
        // when the first cut moved them on).
        let (cut, who) = if round == 0 {
            (leader, "the leader, A's first member")
        } else {
            let now = cluster.leader();
            let m = (0..3).find(|&m| Some(m) != now).unwrap();
            b.close().unwrap();
            b = ClusterFs::open(connect(&from(m)), opts.clone()).unwrap();
            b.getattr(f).unwrap();
            b.getattr(g).unwrap();
            (m, "a follower, B's first member")
        };
        cluster.isolate(cut, true);
        let t0 = Instant::now();
        println!("member partition: m{cut} ({who}) cut off from its peers");
        let stop = AtomicBool::new(false);
        let mode = [0o600, 0o640][round] as u16;
        let (wa, wb, tma, tmb) = std::thread::scope(|sc| {
            let ha = sc.spawn(|| work(&a, da, &format!("a{round}"), &stop));
            let hb = sc.spawn(|| work(&b, db, &format!("b{round}"), &stop));
            // The workers stop when this closure ends, even by a failed check.
            let _stop = StopOnDrop(&stop);
            // A second into the cut, while both work, each changes a file
            // the other has in its cache.
            std::thread::sleep(Duration::from_secs(1));
            a.setattr(f, &chmod(mode.into())).unwrap();
            b.setattr(g, &chmod(mode.into())).unwrap();
            let tma = soon("B's stat after A's chmod", mode, || {
                b.getattr(f).unwrap().perm
            });
            let tmb = soon("A's stat after B's chmod", mode, || {
                a.getattr(g).unwrap().perm
            });
            std::thread::sleep(CUT.saturating_sub(t0.elapsed()));
            drop(_stop);
            (ha.join().unwrap(), hb.join().unwrap(), tma, tmb)
        });
        println!(
            "member partition: A {} ops, slowest {:?}; B {} ops, slowest {:?}; chmods seen in {tma:?} (by B), {tmb:?} (by A); new leader m{:?}",
            wa.ops,
            wa.slowest,
            wb.ops,
            wb.slowest,
            cluster.leader()
        );
        assert!(wa.slowest < STALL && wb.slowest < STALL, "a stall too long");
        assert!(
            wa.names.len() >= 20 && wb.names.len() >= 20,
            "too little done"
        );
        all_a.extend(wa.names);
        all_b.extend(wb.names);

        // Still cut: each lists the other's names.
        a.fsyncdir().unwrap();
        b.fsyncdir().unwrap();
        let ta = soon("B's listing of A's directory", all_a.clone(), || {
            names(&b, da)
        });
        let tb = soon("A's listing of B's directory", all_b.clone(), || {
            names(&a, db)
        });
        println!(
            "member partition: after {:?}, still cut: B listed A's names in {ta:?}, A listed B's in {tb:?}",
            t0.elapsed()
        );

        cluster.isolate(cut, false);
        cluster.wait_healthy(Duration::from_secs(30));
        // After the heal the member catches up; both go on.
        let n = format!("healed{round}");
        let x = a.create(da, n.as_bytes(), 0o644).unwrap().ino;
        a.fsync(x).unwrap();
        all_a.insert(n);
        soon("B's listing after the heal", all_a.clone(), || {
            names(&b, da)
        });
        println!("member partition: m{cut} healed");
    }
    assert_eq!(names(&a, da), all_a);
    assert_eq!(names(&a, db), all_b);
    assert_clean(&*s);
    drop(a);
    drop(b);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
