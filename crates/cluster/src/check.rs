//! fsck of a cluster namespace.

use super::filedata::Table;
use super::ClusterStore;
use shoal_core::error::{Error, Result};
use shoal_core::types::{Ino, Kind, ROOT_INO};
use std::collections::HashMap;

use crate::format::scan_all;
use crate::keys::{dec_entry, FORMAT_KEY};
use crate::ns::Node;
use crate::txn::kv;

/// What `check` found wrong with a shared namespace.
#[derive(Debug, Default)]
pub struct SharedCheck {
    pub inodes: u64,
    pub entries: u64,
    pub problems: Vec<String>,
}

/// fsck of a shared namespace: every entry names an inode of its kind in a
/// directory that exists; every inode but the root is named, a file as
/// many times as its link count, a directory once, from the parent it
/// records; no directory is its own ancestor.
pub fn check(store: &dyn ClusterStore) -> Result<SharedCheck> {
    if store.get(FORMAT_KEY).map_err(kv)?.is_none() {
        return Err(Error::Io(
            "no shoal filesystem here (make one with `shoal mkfs`)".into(),
        ));
    }
    let mut r = SharedCheck::default();
    let all = |lo: &[u8], hi: &[u8]| scan_all(store, lo, hi);
    let mut nodes: HashMap<Ino, Node> = HashMap::new();
    for (k, v) in all(b"I", b"J")? {
        let ino = u64::from_be_bytes(k[1..9].try_into().unwrap());
        match Node::decode(ino, &v.value) {
            Ok(n) => {
                if let Err(e) = Table::of(&n) {
                    r.problems.push(e.to_string());
                }
                nodes.insert(ino, n);
            }
            Err(e) => r.problems.push(format!("inode {ino}: {e}")),
        }
    }
    r.inodes = nodes.len() as u64;
    let orphans: std::collections::HashSet<Ino> = all(b"O", b"P")?
        .into_iter()
        .filter(|(k, _)| k.len() == 17)
        .map(|(k, _)| u64::from_be_bytes(k[9..17].try_into().unwrap()))
        .collect();
    let mut names: HashMap<Ino, Vec<Ino>> = HashMap::new();
    for (k, v) in all(b"E", b"F")? {
        r.entries += 1;
        let parent = u64::from_be_bytes(k[1..9].try_into().unwrap());
        let name = String::from_utf8_lossy(&k[9..]).to_string();
        let (ino, kind) = dec_entry(&v.value)?;
        match nodes.get(&parent) {
            Some(p) if p.attr.kind == Kind::Dir => {}
            _ => r
                .problems
                .push(format!("entry {parent}/{name}: no directory {parent}")),
        }
        match nodes.get(&ino) {
            None => r
                .problems
                .push(format!("entry {parent}/{name}: no inode {ino}")),
            Some(n) if n.attr.kind != kind => r.problems.push(format!(
                "entry {parent}/{name}: kind differs from inode {ino}'s"
            )),
            Some(_) => names.entry(ino).or_default().push(parent),
        }
    }
    for (ino, n) in &nodes {
        let named = names.get(ino).map_or(0, |v| v.len()) as u32;
        if *ino == ROOT_INO {
            if named != 0 {
                r.problems.push("the root is named by an entry".into());
            }
            continue;
        }
        match n.attr.kind {
            Kind::Dir => {
                if named != 1 {
                    r.problems
                        .push(format!("directory {ino}: named {named} times"));
                } else if names[ino][0] != n.parent() {
                    r.problems.push(format!(
                        "directory {ino}: in {} but records parent {}",
                        names[ino][0],
                        n.parent()
                    ));
                }
            }
            _ if n.attr.nlink == 0 && named == 0 && orphans.contains(ino) => {}
            _ if named != n.attr.nlink => r.problems.push(format!(
                "inode {ino}: nlink {} but {named} names",
                n.attr.nlink
            )),
            _ => {}
        }
    }
    // No cycles: from each directory, the parents reach the root.
    for (ino, n) in &nodes {
        if n.attr.kind != Kind::Dir {
            continue;
        }
        let (mut a, mut steps) = (*ino, 0);
        while a != ROOT_INO && steps <= nodes.len() {
            a = nodes.get(&a).map_or(ROOT_INO, |n| n.parent());
            steps += 1;
        }
        if a != ROOT_INO {
            r.problems.push(format!(
                "directory {ino}: its parents do not reach the root"
            ));
        }
    }
    Ok(r)
}
