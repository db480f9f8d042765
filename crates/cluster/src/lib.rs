//! The seam for a store that several daemons write at once (issue 24): the
//! shape of etcd, TiKV and FoundationDB, which the embedded [`Store`] does
//! not need. Four things grow on it:
//!
//! - **versions**: every read returns the revision at which each key was
//!   last changed (`mod_rev`), and the store's revision at the read;
//! - **conditional commits**: a commit states what must still hold (a key
//!   absent, a key at the version the daemon read) and applies all of its
//!   operations or none; a failed condition is a [`Outcome::Conflict`], after
//!   which the daemon refreshes what it read and runs the operation again;
//! - **a change stream** ([`ClusterStore::watch`]): every change in revision
//!   order from a given revision, for dropping other daemons' changes from
//!   the caches;
//! - **sessions** (leases): keys that vanish when their daemon stops
//!   renewing, and that a commit can require (fencing).
//!
//! The engines' limits come with them ([`Limits`]): etcd takes 128
//! operations and 1.5 MiB in one transaction.
//!
//! The calls are synchronous, like [`Store`]'s: the engine's commit path is
//! threads, and a backend with an async client (etcd, TiKV) runs its own
//! runtime behind these calls.
//!
//! Implementations: [`sim::SimStore`] (in memory, with real conflicts, a
//! watch that lags, leases on a fake clock, commits whose result is lost,
//! and a TiKV mode), `shoal_etcd::EtcdStore`, `shoal_tikv::TikvStore`
//! (tested on a model of TiKV's transactions). One conformance suite runs
//! against every one (`shoal_testkit::conformance`).
//!
//! [`Store`]: shoal_core::store::Store

mod alloc;
pub mod blob;
mod change_stream;
mod check;
mod dirlease;
pub mod filedata;
pub mod filelocks;
mod flags;
mod format;
mod holds;
mod keys;
pub mod ns;
pub mod pinned;
mod record_cache;
mod session;
pub mod sim;
pub mod space;
pub mod status;
mod surface;
mod tmpfile;
mod txn;

use std::fmt;
use std::time::Duration;

/// Keys with their values and versions, and the revision of the snapshot
/// they were read at (`ClusterStore::scan`).
pub type Scan = (Vec<(Vec<u8>, Versioned)>, Rev);

/// Values of several keys (None: absent) and the revision they were read
/// at (`ClusterStore::get_many`).
pub type Got = (Vec<Option<Versioned>>, Rev);

/// A store revision: it grows with every committed change. 0 is "never":
/// the `mod_rev` of a key that does not exist.
pub type Rev = u64;

/// A session's lease.
pub type LeaseId = i64;

/// A key's value and the revision of its last change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    pub value: Vec<u8>,
    pub mod_rev: Rev,
}

/// What a commit requires, checked atomically with its writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cond {
    /// The key has no value.
    Absent(Vec<u8>),
    /// The key was last changed at this revision (it exists).
    ModRev(Vec<u8>, Rev),
    /// The key has a value.
    Exists(Vec<u8>),
    /// No key in `[lo, hi)` (an empty directory: rmdir's condition).
    Empty(Vec<u8>, Vec<u8>),
}

impl Cond {
    /// `key` unchanged since it was read as `v`: at that revision, or
    /// still absent.
    pub fn as_read(key: Vec<u8>, v: &Option<Versioned>) -> Cond {
        match v {
            Some(v) => Cond::ModRev(key, v.mod_rev),
            None => Cond::Absent(key),
        }
    }

    /// The key the condition is on (the range's first for `Empty`).
    pub fn key(&self) -> &[u8] {
        match self {
            Cond::Absent(k) | Cond::ModRev(k, _) | Cond::Exists(k) | Cond::Empty(k, _) => k,
        }
    }

    /// Whether the condition holds, given the revision of the key it is
    /// on (for `Empty`: of the first key in its range), None if absent.
    /// Every backend judges a condition by this one rule.
    pub fn holds(&self, found: Option<Rev>) -> bool {
        match self {
            Cond::Absent(_) | Cond::Empty(..) => found.is_none(),
            Cond::Exists(_) => found.is_some(),
            Cond::ModRev(_, r) => found == Some(*r),
        }
    }
}

/// One write of a commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Set the key; with a lease, the key goes when the lease does.
    Put(Vec<u8>, Vec<u8>, Option<LeaseId>),
    Delete(Vec<u8>),
}

impl Op {
    pub fn key(&self) -> &[u8] {
        match self {
            Op::Put(k, ..) | Op::Delete(k) => k,
        }
    }
    fn bytes(&self) -> usize {
        match self {
            Op::Put(k, v, _) => k.len() + v.len(),
            Op::Delete(k) => k.len(),
        }
    }
}

/// The result of a commit that reached the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Applied whole at this revision.
    Committed(Rev),
    /// Not applied: these conditions (their indexes) did not hold.
    Conflict(Vec<usize>),
}

/// One change, as the stream delivers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub key: Vec<u8>,
    /// The new value, None for a delete.
    pub value: Option<Vec<u8>>,
    pub rev: Rev,
}

/// What a backend takes in one commit and holds in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Conditions plus operations in one commit (etcd: `--max-txn-ops`, 128).
    pub max_ops: usize,
    /// Bytes of keys and values in one commit (etcd: `--max-request-bytes`,
    /// 1.5 MiB, less the request's framing).
    pub max_bytes: usize,
}

impl Limits {
    /// Whether a commit fits.
    pub fn check(&self, conds: &[Cond], ops: &[Op]) -> KvResult<()> {
        let n = conds.len() + ops.len();
        let bytes: usize = conds.iter().map(|c| c.key().len()).sum::<usize>()
            + ops.iter().map(Op::bytes).sum::<usize>();
        if n > self.max_ops || bytes > self.max_bytes {
            return Err(KvError::TooLarge { ops: n, bytes });
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvError {
    /// The store cannot answer now (no quorum, no leader, a timeout before
    /// the request was sent): nothing was applied; try again later.
    Unavailable(String),
    /// The commit was sent and its result is unknown (the connection broke,
    /// a timeout after sending): it may or may not have been applied. The
    /// caller must find out by reading before it retries or answers.
    Unknown(String),
    /// Over the backend's limits (`Limits`): split the work.
    TooLarge {
        ops: usize,
        bytes: usize,
    },
    /// The store is full (etcd's quota): nothing was applied.
    NoSpace,
    /// A watch started at a revision the store no longer keeps: reload.
    Compacted(Rev),
    /// The lease is gone (expired or revoked).
    LeaseExpired(LeaseId),
    /// The backend does not offer this (TiKV has no watch).
    Unsupported(&'static str),
    Other(String),
}

pub type KvResult<T> = std::result::Result<T, KvError>;

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvError::Unavailable(m) => write!(f, "metadata store unavailable: {m}"),
            KvError::Unknown(m) => write!(f, "commit result unknown: {m}"),
            KvError::TooLarge { ops, bytes } => {
                write!(f, "commit too large for the store: {ops} operations, {bytes} bytes")
            }
            KvError::NoSpace => write!(
                f,
                "metadata store is full (etcd: compact and defragment, or raise --quota-backend-bytes)"
            ),
            KvError::Compacted(r) => write!(f, "revision {r} was compacted"),
            KvError::LeaseExpired(l) => write!(f, "lease {l:x} expired"),
            KvError::Unsupported(w) => write!(f, "not supported by this store: {w}"),
            KvError::Other(m) => write!(f, "metadata store: {m}"),
        }
    }
}

impl std::error::Error for KvError {}

impl From<KvError> for shoal_core::Error {
    fn from(e: KvError) -> shoal_core::Error {
        match e {
            KvError::NoSpace => shoal_core::Error::NoSpace,
            other => shoal_core::Error::Io(other.to_string()),
        }
    }
}

/// A change stream from one revision on (`ClusterStore::watch`).
pub trait Watch: Send {
    /// The next changes, in revision order, each revision's whole; waits up
    /// to `timeout` (an empty answer is no change yet). A stream that fell
    /// behind the store's compaction answers `Compacted`.
    fn next(&mut self, timeout: Duration) -> KvResult<Vec<Event>>;
}

/// An ordered key-value store that several daemons write at once.
pub trait ClusterStore: Send + Sync + 'static {
    /// The key's value and version, linearizable (it sees every commit that
    /// finished before the call).
    fn get(&self, key: &[u8]) -> KvResult<Option<Versioned>>;
    /// Several keys from one snapshot, in one round trip where the backend
    /// can (etcd: one read-only Txn), with a revision the values are at
    /// least as new as (the snapshot's).
    fn get_many(&self, keys: &[Vec<u8>]) -> KvResult<Got> {
        let at = self.revision()?;
        let vs = keys.iter().map(|k| self.get(k)).collect::<KvResult<_>>()?;
        Ok((vs, at))
    }
    /// Keys in `[lo, hi)`, ascending, at most `limit`, from one snapshot,
    /// with that snapshot's revision.
    fn scan(&self, lo: &[u8], hi: &[u8], limit: usize) -> KvResult<Scan>;
    /// Apply `ops` atomically if every condition holds, else nothing.
    fn commit(&self, conds: &[Cond], ops: &[Op]) -> KvResult<Outcome>;
    /// Every change to keys starting with `prefix` from revision `from` on
    /// (inclusive).
    fn watch(&self, prefix: &[u8], from: Rev) -> KvResult<Box<dyn Watch>>;
    /// The store's current revision (linearizable).
    fn revision(&self) -> KvResult<Rev>;
    /// A lease that lives `ttl` past each renewal.
    fn lease_grant(&self, ttl: Duration) -> KvResult<LeaseId>;
    /// Renew; `LeaseExpired` if it is gone.
    fn lease_renew(&self, id: LeaseId) -> KvResult<()>;
    /// End the lease now; its keys go.
    fn lease_revoke(&self, id: LeaseId) -> KvResult<()>;
    fn limits(&self) -> Limits;
    /// `get` as of revision `rev` (a store that keeps old revisions until
    /// compacted, as etcd does); `Compacted` when it no longer has it.
    fn get_at(&self, _key: &[u8], _rev: Rev) -> KvResult<Option<Versioned>> {
        Err(KvError::Unsupported("reads at a past revision"))
    }
    /// `scan` as of revision `rev`.
    fn scan_at(&self, _lo: &[u8], _hi: &[u8], _limit: usize, _rev: Rev) -> KvResult<Scan> {
        Err(KvError::Unsupported("reads at a past revision"))
    }
    /// How many keys `[lo, hi)` holds now (etcd: a count-only range, no
    /// values sent).
    fn count(&self, lo: &[u8], hi: &[u8]) -> KvResult<u64> {
        Ok(self.scan(lo, hi, usize::MAX)?.0.len() as u64)
    }
    /// The store's size against its quota, if it tells (statfs).
    fn space(&self) -> KvResult<Option<StoreSpace>> {
        Ok(None)
    }
}

/// A store's size (`ClusterStore::space`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreSpace {
    /// Bytes the store's database takes (etcd: its file, which its quota
    /// is compared with; compaction and defragmentation shrink it).
    pub used: u64,
    /// The most it may take before commits fail with `NoSpace` (etcd's
    /// `--quota-backend-bytes`), if the store says.
    pub quota: Option<u64>,
}
