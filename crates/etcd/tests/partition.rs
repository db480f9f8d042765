//! A daemon cut off from the whole etcd cluster by a network partition
//! (ports 23880-23893, and one proxy per member for daemon A: while cut, no
//! byte moves and no connection is refused or reset), while daemon B keeps
//! the cluster. What must hold (docs/design.md, "Sessions and fencing" and
//! "Directory leases"):
//! - A stops acknowledging creates from memory within a second (its queue
//!   stops moving) and half its session TTL, and its operations fail after
//!   a bounded time; past its lease their errors say to remount;
//! - B, creating the same names in the directory A held, goes on once A's
//!   session lease has ended, and wins every name it creates;
//! - everything A fsynced before the cut is there; nothing A answered
//!   during the cut lands after the link heals (A is fenced and says
//!   "remount");
//! - the namespace is consistent (fsck).
//!
//! CI sets SHOAL_REQUIRE_ETCD=1.

use shoal_cluster::ns::{self, ClusterFs, SessionOpts};
use shoal_cluster::ClusterStore;
use shoal_core::{Error, ROOT_INO};
use shoal_etcd::{EtcdStore, EtcdUrl};
use shoal_testkit::cluster_ns::assert_clean;
use shoal_testkit::etcd::Cluster;
use shoal_testkit::proxy::Proxy;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn a_daemon_cut_off_by_a_partition_is_fenced_and_the_others_go_on() {
    let dir = std::env::temp_dir().join(format!("shoal-etcd-partition-{}", std::process::id()));
    let Some(cluster) = Cluster::start(&dir, 23880) else {
        return;
    };
    let proxies: Vec<Proxy> = cluster
        .endpoints()
        .iter()
        .map(|e| Proxy::start(e.trim_start_matches("http://").parse().unwrap()))
        .collect();
    let name = "partition".to_string();
    let direct = EtcdUrl {
        endpoints: cluster.endpoints(),
        name: name.clone(),
        ..Default::default()
    };
    let through = EtcdUrl {
        endpoints: proxies.iter().map(Proxy::url).collect(),
        name,
        ..Default::default()
    };
    let s: Arc<dyn ClusterStore> = EtcdStore::connect(&direct, Duration::from_secs(3)).unwrap();
    ns::mkfs(&*s).unwrap();
    let ttl = Duration::from_secs(4);
    let opts = SessionOpts {
        ttl,
        unavailable_wait: Duration::from_secs(3),
        ..SessionOpts::default()
    };
    let connect = |u: &EtcdUrl| EtcdStore::connect(u, Duration::from_secs(2)).unwrap();
    let a = ClusterFs::open(connect(&through), opts.clone()).unwrap();
    let b = ClusterFs::open(connect(&direct), opts).unwrap();

    // A makes a directory, creates in it from memory under its lease, and
    // syncs: those names must survive whatever follows.
    let d = a.mkdir(ROOT_INO, b"d", 0o755).unwrap().ino;
    let synced: BTreeSet<String> = (0..10).map(|i| format!("a{i}")).collect();
    for n in &synced {
        a.create(d, n.as_bytes(), 0o644).unwrap();
    }
    a.fsyncdir().unwrap();
    assert!(a.holds_lease(d), "A creates in d under its lease");

    for p in &proxies {
        p.cut(true);
    }
    let cut = Instant::now();
    println!("partition: A cut off from every member");

    // A and B create the same names in d at once.
    let names: Vec<String> = (0..400).map(|i| format!("n{i:03}")).collect();
    let (a_acked, a_err, b_made) = std::thread::scope(|sc| {
        let a_side = sc.spawn(|| {
            let mut acked = Vec::new();
            for n in &names {
                match a.create(d, n.as_bytes(), 0o644) {
                    Ok(_) => acked.push((n.clone(), cut.elapsed())),
                    Err(e) => {
                        // Past the lease, a sync fails too, and its error
                        // names the way back: a remount.
                        let failed = (e, cut.elapsed());
                        while cut.elapsed() < ttl + Duration::from_secs(1) {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        let synced = a.fsyncdir();
                        println!("partition: A's fsync past its lease: {synced:?}");
                        assert!(
                            matches!(&synced, Err(Error::Io(m)) if m.contains("remount")),
                            "{synced:?}"
                        );
                        return (acked, Some(failed));
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            (acked, None)
        });
        let mut made = Vec::new();
        for n in &names {
            let t = Instant::now();
            loop {
                match b.create(d, n.as_bytes(), 0o644) {
                    Ok(_) => break made.push((n.clone(), cut.elapsed())),
                    Err(e) => {
                        // Only while A's lease can still live.
                        assert!(
                            t.elapsed() < ttl * 3 + Duration::from_secs(10),
                            "B's create of {n} still failing: {e}"
                        );
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
            if made.len() == 50 {
                break;
            }
        }
        let (acked, err) = a_side.join().unwrap();
        (acked, err, made)
    });

    // A answered from memory only while its session was surely alive and
    // its queue young: here the queue's limit (its oldest create 1 s old)
    // comes before half the TTL since the last renewal (2 s).
    let last_ack = a_acked.last().map_or(Duration::ZERO, |(_, t)| *t);
    println!(
        "partition: A acknowledged {} creates during the cut, the last after {last_ack:?}",
        a_acked.len()
    );
    assert!(
        last_ack <= Duration::from_millis(1300),
        "A acknowledged a create {last_ack:?} after the cut (TTL {ttl:?})"
    );
    let (e, failed_at) = a_err.expect("A's creates fail while it is cut off");
    println!("partition: A's first failure after {failed_at:?}: {e}");
    assert!(
        failed_at < ttl + Duration::from_secs(3) * 2 + Duration::from_secs(10),
        "A's failure took {failed_at:?}"
    );
    assert!(matches!(&e, Error::Io(_)), "{e:?}");

    // B went on once A's lease had ended, and won every name it created,
    // those A had answered from memory among them.
    let (first_b, last_b) = (b_made[0].1, b_made.last().unwrap().1);
    println!(
        "partition: B created {} names, the first after {first_b:?}",
        b_made.len()
    );
    assert!(
        first_b < ttl * 2 + Duration::from_secs(5),
        "B waited {first_b:?}"
    );
    assert!(
        last_b < ttl * 3 + Duration::from_secs(15),
        "B's creates took {last_b:?}"
    );

    // The link heals. A is fenced: what it answered during the cut never
    // lands, and it says what to do.
    for p in &proxies {
        p.cut(false);
    }
    let e = {
        let t = Instant::now();
        loop {
            match a.create(d, b"after-heal", 0o644) {
                Err(Error::Io(m)) if m.contains("remount") => break m,
                other => {
                    assert!(
                        t.elapsed() < Duration::from_secs(20),
                        "A after the heal: {other:?}"
                    );
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    };
    println!("partition: healed; A says: {e}");
    std::thread::sleep(Duration::from_secs(2));
    let listed: BTreeSet<String> = b
        .readdir(d, None, 10_000)
        .unwrap()
        .into_iter()
        .map(|(n, _, _)| String::from_utf8(n).unwrap())
        .collect();
    let want: BTreeSet<String> = synced
        .iter()
        .cloned()
        .chain(b_made.iter().map(|(n, _)| n.clone()))
        .collect();
    assert_eq!(
        listed, want,
        "d holds exactly A's synced names and B's (A's answers during the cut: {a_acked:?})"
    );
    assert_clean(&*s);
    drop(a);
    drop(b);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
