//! shoal's shared store on TiKV (issue 24): the seam
//! (`shoal_cluster::ClusterStore`) translated onto TiKV's optimistic
//! transactions, for namespaces larger than etcd's 8 GiB.
//!
//! TiKV gives less than the seam asks in four places; how each is made
//! (docs/design.md, "TiKV"):
//!
//! - **Versions.** The client returns values only, so every value is stored
//!   behind a 16-byte header: the start timestamp of the transaction that
//!   wrote it (its `mod_rev`, and the commit's revision) and its lease (0:
//!   none). Start timestamps of writers of one key grow with their commit
//!   order (a writer that started before another committed conflicts), so a
//!   key's `mod_rev` grows with every change, as etcd's does.
//! - **Conditional commits.** One optimistic transaction per commit: the
//!   condition keys are read at its start timestamp and locked (a lock-only
//!   mutation), so a transaction that wrote one of them since makes the
//!   commit fail (first committer wins) and it is run again from the start;
//!   only a condition that does not hold is a `Conflict` for the caller.
//!   `Empty(lo, hi)` is read but cannot be locked (no range locks): it holds
//!   against a racing insert only because the namespace's users of it over
//!   entries (rmdir, rename over a directory) also change the directory's
//!   record, which every create in it reads as a condition (docs/design.md);
//!   its other user, the guard that no directory lease exists (`L dir *`),
//!   never meets a key here: without a change stream no daemon takes leases.
//! - **Sessions.** TiKV has no leases. A lease is a record holding its
//!   deadline in the oracle's time (physical milliseconds of a timestamp);
//!   a key put with a lease is indexed under it and reads as absent once the
//!   lease's deadline has passed at the reader's start timestamp, before any
//!   daemon has deleted it. So a session that stops renewing loses its keys
//!   at its deadline for every reader and every commit's conditions
//!   (fencing), as on etcd. Renewals also delete leases found expired with
//!   their keys.
//! - **The change stream.** None: `watch` answers `Unsupported`, and the
//!   namespace then takes no directory leases and keeps no record cache
//!   (docs/design.md, "TiKV": what a stream would take).
//!
//! The calls are synchronous; the client (`client`, behind the feature of
//! that name) runs its own runtime. Without a TiKV cluster here, the
//! translation is tested against a model of TiKV's transactions
//! (`model::MemTikv`): the conformance suite and the namespace's races.

#[cfg(feature = "client")]
pub mod client;
pub mod model;
pub mod txn;

use parking_lot::Mutex;
use shoal_cluster::{
    ClusterStore, Cond, Got, KvError, KvResult, LeaseId, Limits, Op, Outcome, Rev, Scan, Versioned,
    Watch,
};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use txn::{physical_ms, Txn, TxnError, TxnKv};

/// A stored value's header: its writer's start timestamp and its lease.
const HEADER: usize = 16;

/// How often a commit whose transaction lost a write-write race is run
/// again before the caller is told the store is unavailable.
const MAX_ATTEMPTS: u32 = 200;

/// How often renewals look for expired leases to delete, and how many
/// lease records one look reads (the next look goes on from there).
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);
pub const SWEEP_PAGE: u32 = 1024;

/// The seam on a TiKV-like transactional client `K`.
pub struct TikvStore<K: TxnKv> {
    kv: K,
    /// Every key of this filesystem starts with it (`/shoal/NAME/`).
    prefix: Vec<u8>,
    /// When renewals last looked for expired leases, and the lease id the
    /// next look starts from.
    last_sweep: Mutex<(Option<Instant>, LeaseId)>,
}

/// A value as stored.
struct Rec {
    mod_rev: Rev,
    lease: LeaseId,
    value: Vec<u8>,
}

fn encode(mod_rev: Rev, lease: LeaseId, value: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER + value.len());
    v.extend_from_slice(&mod_rev.to_be_bytes());
    v.extend_from_slice(&lease.to_be_bytes());
    v.extend_from_slice(value);
    v
}

fn decode(raw: &[u8]) -> KvResult<Rec> {
    if raw.len() < HEADER {
        return Err(KvError::Other(format!(
            "a value of {} bytes has no header (not written by shoal?)",
            raw.len()
        )));
    }
    Ok(Rec {
        mod_rev: u64::from_be_bytes(raw[..8].try_into().unwrap()),
        lease: i64::from_be_bytes(raw[8..16].try_into().unwrap()),
        value: raw[HEADER..].to_vec(),
    })
}

/// A lease record: its deadline and time to live, in milliseconds.
fn encode_lease(deadline_ms: u64, ttl_ms: u64) -> Vec<u8> {
    let mut v = deadline_ms.to_be_bytes().to_vec();
    v.extend_from_slice(&ttl_ms.to_be_bytes());
    v
}

fn lease_deadline(raw: &[u8]) -> u64 {
    raw.get(..8)
        .map(|b| u64::from_be_bytes(b.try_into().unwrap()))
        .unwrap_or(0)
}

fn lease_ttl(raw: &[u8]) -> u64 {
    raw.get(8..16)
        .map(|b| u64::from_be_bytes(b.try_into().unwrap()))
        .unwrap_or(0)
}

fn txn_err(e: TxnError) -> KvError {
    match e {
        TxnError::Conflict(m) | TxnError::Unavailable(m) => KvError::Unavailable(m),
        TxnError::Undetermined(m) => KvError::Unknown(m),
    }
}

impl<K: TxnKv> TikvStore<K> {
    /// The store of the filesystem whose keys start with `prefix`.
    pub fn new(kv: K, prefix: Vec<u8>) -> TikvStore<K> {
        TikvStore {
            kv,
            prefix,
            last_sweep: Mutex::new((None, 0)),
        }
    }

    pub fn client(&self) -> &K {
        &self.kv
    }

    fn key(&self, k: &[u8]) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.prefix.len() + 1 + k.len());
        v.extend_from_slice(&self.prefix);
        v.push(b'k');
        v.extend_from_slice(k);
        v
    }

    fn unkey<'a>(&self, k: &'a [u8]) -> &'a [u8] {
        &k[self.prefix.len() + 1..]
    }

    fn lease_key(&self, id: LeaseId) -> Vec<u8> {
        let mut v = self.prefix.clone();
        v.push(b'l');
        v.extend_from_slice(&id.to_be_bytes());
        v
    }

    /// The index entry that says `k` was put with lease `id`.
    fn owned_key(&self, id: LeaseId, k: &[u8]) -> Vec<u8> {
        let mut v = self.prefix.clone();
        v.push(b'o');
        v.extend_from_slice(&id.to_be_bytes());
        v.extend_from_slice(k);
        v
    }

    /// Whether each lease is alive at the transaction's start.
    fn alive(&self, txn: &mut K::Txn, ids: &[LeaseId]) -> KvResult<BTreeMap<LeaseId, bool>> {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Ok(BTreeMap::new());
        }
        let now = physical_ms(txn.start_ts());
        let keys: Vec<Vec<u8>> = ids.iter().map(|&l| self.lease_key(l)).collect();
        let raws = txn.batch_get(&keys).map_err(txn_err)?;
        Ok(ids
            .into_iter()
            .zip(raws)
            .map(|(l, r)| (l, r.is_some_and(|r| lease_deadline(&r) > now)))
            .collect())
    }

    /// Stored values decoded, and None for those whose lease has ended.
    fn live(&self, txn: &mut K::Txn, raws: Vec<Option<Vec<u8>>>) -> KvResult<Vec<Option<Rec>>> {
        let recs: Vec<Option<Rec>> = raws
            .into_iter()
            .map(|r| r.map(|r| decode(&r)).transpose())
            .collect::<KvResult<_>>()?;
        let leases: Vec<LeaseId> = recs
            .iter()
            .flatten()
            .map(|r| r.lease)
            .filter(|&l| l != 0)
            .collect();
        let alive = self.alive(txn, &leases)?;
        Ok(recs
            .into_iter()
            .map(|r| r.filter(|r| r.lease == 0 || alive[&r.lease]))
            .collect())
    }

    /// Live keys in `[lo, hi)` (stored form), at most `limit`.
    fn scan_live(
        &self,
        txn: &mut K::Txn,
        lo: &[u8],
        hi: &[u8],
        limit: usize,
    ) -> KvResult<Vec<(Vec<u8>, Rec)>> {
        let mut out = Vec::new();
        let mut from = lo.to_vec();
        while out.len() < limit {
            let want = (limit - out.len()).clamp(1, 1024);
            let batch = txn.scan(&from, hi, want as u32).map_err(txn_err)?;
            let n = batch.len();
            let Some((last, _)) = batch.last() else { break };
            from = last.clone();
            from.push(0);
            let (keys, raws): (Vec<_>, Vec<_>) =
                batch.into_iter().map(|(k, v)| (k, Some(v))).unzip();
            let recs = self.live(txn, raws)?;
            out.extend(
                keys.into_iter()
                    .zip(recs)
                    .filter_map(|(k, r)| r.map(|r| (k, r))),
            );
            if n < want {
                break;
            }
        }
        out.truncate(limit);
        Ok(out)
    }

    /// One attempt at a commit: `Ok(None)` if its transaction lost a
    /// write-write race (run it again).
    fn try_commit(&self, conds: &[Cond], ops: &[Op]) -> KvResult<Option<Outcome>> {
        let mut txn = self.kv.begin().map_err(txn_err)?;
        let at = txn.start_ts();
        // The condition keys and the written keys, in one read.
        let cond_keys: Vec<Vec<u8>> = conds
            .iter()
            .filter(|c| !matches!(c, Cond::Empty(..)))
            .map(|c| self.key(c.key()))
            .collect();
        let mut keys = cond_keys.clone();
        keys.extend(ops.iter().map(|o| self.key(o.key())));
        let raws = match txn.batch_get(&keys) {
            Ok(r) => r,
            Err(e) => {
                txn.rollback();
                return Err(txn_err(e));
            }
        };
        // What each written key holds now, lease ended or not: its index
        // entry goes with it.
        let before: Vec<Option<LeaseId>> = raws[cond_keys.len()..]
            .iter()
            .map(|r| {
                r.as_deref()
                    .map(decode)
                    .transpose()
                    .map(|r| r.map(|r| r.lease))
            })
            .collect::<KvResult<_>>()?;
        let recs = self.live(&mut txn, raws[..cond_keys.len()].to_vec())?;
        let mut failed = Vec::new();
        let mut recs = recs.into_iter();
        for (i, c) in conds.iter().enumerate() {
            let found = match c {
                Cond::Empty(lo, hi) => self
                    .scan_live(&mut txn, &self.key(lo), &self.key(hi), 1)?
                    .first()
                    .map(|(_, r)| r.mod_rev),
                _ => recs.next().flatten().map(|r| r.mod_rev),
            };
            if !c.holds(found) {
                failed.push(i);
            }
        }
        if !failed.is_empty() {
            txn.rollback();
            return Ok(Some(Outcome::Conflict(failed)));
        }
        let leases: Vec<LeaseId> = ops
            .iter()
            .filter_map(|o| match o {
                Op::Put(_, _, l) => *l,
                Op::Delete(_) => None,
            })
            .collect();
        for (l, alive) in self.alive(&mut txn, &leases)? {
            if !alive {
                txn.rollback();
                return Err(KvError::LeaseExpired(l));
            }
            // A renewal or an end of the lease since conflicts.
            txn.lock(self.lease_key(l));
        }
        for k in cond_keys {
            txn.lock(k);
        }
        for (op, was) in ops.iter().zip(before) {
            let now = match op {
                Op::Put(k, v, l) => {
                    let l = l.unwrap_or(0);
                    txn.put(self.key(k), encode(at, l, v));
                    if l != 0 {
                        txn.put(self.owned_key(l, k), Vec::new());
                    }
                    l
                }
                Op::Delete(k) => {
                    txn.delete(self.key(k));
                    0
                }
            };
            if let Some(w) = was.filter(|&w| w != 0 && w != now) {
                txn.delete(self.owned_key(w, op.key()));
            }
        }
        match txn.commit() {
            Ok(()) => Ok(Some(Outcome::Committed(at))),
            Err(TxnError::Conflict(_)) => Ok(None),
            Err(e) => Err(txn_err(e)),
        }
    }

    /// Delete lease `id` and its keys. `Ok(false)`: it was not there.
    fn end_lease(&self, id: LeaseId, only_if_expired: bool) -> KvResult<bool> {
        for _ in 0..MAX_ATTEMPTS {
            let mut txn = self.kv.begin().map_err(txn_err)?;
            let now = physical_ms(txn.start_ts());
            let lk = self.lease_key(id);
            let rec = txn.batch_get(std::slice::from_ref(&lk)).map_err(txn_err)?;
            let Some(rec) = rec.into_iter().next().flatten() else {
                txn.rollback();
                return Ok(false);
            };
            if only_if_expired && lease_deadline(&rec) > now {
                txn.rollback();
                return Ok(false);
            }
            let lo = self.owned_key(id, b"");
            let hi = self.owned_key(id + 1, b"");
            let mut from = lo.clone();
            loop {
                let owned = txn.scan(&from, &hi, 256).map_err(txn_err)?;
                let n = owned.len();
                let keys: Vec<Vec<u8>> = owned
                    .iter()
                    .map(|(o, _)| self.key(&o[lo.len()..]))
                    .collect();
                let raws = txn.batch_get(&keys).map_err(txn_err)?;
                for ((o, _), (k, raw)) in owned.iter().zip(keys.into_iter().zip(raws)) {
                    if raw.is_some_and(|r| decode(&r).is_ok_and(|r| r.lease == id)) {
                        txn.delete(k);
                    }
                    txn.delete(o.clone());
                }
                match owned.last() {
                    Some((o, _)) if n == 256 => {
                        from = o.clone();
                        from.push(0);
                    }
                    _ => break,
                }
            }
            txn.delete(lk);
            match txn.commit() {
                Ok(()) => return Ok(true),
                Err(TxnError::Conflict(_)) => continue,
                Err(e) => return Err(txn_err(e)),
            }
        }
        Err(KvError::Unavailable(format!(
            "lease {id:x}: {MAX_ATTEMPTS} attempts lost write races"
        )))
    }

    /// Delete leases whose deadline has passed, with their keys (at most
    /// once a `SWEEP_EVERY`, from renewals): `SWEEP_PAGE` lease records a
    /// time, each look going on where the last stopped and starting over
    /// past the last, so every expired lease is found however many live
    /// ones come before it.
    fn sweep(&self) -> KvResult<()> {
        let from = {
            let mut last = self.last_sweep.lock();
            if last.0.is_some_and(|t| t.elapsed() < SWEEP_EVERY) {
                return Ok(());
            }
            last.0 = Some(Instant::now());
            last.1
        };
        let mut txn = self.kv.begin().map_err(txn_err)?;
        let now = physical_ms(txn.start_ts());
        let lo = self.lease_key(from);
        let hi = self.lease_key(LeaseId::MAX);
        let leases = txn.scan(&lo, &hi, SWEEP_PAGE).map_err(txn_err)?;
        txn.rollback();
        let id_of = |k: &[u8]| LeaseId::from_be_bytes(k[k.len() - 8..].try_into().unwrap());
        // A full page: the next look starts after its last lease.
        let next = match leases.last() {
            Some((k, _)) if leases.len() == SWEEP_PAGE as usize => id_of(k).saturating_add(1),
            _ => 0,
        };
        self.last_sweep.lock().1 = next;
        for (k, v) in leases {
            if lease_deadline(&v) <= now {
                self.end_lease(id_of(&k), true)?;
            }
        }
        Ok(())
    }
}

impl<K: TxnKv> ClusterStore for TikvStore<K> {
    fn get(&self, key: &[u8]) -> KvResult<Option<Versioned>> {
        Ok(self.get_many(&[key.to_vec()])?.0.remove(0))
    }

    fn get_many(&self, keys: &[Vec<u8>]) -> KvResult<Got> {
        let mut txn = self.kv.begin().map_err(txn_err)?;
        let at = txn.start_ts();
        let stored: Vec<Vec<u8>> = keys.iter().map(|k| self.key(k)).collect();
        let got = txn
            .batch_get(&stored)
            .map_err(txn_err)
            .and_then(|raws| self.live(&mut txn, raws));
        txn.rollback();
        let vs = got?
            .into_iter()
            .map(|r| {
                r.map(|r| Versioned {
                    value: r.value,
                    mod_rev: r.mod_rev,
                })
            })
            .collect();
        Ok((vs, at))
    }

    fn scan(&self, lo: &[u8], hi: &[u8], limit: usize) -> KvResult<Scan> {
        let mut txn = self.kv.begin().map_err(txn_err)?;
        let at = txn.start_ts();
        let got = self.scan_live(&mut txn, &self.key(lo), &self.key(hi), limit);
        txn.rollback();
        let vs = got?
            .into_iter()
            .map(|(k, r)| {
                (
                    self.unkey(&k).to_vec(),
                    Versioned {
                        value: r.value,
                        mod_rev: r.mod_rev,
                    },
                )
            })
            .collect();
        Ok((vs, at))
    }

    fn commit(&self, conds: &[Cond], ops: &[Op]) -> KvResult<Outcome> {
        self.limits().check(conds, ops)?;
        for attempt in 0..MAX_ATTEMPTS {
            if let Some(out) = self.try_commit(conds, ops)? {
                return Ok(out);
            }
            // Lost a write race: back off a little, more each time.
            let us = 50 * u64::from(attempt.min(40)) + (u64::from(attempt) * 7919) % 97;
            std::thread::sleep(Duration::from_micros(us));
        }
        Err(KvError::Unavailable(format!(
            "{MAX_ATTEMPTS} attempts at one commit lost write races"
        )))
    }

    fn watch(&self, _prefix: &[u8], _from: Rev) -> KvResult<Box<dyn Watch>> {
        Err(KvError::Unsupported("watch (TiKV has no change stream)"))
    }

    fn revision(&self) -> KvResult<Rev> {
        self.kv.timestamp().map_err(txn_err)
    }

    fn lease_grant(&self, ttl: Duration) -> KvResult<LeaseId> {
        let mut txn = self.kv.begin().map_err(txn_err)?;
        let at = txn.start_ts();
        // A start timestamp is unique, and below 2^63 for millennia.
        let id = at as LeaseId;
        let ttl_ms = ttl.as_millis() as u64;
        txn.put(
            self.lease_key(id),
            encode_lease(physical_ms(at) + ttl_ms, ttl_ms),
        );
        txn.commit().map_err(txn_err)?;
        Ok(id)
    }

    fn lease_renew(&self, id: LeaseId) -> KvResult<()> {
        for _ in 0..MAX_ATTEMPTS {
            let mut txn = self.kv.begin().map_err(txn_err)?;
            let now = physical_ms(txn.start_ts());
            let lk = self.lease_key(id);
            let rec = txn.batch_get(std::slice::from_ref(&lk)).map_err(txn_err)?;
            match rec.into_iter().next().flatten() {
                Some(r) if lease_deadline(&r) > now => {
                    let ttl = lease_ttl(&r);
                    txn.put(lk, encode_lease(now + ttl, ttl));
                    match txn.commit() {
                        Ok(()) => {
                            if let Err(e) = self.sweep() {
                                tracing::warn!("deleting expired leases: {e}");
                            }
                            return Ok(());
                        }
                        Err(TxnError::Conflict(_)) => continue,
                        Err(e) => return Err(txn_err(e)),
                    }
                }
                _ => {
                    txn.rollback();
                    return Err(KvError::LeaseExpired(id));
                }
            }
        }
        Err(KvError::Unavailable(format!(
            "renewing lease {id:x}: {MAX_ATTEMPTS} attempts lost write races"
        )))
    }

    fn lease_revoke(&self, id: LeaseId) -> KvResult<()> {
        match self.end_lease(id, false)? {
            true => Ok(()),
            false => Err(KvError::LeaseExpired(id)),
        }
    }

    fn limits(&self) -> Limits {
        // TiKV's `txn-total-size-limit` is 100 MiB; a leased put writes an
        // index entry beside it, and every value a 16-byte header.
        Limits {
            max_ops: 1 << 15,
            max_bytes: 64 << 20,
        }
    }
}
