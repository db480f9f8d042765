//! A model of TiKV's optimistic transactions, in memory: multi-version
//! keys, reads at the transaction's start timestamp, and a commit that
//! fails if any key it writes or locks has a version committed after the
//! start timestamp (Percolator's write-write check, first committer wins;
//! a lock-only key leaves a `Lock` version, as TiKV's `WriteType::Lock`
//! record does, which later checks count). Timestamps come from a fake
//! clock, physical milliseconds and a logical counter as PD's oracle gives
//! them, with gaps (other clients take timestamps too).
//!
//! Not modelled: locks left by a crashed writer and their resolution (a
//! reader waits out the lock's TTL on a real cluster), region errors and
//! retries inside the client, garbage collection of old versions.
//!
//! Faults: `fail_next` makes the next commit end as a real one could when
//! its answer is lost (`Undetermined`, applied or not) or when the cluster
//! cannot be reached (`Unavailable`).

use crate::txn::{Ts, Txn, TxnError, TxnKv, TxnResult, PHYSICAL_SHIFT};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Write {
    Put(Vec<u8>),
    Delete,
    Lock,
}

/// A fault for the next commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The commit's answer is lost; it was applied or not.
    Undetermined { applied: bool },
    /// The cluster cannot be reached: nothing applied.
    Unavailable,
}

#[derive(Default)]
struct State {
    /// Key -> (commit timestamp, write), oldest first.
    versions: BTreeMap<Vec<u8>, Vec<(Ts, Write)>>,
    /// The fake clock, in milliseconds.
    clock_ms: u64,
    last_ts: Ts,
    faults: Vec<Fault>,
    commits: u64,
    conflicts: u64,
}

impl State {
    fn next_ts(&mut self) -> Ts {
        let phys = self.clock_ms << PHYSICAL_SHIFT;
        // Later, not next: other clients take timestamps in between.
        let gap = 1 + self.last_ts.wrapping_mul(7919) % 5;
        self.last_ts = (self.last_ts + gap).max(phys);
        self.last_ts
    }

    fn read(&self, key: &[u8], at: Ts) -> Option<Vec<u8>> {
        let vs = self.versions.get(key)?;
        vs.iter()
            .rev()
            .filter(|(c, w)| *c < at && *w != Write::Lock)
            .map(|(_, w)| match w {
                Write::Put(v) => Some(v.clone()),
                _ => None,
            })
            .next()
            .flatten()
    }
}

/// TiKV in memory (see the module's text).
pub struct MemTikv {
    st: Arc<Mutex<State>>,
    delay: Mutex<Duration>,
}

impl MemTikv {
    pub fn new() -> Arc<MemTikv> {
        Arc::new(MemTikv {
            st: Arc::new(Mutex::new(State {
                clock_ms: 1_700_000_000_000,
                ..State::default()
            })),
            delay: Mutex::new(Duration::ZERO),
        })
    }

    /// Move the fake clock on (lease deadlines are in the oracle's time).
    pub fn advance(&self, d: Duration) {
        self.st.lock().clock_ms += d.as_millis() as u64;
    }

    /// Every read and commit waits `d` first, so that several threads'
    /// transactions interleave as they would on a cluster.
    pub fn set_delay(&self, d: Duration) {
        *self.delay.lock() = d;
    }

    pub fn fail_next(&self, f: Fault) {
        self.st.lock().faults.push(f);
    }

    /// (commits, write conflicts) so far.
    pub fn counts(&self) -> (u64, u64) {
        let s = self.st.lock();
        (s.commits, s.conflicts)
    }

    fn wait(&self) {
        let d = *self.delay.lock();
        if !d.is_zero() {
            std::thread::sleep(d);
        }
    }
}

impl TxnKv for Arc<MemTikv> {
    type Txn = MemTxn;

    fn begin(&self) -> TxnResult<MemTxn> {
        self.wait();
        let start = self.st.lock().next_ts();
        Ok(MemTxn {
            kv: self.clone(),
            start,
            writes: BTreeMap::new(),
        })
    }

    fn timestamp(&self) -> TxnResult<Ts> {
        Ok(self.st.lock().next_ts())
    }
}

/// A transaction on `MemTikv`.
pub struct MemTxn {
    kv: Arc<MemTikv>,
    start: Ts,
    writes: BTreeMap<Vec<u8>, Write>,
}

impl Txn for MemTxn {
    fn start_ts(&self) -> Ts {
        self.start
    }

    fn batch_get(&mut self, keys: &[Vec<u8>]) -> TxnResult<Vec<Option<Vec<u8>>>> {
        self.kv.wait();
        let s = self.kv.st.lock();
        Ok(keys.iter().map(|k| s.read(k, self.start)).collect())
    }

    fn scan(&mut self, lo: &[u8], hi: &[u8], limit: u32) -> TxnResult<Vec<(Vec<u8>, Vec<u8>)>> {
        self.kv.wait();
        let s = self.kv.st.lock();
        Ok(s.versions
            .range(lo.to_vec()..hi.to_vec())
            .filter_map(|(k, _)| s.read(k, self.start).map(|v| (k.clone(), v)))
            .take(limit as usize)
            .collect())
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.writes.insert(key, Write::Put(value));
    }

    fn delete(&mut self, key: Vec<u8>) {
        self.writes.insert(key, Write::Delete);
    }

    fn lock(&mut self, key: Vec<u8>) {
        self.writes.entry(key).or_insert(Write::Lock);
    }

    fn commit(self) -> TxnResult<()> {
        self.kv.wait();
        let mut s = self.kv.st.lock();
        let fault = (!s.faults.is_empty()).then(|| s.faults.remove(0));
        if fault == Some(Fault::Unavailable) {
            return Err(TxnError::Unavailable("injected".into()));
        }
        if self.writes.is_empty() {
            return Ok(());
        }
        let start = self.start;
        let conflicts: HashSet<&Vec<u8>> = self
            .writes
            .keys()
            .filter(|k| {
                s.versions
                    .get(*k)
                    .is_some_and(|vs| vs.last().is_some_and(|(c, _)| *c > start))
            })
            .collect();
        if !conflicts.is_empty() {
            s.conflicts += 1;
            return Err(TxnError::Conflict(format!(
                "{} keys written since {start}",
                conflicts.len()
            )));
        }
        if fault == Some(Fault::Undetermined { applied: false }) {
            return Err(TxnError::Undetermined("injected, not applied".into()));
        }
        let commit_ts = s.next_ts();
        for (k, w) in self.writes {
            s.versions.entry(k).or_default().push((commit_ts, w));
        }
        s.commits += 1;
        if fault == Some(Fault::Undetermined { applied: true }) {
            return Err(TxnError::Undetermined("injected, applied".into()));
        }
        Ok(())
    }

    fn rollback(self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_committer_wins_and_reads_are_snapshots() {
        let kv = MemTikv::new();
        let mut a = kv.begin().unwrap();
        let mut b = kv.begin().unwrap();
        a.put(b"k".to_vec(), b"a".to_vec());
        b.put(b"k".to_vec(), b"b".to_vec());
        a.commit().unwrap();
        assert!(matches!(b.commit(), Err(TxnError::Conflict(_))));
        // A lock counts as a write for a later committer.
        let mut r = kv.begin().unwrap();
        let mut w = kv.begin().unwrap();
        assert_eq!(
            r.batch_get(&[b"k".to_vec()]).unwrap(),
            vec![Some(b"a".to_vec())]
        );
        r.lock(b"k".to_vec());
        r.put(b"other".to_vec(), b"x".to_vec());
        w.put(b"k".to_vec(), b"w".to_vec());
        w.commit().unwrap();
        // r still reads its snapshot.
        assert_eq!(
            r.batch_get(&[b"k".to_vec()]).unwrap(),
            vec![Some(b"a".to_vec())]
        );
        assert!(matches!(r.commit(), Err(TxnError::Conflict(_))));
        let mut l = kv.begin().unwrap();
        l.lock(b"k".to_vec());
        let mut after = kv.begin().unwrap();
        l.commit().unwrap();
        after.put(b"k".to_vec(), b"z".to_vec());
        assert!(matches!(after.commit(), Err(TxnError::Conflict(_))));
    }
}
