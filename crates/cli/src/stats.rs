//! `shoal stats`: the daemon's counters as one JSON snapshot (`snapshot`,
//! served on the control socket, `control.rs`); the client polls once a
//! second and prints rates (like `juicefs stats` and seed 002's lockmeter
//! table).

use crate::args::StatsArgs;
use serde_json::{json, Value};
use shoal_core::stats::OPS;
use shoal_core::sync::{lock_counts, LOCK_CLASSES};
use shoal_core::Engine;
use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Per-operation counts and sampled latencies (the operations seen).
fn ops_json(stats: &shoal_core::stats::OpStats) -> Value {
    let mut ops = serde_json::Map::new();
    for op in OPS {
        let s = stats.snapshot(op);
        if s.count > 0 {
            ops.insert(
                op.name().into(),
                json!({
                    "count": s.count, "p50_ns": s.percentile(0.5), "p99_ns": s.percentile(0.99),
                    "hist": s.hist, "sum_ns": s.sum_ns,
                }),
            );
        }
    }
    Value::Object(ops)
}

/// The daemon process's own figures.
fn process_json() -> Value {
    json!({"rss_bytes": crate::metrics::rss_bytes(), "pid": std::process::id()})
}

pub fn snapshot(e: &Engine, requests: Option<&shoal_fuse::Requests>) -> Value {
    let mut fuse = serde_json::Map::new();
    for (name, n) in requests.map(|r| r.snapshot()).unwrap_or_default() {
        if n > 0 {
            fuse.insert(name.into(), json!(n));
        }
    }
    let mut locks = serde_json::Map::new();
    for c in LOCK_CLASSES {
        let l = lock_counts(c);
        locks.insert(
            c.name().into(),
            json!({"acquired": l.acquired, "contended": l.contended, "wait_ns": l.wait_ns}),
        );
    }
    let cs = &e.committer.stats;
    let st = e.store().counters();
    json!({
        // Null, or what made the store fail and what to do (issue 43).
        "failure": failure_json(e),
        "ops": ops_json(&e.stats),
        "process": process_json(),
        "fuse_requests": fuse,
        "fuse_invalidations": requests.map_or(0, |r| r.invalidations.load(Ordering::Relaxed)),
        "commit": {
            "commits": cs.commits.load(Ordering::Relaxed),
            "records_in": cs.records_in.load(Ordering::Relaxed),
            "keys_out": cs.keys_out.load(Ordering::Relaxed),
            "keys_elided": cs.keys_elided.load(Ordering::Relaxed),
            "commit_ns": cs.commit_ns.load(Ordering::Relaxed),
            "keys_hist": cs.keys_hist.iter().map(|b| b.load(Ordering::Relaxed)).collect::<Vec<_>>(),
            "durable_epoch": e.committer.durable_epoch(),
            "read_only": e.committer.is_poisoned(),
        },
        "cache": {
            "bytes": e.cache_usage(),
            "budget": e.budget(),
            "memory_bound": e.cfg.memory_bytes,
            "inodes": e.cached_inodes(),
            "dents": e.cached_dents.get(),
            "fills": e.fills.load(Ordering::Relaxed),
            "evicted_inodes": e.evicted_inodes.load(Ordering::Relaxed),
            "evicted_dents": e.evicted_dents.load(Ordering::Relaxed),
            "demoted_hashes": e.demoted_hashes.load(Ordering::Relaxed),
            "unread_unlinks": e.unread_unlinks.load(Ordering::Relaxed),
            "reclaim_batches": e.reclaim_batches.load(Ordering::Relaxed),
        },
        "store": {"gets": st.gets, "scans": st.scans, "writes": st.writes, "syncs": st.syncs, "keys_written": st.keys_written},
        "locks": locks,
    })
}

/// The store's failure, if it failed: what, the errno changes get, and
/// what to do (`shoal stats`, the metrics' `shoal_store_failed`).
fn failure_json(e: &Engine) -> Value {
    let Some(what) = e.committer.failure() else {
        return Value::Null;
    };
    let errno = match e.cfg.on_error {
        shoal_core::OnError::Shutdown => "EIO (errors=shutdown)",
        shoal_core::OnError::ReadOnly => "EROFS (errors=ro)",
    };
    json!({
        "what": what,
        "changes_get": errno,
        "todo": "unmount (shoal umount); clear the cause; mount again: what was fsync'ed before \
                 the failure replays from the journal; then shoal fsck the store",
    })
}

fn u(v: &Value, p: &[&str]) -> u64 {
    let mut x = v;
    for k in p {
        x = &x[*k];
    }
    x.as_u64().unwrap_or(0)
}

/// `writeln!` into the screen being built (a String cannot fail).
macro_rules! p {
    ($out:ident, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

/// What an etcd mount's daemon counts beside its namespace's counters.
#[derive(Default)]
pub struct SharedExtra {
    /// Object store requests, by result (`metrics::CountedBlobs`).
    pub objects: std::sync::Arc<crate::metrics::ObjectCounts>,
    /// The adapter's kernel invalidations (`ClusterFuse::invalidations`).
    pub invalidations: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// The counters of an etcd mount's namespace.
pub fn shared_snapshot(fs: &shoal_cluster::ns::ClusterFs, x: &SharedExtra) -> Value {
    use std::sync::atomic::Ordering::Relaxed;
    let s = &fs.stats;
    let cached = fs.cached_keys();
    let (held, locks) = (fs.leases_held(), fs.locks_held());
    json!({
        "ops": ops_json(&s.op_stats),
        "process": process_json(),
        "fuse_invalidations": x.invalidations.load(Relaxed),
        "shared": {
        "ops": s.ops.load(Relaxed),
        "commits": s.commits.load(Relaxed),
        "conflicts": s.conflicts.load(Relaxed),
        "unknown": s.unknown.load(Relaxed),
        "unavailable": s.unavailable.load(Relaxed),
        "reads": s.reads.load(Relaxed),
        "guesses": s.guesses.load(Relaxed),
        "data_merges": s.data_merges.load(Relaxed),
        "chunk_claims": s.chunk_claims.load(Relaxed),
        "object_puts": s.blob_puts.load(Relaxed),
        "object_gets": s.blob_gets.load(Relaxed),
        "object_deletes": s.blob_deletes.load(Relaxed),
        "leases_taken": s.leases_taken.load(Relaxed),
        "leases_given": s.leases_given.load(Relaxed),
        "lease_splits": s.lease_splits.load(Relaxed),
        "lease_creates": s.lease_creates.load(Relaxed),
        "lease_batches": s.lease_batches.load(Relaxed),
        "lease_waits": s.lease_waits.load(Relaxed),
        "lease_listed": s.lease_listed.load(Relaxed),
        "lease_amends": s.lease_amends.load(Relaxed),
        "lease_removals": s.lease_removals.load(Relaxed),
        "lock_leases_taken": s.lock_leases_taken.load(Relaxed),
        "lock_leases_given": s.lock_leases_given.load(Relaxed),
        "lock_lease_answers": s.lock_lease_answers.load(Relaxed),
        "lock_lease_waits": s.lock_lease_waits.load(Relaxed),
        "cache_hits": s.cache_hits.load(Relaxed),
        "cache_misses": s.cache_misses.load(Relaxed),
        "cached_keys": cached.0,
        "cached_bytes": cached.1,
        "object_requests": x.objects.json(),
        "leases_held": {"directories": held.0, "ranges": held.1, "creates_queued": held.2},
        "file_locks_held": {"inodes": locks.0, "locks": locks.1, "lock_leases": fs.lock_leases_held()},
        "session": format!("{:x}", fs.session()),
    }})
}

/// `shoal stats` of an etcd mount: per interval, operations, their
/// transactions, conflicts and retries, and object store calls; then the
/// requests served by operation, with their latencies.
fn shared_stats(a: &StatsArgs, sock: &std::path::Path) -> Result<i32, String> {
    if a.json {
        emit(&format!("{}\n", crate::control::request(sock, "stats")?));
        return Ok(0);
    }
    let mut prev = crate::control::request(sock, "stats")?;
    let mut n = 0;
    loop {
        std::thread::sleep(Duration::from_secs_f64(a.interval));
        let cur = crate::control::request(sock, "stats")?;
        let d = |k: &str| u(&cur, &["shared", k]) - u(&prev, &["shared", k]);
        let ops = d("ops");
        let per = |x: u64| if ops == 0 { 0.0 } else { x as f64 / ops as f64 };
        emit(&format!(
            "ops/s {:.0}  commits per op {:.2}  conflicts per op {:.3}  retries (unknown, unavailable) {} {}  reads per op {:.2}  objects put/get/delete {} {} {}  creates from memory {} in {} batches, leases taken/given/split/waited {} {} {} {} (entries read to take them {})  stats and lookups from the cache {} of {}\n",
            ops as f64 / a.interval,
            per(d("commits")),
            per(d("conflicts")),
            d("unknown"),
            d("unavailable"),
            per(d("reads")),
            d("object_puts"),
            d("object_gets"),
            d("object_deletes"),
            d("lease_creates"),
            d("lease_batches"),
            d("leases_taken"),
            d("leases_given"),
            d("lease_splits"),
            d("lease_waits"),
            d("lease_listed"),
            d("cache_hits"),
            d("cache_hits") + d("cache_misses"),
        ));
        // The adapter's per-operation counts and latencies, as on an
        // embedded mount (one line: a pipe reads one line per refresh).
        let row: Vec<String> = cur["ops"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(name, v)| {
                let n = u(v, &["count"]) - u(&prev, &["ops", name, "count"]);
                (n > 0).then(|| {
                    format!(
                        "{name} {:.0}/s p50 {}us p99 {}us",
                        n as f64 / a.interval,
                        u(v, &["p50_ns"]) / 1000,
                        u(v, &["p99_ns"]) / 1000
                    )
                })
            })
            .collect();
        if !row.is_empty() {
            emit(&format!("  by operation: {}\n", row.join(", ")));
        }
        prev = cur;
        n += 1;
        if a.count > 0 && n >= a.count {
            return Ok(0);
        }
    }
}

pub fn cmd_stats(a: &StatsArgs) -> Result<i32, String> {
    let m = crate::mountinfo::shoal_at(&a.mountpoint)?;
    if crate::is_shared(&m.source) {
        let mnt = std::fs::canonicalize(&a.mountpoint).map_err(|e| e.to_string())?;
        return shared_stats(a, &crate::control::shared_socket(&m.source, &mnt));
    }
    let sock = crate::control::socket_of(&crate::mountinfo::store_of(&m.source));
    if a.json {
        emit(&format!("{}\n", crate::control::request(&sock, "stats")?));
        return Ok(0);
    }
    // A terminal gets one screen redrawn in place; a pipe or file gets each
    // refresh as plain text after a blank line, with no escape codes.
    let tty = std::io::stdout().is_terminal();
    let mut prev = crate::control::request(&sock, "stats")?;
    let mut n = 0;
    loop {
        std::thread::sleep(Duration::from_secs_f64(a.interval));
        let cur = crate::control::request(&sock, "stats")?;
        let dt = a.interval;
        let mut out = String::new();
        if tty {
            out.push_str("\x1b[2J\x1b[H");
        } else if n > 0 {
            out.push('\n');
        }
        if !cur["failure"].is_null() {
            let f = &cur["failure"];
            p!(
                out,
                "STORE FAILED: {}\nchanges get {}; to do: {}\n",
                f["what"].as_str().unwrap_or(""),
                f["changes_get"].as_str().unwrap_or(""),
                f["todo"].as_str().unwrap_or("")
            );
        }
        p!(
            out,
            "shoal stats {}  (every {:.1}s)",
            a.mountpoint.display(),
            dt
        );
        p!(
            out,
            "{:<10} {:>10} {:>10} {:>10}",
            "op",
            "ops/s",
            "p50",
            "p99"
        );
        if let Some(ops) = cur["ops"].as_object() {
            for (name, v) in ops {
                let d = u(v, &["count"]) - u(&prev, &["ops", name, "count"]);
                if d > 0 {
                    p!(
                        out,
                        "{:<10} {:>10.0} {:>9}us {:>9}us",
                        name,
                        d as f64 / dt,
                        u(v, &["p50_ns"]) / 1000,
                        u(v, &["p99_ns"]) / 1000
                    );
                }
            }
        }
        if let Some(reqs) = cur["fuse_requests"].as_object() {
            let row: Vec<String> = reqs
                .keys()
                .filter_map(|k| {
                    let d = u(&cur, &["fuse_requests", k]) - u(&prev, &["fuse_requests", k]);
                    (d > 0).then(|| format!("{k} {:.0}", d as f64 / dt))
                })
                .collect();
            if !row.is_empty() {
                p!(out, "\nFUSE requests/s: {}", row.join("  "));
            }
        }
        // Calls that went around the mount (docs/client.md), beside FUSE's.
        if let Some(calls) = cur["client"]["calls"].as_object() {
            let row: Vec<String> = calls
                .keys()
                .filter_map(|k| {
                    let d = u(&cur, &["client", "calls", k]) - u(&prev, &["client", "calls", k]);
                    (d > 0).then(|| format!("{k} {:.0}", d as f64 / dt))
                })
                .collect();
            p!(
                out,
                "client calls/s: {}  (connections: {} open, {} refused)",
                if row.is_empty() {
                    "none".into()
                } else {
                    row.join("  ")
                },
                u(&cur, &["client", "live"]),
                u(&cur, &["client", "refused"])
            );
        }
        let commits = u(&cur, &["commit", "commits"]) - u(&prev, &["commit", "commits"]);
        let recs = u(&cur, &["commit", "records_in"]) - u(&prev, &["commit", "records_in"]);
        let keys = u(&cur, &["commit", "keys_out"]) - u(&prev, &["commit", "keys_out"]);
        let elided = u(&cur, &["commit", "keys_elided"]) - u(&prev, &["commit", "keys_elided"]);
        p!(out, "\ncommits/s {:.0}  records/commit {:.1}  keys/commit {:.1}  elided/commit {:.1}  read-only {}",
            commits as f64 / dt, recs as f64 / commits.max(1) as f64, keys as f64 / commits.max(1) as f64,
            elided as f64 / commits.max(1) as f64, cur["commit"]["read_only"]);
        p!(
            out,
            "cache {} / {} MiB  inodes {}  dents {}  fills/s {:.0}  evicted/s {:.0}",
            u(&cur, &["cache", "bytes"]) >> 20,
            u(&cur, &["cache", "budget"]) >> 20,
            u(&cur, &["cache", "inodes"]),
            u(&cur, &["cache", "dents"]),
            (u(&cur, &["cache", "fills"]) - u(&prev, &["cache", "fills"])) as f64 / dt,
            (u(&cur, &["cache", "evicted_inodes"]) - u(&prev, &["cache", "evicted_inodes"])) as f64
                / dt
        );
        p!(
            out,
            "\n{:<12} {:>12} {:>10} {:>12}",
            "lock class",
            "acquired/s",
            "waits/s",
            "wait us/s"
        );
        if let Some(locks) = cur["locks"].as_object() {
            let mut rows: Vec<_> = locks
                .keys()
                .map(|k| {
                    let acq =
                        u(&cur, &["locks", k, "acquired"]) - u(&prev, &["locks", k, "acquired"]);
                    let w =
                        u(&cur, &["locks", k, "contended"]) - u(&prev, &["locks", k, "contended"]);
                    let ns = u(&cur, &["locks", k, "wait_ns"]) - u(&prev, &["locks", k, "wait_ns"]);
                    (ns, w, acq, k.clone())
                })
                .collect();
            rows.sort_by(|a, b| b.cmp(a));
            for (ns, w, acq, k) in rows {
                p!(
                    out,
                    "{:<12} {:>12.0} {:>10.0} {:>12.0}",
                    k,
                    acq as f64 / dt,
                    w as f64 / dt,
                    ns as f64 / 1000.0 / dt
                );
            }
        }
        emit(&out);
        prev = cur;
        n += 1;
        if a.count > 0 && n >= a.count {
            return Ok(0);
        }
    }
}

/// Write to stdout; a closed pipe (`shoal stats M | head -1`) ends the
/// command quietly with success, as it does for cat and ls.
fn emit(s: &str) {
    let mut o = std::io::stdout().lock();
    if o.write_all(s.as_bytes()).and_then(|_| o.flush()).is_err() {
        std::process::exit(0);
    }
}
