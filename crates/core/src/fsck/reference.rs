//! The in-memory walk `fsck` was until it checked in bounded memory, kept
//! unchanged as the oracle the bounded walk is tested against
//! (`crates/core/tests/fsck_bounded.rs`): both must report the same
//! problems and leave the same store after `--repair`. It holds every
//! inode's facts in a map (about 700 bytes an inode), so use it only on
//! small stores. Not for production use.

use super::{for_range, Report};
use crate::schema::{self, AG_SHIFT};
use crate::store::BatchItem;
use crate::{Error, Kind, Result, Store, BLOCK, INLINE_MAX, ROOT_INO};
use std::collections::{BTreeMap, HashMap};

struct InodeInfo {
    attr: crate::Attr,
    parent_ptr: u64,
    refs: u32,
    subdirs: u32,
    entries: u64,
    named_from: Option<u64>,
    /// The primary pointer stored in the inode record.
    primary: Option<(u64, u64)>,
    /// Keys and locations of the entries naming it with the sole flag.
    sole: Vec<(Vec<u8>, (u64, u64))>,
    has_data: bool,
}

pub fn fsck(store: &dyn Store, repair: bool) -> Result<Report> {
    let mut r = Report::default();
    let mut fix: Vec<BatchItem> = Vec::new();
    let ags = match store.get(&schema::super_key())? {
        Some(v) => schema::decode_super(&v)?,
        None => return Err(Error::Corrupted("no superblock: not a shoal store".into())),
    };
    let mut ag_next = vec![0u64; ags as usize];
    for (ag, slot) in ag_next.iter_mut().enumerate() {
        match store.get(&schema::ag_key(ag as u32))? {
            Some(v) => match schema::decode_u64("allocation group", &v) {
                Ok(n) => *slot = n,
                Err(e) => r.problems.push(format!("allocation group {ag}: {e}")),
            },
            None => r
                .problems
                .push(format!("allocation group {ag}: record missing")),
        }
    }
    let mut inodes: HashMap<u64, InodeInfo> = HashMap::new();
    for_range(
        store,
        vec![schema::K_INODE],
        vec![schema::K_INODE + 1],
        |k, v| {
            let ino = schema::parse_inode_key(k)?;
            match schema::decode_inode(ino, v) {
                Ok((attr, extra)) => {
                    let parent_ptr = if attr.kind == Kind::Dir && extra.blob.len() == 8 {
                        u64::from_le_bytes(extra.blob[..8].try_into().unwrap())
                    } else {
                        0
                    };
                    inodes.insert(
                        ino,
                        InodeInfo {
                            attr,
                            parent_ptr,
                            refs: 0,
                            subdirs: 0,
                            entries: 0,
                            named_from: None,
                            primary: extra.primary,
                            sole: Vec::new(),
                            has_data: false,
                        },
                    );
                }
                Err(e) => {
                    r.problems.push(format!("inode {ino}: {e}"));
                }
            }
            Ok(())
        },
    )?;
    r.inodes = inodes.len() as u64;
    if !inodes
        .get(&ROOT_INO)
        .is_some_and(|i| i.attr.kind == Kind::Dir)
    {
        r.problems
            .push("root inode missing or not a directory".into());
        if !repair {
            return Ok(r);
        }
        // A new, empty root (as e2fsck makes one): the entries under it are
        // counted below, and what it held before is linked back into it
        // as lost+found.<ino>.
        let t = crate::types::Ts::now();
        let attr = crate::types::Attr::root(t);
        // Written now: the repairs below read the root's record back.
        store.write(
            &[(
                schema::inode_key(ROOT_INO),
                Some(schema::encode_inode(
                    &attr,
                    &ROOT_INO.to_le_bytes(),
                    &[],
                    None,
                    0,
                )),
            )],
            true,
        )?;
        r.repaired += 1;
        inodes.insert(
            ROOT_INO,
            InodeInfo {
                attr,
                parent_ptr: ROOT_INO,
                refs: 0,
                subdirs: 0,
                entries: 0,
                named_from: None,
                primary: None,
                sole: Vec::new(),
                has_data: false,
            },
        );
    }
    for (ino, _) in inodes.iter() {
        let ag = (ino >> AG_SHIFT) as usize;
        let seq = ino & ((1 << AG_SHIFT) - 1);
        if ag >= ag_next.len() || seq >= ag_next[ag] {
            r.problems.push(format!(
                "inode {ino}: beyond its allocation group's high-water mark"
            ));
            if repair && ag < ag_next.len() {
                ag_next[ag] = seq + 1;
                fix.push((schema::ag_key(ag as u32), Some(schema::encode_u64(seq + 1))));
            }
        }
    }
    // Entries.
    let mut names: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for_range(
        store,
        vec![schema::K_ENTRY],
        vec![schema::K_ENTRY + 1],
        |k, v| {
            let (parent, hash, name) = schema::parse_entry_key(k)?;
            r.entries += 1;
            let shown = String::from_utf8_lossy(name).into_owned();
            if schema::name_hash(name) != hash {
                r.problems
                    .push(format!("entry {parent}/{shown}: hash does not match name"));
                if repair {
                    fix.push((k.to_vec(), None));
                }
                return Ok(());
            }
            let (child, kind, sole) = match schema::decode_entry(v) {
                Ok(x) => x,
                Err(e) => {
                    r.problems.push(format!("entry {parent}/{shown}: {e}"));
                    if repair {
                        fix.push((k.to_vec(), None));
                    }
                    return Ok(());
                }
            };
            let parent_ok = inodes
                .get(&parent)
                .is_some_and(|p| p.attr.kind == Kind::Dir);
            let child_ok = inodes.get(&child).is_some_and(|c| c.attr.kind == kind);
            if !parent_ok || !child_ok {
                r.problems.push(format!(
                    "entry {parent}/{shown} -> {child}: {}",
                    if !parent_ok {
                        "parent is not a live directory"
                    } else {
                        "child inode missing or of another kind"
                    }
                ));
                if repair {
                    fix.push((k.to_vec(), None));
                }
                return Ok(());
            }
            let c = inodes.get_mut(&child).unwrap();
            c.refs += 1;
            if sole {
                c.sole.push((k.to_vec(), (parent, hash)));
            }
            if kind == Kind::Dir {
                if c.named_from.is_some() {
                    r.problems
                        .push(format!("directory {child} has more than one name"));
                }
                c.named_from = Some(parent);
            }
            let p = inodes.get_mut(&parent).unwrap();
            p.entries += 1;
            if kind == Kind::Dir {
                p.subdirs += 1;
            }
            names.entry(child).or_insert_with(|| name.to_vec());
            Ok(())
        },
    )?;
    // Orphans.
    let mut orphans: Vec<u64> = Vec::new();
    for_range(
        store,
        vec![schema::K_ORPHAN],
        vec![schema::K_ORPHAN + 1],
        |k, _| {
            let ino = schema::parse_orphan_key(k)?;
            orphans.push(ino);
            Ok(())
        },
    )?;
    // Data blocks.
    let mut lost_data: Vec<Vec<u8>> = Vec::new();
    for_range(
        store,
        vec![schema::K_DATA],
        vec![schema::K_DATA + 1],
        |k, v| {
            let (ino, blk) = schema::parse_data_key(k)?;
            r.data_blocks += 1;
            if let Err(e) = schema::decode_data(v) {
                r.problems.push(format!("data block {ino}:{blk}: {e}"));
                return Ok(());
            }
            if let Some(i) = inodes.get_mut(&ino) {
                i.has_data = true;
            }
            match inodes.get(&ino) {
                Some(i)
                    if i.attr.kind == Kind::File
                        && i.attr.size > INLINE_MAX
                        && blk * BLOCK < i.attr.size => {}
                Some(i) => {
                    r.problems.push(format!(
                        "data block {ino}:{blk}: outside the file (size {})",
                        i.attr.size
                    ));
                    lost_data.push(k.to_vec());
                }
                None => {
                    r.problems
                        .push(format!("data block {ino}:{blk}: inode missing"));
                    lost_data.push(k.to_vec());
                }
            }
            Ok(())
        },
    )?;
    if repair {
        fix.extend(lost_data.into_iter().map(|k| (k, None)));
    }
    // Data objects: each of a live regular file, no longer than it.
    let data = store.data();
    for ino in data.list()? {
        let size = match inodes.get(&ino) {
            Some(i) if i.attr.kind == Kind::File && !orphans.contains(&ino) => Some(i.attr.size),
            _ => None,
        };
        let want = size.map(|s| if s > INLINE_MAX { s } else { 0 });
        let len = data.len(ino)?;
        if want.is_some_and(|w| len <= w) {
            r.data_objects += 1;
            continue;
        }
        r.leftover_objects += 1;
        if repair {
            match want {
                Some(w) => data.set_len(ino, w)?,
                None => data.remove(ino)?,
            }
            r.repaired += 1;
        }
    }
    // Per-inode invariants.
    let mut lost: Vec<u64> = Vec::new();
    let mut sorted: Vec<_> = inodes.keys().copied().collect();
    sorted.sort_unstable();
    for ino in sorted {
        let i = &inodes[&ino];
        let a = i.attr;
        let orphan = orphans.contains(&ino);
        let mut want = a;
        if a.kind == Kind::Dir {
            if want.nlink != 2 + i.subdirs {
                r.problems.push(format!(
                    "directory {ino}: nlink {} but {} subdirectories",
                    a.nlink, i.subdirs
                ));
                want.nlink = 2 + i.subdirs;
            }
            if want.size != i.entries {
                r.problems.push(format!(
                    "directory {ino}: size {} but {} entries",
                    a.size, i.entries
                ));
                want.size = i.entries;
            }
            if ino != ROOT_INO {
                match i.named_from {
                    Some(p) if p != i.parent_ptr => {
                        r.problems.push(format!(
                            "directory {ino}: parent pointer {} but named in {p}",
                            i.parent_ptr
                        ));
                    }
                    None => {
                        r.problems
                            .push(format!("directory {ino}: not named by any entry"));
                        lost.push(ino);
                    }
                    _ => {}
                }
            }
        } else if i.refs == 0 {
            if !(orphan && a.nlink == 0) {
                r.problems.push(format!(
                    "inode {ino}: nlink {} but no entry names it",
                    a.nlink
                ));
                if a.nlink > 0 {
                    lost.push(ino);
                } else if repair {
                    fix.push((schema::inode_key(ino), None));
                }
            }
        } else if a.nlink != i.refs {
            r.problems.push(format!(
                "inode {ino}: nlink {} but {} entries name it",
                a.nlink, i.refs
            ));
            want.nlink = i.refs;
        }
        // Invariant 7: the flag is a promise unlink acts on without reading.
        let mut clear_primary = false;
        if i.primary.is_some() || !i.sole.is_empty() {
            let agree = i.sole.len() == 1 && i.primary == Some(i.sole[0].1);
            let holds = a.kind != Kind::Dir && a.nlink == 1 && i.refs == 1 && !i.has_data;
            if !agree || !holds {
                r.problems.push(format!(
                    "inode {ino}: sole flag on {} entries, primary pointer {:?}, nlink {}, {} entries, data blocks {}",
                    i.sole.len(), i.primary, a.nlink, i.refs, i.has_data
                ));
                if repair {
                    // Clearing both is always safe: unlink then reads the inode.
                    clear_primary = i.primary.is_some();
                    for (k, _) in &i.sole {
                        fix.push((k.clone(), Some(schema::encode_entry(ino, a.kind, false))));
                    }
                }
            }
        }
        if repair && (want != a || clear_primary) {
            // Re-encode with fixed counts, keeping blob and xattrs.
            if let Some(v) = store.get(&schema::inode_key(ino))? {
                let (_, extra) = schema::decode_inode(ino, &v)?;
                let primary = if clear_primary { None } else { extra.primary };
                fix.push((
                    schema::inode_key(ino),
                    Some(schema::encode_inode(
                        &want,
                        &extra.blob,
                        &extra.xattrs,
                        primary,
                        extra.flags,
                    )),
                ));
            }
        }
    }
    for o in &orphans {
        if inodes.get(o).is_none_or(|i| i.attr.nlink != 0) {
            r.problems
                .push(format!("orphan {o}: inode missing or still linked"));
            if repair {
                fix.push((schema::orphan_key(*o), None));
            }
        }
    }
    if repair {
        // Reattach lost inodes under the root.
        // From the root's counted entries (its recount above may be in
        // `fix` already; this record replaces it).
        let ri = &inodes[&ROOT_INO];
        let mut root = ri.attr;
        root.size = ri.entries;
        root.nlink = 2 + ri.subdirs;
        let mut root_changed = false;
        for ino in lost {
            let i = &inodes[&ino];
            let name = format!("lost+found.{ino}").into_bytes();
            let h = schema::name_hash(&name);
            fix.push((
                schema::entry_key(ROOT_INO, h, &name),
                Some(schema::encode_entry(ino, i.attr.kind, false)),
            ));
            root.size += 1;
            if i.attr.kind == Kind::Dir {
                root.nlink += 1;
                let v = store.get(&schema::inode_key(ino))?.unwrap_or_default();
                let (_, extra) = schema::decode_inode(ino, &v)?;
                fix.push((
                    schema::inode_key(ino),
                    Some(schema::encode_inode(
                        &i.attr,
                        &ROOT_INO.to_le_bytes(),
                        &extra.xattrs,
                        None,
                        extra.flags,
                    )),
                ));
            } else {
                let mut a = i.attr;
                a.nlink = 1;
                let v = store.get(&schema::inode_key(ino))?.unwrap_or_default();
                let (_, extra) = schema::decode_inode(ino, &v)?;
                fix.push((
                    schema::inode_key(ino),
                    Some(schema::encode_inode(
                        &a,
                        &extra.blob,
                        &extra.xattrs,
                        None,
                        extra.flags,
                    )),
                ));
            }
            root_changed = true;
        }
        if root_changed {
            let v = store.get(&schema::inode_key(ROOT_INO))?.unwrap_or_default();
            let (_, extra) = schema::decode_inode(ROOT_INO, &v)?;
            fix.push((
                schema::inode_key(ROOT_INO),
                Some(schema::encode_inode(
                    &root,
                    &extra.blob,
                    &extra.xattrs,
                    None,
                    extra.flags,
                )),
            ));
        }
        if !fix.is_empty() {
            // Later fixes to one key win (the root may be fixed twice).
            let mut m: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            for (k, v) in fix {
                m.insert(k, v);
            }
            let batch: Vec<BatchItem> = m.into_iter().collect();
            r.repaired = batch.len() as u64;
            store.write(&batch, true)?;
        }
    }
    Ok(r)
}
