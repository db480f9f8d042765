//! `shoal fsck`: walk every record and check every invariant of the schema,
//! in bounded memory.
//!
//! Invariants (docs/design.md):
//! 1. The superblock decodes; every record decodes and passes its CRC.
//! 2. Every entry's parent is a live directory and its child a live inode of
//!    the entry's kind.
//! 3. A non-directory's nlink equals the entries naming it; a directory has
//!    exactly one entry (root none), nlink = 2 + subdirectories, size =
//!    entries, and its parent pointer names the directory holding its entry.
//! 4. Every inode except the root is named by an entry, or is on the orphan
//!    list with nlink 0.
//! 5. Data blocks (formats 1 and 2) belong to live files larger than
//!    INLINE_MAX and lie within the file's size. Data objects (format 3)
//!    that no live file uses, or longer than their file, are a crash's
//!    leftovers: counted, not problems, removed by `--repair` and by the
//!    next read-write mount.
//! 6. Every inode number is below its allocation group's high-water mark.
//! 7. An entry carries the sole flag exactly when its inode's primary pointer
//!    names it, and then the inode has nlink 1, this one entry, no data
//!    blocks and is not a directory (unlink deletes such an inode unread).
//!
//! `--repair` fixes what is safe: drops entries to missing inodes, data past
//! EOF or of missing inodes, orphans; recounts nlink/size; and links
//! unreferenced live inodes into the root as `lost+found.<ino>`.
//!
//! How, in memory that does not grow with the store (docs/design.md,
//! "fsck in bounded memory"): every invariant is a join of record streams
//! on an inode number, and the store gives the inode, data and orphan
//! records in inode order and the entries in parent order. What is not in
//! that order is sorted by `spill::Sorter` (in memory under its bound, else
//! in runs on disk merged, as e2fsck's scratch files):
//! 1. entries, in parent order: the parent's inode read once per directory
//!    (invariant 2, parent side), the directory's entry and subdirectory
//!    counts written in parent order (`parents`), and one record per entry
//!    into `children`, sorted by child;
//! 2. one merge in inode order of the inode records, `children`, the data
//!    records, the orphan records and the data objects' list: the child
//!    side of invariant 2, then 3 to 7 for every inode but a directory's
//!    counts, which wait for step 3 because an entry whose child fails
//!    (known only here) must not count in its parent (`adjust`); each
//!    directory goes into `dirs`;
//! 3. a merge of `dirs`, `parents` and `adjust`: the directories' counts,
//!    parent pointers and names.
//!
//! Memory beyond the bound grows only with the problems found (each kept
//! to be reported, and with `--repair` its fix, written at the end in one
//! batch as before).

#[doc(hidden)]
pub mod reference;
mod spill;

use crate::schema::{self, AG_SHIFT};
use crate::store::BatchItem;
use crate::{Error, Kind, Result, Store, BLOCK, INLINE_MAX, ROOT_INO};
use spill::{Peek, Sorter};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Default)]
pub struct Report {
    pub problems: Vec<String>,
    pub inodes: u64,
    pub entries: u64,
    pub data_blocks: u64,
    /// Data objects (`crate::data`) of live files.
    pub data_objects: u64,
    /// Data objects a crash left behind: of no live file, or longer than
    /// their file. Not a problem (the next read-write mount sweeps them, as
    /// ext4 replays its orphan list); `--repair` removes or cuts them.
    pub leftover_objects: u64,
    pub repaired: u64,
    /// Bytes fsck wrote to its scratch files (0: everything fit the bound).
    pub scratch_bytes: u64,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The default bound of fsck's own memory, in MiB (`shoal fsck --memory-mb`).
pub const DEFAULT_MEMORY_MB: usize = 512;

/// How much memory fsck may use and where it spills.
#[derive(Clone, Debug)]
pub struct Options {
    /// Bytes for fsck's sort buffers and merges (the store's own cache is
    /// the store's).
    pub memory: usize,
    /// Where the scratch files go (a private directory is made under it at
    /// the first spill and removed at the end).
    pub scratch: PathBuf,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            memory: DEFAULT_MEMORY_MB << 20,
            scratch: std::env::temp_dir(),
        }
    }
}

/// Scan a key range in chunks (also the salvage's).
pub(crate) fn for_range(
    store: &dyn Store,
    lo: Vec<u8>,
    hi: Vec<u8>,
    mut f: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<()> {
    let mut lo = lo;
    loop {
        let got = store.scan(&lo, &hi, 4096)?;
        for (k, v) in &got {
            f(k, v)?;
        }
        if got.len() < 4096 {
            return Ok(());
        }
        lo = got.last().unwrap().0.clone();
        lo.push(0);
    }
}

/// A key range read in chunks, one record at a time, with look-ahead.
struct Cursor<'a> {
    store: &'a dyn Store,
    lo: Vec<u8>,
    hi: Vec<u8>,
    chunk: usize,
    buf: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    head: Option<(Vec<u8>, Vec<u8>)>,
    done: bool,
}

impl<'a> Cursor<'a> {
    fn new(store: &'a dyn Store, prefix: u8, chunk: usize) -> Result<Cursor<'a>> {
        let mut c = Cursor {
            store,
            lo: vec![prefix],
            hi: vec![prefix + 1],
            chunk,
            buf: Vec::new().into_iter(),
            head: None,
            done: false,
        };
        c.head = c.pull()?;
        Ok(c)
    }
    fn pull(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if let Some(x) = self.buf.next() {
            return Ok(Some(x));
        }
        if self.done {
            return Ok(None);
        }
        let got = self.store.scan(&self.lo, &self.hi, self.chunk)?;
        self.done = got.len() < self.chunk;
        if let Some((k, _)) = got.last() {
            self.lo = k.clone();
            self.lo.push(0);
        }
        self.buf = got.into_iter();
        Ok(self.buf.next())
    }
    /// The inode number the head's key starts with (0 for a key too short
    /// to hold one: taken first, its parse fails, as the old walk's did).
    fn key(&self) -> Option<u64> {
        self.head
            .as_ref()
            .map(|(k, _)| schema::owner_ino(k).unwrap_or(0))
    }
    fn take(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let next = self.pull()?;
        Ok(std::mem::replace(&mut self.head, next))
    }
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().unwrap())
}

/// `children`: child, parent, hash (big-endian, the sort order), kind,
/// sole, name.
fn child_rec(child: u64, parent: u64, hash: u64, kind: Kind, sole: bool, name: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(26 + name.len());
    v.extend_from_slice(&child.to_be_bytes());
    v.extend_from_slice(&parent.to_be_bytes());
    v.extend_from_slice(&hash.to_be_bytes());
    v.push(kind as u8);
    v.push(sole as u8);
    v.extend_from_slice(name);
    v
}

fn is_dir(store: &dyn Store, ino: u64) -> Result<bool> {
    Ok(store
        .get(&schema::inode_key(ino))?
        .and_then(|v| schema::decode_inode(ino, &v).ok())
        .is_some_and(|(a, _)| a.kind == Kind::Dir))
}

/// The root's counts, for the lost inodes linked under it at the end.
struct Root {
    attr: crate::Attr,
    entries: u64,
    subdirs: u32,
}

pub fn fsck(store: &dyn Store, repair: bool) -> Result<Report> {
    check(store, repair, &Options::default())
}

/// `fsck` within `o.memory` bytes of sort buffers.
pub fn check(store: &dyn Store, repair: bool, o: &Options) -> Result<Report> {
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
    let mem = o.memory.max(16 << 10);
    let chunk = if mem >= 16 << 20 { 1024 } else { 128 };
    // The root first: without it the walk has nothing to attach to.
    let root_rec = store.get(&schema::inode_key(ROOT_INO))?;
    let root_decoded = root_rec.as_ref().map(|v| schema::decode_inode(ROOT_INO, v));
    let mut made_root = false;
    if !matches!(&root_decoded, Some(Ok((a, _))) if a.kind == Kind::Dir) {
        if !repair {
            // As the walk always did: the inode records' own problems, then
            // this one, and nothing more.
            for_range(
                store,
                vec![schema::K_INODE],
                vec![schema::K_INODE + 1],
                |k, v| {
                    let ino = schema::parse_inode_key(k)?;
                    match schema::decode_inode(ino, v) {
                        Ok(_) => r.inodes += 1,
                        Err(e) => r.problems.push(format!("inode {ino}: {e}")),
                    }
                    Ok(())
                },
            )?;
            r.problems
                .push("root inode missing or not a directory".into());
            return Ok(r);
        }
        // The walk below reads the new root, so the old record's problem is
        // reported here.
        if let Some(Err(e)) = &root_decoded {
            r.problems.push(format!("inode {ROOT_INO}: {e}"));
        }
        r.problems
            .push("root inode missing or not a directory".into());
        // A new, empty root (as e2fsck makes one): the entries under it are
        // counted below, and what it held before is linked back into it
        // as lost+found.<ino>.
        let t = crate::types::Ts::now();
        let attr = crate::types::Attr::root(t);
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
        made_root = true;
    }

    // Step 1: entries, in parent order.
    let mut children = Sorter::new(mem / 2, &o.scratch);
    let mut parents = Sorter::new(mem / 8, &o.scratch);
    // (parent, live directory, entries, subdirectories)
    let mut cur: Option<(u64, bool, u64, u32)> = None;
    let flush = |parents: &mut Sorter, c: Option<(u64, bool, u64, u32)>| -> Result<()> {
        if let Some((p, true, n, d)) = c {
            let mut v = p.to_be_bytes().to_vec();
            v.extend_from_slice(&n.to_be_bytes());
            v.extend_from_slice(&d.to_be_bytes());
            parents.push(&v)?;
        }
        Ok(())
    };
    for_range(
        store,
        vec![schema::K_ENTRY],
        vec![schema::K_ENTRY + 1],
        |k, v| {
            let (parent, hash, name) = schema::parse_entry_key(k)?;
            r.entries += 1;
            if cur.is_none_or(|c| c.0 != parent) {
                flush(&mut parents, cur.take())?;
                cur = Some((parent, is_dir(store, parent)?, 0, 0));
            }
            let c = cur.as_mut().unwrap();
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
            if !c.1 {
                r.problems.push(format!(
                    "entry {parent}/{shown} -> {child}: parent is not a live directory"
                ));
                if repair {
                    fix.push((k.to_vec(), None));
                }
                return Ok(());
            }
            // Counted for now; step 2 takes back those whose child fails.
            c.2 += 1;
            if kind == Kind::Dir {
                c.3 += 1;
            }
            children.push(&child_rec(child, parent, hash, kind, sole, name))
        },
    )?;
    flush(&mut parents, cur.take())?;

    // Step 2: every inode, in order.
    let mut objects = Sorter::new(mem / 16, &o.scratch);
    let data = store.data();
    for ino in data.list()? {
        objects.push(&ino.to_be_bytes())?;
    }
    let mut objects = Peek::new(objects.finish()?)?;
    let mut children = Peek::new(children.finish()?)?;
    let mut adjust = Sorter::new(mem / 16, &o.scratch);
    let mut dirs = Sorter::new(mem / 4, &o.scratch);
    let mut inodes = Cursor::new(store, schema::K_INODE, chunk)?;
    let mut blocks = Cursor::new(store, schema::K_DATA, chunk)?;
    let mut orphans = Cursor::new(store, schema::K_ORPHAN, chunk)?;
    // What the lost inodes add to the root (step 3 writes the root).
    let (mut lost_entries, mut lost_dirs) = (0u64, 0u32);
    while let Some(ino) = [
        inodes.key(),
        children.key(),
        blocks.key(),
        orphans.key(),
        objects.key(),
    ]
    .into_iter()
    .flatten()
    .min()
    {
        let mut rec: Option<(crate::Attr, schema::InodeExtra, Vec<u8>)> = None;
        if inodes.key() == Some(ino) {
            let (k, v) = inodes.take()?.unwrap();
            schema::parse_inode_key(&k)?;
            match schema::decode_inode(ino, &v) {
                Ok((a, x)) => {
                    r.inodes += 1;
                    rec = Some((a, x, v));
                }
                Err(e) => r.problems.push(format!("inode {ino}: {e}")),
            }
        }
        if rec.is_some() {
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
        let kind = rec.as_ref().map(|x| x.0.kind);
        // The entries naming it.
        let mut refs = 0u32;
        let mut named_from: Option<u64> = None;
        let mut sole: Vec<(Vec<u8>, (u64, u64))> = Vec::new();
        while children.key() == Some(ino) {
            let c = children.take()?.unwrap();
            let (parent, hash) = (be64(&c[8..]), be64(&c[16..]));
            let ekind = Kind::from_u8(c[24]).unwrap();
            let name = &c[26..];
            let key = schema::entry_key(parent, hash, name);
            if kind != Some(ekind) {
                r.problems.push(format!(
                    "entry {parent}/{} -> {ino}: child inode missing or of another kind",
                    String::from_utf8_lossy(name)
                ));
                if repair {
                    fix.push((key, None));
                }
                let mut a = parent.to_be_bytes().to_vec();
                a.push((ekind == Kind::Dir) as u8);
                adjust.push(&a)?;
                continue;
            }
            refs += 1;
            if c[25] != 0 {
                sole.push((key, (parent, hash)));
            }
            if ekind == Kind::Dir {
                if named_from.is_some() {
                    r.problems
                        .push(format!("directory {ino} has more than one name"));
                }
                named_from = Some(parent);
            }
        }
        // Data blocks (formats 1 and 2).
        let mut has_data = false;
        while blocks.key() == Some(ino) {
            let (k, v) = blocks.take()?.unwrap();
            let (_, blk) = schema::parse_data_key(&k)?;
            r.data_blocks += 1;
            if let Err(e) = schema::decode_data(&v) {
                r.problems.push(format!("data block {ino}:{blk}: {e}"));
                continue;
            }
            has_data |= rec.is_some();
            match &rec {
                Some((a, _, _))
                    if a.kind == Kind::File && a.size > INLINE_MAX && blk * BLOCK < a.size => {}
                Some((a, _, _)) => {
                    r.problems.push(format!(
                        "data block {ino}:{blk}: outside the file (size {})",
                        a.size
                    ));
                    if repair {
                        fix.push((k, None));
                    }
                }
                None => {
                    r.problems
                        .push(format!("data block {ino}:{blk}: inode missing"));
                    if repair {
                        fix.push((k, None));
                    }
                }
            }
        }
        let mut orphan = false;
        while orphans.key() == Some(ino) {
            let (k, _) = orphans.take()?.unwrap();
            schema::parse_orphan_key(&k)?;
            orphan = true;
            if rec.as_ref().is_none_or(|(a, _, _)| a.nlink != 0) {
                r.problems
                    .push(format!("orphan {ino}: inode missing or still linked"));
                if repair {
                    fix.push((k, None));
                }
            }
        }
        // Data objects: each of a live regular file, no longer than it.
        while objects.key() == Some(ino) {
            objects.take()?;
            let size = match &rec {
                Some((a, _, _)) if a.kind == Kind::File && !orphan => Some(a.size),
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
        let Some((a, extra, v)) = rec else {
            continue;
        };
        if a.kind == Kind::Dir {
            // Its counts wait for step 3.
            let mut d = ino.to_be_bytes().to_vec();
            match named_from {
                Some(p) => {
                    d.push(1);
                    d.extend_from_slice(&p.to_be_bytes());
                }
                None => d.extend_from_slice(&[0; 9]),
            }
            d.extend_from_slice(&v);
            dirs.push(&d)?;
            continue;
        }
        let mut want = a;
        let mut lost = false;
        if refs == 0 {
            if !(orphan && a.nlink == 0) {
                r.problems.push(format!(
                    "inode {ino}: nlink {} but no entry names it",
                    a.nlink
                ));
                if a.nlink > 0 {
                    lost = true;
                } else if repair {
                    fix.push((schema::inode_key(ino), None));
                }
            }
        } else if a.nlink != refs {
            r.problems.push(format!(
                "inode {ino}: nlink {} but {} entries name it",
                a.nlink, refs
            ));
            want.nlink = refs;
        }
        // Invariant 7: the flag is a promise unlink acts on without reading.
        let mut clear_primary = false;
        if extra.primary.is_some() || !sole.is_empty() {
            let agree = sole.len() == 1 && extra.primary == Some(sole[0].1);
            let holds = a.nlink == 1 && refs == 1 && !has_data;
            if !agree || !holds {
                r.problems.push(format!(
                    "inode {ino}: sole flag on {} entries, primary pointer {:?}, nlink {}, {} entries, data blocks {}",
                    sole.len(), extra.primary, a.nlink, refs, has_data
                ));
                if repair {
                    // Clearing both is always safe: unlink then reads the inode.
                    clear_primary = extra.primary.is_some();
                    for (k, _) in &sole {
                        fix.push((k.clone(), Some(schema::encode_entry(ino, a.kind, false))));
                    }
                }
            }
        }
        if repair && (want != a || clear_primary) {
            // Re-encode with fixed counts, keeping blob and xattrs.
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
        if repair && lost {
            // Linked under the root (this record replaces the one above).
            let mut a = a;
            a.nlink = 1;
            fix.push(lost_entry(ino, a.kind));
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
            lost_entries += 1;
        }
    }
    r.scratch_bytes += children.spilled() + objects.spilled();
    drop((children, objects, inodes, blocks, orphans));

    // Step 3: the directories' counts, parent pointers and names.
    let mut dirs = Peek::new(dirs.finish()?)?;
    let mut parents = Peek::new(parents.finish()?)?;
    let mut adjust = Peek::new(adjust.finish()?)?;
    let mut root: Option<Root> = None;
    while let Some(d) = dirs.take()? {
        let ino = be64(&d);
        let named_from = (d[8] != 0).then(|| be64(&d[9..]));
        let v = &d[17..];
        let (a, extra) = schema::decode_inode(ino, v)?;
        let parent_ptr = if extra.blob.len() == 8 {
            u64::from_le_bytes(extra.blob[..8].try_into().unwrap())
        } else {
            0
        };
        let (mut entries, mut subdirs) = (0u64, 0u32);
        while parents.key().is_some_and(|p| p <= ino) {
            let p = parents.take()?.unwrap();
            if be64(&p) == ino {
                entries = be64(&p[8..]);
                subdirs = u32::from_be_bytes(p[16..20].try_into().unwrap());
            }
        }
        while adjust.key().is_some_and(|p| p <= ino) {
            let x = adjust.take()?.unwrap();
            if be64(&x) == ino {
                entries = entries.saturating_sub(1);
                subdirs = subdirs.saturating_sub(x[8] as u32);
            }
        }
        let mut want = a;
        if want.nlink != 2 + subdirs {
            r.problems.push(format!(
                "directory {ino}: nlink {} but {} subdirectories",
                a.nlink, subdirs
            ));
            want.nlink = 2 + subdirs;
        }
        if want.size != entries {
            r.problems.push(format!(
                "directory {ino}: size {} but {} entries",
                a.size, entries
            ));
            want.size = entries;
        }
        let mut lost = false;
        if ino != ROOT_INO {
            match named_from {
                Some(p) if p != parent_ptr => {
                    r.problems.push(format!(
                        "directory {ino}: parent pointer {parent_ptr} but named in {p}"
                    ));
                }
                None => {
                    r.problems
                        .push(format!("directory {ino}: not named by any entry"));
                    lost = true;
                }
                _ => {}
            }
        } else {
            root = Some(Root {
                attr: a,
                entries,
                subdirs,
            });
        }
        if repair && want != a {
            fix.push((
                schema::inode_key(ino),
                Some(schema::encode_inode(
                    &want,
                    &extra.blob,
                    &extra.xattrs,
                    extra.primary,
                    extra.flags,
                )),
            ));
        }
        if repair && lost {
            // Linked under the root, its parent pointer with it (this
            // record replaces the one above).
            fix.push(lost_entry(ino, a.kind));
            fix.push((
                schema::inode_key(ino),
                Some(schema::encode_inode(
                    &a,
                    &ROOT_INO.to_le_bytes(),
                    &extra.xattrs,
                    None,
                    extra.flags,
                )),
            ));
            lost_entries += 1;
            lost_dirs += 1;
        }
    }
    r.scratch_bytes += dirs.spilled() + parents.spilled() + adjust.spilled();
    if made_root {
        // Counted by the walk, but not a record the store had.
        r.inodes -= 1;
    }
    if repair {
        if lost_entries > 0 {
            // From the root's counted entries (its recount above may be in
            // `fix` already; this record replaces it).
            let ri = root.expect("the root is a directory by now");
            let mut a = ri.attr;
            a.size = ri.entries + lost_entries;
            a.nlink = 2 + ri.subdirs + lost_dirs;
            let v = store.get(&schema::inode_key(ROOT_INO))?.unwrap_or_default();
            let (_, extra) = schema::decode_inode(ROOT_INO, &v)?;
            fix.push((
                schema::inode_key(ROOT_INO),
                Some(schema::encode_inode(
                    &a,
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

/// The root's entry `lost+found.<ino>` naming an inode no entry names.
fn lost_entry(ino: u64, kind: Kind) -> BatchItem {
    let name = format!("lost+found.{ino}").into_bytes();
    let h = schema::name_hash(&name);
    (
        schema::entry_key(ROOT_INO, h, &name),
        Some(schema::encode_entry(ino, kind, false)),
    )
}
