//! `-o metrics=ADDR:PORT`: the daemon's counters in Prometheus's text
//! format (version 0.0.4) at `http://ADDR:PORT/metrics`, for an embedded
//! mount and an etcd mount alike. Off by default.
//!
//! One source of truth: a scrape encodes the very JSON snapshot the control
//! socket answers `shoal stats` with (`stats::snapshot`,
//! `stats::shared_snapshot`), taken at the scrape; nothing is counted twice
//! and nothing here runs on the operation path. The exposition format is
//! `prometheus-client`'s (the maintained Rust client of the Prometheus
//! project); HTTP is `tiny_http`'s, one thread, one scrape at a time (a
//! scrape costs one snapshot, microseconds). Every metric, with its meaning,
//! is listed in docs/operations.md, "Metrics": keep the two in step.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use serde_json::Value;
use shoal_cluster::blob::Blobs;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What a scrape reads: the daemon's `shoal stats` snapshot.
pub type Snapshot = Arc<dyn Fn() -> Value + Send + Sync>;

/// The metrics endpoint, bound and not yet serving.
pub struct Listener {
    server: tiny_http::Server,
    addr: String,
}

impl Listener {
    /// Bind `addr` (IP:PORT) before the mount serves, so that a mount whose
    /// address is taken fails at once, saying which, rather than serve
    /// without its metrics.
    pub fn bind(addr: &str) -> Result<Listener, String> {
        let server = tiny_http::Server::http(addr)
            .map_err(|e| format!("option metrics={addr}: cannot listen there: {e}"))?;
        Ok(Listener {
            server,
            addr: addr.to_string(),
        })
    }

    /// Serve `/metrics` from `snap` on a thread of its own.
    pub fn start(self, snap: Snapshot) {
        let mut reg = Registry::default();
        reg.register_collector(Box::new(Scrape(snap)));
        let Listener { server, addr } = self;
        let spawned = std::thread::Builder::new()
            .name("shoal-metrics".into())
            .spawn(move || {
                for req in server.incoming_requests() {
                    let r = answer(req.url(), &reg);
                    let _ = req.respond(r);
                }
            });
        match spawned {
            Ok(_) => tracing::info!("metrics at http://{addr}/metrics"),
            Err(e) => tracing::warn!("no metrics at {addr}: {e}"),
        }
    }
}

/// The answer to a GET of `url`: the metrics at `/metrics`, else 404.
fn answer(url: &str, reg: &Registry) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    if url != "/metrics" && !url.starts_with("/metrics?") {
        return tiny_http::Response::from_string("shoal: metrics are at /metrics\n")
            .with_status_code(404);
    }
    let mut body = String::new();
    if prometheus_client::encoding::prometheus_text::encode(&mut body, reg).is_err() {
        return tiny_http::Response::from_string("encoding failed\n").with_status_code(500);
    }
    let ct = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
    let h =
        tiny_http::Header::from_bytes(&b"Content-Type"[..], ct.as_bytes()).expect("a valid header");
    tiny_http::Response::from_string(body).with_header(h)
}

/// The daemon's resident memory in bytes (`/proc/self/statm`), 0 if unknown.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf takes an integer and returns one.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

/// Object store requests of a shared namespace, by kind and result,
/// counted at the data seam (`Blobs`) so that failures are counted too
/// (`SharedStats` counts the calls that succeeded, at their call sites).
#[derive(Default)]
pub struct ObjectCounts {
    /// put, get, delete, list: [ok, error].
    counts: [[AtomicU64; 2]; 4],
}

pub const OBJECT_OPS: [&str; 4] = ["put", "get", "delete", "list"];

impl ObjectCounts {
    fn note<T>(&self, op: usize, r: &shoal_core::Result<T>) {
        self.counts[op][r.is_err() as usize].fetch_add(1, Ordering::Relaxed);
    }
    /// `{"put": {"ok": N, "error": M}, ...}` for the stats snapshot.
    pub fn json(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (i, op) in OBJECT_OPS.iter().enumerate() {
            m.insert(
                op.to_string(),
                serde_json::json!({
                    "ok": self.counts[i][0].load(Ordering::Relaxed),
                    "error": self.counts[i][1].load(Ordering::Relaxed),
                }),
            );
        }
        Value::Object(m)
    }
}

/// An object store whose requests are counted in `ObjectCounts`.
pub struct CountedBlobs {
    pub inner: Arc<dyn Blobs>,
    pub counts: Arc<ObjectCounts>,
}

impl Blobs for CountedBlobs {
    fn put(&self, name: &str, bytes: &[u8]) -> shoal_core::Result<()> {
        let r = self.inner.put(name, bytes);
        self.counts.note(0, &r);
        r
    }
    fn get(&self, name: &str, off: u64, len: u64) -> shoal_core::Result<Vec<u8>> {
        let r = self.inner.get(name, off, len);
        self.counts.note(1, &r);
        r
    }
    fn delete(&self, name: &str) -> shoal_core::Result<()> {
        let r = self.inner.delete(name);
        self.counts.note(2, &r);
        r
    }
    fn list(&self) -> shoal_core::Result<Vec<(String, u64)>> {
        let r = self.inner.list();
        self.counts.note(3, &r);
        r
    }
    /// Not a request to the object store (a directory's statvfs at most).
    fn space(&self) -> Option<(u64, u64)> {
        self.inner.space()
    }
}

struct Scrape(Snapshot);

impl fmt::Debug for Scrape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Scrape")
    }
}

/// A histogram from buckets counted elsewhere: (upper bound, count in the
/// bucket alone); the encoder makes them cumulative and adds `+Inf`.
struct Hist {
    sum: f64,
    count: u64,
    buckets: Vec<(f64, u64)>,
}

impl EncodeMetric for Hist {
    fn encode(&self, mut e: MetricEncoder) -> fmt::Result {
        e.encode_histogram::<NoLabelSet>(self.sum, self.count, &self.buckets, None)
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

fn at<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(v, |x, k| &x[*k])
}

fn num(v: &Value, path: &[&str]) -> u64 {
    let x = at(v, path);
    x.as_u64()
        .or_else(|| x.as_bool().map(u64::from))
        .unwrap_or(0)
}

/// Writes metric families; `name` without `_total` (the encoder adds it
/// to counters).
struct Out<'a> {
    enc: DescriptorEncoder<'a>,
}

impl Out<'_> {
    fn counter(&mut self, name: &str, help: &str, v: u64) -> fmt::Result {
        let m = self
            .enc
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        ConstCounter::new(v).encode(m)
    }
    fn seconds(&mut self, name: &str, help: &str, ns: u64) -> fmt::Result {
        let m = self
            .enc
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        ConstCounter::new(ns as f64 / 1e9).encode(m)
    }
    fn gauge(&mut self, name: &str, help: &str, v: u64) -> fmt::Result {
        let m = self
            .enc
            .encode_descriptor(name, help, None, MetricType::Gauge)?;
        ConstGauge::new(v as i64).encode(m)
    }
    /// One counter per label value; `scale` 1e-9 makes nanoseconds seconds.
    fn counters(
        &mut self,
        name: &str,
        help: &str,
        rows: &[(Vec<(&str, &str)>, u64)],
        ns: bool,
    ) -> fmt::Result {
        let mut m = self
            .enc
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        for (labels, v) in rows {
            let f = m.encode_family(labels)?;
            if ns {
                ConstCounter::new(*v as f64 / 1e9).encode(f)?;
            } else {
                ConstCounter::new(*v).encode(f)?;
            }
        }
        Ok(())
    }
}

/// Upper bounds (in ns, as powers of two) of the latency buckets shown:
/// 1 us to 17 s in steps of 4x. `OpStats` keeps finer ones (2x, from 1 ns),
/// which `shoal stats` reads; this many is what a dashboard needs.
const LATENCY_BOUNDS: std::ops::RangeInclusive<u32> = 10..=34;

/// A latency histogram in seconds from `OpStats`' buckets (bucket b:
/// [2^(b-1), 2^b) ns).
fn latency(hist: &[u64], sum_ns: u64) -> Hist {
    let mut buckets = Vec::new();
    let mut b = 0usize;
    for bound in LATENCY_BOUNDS.step_by(2) {
        let mut n = 0;
        while b < hist.len() && b <= bound as usize {
            n += hist[b];
            b += 1;
        }
        buckets.push(((1u64 << bound) as f64 / 1e9, n));
    }
    Hist {
        sum: sum_ns as f64 / 1e9,
        count: hist.iter().sum(),
        buckets,
    }
}

impl Collector for Scrape {
    fn encode(&self, enc: DescriptorEncoder) -> fmt::Result {
        let v = (self.0)();
        let mut o = Out { enc };
        {
            let kind = if v.get("shared").is_some() {
                "shared"
            } else {
                "embedded"
            };
            let labels = [("version", env!("CARGO_PKG_VERSION")), ("kind", kind)];
            let mut m = o.enc.encode_descriptor(
                "shoal_build_info",
                "Always 1: the daemon's shoal version and the kind of mount",
                None,
                MetricType::Gauge,
            )?;
            ConstGauge::new(1i64).encode(m.encode_family(&labels)?)?;
        }
        o.gauge(
            "shoal_process_resident_memory_bytes",
            "The daemon's resident memory (RSS)",
            num(&v, &["process", "rss_bytes"]),
        )?;
        // Per operation: every one the engine (or the etcd mount's adapter)
        // counts, zero included, so that a rate is defined from the start.
        let ops = shoal_core::stats::OPS;
        let rows: Vec<_> = ops
            .iter()
            .map(|op| {
                let n = num(&v, &["ops", op.name(), "count"]);
                (vec![("op", op.name())], n)
            })
            .collect();
        o.counters(
            "shoal_ops",
            "Filesystem operations served, by operation",
            &rows,
            false,
        )?;
        {
            let mut m = o.enc.encode_descriptor(
                "shoal_op_latency_seconds",
                "Latency of operations, one in 8 timed (count: the timed ones)",
                None,
                MetricType::Histogram,
            )?;
            for op in ops {
                let s = at(&v, &["ops", op.name()]);
                let hist: Vec<u64> = s["hist"]
                    .as_array()
                    .map(|h| h.iter().map(|x| x.as_u64().unwrap_or(0)).collect())
                    .unwrap_or_default();
                latency(&hist, num(s, &["sum_ns"]))
                    .encode(m.encode_family(&[("op", op.name())])?)?;
            }
        }
        o.counter(
            "shoal_fuse_invalidations",
            "Entry and attribute invalidations the daemon sent the kernel",
            num(&v, &["fuse_invalidations"]),
        )?;
        if v.get("shared").is_some() {
            shared(&mut o, &v)
        } else {
            embedded(&mut o, &v)
        }
    }
}

/// An embedded mount's: FUSE requests, commits, cache, store, lock classes.
fn embedded(o: &mut Out, v: &Value) -> fmt::Result {
    let rows: Vec<_> = shoal_fuse::REQUEST_NAMES
        .iter()
        .map(|r| (vec![("request", *r)], num(v, &["fuse_requests", r])))
        .collect();
    o.counters(
        "shoal_fuse_requests",
        "FUSE requests received, by type (forget: inodes forgotten)",
        &rows,
        false,
    )?;
    let c = |k: &str| num(v, &["commit", k]);
    o.counter(
        "shoal_commits",
        "Group commits written to the store",
        c("commits"),
    )?;
    o.counter(
        "shoal_commit_records",
        "Records (inode and entry changes) queued into commits",
        c("records_in"),
    )?;
    o.counter(
        "shoal_commit_keys",
        "Keys written by commits",
        c("keys_out"),
    )?;
    o.counter(
        "shoal_commit_keys_elided",
        "Keys born and deleted within one commit interval, never written",
        c("keys_elided"),
    )?;
    o.seconds(
        "shoal_commit_seconds",
        "Time spent committing (merge, write, sync)",
        c("commit_ns"),
    )?;
    {
        let hist: Vec<u64> = v["commit"]["keys_hist"]
            .as_array()
            .map(|h| h.iter().map(|x| x.as_u64().unwrap_or(0)).collect())
            .unwrap_or_default();
        let buckets = hist
            .iter()
            .enumerate()
            .take(21)
            .map(|(b, n)| (((1u64 << b) - 1) as f64, *n))
            .collect();
        let m = o.enc.encode_descriptor(
            "shoal_commit_size_keys",
            "Commits by the keys each wrote",
            None,
            MetricType::Histogram,
        )?;
        Hist {
            sum: c("keys_out") as f64,
            count: hist.iter().sum(),
            buckets,
        }
        .encode(m)?;
    }
    o.gauge(
        "shoal_durable_epoch",
        "The last commit epoch in the store",
        c("durable_epoch"),
    )?;
    o.gauge(
        "shoal_read_only",
        "1 once a failed commit made the mount refuse writes",
        c("read_only"),
    )?;
    o.gauge(
        "shoal_store_failed",
        "1 once the store failed (a write, sync, flush or compaction error): the mount is shut down; shoal stats and the daemon log say what failed",
        u64::from(!at(v, &["failure"]).is_null()),
    )?;
    let k = |key: &str| num(v, &["cache", key]);
    o.gauge("shoal_cache_bytes", "Bytes the cache holds", k("bytes"))?;
    o.gauge(
        "shoal_cache_budget_bytes",
        "The cache's budget (cache_mb, lowered to stay under memory_mb)",
        k("budget"),
    )?;
    o.gauge(
        "shoal_memory_bound_bytes",
        "memory_mb: the bound on the daemon's memory (0: none)",
        k("memory_bound"),
    )?;
    o.gauge("shoal_cache_inodes", "Inodes in the cache", k("inodes"))?;
    o.gauge(
        "shoal_cache_dentries",
        "Directory entries in the cache",
        k("dents"),
    )?;
    o.counter(
        "shoal_cache_fills",
        "Cache misses filled from the store",
        k("fills"),
    )?;
    o.counter(
        "shoal_cache_evicted_inodes",
        "Inodes evicted from the cache",
        k("evicted_inodes"),
    )?;
    o.counter(
        "shoal_cache_evicted_dentries",
        "Directory entries evicted from the cache",
        k("evicted_dents"),
    )?;
    o.counter(
        "shoal_cache_demoted_hashes",
        "Cached names demoted to their hashes to save memory",
        k("demoted_hashes"),
    )?;
    o.counter(
        "shoal_unread_unlinks",
        "Unlinks that did not read the inode (sole-entry flag)",
        k("unread_unlinks"),
    )?;
    o.counter(
        "shoal_reclaim_batches",
        "Batches of cache reclaim run",
        k("reclaim_batches"),
    )?;
    let s = |key: &str| num(v, &["store", key]);
    o.counter("shoal_store_gets", "Point reads of the store", s("gets"))?;
    o.counter("shoal_store_scans", "Range scans of the store", s("scans"))?;
    o.counter(
        "shoal_store_writes",
        "Batches written to the store",
        s("writes"),
    )?;
    o.counter(
        "shoal_store_syncs",
        "fsyncs of the store's journal",
        s("syncs"),
    )?;
    o.counter(
        "shoal_store_keys_written",
        "Keys written to the store",
        s("keys_written"),
    )?;
    let classes: Vec<String> = v["locks"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let per = |k: &str| -> Vec<(Vec<(&str, &str)>, u64)> {
        classes
            .iter()
            .map(|c| (vec![("class", c.as_str())], num(v, &["locks", c, k])))
            .collect()
    };
    o.counters(
        "shoal_lock_acquired",
        "Engine locks taken, by lock class",
        &per("acquired"),
        false,
    )?;
    o.counters(
        "shoal_lock_contended",
        "Engine locks that had to wait, by lock class",
        &per("contended"),
        false,
    )?;
    o.counters(
        "shoal_lock_wait_seconds",
        "Time spent waiting for engine locks, by lock class",
        &per("wait_ns"),
        true,
    )
}

/// An etcd (or TiKV) mount's: transactions, conflicts, retries, directory
/// leases, record cache, object store requests.
fn shared(o: &mut Out, v: &Value) -> fmt::Result {
    let s = |k: &str| num(v, &["shared", k]);
    o.counter(
        "shoal_shared_ops",
        "Operations run as transactions on the shared store",
        s("ops"),
    )?;
    o.counter(
        "shoal_shared_commits",
        "Transactions committed on the shared store",
        s("commits"),
    )?;
    o.counter(
        "shoal_shared_conflicts",
        "Transactions that failed a condition and ran again",
        s("conflicts"),
    )?;
    o.counters(
        "shoal_shared_retries",
        "Store calls retried: a commit whose result was unknown, an unavailable store waited out",
        &[
            (vec![("reason", "unknown")], s("unknown")),
            (vec![("reason", "unavailable")], s("unavailable")),
        ],
        false,
    )?;
    o.counter(
        "shoal_shared_reads",
        "Reads of the shared store within transactions",
        s("reads"),
    )?;
    o.counter(
        "shoal_shared_guessed_reads",
        "Records commits rested on from the record cache instead of a read (checked by the commit)",
        s("guesses"),
    )?;
    o.counter(
        "shoal_shared_data_merges",
        "Flushes whose chunks another mount had changed since, merged byte by byte",
        s("data_merges"),
    )?;
    o.counter(
        "shoal_shared_inode_chunk_claims",
        "Chunks of inode numbers claimed",
        s("chunk_claims"),
    )?;
    o.counter(
        "shoal_dirlease_taken",
        "Directory leases (name ranges) taken",
        s("leases_taken"),
    )?;
    o.counter(
        "shoal_dirlease_given",
        "Directory leases given back",
        s("leases_given"),
    )?;
    o.counter(
        "shoal_dirlease_splits",
        "Leased name ranges split with another mount",
        s("lease_splits"),
    )?;
    o.counter(
        "shoal_dirlease_creates",
        "Creates answered from memory under a lease",
        s("lease_creates"),
    )?;
    o.counter(
        "shoal_dirlease_batches",
        "Batch commits of creates made under leases",
        s("lease_batches"),
    )?;
    o.counter(
        "shoal_dirlease_waits",
        "Commits that met another mount's lease and asked for it",
        s("lease_waits"),
    )?;
    o.counter(
        "shoal_dirlease_listed_entries",
        "Entries read to take leases (directory listings)",
        s("lease_listed"),
    )?;
    o.counter(
        "shoal_dirlease_amends",
        "Changes made in memory to creates still queued",
        s("lease_amends"),
    )?;
    o.counter(
        "shoal_dirlease_removals",
        "Unlinks and rmdirs answered from memory under a directory lease",
        s("lease_removals"),
    )?;
    o.counter(
        "shoal_locklease_answers",
        "File lock requests answered from memory under a lock lease",
        s("lock_lease_answers"),
    )?;
    o.counter(
        "shoal_locklease_waits",
        "File lock requests that met another mount's lock lease and asked for it",
        s("lock_lease_waits"),
    )?;
    o.counter(
        "shoal_record_cache_hits",
        "Stats and lookups answered from the record cache",
        s("cache_hits"),
    )?;
    o.counter(
        "shoal_record_cache_misses",
        "Stats and lookups that read the store",
        s("cache_misses"),
    )?;
    o.gauge(
        "shoal_record_cache_keys",
        "Records in the record cache",
        s("cached_keys"),
    )?;
    o.gauge(
        "shoal_record_cache_bytes",
        "Bytes in the record cache",
        s("cached_bytes"),
    )?;
    let n = |a: &str, b: &str| num(v, &["shared", a, b]);
    o.gauge(
        "shoal_dirlease_held_directories",
        "Directories this mount holds a lease in now",
        n("leases_held", "directories"),
    )?;
    o.gauge(
        "shoal_dirlease_held_ranges",
        "Name ranges this mount holds leases on now",
        n("leases_held", "ranges"),
    )?;
    o.gauge(
        "shoal_dirlease_creates_queued",
        "Creates answered from memory and not yet committed (a kill -9 loses them)",
        n("leases_held", "creates_queued"),
    )?;
    o.gauge(
        "shoal_file_locks_held",
        "fcntl and flock locks this mount holds now",
        n("file_locks_held", "locks"),
    )?;
    o.gauge(
        "shoal_file_locks_held_inodes",
        "Files this mount holds locks on now",
        n("file_locks_held", "inodes"),
    )?;
    let mut rows = vec![];
    for op in OBJECT_OPS {
        for result in ["ok", "error"] {
            rows.push((
                vec![("op", op), ("result", result)],
                num(v, &["shared", "object_requests", op, result]),
            ));
        }
    }
    o.counters(
        "shoal_object_requests",
        "Object store requests for file data, by kind and result",
        &rows,
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests that fail are counted as errors, by kind, at the seam.
    #[test]
    fn object_requests_are_counted_with_their_errors() {
        let counts = Arc::new(ObjectCounts::default());
        let b = CountedBlobs {
            inner: Arc::new(shoal_cluster::blob::MemBlobs::default()),
            counts: counts.clone(),
        };
        b.put("a", b"x").unwrap();
        b.get("a", 0, 1).unwrap();
        assert!(b.get("missing", 0, 1).is_err());
        b.delete("a").unwrap();
        let j = counts.json();
        assert_eq!(j["put"], serde_json::json!({"ok": 1, "error": 0}));
        assert_eq!(j["get"], serde_json::json!({"ok": 1, "error": 1}));
        assert_eq!(j["delete"], serde_json::json!({"ok": 1, "error": 0}));
    }

    /// The encoder's text for a snapshot: the buckets cumulate, counters
    /// end in `_total`, and an operation never seen shows as zero.
    #[test]
    fn a_snapshot_encodes_as_prometheus_text() {
        let mut hist = vec![0u64; 40];
        hist[11] = 3; // [1024, 2048) ns
        hist[20] = 1; // ~1 ms
        let v = serde_json::json!({
            "ops": {"create": {"count": 24, "hist": hist, "sum_ns": 5_000_000}},
            "commit": {"commits": 2, "keys_out": 10, "keys_hist": [0, 0, 1, 0, 1]},
            "process": {"rss_bytes": 4096},
            "locks": {"name": {"acquired": 5, "contended": 1, "wait_ns": 2000}},
        });
        let mut reg = Registry::default();
        reg.register_collector(Box::new(Scrape(Arc::new(move || v.clone()))));
        let mut s = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut s, &reg).unwrap();
        for want in [
            "shoal_ops_total{op=\"create\"} 24\n",
            "shoal_ops_total{op=\"rename\"} 0\n",
            "shoal_op_latency_seconds_bucket{op=\"create\",le=\"1.024e-06\"} 0\n",
            "shoal_op_latency_seconds_bucket{op=\"create\",le=\"4.096e-06\"} 3\n",
            "shoal_op_latency_seconds_bucket{op=\"create\",le=\"+Inf\"} 4\n",
            "shoal_op_latency_seconds_count{op=\"create\"} 4\n",
            "shoal_commit_size_keys_bucket{le=\"3\"} 1\n",
            "shoal_commit_size_keys_bucket{le=\"15\"} 2\n",
            "shoal_commit_size_keys_sum 10",
            "shoal_commits_total 2\n",
            "shoal_lock_wait_seconds_total{class=\"name\"} 0.000002\n",
            "shoal_lock_acquired_total{class=\"name\"} 5\n",
            "shoal_process_resident_memory_bytes 4096\n",
            "shoal_build_info{version=\"0.1.0\",kind=\"embedded\"} 1\n",
        ] {
            assert!(s.contains(want), "{want:?} not in:\n{s}");
        }
    }
}
