//! The storage seam. The engine sees an ordered key-value store with point
//! reads, range scans and atomic batch writes: the shape of TiKV, FoundationDB
//! or RocksDB alike, so a distributed backend can sit beside the embedded one.
//! Nothing here assumes one process: correctness never depends on the store
//! and the cache living in one address space beyond the engine's own cache,
//! whose dirty objects are exactly the uncommitted batches.

use crate::data::{DataStore, MemData};
use crate::error::{Error, Result};
use crate::sync::Arc;
use crate::sync::PlainMutex as Mutex;
use std::collections::BTreeMap;

/// One key's new value (None = delete) in a batch.
pub type BatchItem = (Vec<u8>, Option<Vec<u8>>);

pub trait Store: Send + Sync + 'static {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Keys in `[lo, hi)`, ascending, at most `limit` of them.
    fn scan(&self, lo: &[u8], hi: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Apply a batch atomically: after a crash either all of it or none of it
    /// is visible. With `sync`, durable when this returns.
    fn write(&self, batch: &[BatchItem], sync: bool) -> Result<()>;
    /// Make every earlier write durable.
    fn sync(&self) -> Result<()>;
    /// Where the bytes of files past `INLINE_MAX` live, beside these
    /// records (`crate::data`).
    fn data(&self) -> Arc<dyn DataStore>;
    /// A store that keeps nothing: the engine then never evicts and never reads.
    fn is_null(&self) -> bool {
        false
    }
    /// (total bytes, free bytes) for statfs.
    fn space(&self) -> (u64, u64) {
        (1 << 40, 1 << 40)
    }
    /// Why the store failed on its own, outside a call of the engine's (a
    /// background flush or compaction of an LSM): after that it takes no
    /// more writes. The committer checks it at every tick and shuts the
    /// filesystem down with it (`Committer::fail`). None: not failed.
    fn failure(&self) -> Option<String> {
        None
    }
    /// Counters for `shoal stats` and benchmarks: (gets, scans, writes, syncs).
    fn counters(&self) -> StoreCounters {
        StoreCounters::default()
    }
    /// A read-only view of the records as they are now: later writes do not
    /// show in it, and its own writes fail (`shoal dump` of a mounted store
    /// reads one instant through it). File data (`data()`) is the live one.
    fn snapshot(&self) -> Result<Arc<dyn Store>> {
        Err(Error::NotSupported)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreCounters {
    pub gets: u64,
    pub scans: u64,
    pub writes: u64,
    pub syncs: u64,
    pub keys_written: u64,
}

/// Memory only: nothing is persisted, nothing is read back.
pub struct NullStore;

impl Store for NullStore {
    fn get(&self, _key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }
    fn scan(&self, _lo: &[u8], _hi: &[u8], _limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(vec![])
    }
    fn write(&self, _batch: &[BatchItem], _sync: bool) -> Result<()> {
        Ok(())
    }
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    fn is_null(&self) -> bool {
        true
    }
    fn data(&self) -> Arc<dyn DataStore> {
        Arc::new(MemData::default())
    }
}

/// An in-memory ordered store that keeps what was synced apart from what was
/// only written, so tests can cut the power: [`MemStore::power_cut`] keeps the
/// synced state plus a chosen prefix of the unsynced batches (each batch whole,
/// which is the atomicity every backend promises). Faults can be injected on
/// the next write or sync. Modelled on redb's crash-test backend and SQLite's
/// test6.c.
#[derive(Default)]
pub struct MemStore {
    inner: Mutex<MemInner>,
    /// File data, cut with the records by `power_cut`.
    data: Arc<MemData>,
}

#[derive(Default)]
struct MemInner {
    live: BTreeMap<Vec<u8>, Vec<u8>>,
    durable: BTreeMap<Vec<u8>, Vec<u8>>,
    unsynced: Vec<Vec<BatchItem>>,
    fail_writes: bool,
    counters: StoreCounters,
}

impl MemStore {
    pub fn new() -> Arc<MemStore> {
        Arc::new(MemStore::default())
    }
    /// Simulate a power cut: everything written since the last sync is dropped,
    /// except the first `keep` unsynced batches.
    pub fn power_cut(&self, keep: usize) {
        self.data.power_cut();
        let mut g = self.inner.lock();
        let mut state = g.durable.clone();
        let batches: Vec<_> = g.unsynced.drain(..).collect();
        for b in batches.iter().take(keep) {
            apply(&mut state, b);
        }
        g.live = state.clone();
        g.durable = state;
    }
    pub fn unsynced_batches(&self) -> usize {
        self.inner.lock().unsynced.len()
    }
    /// Make every later write and sync fail with an I/O error (a dying disk).
    pub fn fail_writes(&self, on: bool) {
        self.inner.lock().fail_writes = on;
    }
    /// Overwrite a stored value (for corruption tests).
    pub fn poke(&self, key: &[u8], value: Option<Vec<u8>>) {
        let mut g = self.inner.lock();
        match value {
            Some(v) => {
                g.live.insert(key.to_vec(), v.clone());
                g.durable.insert(key.to_vec(), v);
            }
            None => {
                g.live.remove(key);
                g.durable.remove(key);
            }
        }
    }
    pub fn dump(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.inner
            .lock()
            .live
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

fn apply(m: &mut BTreeMap<Vec<u8>, Vec<u8>>, b: &[BatchItem]) {
    for (k, v) in b {
        match v {
            Some(v) => {
                m.insert(k.clone(), v.clone());
            }
            None => {
                m.remove(k);
            }
        }
    }
}

impl Store for MemStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut g = self.inner.lock();
        g.counters.gets += 1;
        Ok(g.live.get(key).cloned())
    }
    fn scan(&self, lo: &[u8], hi: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut g = self.inner.lock();
        g.counters.scans += 1;
        Ok(g.live
            .range(lo.to_vec()..hi.to_vec())
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
    fn write(&self, batch: &[BatchItem], sync: bool) -> Result<()> {
        let mut g = self.inner.lock();
        if g.fail_writes {
            return Err(Error::Io("injected write failure".into()));
        }
        g.counters.writes += 1;
        g.counters.keys_written += batch.len() as u64;
        apply(&mut g.live, batch);
        if sync {
            g.counters.syncs += 1;
            g.durable = g.live.clone();
            g.unsynced.clear();
        } else {
            g.unsynced.push(batch.to_vec());
        }
        Ok(())
    }
    fn sync(&self) -> Result<()> {
        let mut g = self.inner.lock();
        if g.fail_writes {
            return Err(Error::Io("injected sync failure".into()));
        }
        g.counters.syncs += 1;
        g.durable = g.live.clone();
        g.unsynced.clear();
        Ok(())
    }
    fn counters(&self) -> StoreCounters {
        self.inner.lock().counters
    }
    fn data(&self) -> Arc<dyn DataStore> {
        self.data.clone()
    }
}
