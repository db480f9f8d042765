//! etcd's quota full (ports 23860-23873, members started with a 2 MiB
//! `--quota-backend-bytes`): creates with 4 KiB of inline data until etcd
//! answers NOSPACE. The namespace answers ENOSPC, every create it
//! acknowledged is there with its bytes, reads still work, an unlink under
//! the alarm gets ENOSPC too (it writes the directory's time), and the
//! namespace checks clean. CI sets SHOAL_REQUIRE_ETCD=1.

use shoal_cluster::ns::{self, ClusterFs, SessionOpts};
use shoal_cluster::ClusterStore;
use shoal_core::{Error, ROOT_INO};
use shoal_etcd::{EtcdStore, EtcdUrl};
use shoal_testkit::etcd::Cluster;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn a_full_etcd_quota_is_enospc_and_loses_nothing() {
    let dir = std::env::temp_dir().join(format!("shoal-etcd-quota-{}", std::process::id()));
    let Some(cluster) = Cluster::start_with(&dir, 23860, &["--quota-backend-bytes", "2097152"])
    else {
        return;
    };
    let url = EtcdUrl {
        endpoints: cluster.endpoints(),
        name: "quota".into(),
        ..Default::default()
    };
    let store: Arc<dyn ClusterStore> = EtcdStore::connect(&url, Duration::from_secs(3)).unwrap();
    ns::mkfs(&*store).unwrap();
    let fs = ClusterFs::open(store.clone(), SessionOpts::default()).unwrap();
    let bytes = |i: u32| -> Vec<u8> {
        (0..4000u32)
            .map(|j| (i.wrapping_mul(31) ^ j) as u8)
            .collect()
    };
    let mut made = 0u32;
    let err = loop {
        assert!(
            made < 100_000,
            "no NOSPACE after {made} files of 4 KB in a 2 MiB quota"
        );
        let name = format!("f{made}");
        let f = match fs.create(ROOT_INO, name.as_bytes(), 0o644) {
            Ok(a) => a.ino,
            Err(e) => break e,
        };
        if let Err(e) = fs.write(f, 0, &bytes(made)) {
            // The create was acknowledged; its bytes were not.
            made += 1;
            break e;
        }
        made += 1;
    };
    println!("quota: {made} files, then {err}");
    assert_eq!(err, Error::NoSpace, "a full quota answers ENOSPC");
    assert!(made > 10, "only {made} files fit");
    // Everything acknowledged is there, readable; the namespace is whole.
    for i in 0..made {
        let a = fs.lookup(ROOT_INO, format!("f{i}").as_bytes()).unwrap();
        if a.size > 0 {
            assert_eq!(fs.read(a.ino, 0, 4096).unwrap(), bytes(i), "f{i}");
        } else {
            assert_eq!(i, made - 1, "only the last file may lack its bytes");
        }
    }
    // An unlink while the alarm is on: whichever answer, a clear one and a
    // whole namespace.
    let u = fs.unlink(ROOT_INO, b"f0");
    println!("quota: unlink under NOSPACE: {u:?}");
    assert!(matches!(u, Ok(()) | Err(Error::NoSpace)), "{u:?}");
    let r = ns::check(&*store).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
