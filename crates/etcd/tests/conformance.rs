//! The conformance suite on a real three-member etcd cluster, started here
//! on 127.0.0.1 (ports 23791-23813). CI sets SHOAL_REQUIRE_ETCD=1, so a
//! missing etcd fails instead of skipping.

use shoal_cluster::ClusterStore;
use shoal_etcd::{EtcdStore, EtcdUrl};
use shoal_testkit::conformance::{run_all, Harness};
use shoal_testkit::etcd::Cluster;
use std::time::Duration;

#[test]
fn conformance_etcd() {
    let dir = std::env::temp_dir().join(format!("shoal-etcd-conformance-{}", std::process::id()));
    let Some(cluster) = Cluster::start(&dir, 23790) else {
        return;
    };
    let url = EtcdUrl {
        endpoints: cluster.endpoints(),
        name: format!("conformance-{}", std::process::id()),
        ..Default::default()
    };
    let store = EtcdStore::connect(&url, Duration::from_secs(5)).unwrap();
    let h = Harness {
        store: store as std::sync::Arc<dyn ClusterStore>,
        advance: Box::new(std::thread::sleep),
        prefix: b"t/".to_vec(),
        lease_ttl: Duration::from_secs(2),
    };
    run_all(&h);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
