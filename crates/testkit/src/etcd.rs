//! A real etcd cluster for tests: three members on 127.0.0.1, on ports
//! away from etcd's defaults (2379/2380, which Debian's own service takes),
//! in a directory of the test's, stopped when dropped. Members can be
//! killed, frozen (SIGSTOP) and restarted, for the fault tests, and cut off
//! from each other (`isolate`: nftables drops a member's peer traffic both
//! ways while its client port stays open, as a partition inside the cluster
//! does).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Cluster {
    dir: PathBuf,
    base: u16,
    members: Vec<Option<Child>>,
    extra: Vec<String>,
    /// The members `isolate` cut off from their peers.
    isolated: Vec<usize>,
}

/// Member `i` runs with group id `ISOLATION_GID + i`, so nftables can tell
/// the connections it makes (`meta skgid`) from its peers'; all of them are
/// to 127.0.0.1 from 127.0.0.1.
const ISOLATION_GID: u32 = 4300;

/// The etcd binary: `SHOAL_ETCD_BIN`, else `etcd` on the PATH.
fn binary() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SHOAL_ETCD_BIN") {
        return Some(p.into());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("etcd"))
            .find(|p| p.is_file())
    })
}

/// Whether tests that need etcd must run: `SHOAL_REQUIRE_ETCD=1` (CI sets
/// it), so a missing binary fails them there instead of skipping.
pub fn required() -> bool {
    std::env::var("SHOAL_REQUIRE_ETCD").is_ok_and(|v| v == "1")
}

impl Cluster {
    /// Start three members with client ports `base+1..=base+3` and peer
    /// ports `base+11..=base+13`; None (with a message) when etcd is not
    /// installed and not required.
    pub fn start(dir: &Path, base: u16) -> Option<Cluster> {
        Self::start_with(dir, base, &[])
    }

    /// `start` with more etcd flags for every member (a small
    /// `--quota-backend-bytes`, for the quota test).
    /// `SHOAL_ETCD_PORT_BASE=B` moves every test cluster to `B + base %
    /// 100` (an engineer's own port range beside a CI run on the defaults).
    pub fn start_with(dir: &Path, base: u16, extra: &[&str]) -> Option<Cluster> {
        let base = match std::env::var("SHOAL_ETCD_PORT_BASE").map(|b| b.parse::<u16>()) {
            Ok(Ok(b)) => b + base % 100,
            _ => base,
        };
        let Some(_) = binary() else {
            assert!(
                !required(),
                "SHOAL_REQUIRE_ETCD=1 but no etcd binary (apt-get install etcd-server, or set SHOAL_ETCD_BIN)"
            );
            eprintln!(
                "etcd not installed: skipping (CI installs it and sets SHOAL_REQUIRE_ETCD=1)"
            );
            return None;
        };
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let mut c = Cluster {
            dir: dir.to_path_buf(),
            base,
            members: vec![None, None, None],
            extra: extra.iter().map(|s| s.to_string()).collect(),
            isolated: Vec::new(),
        };
        // A cut left by a run that died would keep a member from its peers.
        if can_isolate() {
            c.apply_cuts();
        }
        for i in 0..3 {
            c.spawn(i, true);
        }
        c.wait_healthy(Duration::from_secs(30));
        Some(c)
    }

    fn client_port(&self, i: usize) -> u16 {
        self.base + 1 + i as u16
    }
    fn peer_port(&self, i: usize) -> u16 {
        self.base + 11 + i as u16
    }

    /// `http://127.0.0.1:P,...` of every member.
    pub fn endpoints(&self) -> Vec<String> {
        (0..3)
            .map(|i| format!("http://127.0.0.1:{}", self.client_port(i)))
            .collect()
    }

    fn spawn(&mut self, i: usize, new: bool) {
        let cluster: Vec<String> = (0..3)
            .map(|j| format!("m{j}=http://127.0.0.1:{}", self.peer_port(j)))
            .collect();
        let client = format!("http://127.0.0.1:{}", self.client_port(i));
        let peer = format!("http://127.0.0.1:{}", self.peer_port(i));
        let log = std::fs::File::create(self.dir.join(format!("m{i}.log"))).unwrap();
        let mut cmd = Command::new(binary().unwrap());
        if unsafe { libc::geteuid() } == 0 {
            use std::os::unix::process::CommandExt;
            cmd.gid(ISOLATION_GID + i as u32);
        }
        let child = cmd
            .args(["--name", &format!("m{i}")])
            .arg("--data-dir")
            .arg(self.dir.join(format!("m{i}")))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &cluster.join(",")])
            .args(["--initial-cluster-token", "shoal-test"])
            .args([
                "--initial-cluster-state",
                if new { "new" } else { "existing" },
            ])
            // Quicker elections for the fault tests (defaults: 100 ms, 1 s).
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args([
                "--auto-compaction-mode",
                "revision",
                "--auto-compaction-retention",
                "100000",
            ])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.members[i] = Some(child);
    }

    /// Wait until every running member answers its health check.
    pub fn wait_healthy(&self, within: Duration) {
        let t = Instant::now();
        for i in 0..3 {
            if self.members[i].is_none() {
                continue;
            }
            let addr = format!("127.0.0.1:{}", self.client_port(i));
            loop {
                if health(&addr) {
                    break;
                }
                assert!(
                    t.elapsed() < within,
                    "etcd member m{i} not healthy after {within:?}: see {}",
                    self.dir.join(format!("m{i}.log")).display()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// The pid of member `i`, if running.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members[i].as_ref().map(|c| c.id())
    }

    /// SIGKILL member `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start member `i` again on its data.
    pub fn restart(&mut self, i: usize) {
        assert!(self.members[i].is_none(), "member m{i} is running");
        self.spawn(i, false);
    }

    /// The member that is the leader now, by its own word, if one answers.
    pub fn leader(&self) -> Option<usize> {
        (0..3).find(|&i| {
            self.members[i].is_some()
                && http(
                    &format!("127.0.0.1:{}", self.client_port(i)),
                    "POST",
                    "/v3/maintenance/status",
                    "{}",
                )
                .is_some_and(|out| {
                    let me = json_u64(&out, "member_id");
                    me.is_some() && me == json_u64(&out, "leader")
                })
        })
    }

    /// Cut member `i` off from its peers (`true`) or let it back: every
    /// byte between it and the other two members is dropped, on open
    /// connections and new ones, with no reset; its client port still
    /// answers. Needs `can_isolate()`.
    pub fn isolate(&mut self, i: usize, on: bool) {
        self.isolated.retain(|&m| m != i);
        if on {
            self.isolated.push(i);
        }
        self.apply_cuts();
    }

    /// Make nftables cut the members in `isolated` and no other: the
    /// table of this cluster's rules, replaced.
    fn apply_cuts(&self) {
        let table = format!("shoal_etcd_{}", self.base);
        let _ = Command::new("nft")
            .args(["delete", "table", "inet", &table])
            .stderr(Stdio::null())
            .status();
        if self.isolated.is_empty() {
            return;
        }
        // Connections the member made are marked by its group id and
        // dropped both ways (conntrack follows a connection's replies);
        // connections made to it are dropped by its peer port.
        let mut rules = String::new();
        for &m in &self.isolated {
            let others: Vec<String> = (0..3)
                .filter(|&j| j != m)
                .map(|j| self.peer_port(j).to_string())
                .collect();
            // The member's group id, also the mark of its connections.
            let mark = ISOLATION_GID as usize + m;
            rules += &format!(
                "  meta skgid {mark} tcp dport {{ {} }} ct mark set {mark}\n  ct mark {mark} drop\n  tcp dport {p} drop\n  tcp sport {p} drop\n",
                others.join(", "),
                p = self.peer_port(m),
            );
        }
        let script = format!(
            "table inet {table} {{\n chain out {{\n  type filter hook output priority 0; policy accept;\n{rules} }}\n}}\n"
        );
        let mut nft = Command::new("nft")
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("run nft");
        use std::io::Write;
        nft.stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        assert!(nft.wait().unwrap().success(), "nft refused:\n{script}");
    }

    /// SIGSTOP (`true`) or SIGCONT member `i`.
    pub fn freeze(&self, i: usize, on: bool) {
        if let Some(pid) = self.pid(i) {
            let sig = if on { "-STOP" } else { "-CONT" };
            let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
        }
    }
}

/// One HTTP/1.0 request to a member's client port (its JSON gateway; no
/// client library needed): the whole answer, or None.
fn http(addr: &str, method: &str, path: &str, body: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s =
        std::net::TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_millis(200))
            .ok()?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    Some(out)
}

/// etcd's `/health`.
fn health(addr: &str) -> bool {
    http(addr, "GET", "/health", "").is_some_and(|out| {
        out.contains("\"health\":\"true\"") || out.contains("\"health\": \"true\"")
    })
}

/// The value of `"field":"N"` in a JSON answer (the gateway writes 64-bit
/// numbers as strings).
fn json_u64(out: &str, field: &str) -> Option<u64> {
    let at = out.find(&format!("\"{field}\":\""))? + field.len() + 4;
    out[at..].split('"').next()?.parse().ok()
}

/// Whether nftables can be used here (the `nft` binary, as root).
pub fn can_isolate() -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    root && Command::new("nft")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.isolated.is_empty() {
            self.isolated.clear();
            self.apply_cuts();
        }
        for i in 0..3 {
            self.freeze(i, false);
            self.kill(i);
        }
    }
}
