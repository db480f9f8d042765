//! The floor's own FUSE transport (`shoal-floor --raw|--uring`), on a real
//! mount: files written, read back, renamed, listed and removed through it,
//! and, over io_uring, the requests carried by the pinned queue threads
//! (their wakeups counted from /proc), not by the /dev/fuse readers.
//! Needs root and /dev/fuse (CI has both); io_uring needs the `fuse`
//! module's `enable_uring` parameter, which the test sets.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn can_mount() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Path::new("/dev/fuse").exists()
}

fn is_mount(p: &Path) -> bool {
    let want = p.to_string_lossy().to_string();
    std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines().any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

struct Mount {
    dir: PathBuf,
    child: Child,
}

impl Mount {
    fn new(mode: &str) -> Mount {
        let dir = std::env::temp_dir().join(format!("shoal-uring-floor-{}-{}", std::process::id(), &mode[2..]));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_shoal-floor")).arg(mode).arg(&dir).spawn().unwrap();
        let t = Instant::now();
        while !is_mount(&dir) {
            assert!(t.elapsed() < Duration::from_secs(10), "{mode}: not mounted after 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        Mount { dir, child }
    }

    /// (thread name, voluntary context switches) of the daemon's threads.
    fn threads(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for t in std::fs::read_dir(format!("/proc/{}/task", self.child.id())).unwrap() {
            let t = t.unwrap().path();
            let name = std::fs::read_to_string(t.join("comm")).unwrap_or_default().trim().to_string();
            let status = std::fs::read_to_string(t.join("status")).unwrap_or_default();
            let vcs = status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:")).map_or(0, |v| v.trim().parse().unwrap());
            out.push((name, vcs));
        }
        out
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let t = Instant::now();
        while self.child.try_wait().ok().flatten().is_none() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Files through the mount, checked against what was written.
fn exercise(root: &Path) {
    let d = root.join("d");
    std::fs::create_dir(&d).unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    std::fs::write(d.join("big"), &data).unwrap();
    assert_eq!(std::fs::read(d.join("big")).unwrap(), data, "read back what was written");
    for i in 0..300 {
        std::fs::write(d.join(format!("f{i}")), format!("{i}")).unwrap();
    }
    std::fs::rename(d.join("f7"), d.join("renamed")).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names.len(), 301);
    assert!(names.contains(&"renamed".to_string()) && !names.contains(&"f7".to_string()));
    assert_eq!(std::fs::read_to_string(d.join("renamed")).unwrap(), "7");
    assert_eq!(std::fs::metadata(d.join("big")).unwrap().len(), data.len() as u64);
    assert_eq!(std::fs::remove_dir(&d).unwrap_err().raw_os_error(), Some(libc::ENOTEMPTY));
    for n in &names {
        std::fs::remove_file(d.join(n)).unwrap();
    }
    assert!(std::fs::metadata(d.join("renamed")).is_err());
    std::fs::remove_dir(&d).unwrap();
}

#[test]
fn own_transport_serves_files_over_dev_fuse_and_io_uring() {
    if !can_mount() {
        eprintln!("skipped: needs root and /dev/fuse");
        return;
    }
    let raw = Mount::new("--raw");
    exercise(&raw.dir);
    assert!(raw.threads().iter().all(|(n, _)| !n.starts_with("floor-uring")));
    drop(raw);

    let param = Path::new("/sys/module/fuse/parameters/enable_uring");
    if !param.exists() {
        eprintln!("io_uring part skipped: this kernel's fuse has no enable_uring parameter");
        return;
    }
    std::fs::write(param, "Y").unwrap();
    let uring = Mount::new("--uring");
    let before: u64 = uring.threads().iter().filter(|(n, _)| n.starts_with("floor-uring")).map(|t| t.1).sum();
    exercise(&uring.dir);
    let threads = uring.threads();
    let queues: Vec<_> = threads.iter().filter(|(n, _)| n.starts_with("floor-uring")).collect();
    assert!(!queues.is_empty(), "no io_uring queue threads: {threads:?}");
    let after: u64 = queues.iter().map(|t| t.1).sum();
    // About 1,200 requests above; each one completes on a queue thread.
    assert!(after - before > 600, "queue threads woke {} times: requests did not come over io_uring ({threads:?})", after - before);
}
