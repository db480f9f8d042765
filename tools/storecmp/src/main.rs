//! storecmp: fjall against RocksDB on filesystem-shaped write batches, the
//! shoal engine's create+unlink rate on each, and crash recovery.
//!
//! usage: storecmp DIR [raw|engine|recover-child|recover] [OPS]
//!
//! raw:     each "create" is one atomic batch of an inode record (~100 B), a
//!          directory entry (~40 B) and the parent's inode (times changed);
//!          each "unlink" deletes the two and rewrites the parent. Modes:
//!          sync each batch; group (256 operations merged into one batch,
//!          synced) as shoal's committer does; buffered (one batch per op,
//!          handed to the OS, never synced). 1 and 2 threads.
//! engine:  shoal's engine (group commit, the default) crunl on each store.
//! recover: a child writes OPS buffered batches and SIGKILLs itself; the
//!          parent times the reopen and counts what came back.

use shoal_core::store::BatchItem;
use shoal_core::{Config, Ctx, Engine, Error, Result, Store, ROOT_INO};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// RocksDB behind shoal's Store seam, configured like the fjall store: WAL
/// on, writes handed to the OS, sync = fsync of the WAL.
struct RocksStore {
    db: rocksdb::DB,
}

fn rerr(e: rocksdb::Error) -> Error {
    Error::Io(e.to_string())
}

impl RocksStore {
    fn open(p: &Path) -> RocksStore {
        let mut o = rocksdb::Options::default();
        o.create_if_missing(true);
        o.set_write_buffer_size(16 << 20);
        o.set_compression_type(rocksdb::DBCompressionType::Lz4);
        let mut bo = rocksdb::BlockBasedOptions::default();
        bo.set_block_cache(&rocksdb::Cache::new_lru_cache(16 << 20));
        o.set_block_based_table_factory(&bo);
        RocksStore { db: rocksdb::DB::open(&o, p).expect("rocksdb open") }
    }
}

impl Store for RocksStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.get(key).map_err(rerr)
    }
    fn scan(&self, lo: &[u8], hi: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = vec![];
        for kv in self.db.iterator(rocksdb::IteratorMode::From(lo, rocksdb::Direction::Forward)) {
            let (k, v) = kv.map_err(rerr)?;
            if &*k >= hi || out.len() >= limit {
                break;
            }
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }
    fn write(&self, batch: &[BatchItem], sync: bool) -> Result<()> {
        let mut b = rocksdb::WriteBatch::default();
        for (k, v) in batch {
            match v {
                Some(v) => b.put(k, v),
                None => b.delete(k),
            }
        }
        let mut wo = rocksdb::WriteOptions::default();
        wo.set_sync(sync);
        self.db.write_opt(b, &wo).map_err(rerr)
    }
    fn sync(&self) -> Result<()> {
        self.db.flush_wal(true).map_err(rerr)
    }
}

fn open(kind: &str, dir: &Path) -> Arc<dyn Store> {
    match kind {
        "fjall" => {
            if dir.join("SHOAL").exists() {
                Arc::new(shoal_store::FjallStore::open(dir).expect("fjall open"))
            } else {
                Arc::new(shoal_store::FjallStore::create(dir, |_| Ok(())).expect("fjall create"))
            }
        }
        _ => Arc::new(RocksStore::open(dir)),
    }
}

fn key(tag: u8, a: u64, b: u64) -> Vec<u8> {
    let mut k = vec![tag];
    k.extend_from_slice(&a.to_be_bytes());
    k.extend_from_slice(&b.to_be_bytes());
    k
}

/// The records of one create (or, with `del`, one unlink) of file `n` by thread `t`.
fn fs_batch(t: u64, n: u64, del: bool, out: &mut Vec<BatchItem>) {
    let parent = key(b'I', 1, 0);
    let ino = key(b'I', (t << 40) | n, 0);
    let ent = key(b'E', 1, n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ t);
    out.push((parent, Some(vec![7u8; 100])));
    if del {
        out.push((ino, None));
        out.push((ent, None));
    } else {
        out.push((ino, Some(vec![1u8; 100])));
        out.push((ent, Some(vec![2u8; 40])));
    }
}

fn raw(kind: &str, base: &Path, mode: &str, threads: u64, ops: u64) -> f64 {
    let dir = base.join(format!("{kind}-{mode}-{threads}"));
    let _ = std::fs::remove_dir_all(&dir);
    let s = open(kind, &dir);
    let t0 = Instant::now();
    std::thread::scope(|sc| {
        for t in 0..threads {
            let s = s.clone();
            sc.spawn(move || {
                let mut b = Vec::new();
                let per = ops / threads;
                let mut i = 0;
                while i < per {
                    b.clear();
                    let group = if mode == "group" { 256 } else { 1 };
                    for _ in 0..group.min(per - i) {
                        // create+unlink as two operations, like crunl
                        fs_batch(t, i, i % 2 == 1, &mut b);
                        i += 1;
                    }
                    s.write(&b, mode != "buffered").unwrap();
                }
            });
        }
    });
    let r = ops as f64 / t0.elapsed().as_secs_f64();
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn engine(kind: &str, base: &Path, threads: usize, iters: u64) -> f64 {
    let dir = base.join(format!("{kind}-engine-{threads}"));
    let _ = std::fs::remove_dir_all(&dir);
    let s = open(kind, &dir);
    Engine::mkfs(&*s, Config::default().ags).unwrap();
    let e = Engine::open(s, Config::default()).unwrap();
    let d = e.mkdir(&Ctx::root(), ROOT_INO, b"d", 0o755).unwrap().ino;
    let t0 = Instant::now();
    std::thread::scope(|sc| {
        for t in 0..threads {
            let e = &e;
            sc.spawn(move || {
                let name = format!("f{t}");
                for _ in 0..iters {
                    e.create(&Ctx::root(), d, name.as_bytes(), 0o644).unwrap();
                    e.unlink(&Ctx::root(), d, name.as_bytes()).unwrap();
                }
            });
        }
    });
    let r = (threads as u64 * iters) as f64 / t0.elapsed().as_secs_f64();
    e.shutdown().unwrap();
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn count(kind: &str, dir: &Path) -> (f64, u64) {
    let t0 = Instant::now();
    let s = open(kind, dir);
    let opened = t0.elapsed().as_secs_f64();
    let n = s.scan(&[b'E'], &[b'F'], usize::MAX).unwrap().len() as u64;
    (opened, n)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let base = PathBuf::from(args.get(1).expect("usage: storecmp DIR [raw|engine|recover] [OPS]"));
    let what = args.get(2).map(|s| s.as_str()).unwrap_or("raw");
    let ops: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    std::fs::create_dir_all(&base).unwrap();
    match what {
        "raw" => {
            println!("{:<8} {:<9} {:>3} {:>12}", "store", "mode", "thr", "ops/s");
            for mode in ["buffered", "group", "sync"] {
                for threads in [1, 2] {
                    for kind in ["fjall", "rocksdb"] {
                        let n = if mode == "sync" { ops / 100 } else { ops };
                        let r = raw(kind, &base, mode, threads, n);
                        println!("{kind:<8} {mode:<9} {threads:>3} {r:>12.0}");
                    }
                }
            }
        }
        "engine" => {
            println!("{:<8} {:>3} {:>12}  (shoal engine crunl, group commit, create+unlink pairs/s)", "store", "thr", "pairs/s");
            for threads in [1, 2] {
                for kind in ["fjall", "rocksdb"] {
                    let r = engine(kind, &base, threads, ops / threads as u64);
                    println!("{kind:<8} {threads:>3} {r:>12.0}");
                }
            }
        }
        "recover-child" => {
            let kind = args[4].as_str();
            let dir = base.join(format!("{kind}-recover"));
            let s = open(kind, &dir);
            let mut b = Vec::new();
            for i in 0..ops {
                b.clear();
                fs_batch(0, i, false, &mut b);
                s.write(&b, false).unwrap();
            }
            // SAFETY: kill(2) on our own pid: die without flushing anything.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        "recover" => {
            println!("{:<8} {:>10} {:>10} {:>10} {:>12}", "store", "written", "recovered", "reopen s", "store MiB");
            for kind in ["fjall", "rocksdb"] {
                let dir = base.join(format!("{kind}-recover"));
                let _ = std::fs::remove_dir_all(&dir);
                let st = std::process::Command::new(&args[0]).args([&args[1], "recover-child", &ops.to_string(), kind]).status().unwrap();
                assert!(!st.success(), "the child should have been killed");
                let (secs, n) = count(kind, &dir);
                let mib = du(&dir) as f64 / (1 << 20) as f64;
                println!("{kind:<8} {ops:>10} {n:>10} {secs:>10.3} {mib:>12.1}");
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
        _ => panic!("unknown command {what}"),
    }
}

fn du(p: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let m = e.metadata().unwrap();
            n += if m.is_dir() { du(&e.path()) } else { m.len() };
        }
    }
    n
}
