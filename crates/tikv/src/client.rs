//! The transactional seam (`crate::txn`) on `tikv-client` 0.4, behind the
//! `client` feature: CI compiles it; nothing here has run against a live
//! TiKV cluster (none can be had on the machines that build shoal).
//!
//! Each call blocks on the client's futures in a runtime of its own, as
//! `shoal_etcd` does. Optimistic transactions: writes are buffered in the
//! client until `commit`, which prewrites and commits them (two-phase).

use crate::txn::{Ts, Txn, TxnError, TxnKv, TxnResult};
use crate::TikvStore;
use shoal_cluster::{KvError, KvResult};
use std::sync::Arc;
use tikv_client::{CheckLevel, Error, Key, TimestampExt, TransactionClient, TransactionOptions};

/// A connection to a TiKV cluster through its PD members.
pub struct Client {
    rt: Arc<tokio::runtime::Runtime>,
    client: TransactionClient,
}

/// `tikv://PD1:P,PD2:P/NAME`: the PD members and the filesystem's name.
pub fn parse_url(url: &str) -> KvResult<(Vec<String>, String)> {
    let rest = url
        .strip_prefix("tikv://")
        .ok_or_else(|| KvError::Other("expected tikv://PD:PORT,.../NAME".into()))?;
    let (hosts, name) = rest.split_once('/').ok_or_else(|| {
        KvError::Other("no /NAME after the PD members (expected tikv://PD:PORT,.../NAME)".into())
    })?;
    let pds: Vec<String> = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(String::from)
        .collect();
    if pds.is_empty() || name.is_empty() || name.contains('/') {
        return Err(KvError::Other("expected tikv://PD:PORT,.../NAME".into()));
    }
    Ok((pds, name.to_string()))
}

/// The shared store of the filesystem `url` names.
pub fn connect(url: &str) -> KvResult<Arc<TikvStore<Client>>> {
    let (pds, name) = parse_url(url)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("shoal-tikv")
        .enable_all()
        .build()
        .map_err(|e| KvError::Other(format!("tikv runtime: {e}")))?;
    let client = rt.block_on(TransactionClient::new(pds)).map_err(|e| {
        KvError::Unavailable(format!(
            "connecting to PD ({e}): is TiKV's PD running there?"
        ))
    })?;
    let prefix = format!("/shoal/{name}/").into_bytes();
    Ok(Arc::new(TikvStore::new(
        Client {
            rt: Arc::new(rt),
            client,
        },
        prefix,
    )))
}

/// A write-write conflict anywhere in a (possibly nested) client error.
fn is_conflict(e: &Error) -> bool {
    match e {
        Error::KeyError(k) => k.conflict.is_some() || !k.retryable.is_empty(),
        Error::MultipleKeyErrors(es) | Error::ExtractedErrors(es) => es.iter().any(is_conflict),
        _ => false,
    }
}

/// Before a commit is sent, nothing was applied.
fn before(e: Error) -> TxnError {
    TxnError::Unavailable(e.to_string())
}

impl TxnKv for Client {
    type Txn = ClientTxn;

    fn begin(&self) -> TxnResult<ClientTxn> {
        // Reads end in a rollback or a plain drop: no drop check.
        let opts = TransactionOptions::new_optimistic().drop_check(CheckLevel::None);
        let txn = self
            .rt
            .block_on(self.client.begin_with_options(opts))
            .map_err(before)?;
        Ok(ClientTxn {
            rt: self.rt.clone(),
            txn,
        })
    }

    fn timestamp(&self) -> TxnResult<Ts> {
        self.rt
            .block_on(self.client.current_timestamp())
            .map(|t| t.version())
            .map_err(before)
    }
}

/// One optimistic transaction of `tikv-client`.
pub struct ClientTxn {
    rt: Arc<tokio::runtime::Runtime>,
    txn: tikv_client::Transaction,
}

impl Txn for ClientTxn {
    fn start_ts(&self) -> Ts {
        self.txn.start_timestamp().version()
    }

    fn batch_get(&mut self, keys: &[Vec<u8>]) -> TxnResult<Vec<Option<Vec<u8>>>> {
        let got: std::collections::HashMap<Key, Vec<u8>> = self
            .rt
            .block_on(self.txn.batch_get(keys.to_vec()))
            .map_err(before)?
            .map(|kv| (kv.0, kv.1))
            .collect();
        Ok(keys
            .iter()
            .map(|k| got.get(&Key::from(k.clone())).cloned())
            .collect())
    }

    fn scan(&mut self, lo: &[u8], hi: &[u8], limit: u32) -> TxnResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let range = lo.to_vec()..hi.to_vec();
        Ok(self
            .rt
            .block_on(self.txn.scan(range, limit))
            .map_err(before)?
            .map(|kv| (Vec::from(kv.0), kv.1))
            .collect())
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        // Buffered in the client (optimistic): this cannot fail but for a
        // transaction already ended, which this type does not allow.
        self.rt
            .block_on(self.txn.put(key, value))
            .expect("buffering a put");
    }

    fn delete(&mut self, key: Vec<u8>) {
        self.rt
            .block_on(self.txn.delete(key))
            .expect("buffering a delete");
    }

    fn lock(&mut self, key: Vec<u8>) {
        self.rt
            .block_on(self.txn.lock_keys([key]))
            .expect("buffering a lock");
    }

    fn commit(mut self) -> TxnResult<()> {
        match self.rt.block_on(self.txn.commit()) {
            Ok(_) => Ok(()),
            Err(e) if is_conflict(&e) => Err(TxnError::Conflict(e.to_string())),
            // After the prewrite: the primary's commit may have landed.
            Err(e) => Err(TxnError::Undetermined(e.to_string())),
        }
    }

    fn rollback(mut self) {
        let _ = self.rt.block_on(self.txn.rollback());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn urls() {
        let (pds, name) = super::parse_url("tikv://10.0.0.1:2379,10.0.0.2:2379/fs1").unwrap();
        assert_eq!(pds, vec!["10.0.0.1:2379", "10.0.0.2:2379"]);
        assert_eq!(name, "fs1");
        assert!(super::parse_url("tikv://h:1").is_err());
        assert!(super::parse_url("etcd://h:1/x").is_err());
    }
}
