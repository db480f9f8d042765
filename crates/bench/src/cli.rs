//! `shoal bench`: run a workload in-process on the engine (threads calling
//! the library) or on mounted paths (worker processes making system calls),
//! over every combination of the given switches and worker counts; print a
//! table, append JSON lines, draw an SVG plot.

use crate::workloads::{self, EngineFs, Params, PathFs, WorkerState};
use clap::Args;
use serde_json::{json, Value};
use shoal_core::sync::{lock_counts, LOCK_CLASSES};
use shoal_core::{
    Config, DirIndex, Durability, Engine, LockScope, NameCache, NullStore, Placement, Store,
};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// crunl, rndrename, postmark, fsmark, mdtest-hard, lookup, seed001, tree
    pub workload: String,
    /// engine: threads on the library API; path: processes on mounted paths.
    #[arg(long, default_value = "engine")]
    pub mode: String,
    /// Path-mode targets, NAME=PATH (repeat or comma-separate).
    #[arg(long = "target", value_delimiter = ',')]
    pub targets: Vec<String>,
    /// Worker counts to run (threads or processes).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub workers: Vec<usize>,
    /// Iterations per worker (crunl, rndrename, lookup; seed001: per directory size).
    #[arg(long, default_value_t = 100_000)]
    pub iters: u64,
    /// postmark: files in the pool per instance; fsmark, mdtest-hard, lookup: files per worker (seed001: in the big directory).
    #[arg(long, default_value_t = 20_000)]
    pub files: u64,
    /// postmark transactions per instance.
    #[arg(long, default_value_t = 50_000)]
    pub transactions: u64,
    /// fsmark file size in bytes.
    #[arg(long, default_value_t = 0)]
    pub size: u64,
    /// fsmark, mdtest-hard: one directory per worker instead of one shared directory.
    #[arg(long)]
    pub own_dirs: bool,
    /// Lock scope: global, dir, name (list to compare).
    #[arg(long, value_delimiter = ',', default_value = "name")]
    pub lock_scope: Vec<String>,
    /// Directory index: linear, indexed.
    #[arg(long, value_delimiter = ',', default_value = "indexed")]
    pub dir_index: Vec<String>,
    /// Name cache: off, on, primed.
    #[arg(long, value_delimiter = ',', default_value = "primed")]
    pub name_cache: Vec<String>,
    /// Placement of new directories: spread, near.
    #[arg(long, value_delimiter = ',', default_value = "near")]
    pub placement: Vec<String>,
    /// Commit: none (memory only), group, sync (every operation).
    #[arg(long, value_delimiter = ',', default_value = "none")]
    pub commit: Vec<String>,
    /// Engine mode with a store: where to put it (default: a temporary directory).
    #[arg(long)]
    pub store_dir: Option<PathBuf>,
    /// Keep the store the run made (in --store-dir, as bench-PID): a store
    /// of a known size to mount, check or measure.
    #[arg(long, requires = "store_dir")]
    pub keep_store: bool,
    /// Cache budget in MiB (engine mode).
    #[arg(long, default_value_t = 1024)]
    pub cache_mb: u64,
    /// evict: the cache budget in MiB the `lookup (evicting)` phase drops to
    /// (the run starts with --cache-mb).
    #[arg(long, default_value_t = 64)]
    pub evict_to_mb: u64,
    /// lookup, seed001: the fraction of lookups that ask for an existing
    /// name (the rest ask for missing ones).
    #[arg(long, default_value_t = 0.5)]
    pub hits: f64,
    /// lookup, seed001: draw the lookups from each worker's first N names
    /// only (0: from all of them), so that a big directory can be probed
    /// with a working set as small as a small directory's.
    #[arg(long, default_value_t = 0)]
    pub hot: u64,
    /// seed001: the small side is N directories of 1000 names, lookups
    /// spread over all of them. With N = --files / 1000 it holds as many
    /// names as the big directory: the same working set in small
    /// directories, a control for what the directory's size alone costs.
    #[arg(long, default_value_t = 1)]
    pub small_dirs: u64,
    /// Bound on the whole process's resident memory in MiB (engine mode; 0:
    /// none): the cache budget shrinks to keep the process under it.
    #[arg(long, default_value_t = 0)]
    pub memory_mb: u64,
    /// Append one JSON line per run to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write an SVG plot of ops/s against workers.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Pin worker i to CPU i modulo the CPU count (threads in engine mode,
    /// processes in path mode), so that the scheduler's placement of the
    /// workers is not part of the comparison.
    #[arg(long)]
    pub pin: bool,
    /// Engine mode with a store: after the run, flush and compact the store
    /// and report its bytes on disk per file created (use with `create`).
    #[arg(long)]
    pub space: bool,
    /// tree: the tarball to unpack, uncompressed (default: Debian's
    /// /usr/src/linux-source-*.tar.xz, decompressed once to /var/tmp).
    #[arg(long)]
    pub tarball: Option<PathBuf>,
    /// tree: start every phase cold: engine mode reopens the engine and store
    /// and drops the page cache; path mode syncs, drops the page cache and
    /// runs --between.
    #[arg(long)]
    pub cold: bool,
    /// tree, path mode: a shell command run between phases (for example a
    /// remount); $SHOAL_BENCH_TARGET and $SHOAL_BENCH_PATH name the target.
    #[arg(long)]
    pub between: Option<String>,
    /// shared-create: the filesystem on etcd, etcd://HOST:PORT,.../NAME
    /// (each row makes its own NAME-... namespace).
    #[arg(long)]
    pub etcd: Option<String>,
    /// shared-create: daemon counts to run (each its own etcd connection
    /// and session, as separate mounts are); --workers is per daemon.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub daemons: Vec<usize>,
    /// shared-create: seconds per phase.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// shared-create: no directory leases (as `-o nodirlease`): each
    /// create is its own etcd transaction before it returns.
    #[arg(long)]
    pub nodirlease: bool,
    /// Internal: run as path-mode worker number N.
    #[arg(long, hide = true)]
    pub worker: Option<usize>,
    #[arg(long, hide = true)]
    pub params: Option<String>,
    #[arg(long, hide = true)]
    pub root: Option<PathBuf>,
}

pub(crate) fn rusage() -> (f64, u64) {
    rusage_of(libc::RUSAGE_SELF)
}

/// (CPU seconds, voluntary + involuntary context switches) of `who`
/// (RUSAGE_SELF, or RUSAGE_CHILDREN for waited-for child processes).
pub(crate) fn rusage_of(who: i32) -> (f64, u64) {
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(who, &mut r) };
    let cpu = r.ru_utime.tv_sec as f64
        + r.ru_utime.tv_usec as f64 / 1e6
        + r.ru_stime.tv_sec as f64
        + r.ru_stime.tv_usec as f64 / 1e6;
    (cpu, (r.ru_nvcsw + r.ru_nivcsw) as u64)
}

/// Seconds since the epoch, for JSON rows.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Append one JSON line to `--json FILE`, if given.
pub(crate) fn append_json(path: Option<&PathBuf>, row: &Value) -> Result<(), String> {
    if let Some(j) = path {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(j)
            .map_err(|e| format!("{}: {e}", j.display()))?;
        writeln!(f, "{row}").map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn pct(v: &mut [u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[derive(Clone, Debug)]
pub(crate) struct Switches {
    pub(crate) lock_scope: String,
    pub(crate) dir_index: String,
    pub(crate) name_cache: String,
    pub(crate) placement: String,
    pub(crate) commit: String,
}

impl Switches {
    pub(crate) fn config(&self, cache_mb: u64) -> Result<Config, String> {
        let lock_scope = match self.lock_scope.as_str() {
            "global" => LockScope::Global,
            "dir" => LockScope::Dir,
            "name" => LockScope::Name,
            x => return Err(format!("--lock-scope {x}: use global, dir, name")),
        };
        let dir_index = match self.dir_index.as_str() {
            "linear" => DirIndex::Linear,
            "indexed" => DirIndex::Indexed,
            x => return Err(format!("--dir-index {x}: use linear, indexed")),
        };
        let name_cache = match self.name_cache.as_str() {
            "off" => NameCache::Off,
            "on" => NameCache::On,
            "primed" => NameCache::Primed,
            x => return Err(format!("--name-cache {x}: use off, on, primed")),
        };
        let placement = match self.placement.as_str() {
            "spread" => Placement::Spread,
            "near" => Placement::Near,
            x => return Err(format!("--placement {x}: use spread, near")),
        };
        let durability = match self.commit.as_str() {
            "none" | "group" => Durability::Group,
            "sync" => Durability::SyncEach,
            x => return Err(format!("--commit {x}: use none, group, sync")),
        };
        Ok(Config {
            lock_scope,
            dir_index,
            name_cache,
            placement,
            durability,
            cache_bytes: cache_mb << 20,
            ..Config::default()
        })
    }
    pub(crate) fn json(&self) -> Value {
        json!({"lock_scope": self.lock_scope, "dir_index": self.dir_index, "name_cache": self.name_cache,
               "placement": self.placement, "commit": self.commit})
    }
    pub(crate) fn short(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}",
            self.lock_scope, self.dir_index, self.name_cache, self.placement, self.commit
        )
    }
}

/// One worker's result: its op count per phase, and its latency samples per
/// phase.
type WorkerOut = (Vec<u64>, Vec<Vec<u64>>);

struct PhaseResult {
    name: String,
    ops: u64,
    secs: f64,
    lat: Vec<u64>,
    /// Store point reads and scans during the phase (engine mode).
    store_reads: u64,
}

pub(crate) fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

pub(crate) fn host() -> String {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_string();
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    format!("{h} ({n} cpus)")
}

pub fn run(a: BenchArgs) -> Result<i32, String> {
    if let Some(id) = a.worker {
        return worker_main(&a, id).map(|_| 0);
    }
    if a.workload == "shared-create" {
        return crate::shared::run(&a);
    }
    if a.workload != "tree" {
        workloads::phases(&a.workload)?;
    }
    // The one-run workloads split a count over their rounds.
    if let Some((rounds, flag)) = workloads::rounds(&a.workload) {
        let count = if flag == "--transactions" {
            a.transactions
        } else {
            a.iters
        };
        if count < rounds {
            return Err(format!(
                "{} splits {flag} over {rounds} rounds: give at least {rounds}",
                a.workload
            ));
        }
    }
    if a.workload == "seed002" && a.mode != "engine" {
        return Err(
            "seed002 compares two engines in one process: it runs in engine mode only".into(),
        );
    }
    let mut combos = Vec::new();
    for l in &a.lock_scope {
        for d in &a.dir_index {
            for n in &a.name_cache {
                for p in &a.placement {
                    for c in &a.commit {
                        combos.push(Switches {
                            lock_scope: l.clone(),
                            dir_index: d.clone(),
                            name_cache: n.clone(),
                            placement: p.clone(),
                            commit: c.clone(),
                        });
                    }
                }
            }
        }
    }
    let targets: Vec<(String, PathBuf)> = if a.mode == "engine" {
        vec![("engine".into(), PathBuf::new())]
    } else if a.mode == "path" {
        if a.targets.is_empty() {
            return Err("path mode needs --target NAME=PATH".into());
        }
        a.targets
            .iter()
            .map(|t| {
                t.split_once('=')
                    .map(|(n, p)| (n.to_string(), PathBuf::from(p)))
                    .ok_or(format!("--target {t}: use NAME=PATH"))
            })
            .collect::<Result<_, _>>()?
    } else {
        return Err(format!("--mode {}: use engine or path", a.mode));
    };
    if a.workload == "tree" {
        return crate::tree::run(&a, &combos, &targets);
    }
    let (commit, host) = (git_commit(), host());
    let mut rows: Vec<Value> = Vec::new();
    println!(
        "{:<12} {:<8} {:<6} {:>3} {:<34} {:>12} {:>9} {:>9} {:>8} {:>8}  lock waits (class: waits, ms)",
        "workload",
        "target",
        "mode",
        "w",
        "switches (lock/index/cache/place/commit)",
        "ops/s",
        "p50 us",
        "p99 us",
        "cs/op",
        "cpu s"
    );
    for (tname, tpath) in &targets {
        for sw in if a.mode == "engine" {
            combos.clone()
        } else {
            vec![combos[0].clone()]
        } {
            for &w in &a.workers {
                let p = Params {
                    workload: a.workload.clone(),
                    workers: w,
                    iters: a.iters,
                    files: a.files,
                    transactions: a.transactions,
                    size: a.size,
                    shared_dir: !a.own_dirs,
                    top: format!("bench-{}-{}-{}", a.workload, std::process::id(), rows.len()),
                    seed: a.seed,
                    evict_to: a.evict_to_mb << 20,
                    hits: a.hits,
                    hot: a.hot,
                    small_dirs: a.small_dirs,
                    pin: a.pin,
                };
                let pb = indicatif::ProgressBar::new_spinner();
                pb.set_message(format!("{} {} w={} {}", a.workload, tname, w, sw.short()));
                pb.enable_steady_tick(Duration::from_millis(200));
                let r = if a.mode == "engine" {
                    run_engine(&p, &sw, &a)
                } else {
                    run_path(&p, tpath)
                };
                pb.finish_and_clear();
                let (phases, cpu, cs, locks, mut extra) = r?;
                let phases = merge_repeats(phases);
                for (k, v) in paired_ratios(&phases) {
                    extra.insert(k, json!((v * 100.0).round() / 100.0));
                }
                let head = workloads::headline(&a.workload);
                let hp = phases.iter().find(|x| x.name == head).unwrap();
                // (seed000's `private` phases make no engine operation.)
                let total_ops: u64 = phases
                    .iter()
                    .filter(|x| x.name != "setup" && !x.name.starts_with("private"))
                    .map(|x| x.ops)
                    .sum();
                let ops_per_s = hp.ops as f64 / hp.secs.max(1e-9);
                let mut hl = hp.lat.clone();
                let (p50, p99) = (pct(&mut hl, 0.5), pct(&mut hl, 0.99));
                let cs_per_op = cs as f64 / total_ops.max(1) as f64;
                let mut lock_txt = String::new();
                if let Some(l) = locks.as_object() {
                    let mut v: Vec<_> = l
                        .iter()
                        .filter(|(_, x)| x["contended"].as_u64().unwrap_or(0) > 0)
                        .collect();
                    v.sort_by_key(|(_, x)| std::cmp::Reverse(x["wait_ns"].as_u64().unwrap_or(0)));
                    for (k, x) in v.iter().take(3) {
                        lock_txt += &format!(
                            "{k}: {}, {:.1}  ",
                            x["contended"],
                            x["wait_ns"].as_u64().unwrap_or(0) as f64 / 1e6
                        );
                    }
                }
                println!(
                    "{:<12} {:<8} {:<6} {:>3} {:<34} {:>12.0} {:>9.1} {:>9.1} {:>8.3} {:>8.2}  {}",
                    a.workload,
                    tname,
                    a.mode,
                    w,
                    if a.mode == "engine" {
                        sw.short()
                    } else {
                        "-".into()
                    },
                    ops_per_s,
                    p50 as f64 / 1e3,
                    p99 as f64 / 1e3,
                    cs_per_op,
                    cpu,
                    lock_txt
                );
                if !extra.is_empty() {
                    println!(
                        "{:>12} {}",
                        "",
                        extra
                            .iter()
                            .map(|(k, v)| format!("{k} {v}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
                let row = json!({
                    "workload": a.workload, "target": tname, "mode": a.mode, "workers": w,
                    "ops_per_s": ops_per_s, "cs_per_op": cs_per_op, "cpu_s": cpu,
                    "p50_ns": p50, "p99_ns": p99,
                    "switches": if a.mode == "engine" { sw.json() } else { Value::Null },
                    "phases": phases.iter().map(|x| {
                        let mut l = x.lat.clone();
                        json!({"name": x.name, "ops": x.ops, "secs": x.secs, "ops_per_s": x.ops as f64 / x.secs.max(1e-9), "store_reads": x.store_reads,
                               "p50_ns": pct(&mut l, 0.5), "p99_ns": pct(&mut l, 0.99)})
                    }).collect::<Vec<_>>(),
                    "params": serde_json::to_value(&p).unwrap(),
                    "locks": locks, "git": commit, "host": host, "extra": extra,
                    "time": unix_now(),
                });
                append_json(a.json.as_ref(), &row)?;
                rows.push(row);
            }
        }
    }
    // Ratios the seeds talk about: each run's rate relative to the first row's.
    if rows.len() > 1 {
        let base = rows[0]["ops_per_s"].as_f64().unwrap_or(1.0);
        print!("ratios to the first row:");
        for r in &rows {
            print!(" {:.2}", r["ops_per_s"].as_f64().unwrap_or(0.0) / base);
        }
        println!();
    }
    if let Some(p) = &a.plot {
        std::fs::write(p, crate::plot::svg(&rows, &a.workload))
            .map_err(|e| format!("{}: {e}", p.display()))?;
        println!("plot: {}", p.display());
    }
    Ok(0)
}

/// A phase listed more than once (seed001's alternated rounds) becomes one
/// result: operations, time, latencies and store reads summed, in the
/// order of first appearance.
fn merge_repeats(phases: Vec<PhaseResult>) -> Vec<PhaseResult> {
    let mut out: Vec<PhaseResult> = Vec::new();
    for r in phases {
        match out.iter_mut().find(|o| o.name == r.name) {
            Some(o) => {
                o.ops += r.ops;
                o.secs += r.secs;
                o.store_reads += r.store_reads;
                o.lat.extend(r.lat);
            }
            None => out.push(r),
        }
    }
    out
}

/// The figures of alternated phase pairs: seed000's speedup of all workers
/// over worker 0 alone ("X" over "X 1w", and "X apart" over "X 1w"),
/// seed002's fine-grained over big-lock rate ("X" over "X global"), seed001's cost of a lookup in the
/// big directory over one in the small one ("X 1K" rate over "X" rate).
fn paired_ratios(phases: &[PhaseResult]) -> Vec<(String, f64)> {
    let rate = |name: &str| {
        phases
            .iter()
            .find(|x| x.name == name)
            .map(|x| x.ops as f64 / x.secs.max(1e-9))
    };
    let mut out = Vec::new();
    for x in phases {
        if let (Some(base), Some(solo)) = (x.name.strip_suffix(" 1w"), rate(&x.name)) {
            if let Some(all) = rate(base) {
                out.push((format!("{base} speedup"), all / solo.max(1e-9)));
            }
            // Worker 0 alone shares nothing either: the reference for the
            // workers in engines of their own.
            if let Some(all) = rate(&format!("{base} apart")) {
                out.push((format!("{base} apart speedup"), all / solo.max(1e-9)));
            }
        }
        if let (Some(base), Some(big_lock)) = (x.name.strip_suffix(" global"), rate(&x.name)) {
            if let Some(fine) = rate(base) {
                out.push((format!("{base} fine/global"), fine / big_lock.max(1e-9)));
            }
        }
        if let (Some(base), Some(small)) = (x.name.strip_suffix(" 1K"), rate(&x.name)) {
            if let Some(big) = rate(base) {
                out.push((format!("{base} cost ratio"), small / big.max(1e-9)));
            }
        }
    }
    out
}

/// (phases, cpu seconds, context switches, lock counts, extra facts for the JSON row).
type RunOut = (
    Vec<PhaseResult>,
    f64,
    u64,
    Value,
    serde_json::Map<String, Value>,
);

fn lock_snapshot() -> Vec<shoal_core::sync::LockCounts> {
    LOCK_CLASSES.iter().map(|c| lock_counts(*c)).collect()
}

fn run_engine(p: &Params, sw: &Switches, a: &BenchArgs) -> Result<RunOut, String> {
    let mut cfg = sw.config(a.cache_mb)?;
    cfg.memory_bytes = a.memory_mb << 20;
    let _tmp;
    let mut store_path = None;
    let mut fjall = None;
    let store: Arc<dyn Store> = if sw.commit == "none" {
        Arc::new(NullStore)
    } else {
        let dir = match &a.store_dir {
            Some(d) => {
                let d = d.join(format!("bench-{}", std::process::id()));
                let _ = std::fs::remove_dir_all(&d);
                d
            }
            None => {
                _tmp = tempfile_dir()?;
                _tmp.join("store")
            }
        };
        store_path = Some(dir.clone());
        let s = Arc::new(
            shoal_store::FjallStore::create(&dir, |s| Engine::mkfs(s, cfg.ags))
                .map_err(|e| e.to_string())?,
        );
        fjall = Some(s.clone());
        s
    };
    // seed000's "... apart" phases: each worker in an engine of its own
    // (memory only), so that nothing of the engine is shared. seed002's
    // "... global" phases: one more engine, shared, under the big lock.
    let phases = workloads::phases(&p.workload)?;
    let has = |suffix: &str| phases.iter().any(|ph| ph.ends_with(suffix));
    let (apart, global) = (has(" apart"), has(" global"));
    if (apart || global) && sw.commit != "none" {
        return Err(format!(
            "{}: its second engines are memory only: use --commit none",
            p.workload
        ));
    }
    let own_cfg = cfg.clone();
    let glob = match global {
        true => Some(
            Engine::open(
                Arc::new(NullStore),
                Config {
                    lock_scope: LockScope::Global,
                    ..cfg.clone()
                },
            )
            .map_err(|e| e.to_string())?,
        ),
        false => None,
    };
    let e = Engine::open(store, cfg).map_err(|e| e.to_string())?;
    let rss = RssSampler::start();
    let barrier = Barrier::new(p.workers + 1);
    let locks0 = lock_snapshot();
    let (cpu0, cs0) = rusage();
    let mut results: Vec<PhaseResult> = phases
        .iter()
        .map(|n| PhaseResult {
            name: n.to_string(),
            ops: 0,
            secs: 0.0,
            lat: vec![],
            store_reads: 0,
        })
        .collect();
    let out: Result<Vec<WorkerOut>, String> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..p.workers)
            .map(|id| {
                let (e, barrier, phases, own_cfg, glob) = (&e, &barrier, &phases, &own_cfg, &glob);
                sc.spawn(move || -> Result<WorkerOut, String> {
                    let fs = EngineFs { e };
                    let mut st = WorkerState::new(p.seed, id);
                    // The worker's own engine and state for "... apart"
                    // phases, set up as the shared one is.
                    let own = match apart {
                        true => Some(
                            Engine::open(Arc::new(NullStore), own_cfg.clone())
                                .map_err(|e| e.to_string())?,
                        ),
                        false => None,
                    };
                    let own_fs = own.as_deref().map(|e| EngineFs { e });
                    let mut own_st = WorkerState::new(p.seed, id);
                    if p.pin {
                        pin_to_cpu(id)?;
                    }
                    // The big-lock engine's state, for "... global" phases.
                    let glob_fs = glob.as_deref().map(|e| EngineFs { e });
                    let mut glob_st = WorkerState::new(p.seed, id);
                    for (side, f, s) in [
                        ("own", &own_fs, &mut own_st),
                        ("big-lock", &glob_fs, &mut glob_st),
                    ] {
                        if let Some(f) = f {
                            workloads::run_phase(f, p, id, "setup", s)
                                .map_err(|e| format!("worker {id} {side} engine's setup: {e}"))?;
                        }
                    }
                    let (mut ops, mut lats) = (vec![], vec![]);
                    // A failed worker keeps meeting the barriers (doing
                    // nothing), or the others and the timer would wait for
                    // it forever; its first error ends the run afterwards.
                    let mut failed = None;
                    for ph in phases.iter() {
                        let (f, s) = match (&own_fs, &glob_fs) {
                            (Some(o), _) if ph.ends_with(" apart") => (o, &mut own_st),
                            (_, Some(g)) if ph.ends_with(" global") => (g, &mut glob_st),
                            _ => (&fs, &mut st),
                        };
                        barrier.wait();
                        s.lat.clear();
                        let r = if failed.is_none() {
                            workloads::run_phase(f, p, id, ph, s)
                        } else {
                            Ok(0)
                        };
                        barrier.wait();
                        match r {
                            Ok(n) => ops.push(n),
                            Err(e) => failed = Some(format!("worker {id} {ph}: {e}")),
                        }
                        lats.push(std::mem::take(&mut s.lat));
                    }
                    match failed {
                        Some(e) => Err(e),
                        None => Ok((ops, lats)),
                    }
                })
            })
            .collect();
        let reads = || {
            let c = e.store().counters();
            c.gets + c.scans
        };
        for r in results.iter_mut() {
            barrier.wait();
            let (t, r0) = (Instant::now(), reads());
            barrier.wait();
            r.secs = t.elapsed().as_secs_f64();
            r.store_reads = reads() - r0;
            // Long runs: say when each phase ends (the table comes at the end).
            if r.secs > 10.0 {
                eprintln!(
                    "  phase {} done in {:.1} s ({} store reads, RSS now {} MB)",
                    r.name,
                    r.secs,
                    r.store_reads,
                    rss_bytes() >> 20
                );
            }
        }
        hs.into_iter()
            .map(|h| h.join().map_err(|_| "worker panicked".to_string())?)
            .collect()
    });
    for (ops, lats) in out? {
        for (i, r) in results.iter_mut().enumerate() {
            r.ops += ops[i];
            r.lat.extend_from_slice(&lats[i]);
        }
    }
    let (cpu1, cs1) = rusage();
    let locks1 = lock_snapshot();
    let mut locks = serde_json::Map::new();
    for (i, c) in LOCK_CLASSES.iter().enumerate() {
        locks.insert(
            c.name().into(),
            json!({
                "acquired": locks1[i].acquired - locks0[i].acquired,
                "contended": locks1[i].contended - locks0[i].contended,
                "wait_ns": locks1[i].wait_ns - locks0[i].wait_ns,
            }),
        );
    }
    let mut extra = serde_json::Map::new();
    extra.insert("peak_rss_mb".into(), json!(rss.stop() >> 20));
    extra.insert("cached_inodes".into(), json!(e.cached_inodes()));
    extra.insert("cache_estimate_mb".into(), json!(e.cache_usage() >> 20));
    extra.insert("budget_mb".into(), json!(e.budget() >> 20));
    extra.insert(
        "demoted_hashes".into(),
        json!(e.demoted_hashes.load(std::sync::atomic::Ordering::Relaxed)),
    );
    extra.insert(
        "unread_unlinks".into(),
        json!(e.unread_unlinks.load(std::sync::atomic::Ordering::Relaxed)),
    );
    let cs = &e.committer.stats;
    extra.insert(
        "keys_written".into(),
        json!(cs.keys_out.load(std::sync::atomic::Ordering::Relaxed)),
    );
    extra.insert(
        "keys_elided".into(),
        json!(cs.keys_elided.load(std::sync::atomic::Ordering::Relaxed)),
    );
    extra.insert(
        "throttled".into(),
        json!(e.throttled.load(std::sync::atomic::Ordering::Relaxed)),
    );
    if let (true, Some(f)) = (a.space, fjall.take()) {
        let files = results
            .iter()
            .filter(|r| r.name == "create")
            .map(|r| r.ops)
            .sum::<u64>()
            .max(1);
        e.shutdown().map_err(|e| e.to_string())?;
        drop(e);
        let before = f.disk_space();
        f.compact().map_err(|e| e.to_string())?;
        let after = f.disk_space();
        extra.insert("store_bytes_per_file".into(), json!(after / files));
        extra.insert(
            "store_bytes_per_file_before_compaction".into(),
            json!(before / files),
        );
    } else {
        e.shutdown().map_err(|e| e.to_string())?;
        drop(e);
    }
    drop(fjall);
    // The benchmark's store is scratch: remove it (and its temporary parent).
    if let Some(p) = store_path.filter(|_| !a.keep_store) {
        let _ = std::fs::remove_dir_all(&p);
        if a.store_dir.is_none() {
            if let Some(parent) = p.parent() {
                let _ = std::fs::remove_dir_all(parent);
            }
        }
    }
    Ok((results, cpu1 - cpu0, cs1 - cs0, Value::Object(locks), extra))
}

/// Samples this process's resident set every 20 ms on a thread; `stop` gives the peak in bytes.
pub(crate) struct RssSampler {
    stop: Arc<std::sync::atomic::AtomicBool>,
    h: std::thread::JoinHandle<u64>,
}

pub(crate) fn rss_bytes() -> u64 {
    shoal_core::engine::resident_bytes().unwrap_or(0)
}

impl RssSampler {
    pub(crate) fn start() -> RssSampler {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let h = std::thread::spawn(move || {
            let mut peak = 0;
            while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss_bytes());
                std::thread::sleep(Duration::from_millis(20));
            }
            peak.max(rss_bytes())
        });
        RssSampler { stop, h }
    }
    pub(crate) fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.h.join().unwrap_or(0)
    }
}

pub(crate) fn tempfile_dir() -> Result<PathBuf, String> {
    let d = std::env::temp_dir().join(format!(
        "shoal-bench-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
    Ok(d)
}

/// Path mode: one process per worker, phases separated by a barrier over pipes.
fn run_path(p: &Params, root: &std::path::Path) -> Result<RunOut, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let params = serde_json::to_string(p).unwrap();
    let mut kids = Vec::new();
    for id in 0..p.workers {
        let mut c = std::process::Command::new(&exe)
            .args([
                "bench",
                &p.workload,
                "--worker",
                &id.to_string(),
                "--params",
                &params,
                "--root",
            ])
            .arg(root)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawning a worker: {e}"))?;
        let out = BufReader::new(c.stdout.take().unwrap());
        let inp = c.stdin.take().unwrap();
        kids.push((c, inp, out.lines()));
    }
    let phases = workloads::phases(&p.workload)?;
    let mut results = Vec::new();
    let expect = |lines: &mut std::io::Lines<BufReader<std::process::ChildStdout>>,
                  what: &str|
     -> Result<String, String> {
        match lines.next() {
            Some(Ok(l)) if l.starts_with(what) => Ok(l),
            Some(Ok(l)) => Err(format!("worker said '{l}', expected {what}")),
            _ => Err("a worker died".into()),
        }
    };
    for ph in &phases {
        for k in kids.iter_mut() {
            expect(&mut k.2, "ready")?;
        }
        let t = Instant::now();
        for k in kids.iter_mut() {
            writeln!(k.1, "go").map_err(|e| e.to_string())?;
        }
        for k in kids.iter_mut() {
            expect(&mut k.2, "done")?;
        }
        results.push(PhaseResult {
            name: ph.to_string(),
            ops: 0,
            secs: t.elapsed().as_secs_f64(),
            lat: vec![],
            store_reads: 0,
        });
    }
    let (mut cpu, mut cs) = (0.0, 0u64);
    for k in kids.iter_mut() {
        let l = expect(&mut k.2, "result ")?;
        let v: Value = serde_json::from_str(&l["result ".len()..]).map_err(|e| e.to_string())?;
        for (i, r) in results.iter_mut().enumerate() {
            r.ops += v["ops"][i].as_u64().unwrap_or(0);
            if let Some(l) = v["lat"][i].as_array() {
                r.lat.extend(l.iter().filter_map(|x| x.as_u64()));
            }
        }
        cpu += v["cpu"].as_f64().unwrap_or(0.0);
        cs += v["cs"].as_u64().unwrap_or(0);
        let _ = k.0.wait();
    }
    let _ = std::fs::remove_dir_all(root.join(&p.top));
    Ok((results, cpu, cs, Value::Null, serde_json::Map::new()))
}

/// `--pin`: run the calling thread (or process) on CPU `id` modulo the CPUs
/// this process may use.
fn pin_to_cpu(id: usize) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data; both calls get a valid pointer and size.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut allowed) != 0 {
            return Err(format!(
                "sched_getaffinity: {}",
                std::io::Error::last_os_error()
            ));
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &allowed))
            .collect();
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus[id % cpus.len()], &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "sched_setaffinity: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

fn worker_main(a: &BenchArgs, id: usize) -> Result<(), String> {
    let p: Params =
        serde_json::from_str(a.params.as_deref().ok_or("--params")?).map_err(|e| e.to_string())?;
    let fs = PathFs {
        root: a.root.clone().ok_or("--root")?,
    };
    let phases = workloads::phases(&p.workload)?;
    if p.pin {
        pin_to_cpu(id)?;
    }
    let mut st = WorkerState::new(p.seed, id);
    let stdin = std::io::stdin();
    let mut line = String::new();
    let (mut ops, mut lats) = (vec![], vec![]);
    let (cpu0, cs0) = rusage();
    for ph in &phases {
        println!("ready");
        line.clear();
        stdin
            .lock()
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        st.lat.clear();
        let n = workloads::run_phase(&fs, &p, id, ph, &mut st)
            .map_err(|e| format!("worker {id} {ph}: {e}"))?;
        ops.push(n);
        lats.push(std::mem::take(&mut st.lat));
        println!("done");
    }
    let (cpu1, cs1) = rusage();
    println!(
        "result {}",
        json!({"ops": ops, "lat": lats, "cpu": cpu1 - cpu0, "cs": cs1 - cs0})
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        a: BenchArgs,
    }

    /// Run `shoal bench ARGS` in engine mode with `workers` and the default
    /// switches; the phases as run (count) and merged.
    fn run_args(args: &[&str], workers: usize) -> (usize, Vec<PhaseResult>) {
        let a = Cmd::parse_from(args).a;
        let p = Params {
            workload: a.workload.clone(),
            workers,
            iters: a.iters,
            files: a.files,
            transactions: a.transactions,
            size: 0,
            shared_dir: true,
            top: "t".into(),
            seed: 1,
            evict_to: 0,
            hits: a.hits,
            hot: a.hot,
            small_dirs: a.small_dirs,
            pin: a.pin,
        };
        let sw = Switches {
            lock_scope: "name".into(),
            dir_index: "indexed".into(),
            name_cache: "primed".into(),
            placement: "near".into(),
            commit: "none".into(),
        };
        let (phases, ..) = run_engine(&p, &sw, &a).unwrap();
        (phases.len(), merge_repeats(phases))
    }

    /// seed001 runs both directory sizes in one engine, alternated, and
    /// reports each phase once with the rounds' operations summed.
    #[test]
    fn seed001_reports_each_size_once() {
        let (n, merged) = run_args(
            &["bench", "seed001", "--files", "3000", "--iters", "1000"],
            1,
        );
        assert_eq!(n as u64, 2 + 2 * 2 * workloads::ROUNDS);
        let got: Vec<(&str, u64)> = merged.iter().map(|r| (r.name.as_str(), r.ops)).collect();
        // Half the lookups ask for missing names: a missing name found, or
        // an existing one not found, fails the run.
        assert_eq!(
            got,
            [
                ("setup", 0),
                ("populate", 3000 + workloads::SMALL_DIR),
                ("lookup 1K", 1000),
                ("lookup", 1000),
                ("create+unlink 1K", 1000),
                ("create+unlink", 1000)
            ]
        );
    }

    /// seed001 with --small-dirs: the small side is that many directories
    /// of 1000 names, all populated, and its lookups of existing names
    /// find every one (a name not found fails the run).
    #[test]
    fn seed001_spreads_the_small_side_over_directories() {
        let (_, merged) = run_args(
            &[
                "bench",
                "seed001",
                "--files",
                "3000",
                "--iters",
                "2000",
                "--small-dirs",
                "3",
                "--hits",
                "1",
            ],
            1,
        );
        let got: Vec<(&str, u64)> = merged.iter().map(|r| (r.name.as_str(), r.ops)).collect();
        assert_eq!(
            got,
            [
                ("setup", 0),
                ("populate", 3000 + 3 * workloads::SMALL_DIR),
                ("lookup 1K", 2000),
                ("lookup", 2000),
                ("create+unlink 1K", 2000),
                ("create+unlink", 2000)
            ]
        );
    }

    /// seed000 alternates worker 0 alone with every worker in one engine:
    /// a solo phase counts worker 0's iterations only, and each pair
    /// yields its speedup.
    #[test]
    fn seed000_alternates_one_and_all_workers() {
        let (n, merged) = run_args(&["bench", "seed000", "--iters", "1000"], 2);
        assert_eq!(n as u64, 1 + 7 * workloads::SEED000_ROUNDS);
        let got: Vec<(&str, u64)> = merged.iter().map(|r| (r.name.as_str(), r.ops)).collect();
        assert_eq!(
            got,
            [
                ("setup", 0),
                ("crunl 1w", 1000),
                ("crunl", 2000),
                ("rndrename 1w", 1000),
                ("rndrename", 2000),
                ("rndrename apart", 2000),
                ("private 1w", 1000),
                ("private", 2000)
            ]
        );
        let names: Vec<String> = paired_ratios(&merged)
            .into_iter()
            .map(|(k, v)| {
                assert!(v > 0.0 && v.is_finite(), "{k} {v}");
                k
            })
            .collect();
        assert_eq!(
            names,
            [
                "crunl speedup",
                "rndrename speedup",
                "rndrename apart speedup",
                "private speedup"
            ]
        );
    }

    /// seed002 runs each worker's postmark instance in the run's engine and
    /// in a big-lock engine, the transactions alternated: each phase counts
    /// both workers' transactions once, and each pair yields its ratio.
    /// (With `--pin`: the workers pin themselves, which must not fail.)
    #[test]
    fn seed002_alternates_fine_and_big_lock_engines() {
        let (n, merged) = run_args(
            &[
                "bench",
                "seed002",
                "--files",
                "200",
                "--transactions",
                "1000",
                "--pin",
            ],
            2,
        );
        assert_eq!(n as u64, 1 + 2 + 2 * workloads::SEED002_ROUNDS + 2);
        let got: Vec<(&str, u64)> = merged
            .iter()
            .take(5)
            .map(|r| (r.name.as_str(), r.ops))
            .collect();
        assert_eq!(
            got,
            [
                ("setup", 0),
                ("create pool", 400),
                ("create pool global", 400),
                ("transactions", 2000),
                ("transactions global", 2000)
            ]
        );
        let names: Vec<String> = paired_ratios(&merged).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            names,
            [
                "create pool fine/global",
                "transactions fine/global",
                "delete pool fine/global"
            ]
        );
        // Each engine's pools are deleted in full: what was created and not
        // deleted by the transactions.
        for sfx in ["", " global"] {
            let ops = |name: &str| {
                merged
                    .iter()
                    .find(|r| r.name == format!("{name}{sfx}"))
                    .unwrap()
                    .ops
            };
            assert!(
                ops("delete pool") > 0 && ops("delete pool") <= 400 + 2000,
                "delete pool{sfx}: {}",
                ops("delete pool")
            );
        }
    }
}
