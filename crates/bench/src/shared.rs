//! `shoal bench shared-create --etcd etcd://H:P,.../NAME`: creates in ONE
//! directory shared by several daemons on an etcd cluster (issue 24's
//! figure), then stats of what was created. Each daemon is a `ClusterFs`
//! with its own etcd connection and session, as separate mounts are; its
//! workers are threads. For each daemon count in `--daemons` and worker
//! count in `--workers` (per daemon), in one run: operations per second,
//! commits and conflicts per operation, latency percentiles.

use crate::cli::BenchArgs;
use shoal_cluster::ns::{self, ClusterFs, SessionOpts};
use shoal_cluster::ClusterStore;
use shoal_core::ROOT_INO;
use shoal_etcd::{EtcdStore, EtcdUrl};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Row {
    daemons: usize,
    workers: usize,
    phase: &'static str,
    ops: u64,
    secs: f64,
    commits: u64,
    conflicts: u64,
    /// Directory leases taken, and the entries read to take them.
    turns: u64,
    listed: u64,
    lat: Vec<u64>,
}

fn pct(l: &mut [u64], p: f64) -> f64 {
    if l.is_empty() {
        return 0.0;
    }
    l.sort_unstable();
    l[((l.len() - 1) as f64 * p) as usize] as f64 / 1000.0
}

pub fn run(a: &BenchArgs) -> Result<i32, String> {
    let url = a
        .etcd
        .as_deref()
        .ok_or("shared-create needs --etcd etcd://HOST:PORT,.../NAME")?;
    let base = EtcdUrl::parse(url)?;
    let secs = a.seconds;
    println!(
        "creates in one shared directory on etcd {:?}, {secs} s per phase (git {})",
        base.endpoints,
        std::process::Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    );
    println!(
        "{:>7} {:>7} {:<8} {:>9} {:>8} {:>10} {:>9} {:>9} {:>7} {:>9}",
        "daemons",
        "workers",
        "phase",
        "ops/s",
        "txn/op",
        "confl/op",
        "p50 ms",
        "p99 ms",
        "turns",
        "listed"
    );
    for &daemons in &a.daemons {
        for &workers in &a.workers {
            // A fresh namespace per row: the same starting point.
            let url = EtcdUrl {
                endpoints: base.endpoints.clone(),
                name: format!("{}-{daemons}d{workers}w-{}", base.name, std::process::id()),
                ..base.clone()
            };
            let connect = || -> Result<Arc<dyn ClusterStore>, String> {
                Ok(EtcdStore::connect(&url, Duration::from_secs(5)).map_err(|e| e.to_string())?)
            };
            ns::mkfs(&*connect()?).map_err(|e| e.to_string())?;
            let fss: Vec<Arc<ClusterFs>> = (0..daemons)
                .map(|_| {
                    let opts = SessionOpts {
                        dir_leases: !a.nodirlease,
                        ..SessionOpts::default()
                    };
                    ClusterFs::open(connect()?, opts).map_err(|e| e.to_string())
                })
                .collect::<Result<_, _>>()?;
            let dir = fss[0]
                .mkdir(ROOT_INO, b"shared", 0o755)
                .map_err(|e| e.to_string())?
                .ino;
            let mut made = vec![0u64; daemons * workers];
            for phase in ["create", "stat"] {
                let snap = |f: &ClusterFs| {
                    let s = &f.stats;
                    [
                        s.commits.load(Ordering::Relaxed),
                        s.conflicts.load(Ordering::Relaxed),
                        s.leases_taken.load(Ordering::Relaxed),
                        s.lease_listed.load(Ordering::Relaxed),
                    ]
                };
                let before: Vec<[u64; 4]> = fss.iter().map(|f| snap(f)).collect();
                let start = std::sync::Barrier::new(daemons * workers);
                let t0 = Instant::now();
                let results: Vec<(u64, Vec<u64>)> = std::thread::scope(|sc| {
                    let hs: Vec<_> = (0..daemons * workers)
                        .map(|w| {
                            let (fs, start, n) = (&fss[w % daemons], &start, made[w]);
                            sc.spawn(move || {
                                start.wait();
                                let t = Instant::now();
                                let (mut ops, mut lat) = (0u64, Vec::new());
                                while t.elapsed().as_secs_f64() < secs {
                                    // stat: the worker's own names, round and round.
                                    let i = if phase == "stat" { ops % n.max(1) } else { ops };
                                    let name = format!("w{w}-{i}");
                                    let s = Instant::now();
                                    let r = if phase == "create" {
                                        fs.create(dir, name.as_bytes(), 0o644).map(|_| ())
                                    } else {
                                        fs.lookup(dir, name.as_bytes()).map(|_| ())
                                    };
                                    r.unwrap_or_else(|e| panic!("{phase} {name}: {e}"));
                                    lat.push(s.elapsed().as_micros() as u64);
                                    ops += 1;
                                }
                                (ops, lat)
                            })
                        })
                        .collect();
                    hs.into_iter().map(|h| h.join().unwrap()).collect()
                });
                let took = t0.elapsed().as_secs_f64();
                if phase == "create" {
                    made = results.iter().map(|r| r.0).collect();
                }
                let mut d = [0u64; 4];
                for (f, b) in fss.iter().zip(before) {
                    for (x, (now, was)) in d.iter_mut().zip(snap(f).iter().zip(b)) {
                        *x += now - was;
                    }
                }
                let [commits, conflicts, turns, listed] = d;
                let mut row = Row {
                    daemons,
                    workers,
                    phase,
                    ops: results.iter().map(|r| r.0).sum(),
                    secs: took,
                    commits,
                    conflicts,
                    turns,
                    listed,
                    lat: results.into_iter().flat_map(|r| r.1).collect(),
                };
                let per = |x: u64| x as f64 / row.ops.max(1) as f64;
                println!(
                    "{:>7} {:>7} {:<8} {:>9.0} {:>8.2} {:>10.4} {:>9.2} {:>9.2} {:>7} {:>9}",
                    row.daemons,
                    row.workers,
                    row.phase,
                    row.ops as f64 / row.secs,
                    per(row.commits),
                    per(row.conflicts),
                    pct(&mut row.lat, 0.5),
                    pct(&mut row.lat, 0.99),
                    row.turns,
                    row.listed
                );
            }
            let r = ns::check(&*connect()?).map_err(|e| e.to_string())?;
            if !r.problems.is_empty() {
                return Err(format!("check after the run: {:?}", r.problems));
            }
            for f in &fss {
                let _ = f.close();
            }
        }
    }
    Ok(0)
}
