//! crunl (create+unlink pairs in one directory) through the client beside
//! the same through the mount, and on other directories given (tmpfs,
//! ext4), with one and two threads, in one run; and the protocol's round
//! trip alone (`ping`: the futex ping-pong through the daemon, no engine
//! call). scripts/bench-client.sh runs it.
//!
//! usage: crunl MNT PAIRS [OTHER_DIR...]
//! One JSON line per measurement, then a table.

use shoal_client::Client;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Pairs per second over `threads` threads doing `pairs` each; `f(t, i)`
/// makes and removes pair `i` of thread `t`.
fn run(threads: usize, pairs: usize, f: impl Fn(usize, usize) + Sync) -> f64 {
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let f = &f;
            s.spawn(move || {
                for i in 0..pairs {
                    f(t, i)
                }
            });
        }
    });
    (threads * pairs) as f64 / t0.elapsed().as_secs_f64()
}

fn path_pair(dir: &Path, t: usize, i: usize) {
    let p = CString::new(dir.join(format!("t{t}-{i}")).as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string; the descriptor closed at once.
    unsafe {
        let fd = libc::open(
            p.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
            0o644,
        );
        assert!(fd >= 0, "create {p:?}: {}", std::io::Error::last_os_error());
        libc::close(fd);
        assert_eq!(libc::unlink(p.as_ptr()), 0, "unlink {p:?}");
    }
}

/// Pin the calling thread to `cpu`, or to every CPU with None.
fn pin(cpu: Option<usize>) {
    // SAFETY: a zeroed cpu_set_t filled by the CPU_* helpers.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in 0..libc::CPU_SETSIZE as usize {
            if cpu.is_none_or(|x| x == c) {
                libc::CPU_SET(c, &mut set);
            }
        }
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
    }
}

/// The round trip of the client's protocol alone (region.rs's wait and
/// post), between this process and a forked one: seconds per trip.
fn pingpong(n: usize, one_cpu: bool) -> f64 {
    use shoal_client::proto::*;
    use shoal_client::region::Region;
    use std::time::Duration;
    let (r, _fd) = Region::create().unwrap();
    let spin = spin_ns(false);
    // SAFETY: the child only waits and posts on the shared mapping, then
    // exits without returning into the parent's state.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        if one_cpu {
            pin(Some(0));
        }
        loop {
            let ok = r.wait_for(
                REQUEST,
                SERVER_SLEEPS,
                spin_ns(true),
                Duration::from_secs(1),
                || (unsafe { libc::getppid() }) != 1,
            );
            // SAFETY: REQUEST: the slot is this side's.
            if !ok || unsafe { r.slot()[0] } == 0xff {
                unsafe { libc::_exit(0) };
            }
            r.post(ANSWER, CLIENT_SLEEPS);
        }
    }
    if one_cpu {
        pin(Some(0));
    }
    let trip = || {
        r.post(REQUEST, SERVER_SLEEPS);
        assert!(r.wait_for(ANSWER, CLIENT_SLEEPS, spin, Duration::from_secs(5), || true));
    };
    for _ in 0..1000 {
        trip();
    }
    let t0 = Instant::now();
    for _ in 0..n {
        trip();
    }
    let el = t0.elapsed().as_secs_f64() / n as f64;
    // SAFETY: ANSWER: the slot is this side's.
    unsafe { r.slot()[0] = 0xff };
    r.post(REQUEST, SERVER_SLEEPS);
    let mut st = 0;
    // SAFETY: our child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    pin(None);
    el
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: crunl MNT PAIRS [OTHER_DIR...]");
        std::process::exit(2);
    }
    let mnt = PathBuf::from(&args[1]);
    let pairs: usize = args[2].parse().expect("PAIRS");
    let others: Vec<PathBuf> = args[3..].iter().map(PathBuf::from).collect();
    let c = Client::for_mount(&mnt).expect("a shoal mount");
    let _ = c.mkdir("crunl-client", 0o755);
    let _ = std::fs::create_dir(mnt.join("crunl-mount"));
    let mut rows: Vec<(String, usize, f64)> = Vec::new();
    let mut emit = |what: &str, threads: usize, v: f64| {
        println!(
            "{{\"bench\":\"client-crunl\",\"target\":\"{what}\",\"threads\":{threads},\"ops_per_s\":{v:.0}}}"
        );
        rows.push((what.to_string(), threads, v));
    };
    // The round trip alone, on one thread.
    let n = pairs * 4;
    for _ in 0..1000 {
        c.ping().unwrap();
    }
    let t0 = Instant::now();
    for _ in 0..n {
        c.ping().unwrap();
    }
    let rt = t0.elapsed().as_secs_f64() / n as f64;
    println!(
        "{{\"bench\":\"client-ping\",\"round_trip_us\":{:.2}}}",
        rt * 1e6
    );
    // Beside it, in the same run: the futex ping-pong alone between two
    // processes (the floor of any round trip), on any CPUs and with both
    // pinned to one; and one FUSE round trip (a getxattr the kernel does
    // not cache).
    let pp_any = pingpong(n, false);
    let pp_one = pingpong(n, true);
    let d = mnt.join("crunl-mount");
    let name = CString::new("user.none").unwrap();
    let dp = CString::new(d.as_os_str().as_bytes()).unwrap();
    let t0 = Instant::now();
    for _ in 0..n {
        // SAFETY: valid C strings, no value buffer.
        unsafe { libc::getxattr(dp.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
    }
    let fuse = t0.elapsed().as_secs_f64() / n as f64;
    println!(
        "{{\"bench\":\"round-trips\",\"client_ping_us\":{:.2},\"futex_pingpong_us\":{:.2},\"futex_pingpong_one_cpu_us\":{:.2},\"fuse_getxattr_us\":{:.2}}}",
        rt * 1e6,
        pp_any * 1e6,
        pp_one * 1e6,
        fuse * 1e6
    );
    if std::env::var_os("PING_ONLY").is_some() {
        return;
    }
    for threads in [1, 2] {
        let v = run(threads, pairs, |t, i| {
            let p = format!("crunl-client/t{t}-{i}");
            c.create(&p, 0o644).unwrap();
            c.unlink(&p).unwrap();
        });
        emit("client create+unlink", threads, v);
        let v = run(threads, pairs, |t, i| {
            let p = format!("crunl-client/o{t}-{i}");
            let f = c
                .open(&p, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644)
                .unwrap();
            f.close().unwrap();
            c.unlink(&p).unwrap();
        });
        emit("client open(O_CREAT)+close+unlink", threads, v);
        let d = mnt.join("crunl-mount");
        let v = run(threads, pairs, |t, i| path_pair(&d, t, i));
        emit("mount", threads, v);
        for o in &others {
            let d = o.join("crunl-other");
            let _ = std::fs::create_dir(&d);
            let v = run(threads, pairs, |t, i| path_pair(&d, t, i));
            emit(&o.display().to_string(), threads, v);
            let _ = std::fs::remove_dir(&d);
        }
    }
    let _ = c.rmdir("crunl-client");
    let _ = std::fs::remove_dir(mnt.join("crunl-mount"));
    println!();
    println!(
        "round trip through the daemon, no engine call: {:.2} us",
        rt * 1e6
    );
    println!(
        "futex ping-pong between two processes: {:.2} us (both on one CPU: {:.2} us)",
        pp_any * 1e6,
        pp_one * 1e6
    );
    println!("FUSE round trip (getxattr): {:.2} us", fuse * 1e6);
    println!(
        "{:<40} {:>12} {:>12} {:>8}",
        "target", "1 thread/s", "2 threads/s", "2/1"
    );
    let targets: Vec<String> = {
        let mut v: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
        v.dedup();
        v.sort();
        v.dedup();
        v
    };
    let mount1 = rows
        .iter()
        .find(|r| r.0 == "mount" && r.1 == 1)
        .map(|r| r.2)
        .unwrap_or(1.0);
    for t in targets {
        let get = |n| {
            rows.iter()
                .find(|r| r.0 == t && r.1 == n)
                .map(|r| r.2)
                .unwrap_or(0.0)
        };
        let (a, b) = (get(1), get(2));
        println!(
            "{:<40} {:>12.0} {:>12.0} {:>7.2}x   ({:.2}x the mount's 1 thread)",
            t,
            a,
            b,
            b / a,
            a / mount1
        );
    }
}
