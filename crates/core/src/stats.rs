//! Per-operation counters and sampled latency histograms, striped by thread so
//! that counting costs one uncontended relaxed add. Read by `shoal stats` and
//! the benchmarks; nothing reads them on the operation path.

use crate::sync::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Op {
    Lookup = 0,
    Getattr,
    Setattr,
    Create,
    Mkdir,
    Unlink,
    Rmdir,
    Rename,
    Link,
    Symlink,
    Readlink,
    Open,
    Release,
    Read,
    Write,
    Readdir,
    Fsync,
    Xattr,
    Statfs,
    Forget,
}

pub const OPS: [Op; 20] = [
    Op::Lookup,
    Op::Getattr,
    Op::Setattr,
    Op::Create,
    Op::Mkdir,
    Op::Unlink,
    Op::Rmdir,
    Op::Rename,
    Op::Link,
    Op::Symlink,
    Op::Readlink,
    Op::Open,
    Op::Release,
    Op::Read,
    Op::Write,
    Op::Readdir,
    Op::Fsync,
    Op::Xattr,
    Op::Statfs,
    Op::Forget,
];

impl Op {
    pub fn name(self) -> &'static str {
        [
            "lookup", "getattr", "setattr", "create", "mkdir", "unlink", "rmdir", "rename", "link",
            "symlink", "readlink", "open", "release", "read", "write", "readdir", "fsync", "xattr",
            "statfs", "forget",
        ][self as usize]
    }
}

const BUCKETS: usize = 40;
const STRIPES: usize = 8;
/// One op in this many is timed (Instant::now costs ~20 ns; counting is free).
pub const SAMPLE: u64 = 8;

struct Stripe {
    count: [AtomicU64; OPS.len()],
    hist: [[AtomicU64; BUCKETS]; OPS.len()],
    /// Nanoseconds of the timed operations, for a histogram's sum
    /// (Prometheus's `_sum`: mean latency = sum / timed count).
    sum_ns: [AtomicU64; OPS.len()],
}

pub struct OpStats {
    stripes: Vec<CachePadded<Stripe>>,
}

impl Default for OpStats {
    fn default() -> Self {
        OpStats {
            stripes: (0..STRIPES)
                .map(|_| {
                    CachePadded::new(Stripe {
                        count: std::array::from_fn(|_| AtomicU64::new(0)),
                        hist: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
                        sum_ns: std::array::from_fn(|_| AtomicU64::new(0)),
                    })
                })
                .collect(),
        }
    }
}

thread_local! {
    /// One count per operation kind: a thread that alternates kinds (a
    /// lookup before each create) would otherwise sample one kind never,
    /// when its period divides `SAMPLE` (metrics.sh saw no create timed on
    /// an etcd mount after 120 creates).
    static TICK: [std::cell::Cell<u64>; OPS.len()] = const { [const { std::cell::Cell::new(0) }; OPS.len()] };
}

/// A started operation; records itself on drop.
pub struct Timer<'a> {
    stats: &'a OpStats,
    op: Op,
    t0: Option<std::time::Instant>,
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        let s = &self.stats.stripes[crate::sync::thread_slot() % STRIPES];
        s.count[self.op as usize].fetch_add(1, Ordering::Relaxed);
        if let Some(t0) = self.t0 {
            let ns = t0.elapsed().as_nanos() as u64;
            let b = (64 - ns.leading_zeros() as usize).min(BUCKETS - 1);
            s.hist[self.op as usize][b].fetch_add(1, Ordering::Relaxed);
            s.sum_ns[self.op as usize].fetch_add(ns, Ordering::Relaxed);
        }
    }
}

/// Snapshot of one op's counters.
#[derive(Clone, Debug, Default)]
pub struct OpSnapshot {
    pub count: u64,
    /// Sampled latency histogram: bucket b counts latencies in [2^(b-1), 2^b) ns.
    pub hist: Vec<u64>,
    /// Nanoseconds of the timed operations together.
    pub sum_ns: u64,
}

impl OpSnapshot {
    /// Latency percentile in ns (upper bound of the bucket), from the samples.
    pub fn percentile(&self, p: f64) -> u64 {
        let total: u64 = self.hist.iter().sum();
        if total == 0 {
            return 0;
        }
        let want = (total as f64 * p).ceil() as u64;
        let mut acc = 0;
        for (b, c) in self.hist.iter().enumerate() {
            acc += c;
            if acc >= want {
                return 1u64 << b;
            }
        }
        1u64 << (BUCKETS - 1)
    }
}

impl std::fmt::Debug for OpStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OpStats")
    }
}

impl OpStats {
    #[inline]
    pub fn start(&self, op: Op) -> Timer<'_> {
        let t = TICK.with(|c| {
            let c = &c[op as usize];
            let v = c.get().wrapping_add(1);
            c.set(v);
            v
        });
        Timer {
            stats: self,
            op,
            t0: if t.is_multiple_of(SAMPLE) {
                Some(std::time::Instant::now())
            } else {
                None
            },
        }
    }
    pub fn snapshot(&self, op: Op) -> OpSnapshot {
        let mut s = OpSnapshot {
            count: 0,
            hist: vec![0; BUCKETS],
            sum_ns: 0,
        };
        for st in &self.stripes {
            s.count += st.count[op as usize].load(Ordering::Relaxed);
            s.sum_ns += st.sum_ns[op as usize].load(Ordering::Relaxed);
            for (b, h) in st.hist[op as usize].iter().enumerate() {
                s.hist[b] += h.load(Ordering::Relaxed);
            }
        }
        s
    }
}
