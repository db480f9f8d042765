//! A cluster namespace's format: mkfs, where its file data goes, its sessions.

use super::filedata::Table;
use super::{ClusterStore, Cond, Op, Outcome, Versioned};
use shoal_core::error::{Error, Result};
use shoal_core::types::{Attr, Ts, ROOT_INO};

use crate::keys::{ikey, skey, DATA_KEY, FORMAT_KEY, NEXT_CHUNK};
use crate::ns::{Node, SHARED_FORMAT};
use crate::txn::kv;

/// Make a new shared namespace on `store`: the format key, the root, the
/// inode counter. Refused if one is there already.
pub fn mkfs(store: &dyn ClusterStore) -> Result<()> {
    mkfs_with_data(store, None)
}

/// `mkfs` that records where file data goes (`data_url`, read back by every
/// mount with [`data_url`]).
pub fn mkfs_with_data(store: &dyn ClusterStore, data: Option<&str>) -> Result<()> {
    let t = Ts::now();
    let root = Node {
        attr: Attr::root(t),
        blob: ROOT_INO.to_le_bytes().to_vec(),
        xattrs: vec![],
        flags: 0,
    };
    let ops = vec![
        Op::Put(
            FORMAT_KEY.to_vec(),
            SHARED_FORMAT.to_le_bytes().to_vec(),
            None,
        ),
        Op::Put(NEXT_CHUNK.to_vec(), 1u64.to_le_bytes().to_vec(), None),
        Op::Put(ikey(ROOT_INO), root.encode(), None),
    ];
    let mut ops = ops;
    if let Some(d) = data {
        ops.push(Op::Put(DATA_KEY.to_vec(), d.as_bytes().to_vec(), None));
    }
    match store
        .commit(&[Cond::Absent(FORMAT_KEY.to_vec())], &ops)
        .map_err(kv)?
    {
        Outcome::Committed(_) => Ok(()),
        Outcome::Conflict(_) => Err(Error::Exists),
    }
}

/// Where the namespace on `store` keeps file data past the inline size
/// (what mkfs was given), if anywhere.
pub fn data_url(store: &dyn ClusterStore) -> Result<Option<String>> {
    Ok(store
        .get(DATA_KEY)
        .map_err(kv)?
        .map(|v| String::from_utf8_lossy(&v.value).into_owned()))
}

/// Whether `store` holds a shoal namespace (its format key).
pub fn is_formatted(store: &dyn ClusterStore) -> Result<bool> {
    Ok(store.get(FORMAT_KEY).map_err(kv)?.is_some())
}

/// Record `data` as where the namespace on `store` keeps file data
/// (`shoal config --data`: the object store moved, or its settings
/// changed). Mounts read it when they start. `Invalid` when `store`
/// holds no shoal namespace.
pub fn set_data_url(store: &dyn ClusterStore, data: &str) -> Result<()> {
    match store
        .commit(
            &[Cond::Exists(FORMAT_KEY.to_vec())],
            &[Op::Put(DATA_KEY.to_vec(), data.as_bytes().to_vec(), None)],
        )
        .map_err(kv)?
    {
        Outcome::Committed(_) => Ok(()),
        Outcome::Conflict(_) => Err(Error::Invalid),
    }
}

/// Whether the session `sid` is alive (its key, on its lease, is there).
pub fn session_alive(store: &dyn ClusterStore, sid: u64) -> Result<bool> {
    Ok(store.get(&skey(sid)).map_err(kv)?.is_some())
}

/// The object names every file's chunk table holds.
pub fn all_tables(store: &dyn ClusterStore) -> Result<Vec<String>> {
    let mut names = vec![];
    for (k, v) in scan_all(store, b"I", b"J")? {
        let ino = u64::from_be_bytes(k[1..9].try_into().unwrap());
        let n = Node::decode(ino, &v.value)?;
        names.extend(Table::of(&n)?.0.iter().map(|p| p.name(ino)));
    }
    Ok(names)
}

/// Every key in `[lo, hi)`, in pages.
pub(super) fn scan_all(
    store: &dyn ClusterStore,
    lo: &[u8],
    hi: &[u8],
) -> Result<Vec<(Vec<u8>, Versioned)>> {
    let mut out = Vec::new();
    let mut from = lo.to_vec();
    loop {
        let (kvs, _) = store.scan(&from, hi, 1000).map_err(kv)?;
        let n = kvs.len();
        if let Some((k, _)) = kvs.last() {
            from = k.clone();
            from.push(0);
        }
        out.extend(kvs);
        if n < 1000 {
            return Ok(out);
        }
    }
}
