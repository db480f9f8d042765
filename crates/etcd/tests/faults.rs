//! The shared namespace while the etcd cluster fails (ports 23840-23853):
//! each member killed -9 in turn (so the leader too) and restarted, a
//! member frozen with SIGSTOP, and quorum lost then regained. Operations
//! pause and carry on; without quorum they fail after the configured wait
//! with an error that says the mount recovers by itself, and it does;
//! nothing acknowledged is lost. CI sets SHOAL_REQUIRE_ETCD=1.

use shoal_cluster::ns::{self, ClusterFs, SessionOpts};
use shoal_cluster::ClusterStore;
use shoal_core::{Error, ROOT_INO};
use shoal_etcd::{EtcdStore, EtcdUrl};
use shoal_testkit::etcd::Cluster;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn the_namespace_survives_etcd_failures() {
    let dir = std::env::temp_dir().join(format!("shoal-etcd-faults-{}", std::process::id()));
    let Some(mut cluster) = Cluster::start(&dir, 23840) else {
        return;
    };
    let url = EtcdUrl {
        endpoints: cluster.endpoints(),
        name: "faults".into(),
        ..Default::default()
    };
    let store: Arc<dyn ClusterStore> = EtcdStore::connect(&url, Duration::from_secs(3)).unwrap();
    ns::mkfs(&*store).unwrap();
    let opts = SessionOpts {
        ttl: Duration::from_secs(10),
        unavailable_wait: Duration::from_secs(8),
        ..SessionOpts::default()
    };
    let fs = ClusterFs::open(store.clone(), opts).unwrap();
    let d = fs.mkdir(ROOT_INO, b"d", 0o755).unwrap().ino;

    // A writer creates files the whole time; every create it was told
    // succeeded must be there at the end.
    let (stop, made, failed) = (AtomicBool::new(false), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match fs.create(d, format!("f{i}").as_bytes(), 0o644) {
                    Ok(_) => {
                        made.fetch_add(1, Ordering::Relaxed);
                    }
                    // A retried create whose first try applied: the name is ours.
                    Err(Error::Exists) => {
                        made.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        eprintln!("create f{i}: {e}");
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                i += 1;
            }
        });
        let progress = |what: &str| {
            let before = made.load(Ordering::Relaxed);
            let t = Instant::now();
            while made.load(Ordering::Relaxed) < before + 20 {
                assert!(
                    t.elapsed() < Duration::from_secs(20),
                    "no progress after {what}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            println!("faults: {what}: creates carry on ({:?})", t.elapsed());
        };
        progress("start");
        for m in 0..3 {
            cluster.kill(m);
            progress(&format!("member m{m} killed"));
            cluster.restart(m);
            cluster.wait_healthy(Duration::from_secs(30));
        }
        cluster.freeze(0, true);
        progress("member m0 frozen");
        cluster.freeze(0, false);
        cluster.wait_healthy(Duration::from_secs(30));
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "creates failed while a member was down"
    );

    // Quorum lost: an operation fails after the wait, saying so; nothing
    // acknowledged is lost; with quorum back the same mount carries on.
    // The writer's directory is leased: creates there are acknowledged
    // from memory until the queue has waited a second, then they wait too.
    cluster.kill(1);
    cluster.kill(2);
    let t = Instant::now();
    let mut acked = 0;
    let e = loop {
        match fs.create(d, format!("nq{acked}").as_bytes(), 0o644) {
            Ok(_) => acked += 1,
            Err(e) => break e,
        }
        assert!(
            t.elapsed() < Duration::from_secs(40),
            "creates never stopped"
        );
    };
    println!(
        "faults: without quorum, {acked} creates from memory, then a failure after {:?}: {e}",
        t.elapsed()
    );
    assert!(
        t.elapsed() >= Duration::from_secs(8),
        "failed before the wait"
    );
    assert!(
        t.elapsed() < Duration::from_secs(45),
        "waited far past the wait"
    );
    assert!(
        matches!(&e, Error::Io(m) if m.contains("carries on by itself")),
        "{e:?}"
    );
    cluster.restart(1);
    cluster.restart(2);
    cluster.wait_healthy(Duration::from_secs(30));
    let t = Instant::now();
    fs.create(d, b"quorum-back", 0o644).unwrap();
    println!("faults: quorum back: a create after {:?}", t.elapsed());
    let names = fs.readdir(d, None, 1_000_000).unwrap();
    for i in 0..acked {
        let name = format!("nq{i}").into_bytes();
        assert!(
            names.iter().any(|(n, ..)| *n == name),
            "acknowledged nq{i} lost"
        );
    }
    let n = made.load(Ordering::Relaxed) + acked;
    assert!(
        names.len() as u64 > n,
        "{} names for {n} acknowledged creates",
        names.len()
    );
    let r = ns::check(&*store).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let _ = fs.close();
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
