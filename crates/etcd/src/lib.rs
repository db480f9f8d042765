//! shoal's shared store on an etcd cluster (`shoal_cluster::ClusterStore`).
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
use shoal_cluster::{
    ClusterStore, Cond, Event, Got, KvError, KvResult, LeaseId, Limits, Op, Outcome, Rev, Scan,
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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EtcdUrl {
    pub endpoints: Vec<String>,
    pub name: String,
    /// etcd's authentication: user and password (docs/security.md).
    pub user: Option<(String, String)>,
    /// TLS to the members (`https://` endpoints).
    pub tls: Option<Tls>,
}

/// TLS settings, named as JuiceFS names them (`cacert`, `cert`, `key`,
/// `server-name`): PEM files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tls {
    pub cacert: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
    pub server_name: Option<String>,
}

/// `url` as it may be shown (logs, /proc/mounts, status): without a
/// password given in it.
pub fn redact(url: &str) -> String {
    let Some(rest) = url.strip_prefix("etcd://") else {
        return url.to_string();
    };
    let (hosts, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match hosts.rsplit_once('@') {
        Some((cred, h)) => {
            let user = cred.split_once(':').map_or(cred, |(u, _)| u);
            format!("etcd://{user}@{h}{tail}")
        }
        None => url.to_string(),
    }
}

/// The password given in `url` itself, if any (a daemon passes it to its
/// background child in the environment, not on its command line).
pub fn url_password(url: &str) -> Option<String> {
    let rest = url.strip_prefix("etcd://")?;
    let hosts = rest.split('/').next()?;
    let (cred, _) = hosts.rsplit_once('@')?;
    cred.split_once(':').map(|(_, p)| p.to_string())
}

impl EtcdUrl {
    /// `etcd://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/NAME[?PARAMS]`,
    /// PARAMS `cacert=`, `cert=`, `key=`, `server-name=` (TLS, each a PEM
    /// file but the last) and `password-file=`; the password is taken from
    /// the URL, else `META_PASSWORD`, else the password file.
    pub fn parse(url: &str) -> Result<EtcdUrl, String> {
        let shown = redact(url);
        let usage = || {
            format!(
                "'{shown}': expected etcd://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/NAME[?cacert=CA.pem&cert=CERT.pem&key=KEY.pem&server-name=NAME&password-file=FILE]"
            )
        };
        let rest = url.strip_prefix("etcd://").ok_or_else(usage)?;
        let (hosts, path) = rest.split_once('/').ok_or_else(usage)?;
        let (name, query) = match path.split_once('?') {
            Some((n, q)) => (n, q),
            None => (path, ""),
        };
        let (cred, hosts) = match hosts.rsplit_once('@') {
            Some((c, h)) => (Some(c), h),
            None => (None, hosts),
        };
        if hosts.is_empty()
            || name.is_empty()
            || name.contains('/')
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(usage());
        }
        let mut tls = Tls::default();
        let mut password_file = None;
        for kv in query.split('&').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let v = v.to_string();
            match k {
                "cacert" => tls.cacert = Some(v),
                "cert" => tls.cert = Some(v),
                "key" => tls.key = Some(v),
                "server-name" => tls.server_name = Some(v),
                "password-file" => password_file = Some(v),
                "insecure-skip-verify" => {
                    return Err(format!(
                        "'{shown}': insecure-skip-verify is not offered: a member's certificate is always checked; give its CA with cacert=CA.pem"
                    ))
                }
                _ => return Err(format!("'{shown}': unknown parameter '{k}' ({})", usage())),
            }
        }
        if tls.cert.is_some() != tls.key.is_some() {
            return Err(format!(
                "'{shown}': a client certificate needs both cert= and key="
            ));
        }
        let has_tls = tls.cacert.is_some() || tls.cert.is_some() || tls.server_name.is_some();
        let scheme = if has_tls { "https" } else { "http" };
        let endpoints = hosts
            .split(',')
            .map(|h| {
                if h.is_empty() || !h.contains(':') {
                    Err(usage())
                } else {
                    Ok(format!("{scheme}://{h}"))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let user = match cred {
            None => None,
            Some(c) => {
                let (u, p) = match c.split_once(':') {
                    Some((u, p)) => (u.to_string(), Some(p.to_string())),
                    None => (c.to_string(), None),
                };
                let p = match p {
                    Some(p) => p,
                    None => match (std::env::var("META_PASSWORD"), &password_file) {
                        (Ok(p), _) => p,
                        (_, Some(f)) => std::fs::read_to_string(f)
                            .map_err(|e| format!("'{shown}': password-file {f}: {e}"))?
                            .trim_end_matches(['\n', '\r'])
                            .to_string(),
                        _ => {
                            return Err(format!(
                                "'{shown}': no password for etcd user '{u}': set META_PASSWORD, or give password-file=FILE"
                            ))
                        }
                    },
                };
                Some((u, p))
            }
        };
        Ok(EtcdUrl {
            endpoints,
            name: name.to_string(),
            user,
            tls: has_tls.then_some(tls),
        })
    }

    /// The client's options for these credentials and TLS settings.
    fn options(&self, mut opts: ConnectOptions) -> KvResult<ConnectOptions> {
        if let Some((u, p)) = &self.user {
            opts = opts.with_user(u.clone(), p.clone());
        }
        if let Some(t) = &self.tls {
            let read = |what: &str, f: &str| {
                std::fs::read(f).map_err(|e| KvError::Other(format!("{what} {f}: {e}")))
            };
            let mut o = etcd_client::TlsOptions::new();
            if let Some(ca) = &t.cacert {
                o = o.ca_certificate(etcd_client::Certificate::from_pem(read("cacert", ca)?));
            }
            if let (Some(c), Some(k)) = (&t.cert, &t.key) {
                o = o.identity(etcd_client::Identity::from_pem(
                    read("cert", c)?,
                    read("key", k)?,
                ));
            }
            if let Some(n) = &t.server_name {
                o = o.domain_name(n.clone());
            }
            opts = opts.with_tls(o);
        }
        Ok(opts)
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
        if url.tls.is_some() {
            // Both ring (tonic's) and aws-lc-rs (the object store's HTTP
            // client's) are compiled into rustls, which then has no default
            // and fails every handshake ("transport error"): choose one.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("shoal-etcd")
            .enable_all()
            .build()
            .map_err(other)?;
        let opts = url.options(
            ConnectOptions::new()
                .with_connect_timeout(timeout)
                .with_timeout(timeout)
                .with_keep_alive(Duration::from_secs(2), timeout)
                .with_require_leader(true),
        )?;
        let mut clients = Vec::new();
        for ep in &url.endpoints {
            let c = rt
                .block_on(async {
                    tokio::time::timeout(timeout, Client::connect([ep], Some(opts.clone()))).await
                })
                .map_err(|_| KvError::Unavailable(format!("connect to {ep}: timed out")))?
                .map_err(|e| {
                    // The cause behind tonic's "transport error" (a refused
                    // certificate, a TLS handshake with a plaintext member).
                    let mut m = e.to_string();
                    let mut src = std::error::Error::source(&e);
                    while let Some(s) = src {
                        m = format!("{m}: {s}");
                        src = s.source();
                    }
                    match map_err(e, false) {
                        KvError::Unavailable(_) => KvError::Unavailable(format!("{ep}: {m}")),
                        other => other,
                    }
                })?;
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

impl ClusterStore for EtcdStore {
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

    fn count(&self, lo: &[u8], hi: &[u8]) -> KvResult<u64> {
        let mut c = self.client();
        let k = self.key(lo);
        let opts = GetOptions::new().with_range(self.key(hi)).with_count_only();
        let r = self.call(false, async move { c.get(k, Some(opts)).await })?;
        Ok(r.count() as u64)
    }

    /// The member's database size; its quota where it reports one (etcd
    /// 3.6's `dbSizeQuota`; 3.4 and 3.5 do not, and then it is None).
    fn space(&self) -> KvResult<Option<shoal_cluster::StoreSpace>> {
        let mut c = self.client();
        let r = self.call(false, async move { c.status().await })?;
        Ok(Some(shoal_cluster::StoreSpace {
            used: r.db_size().max(0) as u64,
            quota: (r.db_size_quota() > 0).then(|| r.db_size_quota() as u64),
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

/// etcd's answer to a read of a compacted revision (`map_err` read it
/// from etcd's message, the one place that does) with the revision asked.
fn compacted(e: KvError, rev: Rev) -> KvError {
    match e {
        KvError::Compacted(_) => KvError::Compacted(rev),
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

    /// Users, passwords and TLS in the URL, and what is shown of it.
    #[test]
    fn secured_urls() {
        let u = EtcdUrl::parse(
            "etcd://al:pw@h:1,h:2/fs?cacert=/c.pem&cert=/a.pem&key=/k.pem&server-name=etcd",
        )
        .unwrap();
        assert_eq!(u.endpoints, vec!["https://h:1", "https://h:2"]);
        assert_eq!(u.user, Some(("al".into(), "pw".into())));
        let t = u.tls.unwrap();
        assert_eq!(t.cacert.as_deref(), Some("/c.pem"));
        assert_eq!(t.server_name.as_deref(), Some("etcd"));
        assert_eq!(redact("etcd://al:pw@h:1/fs?x=1"), "etcd://al@h:1/fs?x=1");
        assert_eq!(redact("etcd://h:1/fs"), "etcd://h:1/fs");
        assert_eq!(url_password("etcd://al:pw@h:1/fs").as_deref(), Some("pw"));
        assert_eq!(url_password("etcd://al@h:1/fs"), None);
        let f = std::env::temp_dir().join(format!("shoal-pw-{}", std::process::id()));
        std::fs::write(&f, "from-file\n").unwrap();
        let u = EtcdUrl::parse(&format!("etcd://al@h:1/fs?password-file={}", f.display()));
        let _ = std::fs::remove_file(&f);
        if std::env::var_os("META_PASSWORD").is_none() {
            assert_eq!(u.unwrap().user, Some(("al".into(), "from-file".into())));
        }
        for bad in [
            "etcd://h:1/fs?cert=/a.pem",
            "etcd://h:1/fs?insecure-skip-verify=true",
            "etcd://h:1/fs?what=1",
        ] {
            let e = EtcdUrl::parse(bad).unwrap_err();
            assert!(!e.contains("pw"), "{e}");
        }
    }
}
