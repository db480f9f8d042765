//! A shared store read at one revision: what `shoal dump` of a namespace
//! on etcd reads through, so the dump is the namespace as it was at that
//! revision whatever the mounts do meanwhile. Reads go to the revision;
//! commits and leases go to the store as they are (the reader's own
//! session), and there is no change stream (nothing after the revision
//! may reach the reader's cache).

use super::{ClusterStore, Cond, KvError, KvResult, LeaseId, Limits, Op, Outcome, Rev, Scan};
use super::{Got, Versioned, Watch};
use std::sync::Arc;
use std::time::Duration;

pub struct Pinned {
    inner: Arc<dyn ClusterStore>,
    rev: Rev,
}

impl Pinned {
    /// `inner` at its current revision; `Unsupported` where it keeps no
    /// past revisions (TiKV's client here, the simulator).
    pub fn now(inner: Arc<dyn ClusterStore>) -> KvResult<Pinned> {
        let rev = inner.revision()?;
        inner.get_at(b"", rev)?;
        Ok(Pinned { inner, rev })
    }
    pub fn revision_pinned(&self) -> Rev {
        self.rev
    }
}

impl ClusterStore for Pinned {
    fn get(&self, key: &[u8]) -> KvResult<Option<Versioned>> {
        self.inner.get_at(key, self.rev)
    }
    fn get_many(&self, keys: &[Vec<u8>]) -> KvResult<Got> {
        let vs = keys.iter().map(|k| self.get(k)).collect::<KvResult<_>>()?;
        Ok((vs, self.rev))
    }
    fn scan(&self, lo: &[u8], hi: &[u8], limit: usize) -> KvResult<Scan> {
        self.inner.scan_at(lo, hi, limit, self.rev)
    }
    fn commit(&self, conds: &[Cond], ops: &[Op]) -> KvResult<Outcome> {
        self.inner.commit(conds, ops)
    }
    fn watch(&self, _prefix: &[u8], _from: Rev) -> KvResult<Box<dyn Watch>> {
        Err(KvError::Unsupported(
            "a change stream of a store read at one revision",
        ))
    }
    fn revision(&self) -> KvResult<Rev> {
        Ok(self.rev)
    }
    fn lease_grant(&self, ttl: Duration) -> KvResult<LeaseId> {
        self.inner.lease_grant(ttl)
    }
    fn lease_renew(&self, id: LeaseId) -> KvResult<()> {
        self.inner.lease_renew(id)
    }
    fn lease_revoke(&self, id: LeaseId) -> KvResult<()> {
        self.inner.lease_revoke(id)
    }
    fn limits(&self) -> Limits {
        self.inner.limits()
    }
}
