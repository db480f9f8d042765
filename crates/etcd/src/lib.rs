//! shoal's shared store on an etcd cluster (`shoal_core::shared::SharedStore`).
//!
//! One filesystem is one key prefix, `/shoal/NAME/`, in the cluster; the
//! calls map one to one onto etcd's: a conditional commit is one `Txn`
//! (`If` the conditions, `Then` the writes, `Else` reads of the conditions'
//! keys, so a conflict says which failed), the change stream is a `Watch`
//! (without the previous values: nothing reads them, and each costs the
//! cluster a read per event per watcher), sessions are leases.
//!
//! The client (`etcd-client`) is async; the seam is synchronous, so the
//! store owns a small tokio runtime and blocks on it. Every call has a
//! deadline (`timeout`): past it a read is `Unavailable`, and a commit whose
//! request may have reached the cluster is `Unknown`, never retried blind.

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, PutOptions, Txn, TxnOp,
    TxnOpResponse, WatchOptions, WatchStream,
};
use shoal_core::shared::{
    Cond, Event, Got, KvError, KvResult, LeaseId, Limits, Op, Outcome, Rev, Scan, SharedStore,
    Versioned, Watch,
};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// etcd's defaults: `--max-txn-ops` 128 (checked for the conditions and the
/// writes each; shoal counts them together), `--max-request-bytes` 1.5 MiB
/// (less room for the request's framing and the key prefix).
pub const ETCD_LIMITS: Limits = Limits {
    max_ops: 128,
    max_bytes: 1536 * 1024 - 64 * 1024,
};

pub struct EtcdStore {
    rt: Arc<tokio::runtime::Runtime>,
    /// One client per member. Calls go to `cur`'s; a call that times out
    /// or cannot connect moves `cur` on, so a member that is down or frozen
    /// (SIGSTOP: its TCP port still accepts) costs one timeout, not one in
    /// three calls as a balanced channel would.
    clients: Vec<Client>,
    cur: AtomicUsize,
    /// `/shoal/NAME/`: every key of this filesystem starts with it.
    prefix: Vec<u8>,
    timeout: Duration,
}

/// Where a filesystem on etcd is: `etcd://H1:P1,H2:P2/NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdUrl {
    pub endpoints: Vec<String>,
    pub name: String,
}

impl EtcdUrl {
    pub fn parse(url: &str) -> Result<EtcdUrl, String> {
        let usage = || format!("'{url}': expected etcd://HOST:PORT[,HOST:PORT...]/NAME");
        let rest = url.strip_prefix("etcd://").ok_or_else(usage)?;
        let (hosts, name) = rest.split_once('/').ok_or_else(usage)?;
        if hosts.is_empty()
            || name.is_empty()
            || name.contains('/')
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(usage());
        }
        let endpoints = hosts
            .split(',')
            .map(|h| {
                if h.is_empty() || !h.contains(':') {
                    Err(usage())
                } else {
                    Ok(format!("http://{h}"))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(EtcdUrl {
            endpoints,
            name: name.to_string(),
        })
    }
}

fn other(e: impl std::fmt::Display) -> KvError {
    KvError::Other(e.to_string())
}

/// etcd's answer as the seam's error. `commit`: the request may have been
/// applied when the failure came after sending it.
fn map_err(e: etcd_client::Error, commit: bool) -> KvError {
    use etcd_client::Error as E;
    let unsure = |m: String| {
        if commit {
            KvError::Unknown(m)
        } else {
            KvError::Unavailable(m)
        }
    };
    match e {
        E::GRpcStatus(s) => {
            let m = s.message().to_string();
            if m.contains("database space exceeded") {
                KvError::NoSpace
            } else if m.contains("too many operations") || m.contains("request is too large") {
                KvError::TooLarge { ops: 0, bytes: 0 }
            } else if m.contains("requested lease not found") {
                KvError::LeaseExpired(0)
            } else if m.contains("required revision has been compacted") {
                KvError::Compacted(0)
            } else if s.code() == tonic::Code::Unavailable && m.contains("connect") {
                // The connection was never made: the request did not leave.
                KvError::Unavailable(format!("{m} (is etcd running there?)"))
            } else if m.contains("no leader") {
                // Refused before any proposal: nothing applied.
                KvError::Unavailable(m)
            } else {
                match s.code() {
                    // OutOfRange: an answer over gRPC's size limit.
                    tonic::Code::InvalidArgument
                    | tonic::Code::FailedPrecondition
                    | tonic::Code::OutOfRange => KvError::Other(m),
                    _ => unsure(format!("{:?}: {m}", s.code())),
                }
            }
        }
        E::TransportError(t) => KvError::Unavailable(t.to_string()),
        E::LeaseKeepAliveError(m) if m.contains("lease not found") => KvError::LeaseExpired(0),
        other => unsure(other.to_string()),
    }
}

impl EtcdStore {
    /// Connect to the cluster for filesystem `name`.
    pub fn connect(url: &EtcdUrl, timeout: Duration) -> KvResult<Arc<EtcdStore>> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("shoal-etcd")
            .enable_all()
            .build()
            .map_err(other)?;
        let opts = ConnectOptions::new()
            .with_connect_timeout(timeout)
            .with_timeout(timeout)
            .with_keep_alive(Duration::from_secs(2), timeout)
            .with_require_leader(true);
        let mut clients = Vec::new();
        for ep in &url.endpoints {
            let c = rt
                .block_on(async {
                    tokio::time::timeout(timeout, Client::connect([ep], Some(opts.clone()))).await
                })
                .map_err(|_| KvError::Unavailable(format!("connect to {ep}: timed out")))?
                .map_err(|e| map_err(e, false))?;
            clients.push(c);
        }
        Ok(Arc::new(EtcdStore {
            rt: Arc::new(rt),
            clients,
            cur: AtomicUsize::new(0),
            prefix: format!("/shoal/{}/", url.name).into_bytes(),
            timeout,
        }))
    }

    fn key(&self, k: &[u8]) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.prefix.len() + k.len());
        v.extend_from_slice(&self.prefix);
        v.extend_from_slice(k);
        v
    }

    fn client(&self) -> Client {
        self.clients[self.cur.load(Ordering::Relaxed) % self.clients.len()].clone()
    }

    /// The current member failed to answer: use the next one.
    fn next_member(&self) {
        self.cur.fetch_add(1, Ordering::Relaxed);
    }

    fn strip(&self, k: &[u8]) -> Vec<u8> {
        k[self.prefix.len().min(k.len())..].to_vec()
    }

    /// Run `f` on the runtime within the deadline; `commit` says how a
    /// failure is reported. A call that times out or cannot reach its
    /// member moves on to the next member for the calls after it.
    fn call<T, F>(&self, commit: bool, f: F) -> KvResult<T>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        let t = self.timeout;
        let r = match self
            .rt
            .block_on(async move { tokio::time::timeout(t, f).await })
        {
            Ok(r) => r.map_err(|e| map_err(e, commit)),
            Err(_) if commit => Err(KvError::Unknown(format!("no answer within {t:?}"))),
            Err(_) => Err(KvError::Unavailable(format!("no answer within {t:?}"))),
        };
        if matches!(r, Err(KvError::Unavailable(_)) | Err(KvError::Unknown(_))) {
            self.next_member();
        }
        r
    }
}

impl SharedStore for EtcdStore {
    fn get(&self, key: &[u8]) -> KvResult<Option<Versioned>> {
        let mut c = self.client();
        let k = self.key(key);
        let r = self.call(false, async move { c.get(k, None).await })?;
        Ok(r.kvs().first().map(|kv| Versioned {
            value: kv.value().to_vec(),
            mod_rev: kv.mod_revision() as u64,
        }))
    }

    fn get_many(&self, keys: &[Vec<u8>]) -> KvResult<Got> {
        let reads: Vec<TxnOp> = keys.iter().map(|k| TxnOp::get(self.key(k), None)).collect();
        let mut c = self.client();
        let r = self.call(
            false,
            async move { c.txn(Txn::new().and_then(reads)).await },
        )?;
        let at = r.header().map_or(0, |h| h.revision() as u64);
        let vs = r
            .op_responses()
            .iter()
            .map(|resp| match resp {
                TxnOpResponse::Get(g) => g.kvs().first().map(|kv| Versioned {
                    value: kv.value().to_vec(),
                    mod_rev: kv.mod_revision() as u64,
                }),
                _ => None,
            })
            .collect();
        Ok((vs, at))
    }

    fn scan(&self, lo: &[u8], hi: &[u8], limit: usize) -> KvResult<Scan> {
        self.scan_from(lo, hi, limit, 0)
    }

    fn get_at(&self, key: &[u8], rev: Rev) -> KvResult<Option<Versioned>> {
        let mut c = self.client();
        let k = self.key(key);
        let opts = GetOptions::new().with_revision(rev as i64);
        let r = self
            .call(false, async move { c.get(k, Some(opts)).await })
            .map_err(|e| compacted(e, rev))?;
        Ok(r.kvs().first().map(|kv| Versioned {
            value: kv.value().to_vec(),
            mod_rev: kv.mod_revision() as u64,
        }))
    }

    fn scan_at(&self, lo: &[u8], hi: &[u8], limit: usize, rev: Rev) -> KvResult<Scan> {
        self.scan_from(lo, hi, limit, rev)
            .map_err(|e| compacted(e, rev))
    }
    fn commit(&self, conds: &[Cond], ops: &[Op]) -> KvResult<Outcome> {
        ETCD_LIMITS.check(conds, ops)?;
        let compares: Vec<Compare> = conds
            .iter()
            .map(|c| {
                let k = self.key(c.key());
                match c {
                    // A missing key's create revision is 0.
                    Cond::Absent(_) => Compare::create_revision(k, CompareOp::Equal, 0),
                    Cond::Exists(_) => Compare::create_revision(k, CompareOp::Greater, 0),
                    Cond::ModRev(_, r) => Compare::mod_revision(k, CompareOp::Equal, *r as i64),
                    // Over a range: true when every key in it has create
                    // revision 0, that is when there is none.
                    Cond::Empty(_, hi) => {
                        Compare::create_revision(k, CompareOp::Equal, 0).with_range(self.key(hi))
                    }
                }
            })
            .collect();
        let then: Vec<TxnOp> = ops
            .iter()
            .map(|o| match o {
                Op::Put(k, v, lease) => TxnOp::put(
                    self.key(k),
                    v.clone(),
                    lease.map(|l| PutOptions::new().with_lease(l)),
                ),
                Op::Delete(k) => TxnOp::delete(self.key(k), None),
            })
            .collect();
        let reads: Vec<TxnOp> = conds
            .iter()
            .map(|c| match c {
                Cond::Empty(lo, hi) => TxnOp::get(
                    self.key(lo),
                    Some(GetOptions::new().with_range(self.key(hi)).with_limit(1)),
                ),
                _ => TxnOp::get(self.key(c.key()), None),
            })
            .collect();
        let txn = Txn::new().when(compares).and_then(then).or_else(reads);
        let mut c = self.client();
        let r = match self.call(true, async move { c.txn(txn).await }) {
            Err(KvError::LeaseExpired(_)) => {
                let l = ops.iter().find_map(|o| match o {
                    Op::Put(_, _, Some(l)) => Some(*l),
                    _ => None,
                });
                return Err(KvError::LeaseExpired(l.unwrap_or(0)));
            }
            Err(KvError::TooLarge { .. }) => {
                let bytes = ops.iter().map(|o| o.key().len()).sum();
                return Err(KvError::TooLarge {
                    ops: conds.len() + ops.len(),
                    bytes,
                });
            }
            other => other?,
        };
        if r.succeeded() {
            let rev = r.header().map_or(0, |h| h.revision() as u64);
            return Ok(Outcome::Committed(rev));
        }
        let failed = r
            .op_responses()
            .iter()
            .zip(conds)
            .enumerate()
            .filter(|(_, (resp, c))| match resp {
                TxnOpResponse::Get(g) => {
                    !c.holds(g.kvs().first().map(|kv| kv.mod_revision() as u64))
                }
                _ => true,
            })
            .map(|(i, _)| i)
            .collect();
        Ok(Outcome::Conflict(failed))
    }

    fn watch(&self, prefix: &[u8], from: Rev) -> KvResult<Box<dyn Watch>> {
        let mut c = self.client();
        let k = self.key(prefix);
        let opts = WatchOptions::new()
            .with_prefix()
            .with_start_revision(from as i64)
            .with_progress_notify();
        let stream = self.call(false, async move { c.watch(k, Some(opts)).await })?;
        Ok(Box::new(EtcdWatch {
            rt: self.rt.clone(),
            stream,
            strip: self.prefix.len(),
            from,
        }))
    }

    fn revision(&self) -> KvResult<Rev> {
        let mut c = self.client();
        // A linearizable read of one key: its header carries the revision.
        let k = self.key(b"");
        let opts = GetOptions::new().with_limit(1).with_keys_only();
        let r = self.call(false, async move { c.get(k, Some(opts)).await })?;
        Ok(r.header().map_or(0, |h| h.revision() as u64))
    }

    fn lease_grant(&self, ttl: Duration) -> KvResult<LeaseId> {
        let mut c = self.client();
        let secs = ttl.as_secs().max(1) as i64;
        let r = self.call(false, async move { c.lease_grant(secs, None).await })?;
        Ok(r.id())
    }

    fn lease_renew(&self, id: LeaseId) -> KvResult<()> {
        let mut c = self.client();
        let ttl = match self.call(false, async move {
            let (mut keeper, mut stream) = c.lease_keep_alive(id).await?;
            keeper.keep_alive().await?;
            Ok(stream.message().await?.map_or(0, |m| m.ttl()))
        }) {
            Err(KvError::LeaseExpired(_)) => return Err(KvError::LeaseExpired(id)),
            other => other?,
        };
        if ttl <= 0 {
            return Err(KvError::LeaseExpired(id));
        }
        Ok(())
    }

    fn lease_revoke(&self, id: LeaseId) -> KvResult<()> {
        let mut c = self.client();
        match self.call(false, async move { c.lease_revoke(id).await }) {
            Ok(_) => Ok(()),
            Err(KvError::LeaseExpired(_)) => Err(KvError::LeaseExpired(id)),
            Err(e) => Err(e),
        }
    }

    fn limits(&self) -> Limits {
        ETCD_LIMITS
    }
}

struct EtcdWatch {
    rt: Arc<tokio::runtime::Runtime>,
    stream: WatchStream,
    strip: usize,
    from: Rev,
}

impl Watch for EtcdWatch {
    fn next(&mut self, timeout: Duration) -> KvResult<Vec<Event>> {
        let stream = &mut self.stream;
        let msg = match self
            .rt
            .block_on(async move { tokio::time::timeout(timeout, stream.message()).await })
        {
            Err(_) => return Ok(vec![]),
            Ok(r) => r.map_err(|e| map_err(e, false))?,
        };
        let Some(resp) = msg else {
            return Err(KvError::Unavailable("watch stream ended".into()));
        };
        if resp.compact_revision() > 0 {
            return Err(KvError::Compacted(self.from));
        }
        if resp.canceled() {
            return Err(KvError::Unavailable(format!(
                "watch canceled: {}",
                resp.cancel_reason()
            )));
        }
        let mut out = Vec::new();
        for e in resp.events() {
            let Some(kv) = e.kv() else { continue };
            let rev = kv.mod_revision() as u64;
            self.from = self.from.max(rev + 1);
            out.push(Event {
                key: kv.key()[self.strip.min(kv.key().len())..].to_vec(),
                value: match e.event_type() {
                    EventType::Put => Some(kv.value().to_vec()),
                    EventType::Delete => None,
                },
                rev,
            });
        }
        Ok(out)
    }
}

impl EtcdStore {
    /// Keys in `[lo, hi)` at revision `at` (0: now), in pages (one answer
    /// must stay under gRPC's 4 MiB), every page at the first one's
    /// revision: one snapshot.
    fn scan_from(&self, lo: &[u8], hi: &[u8], limit: usize, at: Rev) -> KvResult<Scan> {
        const PAGE: usize = 10_000;
        let hi = self.key(hi);
        let mut from = self.key(lo);
        let mut rev = at;
        let mut v: Vec<(Vec<u8>, Versioned)> = Vec::new();
        while v.len() < limit {
            let want = (limit - v.len()).min(PAGE);
            let mut opts = GetOptions::new()
                .with_range(hi.clone())
                .with_limit(want as i64);
            if rev > 0 {
                opts = opts.with_revision(rev as i64);
            }
            let mut c = self.client();
            let key = from.clone();
            let r = self.call(false, async move { c.get(key, Some(opts)).await })?;
            if rev == 0 {
                rev = r.header().map_or(0, |h| h.revision() as u64);
            }
            for kv in r.kvs() {
                v.push((
                    self.strip(kv.key()),
                    Versioned {
                        value: kv.value().to_vec(),
                        mod_rev: kv.mod_revision() as u64,
                    },
                ));
            }
            match r.kvs().last() {
                Some(last) if r.more() => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => break,
            }
        }
        Ok((v, rev))
    }
}

/// etcd's answer to a read of a compacted revision, as `Compacted`.
fn compacted(e: KvError, rev: Rev) -> KvError {
    match e {
        KvError::Other(m) if m.contains("compacted") => KvError::Compacted(rev),
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = EtcdUrl::parse("etcd://127.0.0.1:23791,127.0.0.1:23792/fs1").unwrap();
        assert_eq!(
            u.endpoints,
            vec!["http://127.0.0.1:23791", "http://127.0.0.1:23792"]
        );
        assert_eq!(u.name, "fs1");
        for bad in [
            "etcd://h:1",
            "etcd:///x",
            "http://h:1/x",
            "etcd://h:1/a/b",
            "etcd://h/x",
            "etcd://h:1/",
        ] {
            assert!(EtcdUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
