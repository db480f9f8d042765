//! The client (crates/client, docs/client.md) against a real daemon on a
//! real FUSE mount with the kernel's caches kept an hour (the default):
//! what the client changes is seen through the mount at once and the
//! reverse; a second user is refused what the permissions refuse; a
//! malformed request is answered EINVAL and the daemon serves on; kill -9
//! of the daemon gives the client ENOTCONN, not a hang.

use shoal_client::Client;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn shoal() -> Command {
    Command::new(env!("CARGO_BIN_EXE_shoal"))
}

fn can_mount() -> bool {
    Path::new("/dev/fuse").exists() && unsafe { libc::geteuid() } == 0
}

fn skip() -> bool {
    if can_mount() {
        return false;
    }
    assert!(
        std::env::var("SHOAL_REQUIRE_MOUNT").is_err(),
        "SHOAL_REQUIRE_MOUNT is set but FUSE mounts are not possible here"
    );
    eprintln!("skipped: needs root and /dev/fuse");
    true
}

/// A store mounted with allow_other, unmounted (or its daemon killed) at
/// the end, also when the test fails.
struct Mount {
    _tmp: tempfile::TempDir,
    store: PathBuf,
    mnt: PathBuf,
}

impl Mount {
    fn new() -> Mount {
        let tmp = tempfile::Builder::new()
            .prefix("client-")
            .tempdir_in("/tmp")
            .unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let store = tmp.path().join("store");
        let mnt = tmp.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let out = shoal().arg("mkfs").arg(&store).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let out = shoal()
            .args(["mount", "-d", "-o", "allow_other"])
            .arg(&store)
            .arg(&mnt)
            .output()
            .unwrap();
        assert!(out.status.success(), "mount: {out:?}");
        Mount {
            _tmp: tmp,
            store,
            mnt,
        }
    }
    fn client(&self) -> Client {
        Client::for_mount(&self.mnt).unwrap()
    }
    fn pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.store.join("daemon.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let ok = shoal()
            .arg("umount")
            .arg(&self.mnt)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            if let Some(pid) = self.pid() {
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
    }
}

fn errno(r: std::io::Result<impl std::fmt::Debug>) -> i32 {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

#[test]
fn changes_through_the_client_are_seen_through_the_mount_at_once_and_back() {
    if skip() {
        return;
    }
    let m = Mount::new();
    let c = m.client();
    let at = |p: &str| m.mnt.join(p);
    // The kernel caches a miss (a negative entry) and the root's listing.
    assert!(!at("d").exists());
    let _ = std::fs::read_dir(&m.mnt).unwrap().count();
    c.mkdir("d", 0o755).unwrap();
    assert!(at("d").is_dir(), "mkdir through the client not seen");
    let names = |p: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&m.mnt), ["d"]);
    // A file written through the client's descriptor: name, size and
    // bytes seen through the mount.
    let _ = std::fs::metadata(at("d/f")).is_err();
    let mut f = c
        .open("d/f", libc::O_CREAT | libc::O_WRONLY | libc::O_EXCL, 0o640)
        .unwrap();
    f.write_all(b"hello from the client").unwrap();
    // Before the close: the size, through the mount and the client (the
    // daemon takes it from the object while a client holds the file for
    // writing; it came at close before).
    assert_eq!(std::fs::metadata(at("d/f")).unwrap().len(), 21);
    assert_eq!(c.stat("d/f").unwrap().size, 21);
    f.close().unwrap();
    assert_eq!(std::fs::read(at("d/f")).unwrap(), b"hello from the client");
    let md = std::fs::metadata(at("d/f")).unwrap();
    assert_eq!(
        (md.len(), md.mode() & 0o7777),
        (21, 0o640 & !current_umask())
    );
    // Its attributes cached by the kernel, then changed through the client.
    c.chmod("d/f", 0o600).unwrap();
    assert_eq!(std::fs::metadata(at("d/f")).unwrap().mode() & 0o7777, 0o600);
    c.truncate("d/f", 5).unwrap();
    assert_eq!(std::fs::read(at("d/f")).unwrap(), b"hello");
    c.setxattr("d/f", b"user.k", b"v", 0).unwrap();
    assert_eq!(xattr(&at("d/f"), "user.k"), Some(b"v".to_vec()));
    // rename, link, symlink, unlink, rmdir.
    c.rename("d/f", "d/g", 0).unwrap();
    assert!(!at("d/f").exists() && at("d/g").exists());
    c.link("d/g", "h").unwrap();
    assert_eq!(std::fs::metadata(at("d/g")).unwrap().nlink(), 2);
    c.symlink("d/g", "s").unwrap();
    assert_eq!(std::fs::read_link(at("s")).unwrap(), Path::new("d/g"));
    assert_eq!(std::fs::read(at("s")).unwrap(), b"hello");
    c.unlink("h").unwrap();
    assert!(!at("h").exists());
    assert_eq!(std::fs::metadata(at("d/g")).unwrap().nlink(), 1);
    c.unlink("d/g").unwrap();
    c.rmdir("d").unwrap();
    assert!(!at("d").exists(), "rmdir through the client not seen");
    assert_eq!(names(&m.mnt), ["s"]);
    // The reverse: the client keeps no cache.
    std::fs::create_dir(at("e")).unwrap();
    std::fs::write(at("e/x"), b"through the mount").unwrap();
    assert_eq!(c.stat("e/x").unwrap().size, 17);
    let mut f = c.open("e/x", libc::O_RDONLY, 0).unwrap();
    let mut s = String::new();
    f.read_to_string(&mut s).unwrap();
    assert_eq!(s, "through the mount");
    drop(f);
    let l: Vec<_> = c
        .readdir("e")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(l, [b"x".to_vec()]);
    std::fs::remove_file(at("e/x")).unwrap();
    assert_eq!(errno(c.stat("e/x")), libc::ENOENT);
    // A file open both ways is one object: a write through the client's
    // descriptor is read through the mount's while both are open.
    std::fs::write(at("e/y"), vec![b'a'; 10_000]).unwrap();
    let mut kf = std::fs::File::open(at("e/y")).unwrap();
    let mut cf = c.open("e/y", libc::O_RDWR, 0).unwrap();
    cf.write_all(b"BBBB").unwrap();
    // fstat through the client: the file's attributes, not the object's.
    let fs = cf.fstat().unwrap();
    let ks = std::fs::metadata(at("e/y")).unwrap();
    assert_eq!((fs.ino, fs.size, fs.mode), (ks.ino(), 10_000, ks.mode()));
    let mut head = [0u8; 4];
    kf.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"BBBB");
    cf.sync_all().unwrap();
    drop(cf);
    // Errors are the engine's, as errno.
    assert_eq!(errno(c.mkdir("e", 0o755)), libc::EEXIST);
    assert_eq!(errno(c.rmdir("e")), libc::ENOTEMPTY);
    assert_eq!(errno(c.stat("nope/x")), libc::ENOENT);
    assert_eq!(errno(c.open("e", libc::O_RDONLY, 0)), libc::EISDIR);
    assert_eq!(
        errno(c.rename("e/y", "s", libc::RENAME_NOREPLACE)),
        libc::EEXIST
    );
    // A symlink out of the mount: where to continue, outside.
    c.symlink("/etc", "out").unwrap();
    let e = c.stat("out/hostname").unwrap_err();
    assert_eq!(
        shoal_client::Outside::of(&e),
        Some(Path::new("/etc/hostname"))
    );
    // An absolute symlink into the mount is followed inside.
    c.symlink(at("e"), "abs").unwrap();
    assert_eq!(c.stat("abs/y").unwrap().size, 10_000);
    // shoal stats counts the calls that went around the mount.
    let out = shoal()
        .args(["stats", "--json"])
        .arg(&m.mnt)
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    // Refused calls count too (the mkdir of "e" that met EEXIST).
    assert_eq!(v["client"]["calls"]["mkdir"], 2, "{}", v["client"]);
    assert!(v["client"]["calls"]["stat"].as_u64().unwrap() >= 4);
    assert!(v["client"]["live"].as_u64().unwrap() >= 1);
}

fn current_umask() -> u32 {
    let m = unsafe { libc::umask(0o022) };
    unsafe { libc::umask(m) };
    m
}

fn xattr(p: &Path, name: &str) -> Option<Vec<u8>> {
    let out = Command::new("getfattr")
        .args(["--only-values", "-n", name])
        .arg(p)
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}

/// Run `f` in a child process as uid:gid 1000:1000 (no supplementary
/// groups), on a thread of its own (no connection inherited); the child's
/// exit code is `f`'s answer: 0, or the number of the check that failed.
fn as_user(f: impl FnOnce() -> i32 + Send + 'static) -> i32 {
    match unsafe { libc::fork() } {
        0 => {
            let code = unsafe {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(1000) != 0
                    || libc::setuid(1000) != 0
                {
                    100
                } else {
                    std::thread::spawn(f).join().unwrap_or(101)
                }
            };
            unsafe { libc::_exit(code) }
        }
        pid => {
            let mut st = 0;
            unsafe { libc::waitpid(pid, &mut st, 0) };
            assert!(libc::WIFEXITED(st), "the child died: {st}");
            libc::WEXITSTATUS(st)
        }
    }
}

#[test]
fn a_second_user_is_refused_what_the_permissions_refuse() {
    if skip() {
        return;
    }
    let m = Mount::new();
    let c = m.client();
    c.mkdir("private", 0o700).unwrap();
    c.create("private/f", 0o644).unwrap();
    let mut f = c
        .open("secret", libc::O_CREAT | libc::O_WRONLY, 0o600)
        .unwrap();
    f.write_all(b"root's").unwrap();
    f.close().unwrap();
    c.mkdir("tmp", 0o777).unwrap();
    c.chmod("tmp", 0o1777).unwrap();
    c.create("tmp/roots", 0o666).unwrap();
    let sock = m.store.join("client.sock");
    let code = as_user(move || {
        let c = Client::new(sock);
        let checks: Vec<(i32, i32)> = vec![
            (errno(c.mkdir("mine", 0o755)), libc::EACCES),
            (errno(c.stat("private/f")), libc::EACCES),
            (errno(c.open("secret", libc::O_RDONLY, 0)), libc::EACCES),
            (errno(c.read_file("secret")), libc::EACCES),
            (errno(c.read_file("private/f")), libc::EACCES),
            (errno(c.unlink("secret")), libc::EACCES),
            (errno(c.unlink("tmp/roots")), libc::EPERM),
            (errno(c.chmod("secret", 0o666)), libc::EPERM),
            (errno(c.chown("tmp/roots", Some(1000), None)), libc::EPERM),
            (errno(c.opendir("private")), libc::EACCES),
        ];
        for (i, (got, want)) in checks.into_iter().enumerate() {
            if got != want {
                eprintln!("check {i}: errno {got}, expected {want}");
                return 1 + i as i32;
            }
        }
        // What the permissions allow: a file of its own in the sticky
        // directory, owned by it.
        match c.create("tmp/users", 0o644) {
            Ok(s) if s.uid == 1000 && s.gid == 1000 => {}
            other => {
                eprintln!("create in tmp: {other:?}");
                return 50;
            }
        }
        if c.unlink("tmp/users").is_err() || c.stat("tmp/roots").is_err() {
            return 51;
        }
        if c.read_file("tmp/roots").map(|b| b.len()).ok() != Some(0) {
            return 52;
        }
        0
    });
    assert_eq!(code, 0, "the second user's checks (see stderr)");
    // As through the mount: the same refusals by the kernel.
    assert!(m.mnt.join("tmp/roots").exists());
}

#[test]
fn a_malformed_request_is_einval_and_the_daemon_serves_on() {
    if skip() {
        return;
    }
    let m = Mount::new();
    let c = m.client();
    c.mkdir("d", 0o755).unwrap();
    // A string length past the slot.
    let mut raw = vec![0u8; shoal_client::proto::REQ_HEAD + 4];
    raw[..4].copy_from_slice(&(shoal_client::proto::Op::Stat as u32).to_ne_bytes());
    raw[shoal_client::proto::REQ_HEAD..].copy_from_slice(&u32::MAX.to_ne_bytes());
    assert_eq!(errno(c.raw_call(&raw)), libc::EINVAL);
    // An unknown op, a handle never given, a name with a NUL.
    raw[..4].copy_from_slice(&999u32.to_ne_bytes());
    raw[shoal_client::proto::REQ_HEAD..].copy_from_slice(&0u32.to_ne_bytes());
    raw.extend_from_slice(&[0; 8]);
    assert_eq!(errno(c.raw_call(&raw)), libc::EINVAL);
    assert_eq!(errno(c.stat_at(77, "x", true)), libc::EINVAL);
    assert_eq!(errno(c.mkdir("d/a\0b", 0o755)), libc::EINVAL);
    // The same connection and new ones still served.
    c.ping().unwrap();
    assert!(c.stat("d").unwrap().is_dir());
    let sock = m.store.join("client.sock");
    std::thread::spawn(move || Client::new(sock).stat("d").map(|s| s.is_dir()))
        .join()
        .unwrap()
        .unwrap();
    assert!(m.mnt.join("d").is_dir());
}

#[test]
fn kill_9_of_the_daemon_gives_enotconn_not_a_hang() {
    if skip() {
        return;
    }
    let m = Mount::new();
    let c = m.client();
    c.mkdir("d", 0o755).unwrap();
    let mut f = c.open("d/f", libc::O_CREAT | libc::O_RDWR, 0o644).unwrap();
    // Calls in a loop on another thread while the daemon is killed.
    let c2 = c.clone();
    let worker = std::thread::spawn(move || {
        let mut i = 0u64;
        loop {
            let r = c2
                .create(format!("d/{i}"), 0o644)
                .and_then(|_| c2.unlink(format!("d/{i}")));
            if let Err(e) = r {
                return (i, e.raw_os_error(), Instant::now());
            }
            i += 1;
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let pid = m.pid().expect("the daemon's pid");
    let killed = Instant::now();
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let (done, err, at) = worker.join().unwrap();
    assert!(done > 0, "no call succeeded before the kill");
    assert_eq!(err, Some(libc::ENOTCONN));
    assert!(
        at.duration_since(killed) < Duration::from_secs(2),
        "ENOTCONN {:?} after the kill",
        at.duration_since(killed)
    );
    // This thread's connection too, and the descriptor handed out still
    // reads and writes its object.
    assert_eq!(errno(c.stat("d")), libc::ENOTCONN);
    f.write_all(b"still here").unwrap();
    drop(f);
    // After a remount the same client connects again on its next call,
    // and what was acknowledged before the kill is there.
    while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z ")) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = Command::new("umount").arg("-l").arg(&m.mnt).status();
    let out = shoal()
        .args(["mount", "-d", "-o", "allow_other"])
        .arg(&m.store)
        .arg(&m.mnt)
        .output()
        .unwrap();
    assert!(out.status.success(), "remount: {out:?}");
    assert!(c.stat("d").unwrap().is_dir());
    assert!(c.stat("d/f").unwrap().is_file());
    assert!(m.mnt.join("d/f").exists());
}
