//! The object stores for file data pass one conformance check: in memory,
//! a directory (`file://`), and a real SeaweedFS S3 server started here
//! (ports 24411-24414, its gRPC on 24415-24418); then two daemons share a
//! 20 MiB file through SeaweedFS. CI sets SHOAL_REQUIRE_WEED=1, so a
//! missing `weed` fails.

use shoal_cluster::blob::{Blobs, MemBlobs};
use shoal_cluster::filedata;
use shoal_cluster::ns::{self, ClusterFs, SessionOpts};
use shoal_cluster::sim::SimStore;
use shoal_cluster::ClusterStore;
use shoal_core::ROOT_INO;
use shoal_objects::ObjectBlobs;
use shoal_testkit::objects::{blobs_conformance, Seaweed};
use std::sync::Arc;

#[test]
fn memory_and_a_directory_and_seaweedfs_answer_as_the_seam_says() {
    blobs_conformance(&MemBlobs::default());
    let dir = std::env::temp_dir().join(format!("shoal-objects-{}", std::process::id()));
    let b = ObjectBlobs::open(&format!("file://{}", dir.display())).unwrap();
    b.probe().unwrap();
    blobs_conformance(&b);
    let _ = std::fs::remove_dir_all(&dir);
    let wdir = std::env::temp_dir().join(format!("shoal-weed-{}", std::process::id()));
    let Some(w) = Seaweed::start(&wdir, 24410) else {
        return;
    };
    let s3 = ObjectBlobs::open(&w.url("conformance")).unwrap();
    s3.probe().unwrap();
    blobs_conformance(&s3);

    // Two daemons on one namespace, data on SeaweedFS.
    let url = w.url("ns");
    let s = SimStore::new();
    ns::mkfs_with_data(&*s, Some(&url)).unwrap();
    let open = || {
        let b = Arc::new(ObjectBlobs::open(&ns::data_url(&*s).unwrap().unwrap()).unwrap());
        ClusterFs::open_with_data(
            s.clone() as Arc<dyn ClusterStore>,
            Some(b as Arc<dyn Blobs>),
            SessionOpts {
                // An unlinked file goes after this (10 s by default).
                unlinked_grace: std::time::Duration::from_millis(100),
                ..SessionOpts::default()
            },
        )
        .unwrap()
    };
    let (a, c) = (open(), open());
    let f = a.create(ROOT_INO, b"big", 0o644).unwrap().ino;
    let bytes: Vec<u8> = (0..20u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    for (i, piece) in bytes.chunks(128 << 10).enumerate() {
        a.write(f, (i * (128 << 10)) as u64, piece).unwrap();
    }
    a.flush(f).unwrap();
    let mut got = vec![];
    while got.len() < bytes.len() {
        got.extend(c.read(f, got.len() as u64, 1 << 20).unwrap());
    }
    assert!(got == bytes, "the other daemon read different bytes");
    let s3 = ObjectBlobs::open(&url).unwrap();
    assert_eq!(s3.list().unwrap().len(), 5, "20 MiB in 4 MiB chunks");
    c.unlink(ROOT_INO, b"big").unwrap();
    shoal_testkit::cluster_ns::soon("the file's objects after its unlink", 0, || {
        s3.list().unwrap().len()
    });
    let r = filedata::collect(&*s, &s3, true).unwrap();
    assert_eq!((r.unnamed, r.missing.len()), (0, 0));
}
