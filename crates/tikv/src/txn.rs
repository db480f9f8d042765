//! The part of TiKV's transactional API the translation uses: optimistic
//! transactions that read at their start timestamp and commit if no key they
//! write or lock was written by a transaction that committed after they
//! started (first committer wins), and a timestamp oracle.
//!
//! Two implementations: `crate::model::MemTikv` (in memory, for the tests:
//! no TiKV cluster can be had here) and, with the `client` feature,
//! `crate::client::Client` over `tikv-client`. The calls are synchronous, as
//! the seam's are (`shoal_cluster::ClusterStore`).

use std::fmt;

/// A TiKV timestamp: physical milliseconds shifted left by 18 bits, plus a
/// logical counter (PD's timestamp oracle).
pub type Ts = u64;

/// Bits of a timestamp below its physical part.
pub const PHYSICAL_SHIFT: u32 = 18;

/// The physical part of a timestamp, in milliseconds.
pub fn physical_ms(ts: Ts) -> u64 {
    ts >> PHYSICAL_SHIFT
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnError {
    /// Another transaction wrote a key this one writes or locks after it
    /// started: nothing was applied; run again at a new timestamp.
    Conflict(String),
    /// The cluster could not be reached before anything was applied.
    Unavailable(String),
    /// The commit was sent and its result is not known.
    Undetermined(String),
}

impl fmt::Display for TxnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxnError::Conflict(m) => write!(f, "write conflict: {m}"),
            TxnError::Unavailable(m) => write!(f, "unavailable: {m}"),
            TxnError::Undetermined(m) => write!(f, "commit undetermined: {m}"),
        }
    }
}

pub type TxnResult<T> = Result<T, TxnError>;

/// A transactional client.
pub trait TxnKv: Send + Sync + 'static {
    type Txn: Txn;
    /// An optimistic transaction at a fresh start timestamp.
    fn begin(&self) -> TxnResult<Self::Txn>;
    /// A fresh timestamp from the oracle.
    fn timestamp(&self) -> TxnResult<Ts>;
}

/// One optimistic transaction. Writes are buffered until `commit`. Every
/// transaction ends in `commit` or `rollback`.
pub trait Txn: Send {
    fn start_ts(&self) -> Ts;
    /// The values of `keys` at the start timestamp, in the order asked.
    fn batch_get(&mut self, keys: &[Vec<u8>]) -> TxnResult<Vec<Option<Vec<u8>>>>;
    /// Keys in `[lo, hi)` with their values, ascending, at most `limit`.
    fn scan(&mut self, lo: &[u8], hi: &[u8], limit: u32) -> TxnResult<Vec<(Vec<u8>, Vec<u8>)>>;
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>);
    fn delete(&mut self, key: Vec<u8>);
    /// Make a key read part of the write set without writing it: a
    /// transaction that wrote it after this one started makes this one's
    /// commit conflict (read-write conflicts become write-write ones).
    fn lock(&mut self, key: Vec<u8>);
    /// Apply the buffered writes, or nothing.
    fn commit(self) -> TxnResult<()>;
    fn rollback(self);
}
