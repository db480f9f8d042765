//! `shoal fsck --repair` on a store that cannot be read whole: copy every
//! record that can still be read into a new store, let fsck's repair make it
//! consistent (entries to lost inodes dropped, inodes whose names were lost
//! linked under the root), keep the damaged store beside it, and say by path
//! what could not be saved.
//!
//! Reading around damage: a range scan fails when it reaches a table block
//! that fails its checksum. The walk scans in chunks; when a chunk fails it
//! steps one key at a time to the last readable key before the damage, then
//! finds by bisection the smallest key past it from which scanning works
//! again. The keys between are lost (one table block's worth, typically a
//! few dozen records).

use crate::fsck;
use crate::schema;
use crate::{Error, Result, Store};
use std::collections::{BTreeMap, HashMap};

/// What a salvage saved and lost.
#[derive(Debug, Default)]
pub struct Salvage {
    /// Records copied into the new store.
    pub records: u64,
    /// Key ranges `[lo, hi)` that could not be read.
    pub damaged: Vec<(Vec<u8>, Vec<u8>)>,
    /// What was lost, by path where one is known.
    pub lost: Vec<String>,
    /// The repair's report on the new store.
    pub repair: fsck::Report,
}

const CHUNK: usize = 1024;

/// Key width for bisection: longer than every fixed-size key (data keys are
/// 17 bytes), and than most entry keys' distinguishing prefix.
const WIDTH: usize = 32;

/// Hand every readable record of `src` to `emit`, in key order; return the
/// ranges that could not be read.
pub fn readable_records(
    src: &dyn Store,
    mut emit: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let hi = vec![0xff; WIDTH];
    let mut cur: Vec<u8> = Vec::new();
    let mut damaged = Vec::new();
    loop {
        match src.scan(&cur, &hi, CHUNK) {
            Ok(got) => {
                for (k, v) in &got {
                    emit(k, v)?;
                }
                if got.len() < CHUNK {
                    return Ok(damaged);
                }
                cur = after(&got.last().unwrap().0);
            }
            Err(Error::Corrupted(_) | Error::Io(_)) => {
                // One key at a time up to the damage.
                loop {
                    match src.scan(&cur, &hi, 1) {
                        Ok(got) if got.is_empty() => return Ok(damaged),
                        Ok(got) => {
                            emit(&got[0].0, &got[0].1)?;
                            cur = after(&got[0].0);
                        }
                        Err(_) => break,
                    }
                }
                // The smallest key from which a scan works again.
                let (mut bad, mut good) = (pad(&cur), hi.clone());
                while let Some(mid) = midpoint(&bad, &good) {
                    if src.scan(&mid, &hi, 1).is_ok() {
                        good = mid;
                    } else {
                        bad = mid;
                    }
                }
                // Bisection works on WIDTH-byte keys; a shorter key that
                // the padded one passes over may still be readable.
                let mut short = good.clone();
                while short.last() == Some(&0) {
                    short.pop();
                }
                if short != good && src.scan(&short, &hi, 1).is_ok() {
                    good = short;
                }
                damaged.push((cur.clone(), good.clone()));
                if good == hi {
                    return Ok(damaged);
                }
                cur = good;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The smallest key after `k`.
fn after(k: &[u8]) -> Vec<u8> {
    let mut n = k.to_vec();
    n.push(0);
    n
}

fn pad(k: &[u8]) -> Vec<u8> {
    let mut n = k.to_vec();
    n.resize(WIDTH.max(n.len()), 0);
    n.truncate(WIDTH);
    n
}

/// The key halfway between `a` < `b` (as WIDTH-byte numbers), or None when
/// they are adjacent.
fn midpoint(a: &[u8], b: &[u8]) -> Option<Vec<u8>> {
    let (a, b) = (pad(a), pad(b));
    let mut sum = [0u16; WIDTH + 1];
    let mut carry = 0u16;
    for i in (0..WIDTH).rev() {
        let s = a[i] as u16 + b[i] as u16 + carry;
        sum[i + 1] = s & 0xff;
        carry = s >> 8;
    }
    sum[0] = carry;
    let mut mid = vec![0u8; WIDTH];
    let mut rem = 0u16;
    for i in 0..=WIDTH {
        let cur = (rem << 8) | sum[i];
        if i > 0 {
            mid[i - 1] = (cur >> 1) as u8;
        }
        rem = cur & 1;
    }
    (mid > a && mid < b).then_some(mid)
}

/// Copy `src`'s readable records into `dst` (a new, empty store), repair
/// `dst`, and describe what was lost.
pub fn salvage(src: &dyn Store, dst: &dyn Store) -> Result<Salvage> {
    let mut out = Salvage::default();
    let mut batch: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    out.damaged = readable_records(src, |k, v| {
        batch.push((k.to_vec(), Some(v.to_vec())));
        out.records += 1;
        if batch.len() >= 4096 {
            // A failure of the new store ends the walk (it is not damage
            // to read around: `readable_records` passes it on).
            dst.write(&std::mem::take(&mut batch), false)?;
        }
        Ok(())
    })?;
    dst.write(&batch, false)?;
    dst.sync()?;
    out.lost = describe(dst, &out.damaged)?;
    out.repair = fsck::fsck(dst, true)?;
    Ok(out)
}

/// What the damaged ranges held, by path, from the names the salvaged
/// store still has (before its repair drops entries to lost inodes).
fn describe(dst: &dyn Store, damaged: &[(Vec<u8>, Vec<u8>)]) -> Result<Vec<String>> {
    // child -> (parent, name), and which children's inode records exist.
    let mut names: HashMap<u64, (u64, Vec<u8>)> = HashMap::new();
    fsck::for_range(
        dst,
        vec![schema::K_ENTRY],
        vec![schema::K_ENTRY + 1],
        |k, v| {
            if let (Ok((parent, _, name)), Ok((child, _, _))) =
                (schema::parse_entry_key(k), schema::decode_entry(v))
            {
                names.insert(child, (parent, name.to_vec()));
            }
            Ok(())
        },
    )?;
    let path = |ino: u64| -> String {
        let mut parts = Vec::new();
        let mut at = ino;
        while at != crate::ROOT_INO && parts.len() < 4096 {
            match names.get(&at) {
                Some((p, n)) => {
                    parts.push(String::from_utf8_lossy(n).into_owned());
                    at = *p;
                }
                None => return format!("(inode {ino}, name lost)"),
            }
        }
        parts.reverse();
        format!("/{}", parts.join("/"))
    };
    let ino_of = |k: &[u8]| -> u64 {
        let mut b = [0u8; 8];
        let src = k.get(1..9).unwrap_or(&[]);
        b[..src.len()].copy_from_slice(src);
        u64::from_be_bytes(b)
    };
    let mut lost: BTreeMap<String, ()> = BTreeMap::new();
    for (lo, hi) in damaged {
        let (tlo, thi) = (
            lo.first().copied().unwrap_or(0),
            hi.first().copied().unwrap_or(0xff),
        );
        // A span can cross record types (the end of the entries into the
        // inodes): each type's part is described on its own.
        let known = [
            schema::K_AG,
            schema::K_DATA,
            schema::K_ENTRY,
            schema::K_INODE,
            schema::K_ORPHAN,
            schema::K_SUPER,
        ];
        let mut types = vec![tlo];
        types.extend(known.iter().copied().filter(|k| *k > tlo && *k <= thi));
        for t in types {
            let ilo = if t == tlo { ino_of(lo) } else { 0 };
            let ihi = if t == thi { ino_of(hi) } else { u64::MAX };
            match t {
                schema::K_INODE => {
                    if (ilo..=ihi).contains(&crate::ROOT_INO)
                        && dst.get(&schema::inode_key(crate::ROOT_INO))?.is_none()
                    {
                        lost.insert(
                        "/: the root directory's record was damaged (made anew; names it held that survive are in it, the rest in /lost+found.<inode>)".into(),
                        (),
                    );
                    }
                    let mut gone_dirs = Vec::new();
                    for (child, _) in names.iter().filter(|(c, _)| **c >= ilo && **c <= ihi) {
                        if dst.get(&schema::inode_key(*child))?.is_none() {
                            lost.insert(
                                format!("{}: lost (its inode record was damaged)", path(*child)),
                                (),
                            );
                            gone_dirs.push(*child);
                        }
                    }
                    // What was below a lost directory keeps its data but not its
                    // path: fsck links it back as /lost+found.<inode>.
                    for (child, _) in names.iter() {
                        let mut at = *child;
                        let mut steps = 0;
                        while let Some((p, _)) = names.get(&at) {
                            if gone_dirs.contains(p) {
                                lost.insert(
                                format!(
                                    "{}: its directory {} was lost (the file, if intact, is now /lost+found.<inode>)",
                                    path(*child),
                                    path(*p)
                                ),
                                (),
                            );
                                break;
                            }
                            at = *p;
                            steps += 1;
                            if steps > 4096 {
                                break;
                            }
                        }
                    }
                }
                schema::K_DATA => {
                    for (child, _) in names.iter().filter(|(c, _)| **c >= ilo && **c <= ihi) {
                        let (dlo, dhi) = schema::data_range(*child, 0);
                        let from = if *child == ilo { lo.clone() } else { dlo };
                        let to = if *child == ihi {
                            hi.clone()
                        } else {
                            dhi.clone()
                        };
                        // Only files that had data in the damaged span.
                        if from < to
                            && (dst.scan(&from, &to, 1)?.is_empty()
                                || *child == ilo
                                || *child == ihi)
                        {
                            lost.insert(
                                format!(
                                    "{}: some data blocks lost (they read as zeros)",
                                    path(*child)
                                ),
                                (),
                            );
                        }
                    }
                }
                schema::K_ENTRY => {
                    // The directories whose entries lay in the span: the keys
                    // are (parent, hash, name), so the span is of parents.
                    let dirs: std::collections::BTreeSet<u64> = names
                        .values()
                        .map(|(p, _)| *p)
                        .filter(|p| *p >= ilo && *p <= ihi)
                        .chain([ilo])
                        .collect();
                    for d in dirs {
                        if d == crate::ROOT_INO || names.contains_key(&d) {
                            lost.insert(format!("{}: some names lost (their files, if intact, are now /lost+found.<inode>)", path(d)), ());
                        }
                    }
                }
                _ => {
                    lost.insert(
                        format!(
                            "records {} to {} (superblock, group or orphan records)",
                            hex(lo),
                            hex(hi)
                        ),
                        (),
                    );
                }
            }
        }
    }
    Ok(lost.into_keys().collect())
}

fn hex(k: &[u8]) -> String {
    k.iter().take(17).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn midpoint_lies_between_and_ends() {
        let a = vec![b'D', 0, 0, 0, 0, 0, 0, 0, 5];
        let b = vec![b'D', 0, 0, 0, 0, 0, 0, 0, 7];
        let m = midpoint(&a, &b).unwrap();
        assert!(pad(&a) < m && m < pad(&b));
        let x = pad(&a);
        let mut y = x.clone();
        *y.last_mut().unwrap() += 1;
        assert_eq!(midpoint(&x, &y), None);
    }

    /// A store whose scans fail when they reach the keys in `bad`.
    struct Damaged {
        inner: crate::MemStore,
        bad: (Vec<u8>, Vec<u8>),
    }
    impl Store for Damaged {
        fn get(&self, k: &[u8]) -> Result<Option<Vec<u8>>> {
            self.inner.get(k)
        }
        fn data(&self) -> std::sync::Arc<dyn crate::data::DataStore> {
            self.inner.data()
        }
        fn scan(&self, lo: &[u8], hi: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
            let got = self.inner.scan(lo, hi, usize::MAX)?;
            let mut out = Vec::new();
            // A scan that starts inside the damaged span fails, as a seek
            // into a damaged block does; one that reaches it, too.
            if lo >= &self.bad.0[..] && lo < &self.bad.1[..] {
                return Err(Error::Corrupted("checksum".into()));
            }
            for (k, v) in got {
                if out.len() >= limit {
                    break;
                }
                if k >= self.bad.0 && k < self.bad.1 {
                    return Err(Error::Corrupted("checksum".into()));
                }
                out.push((k, v));
            }
            Ok(out)
        }
        fn write(&self, b: &[crate::store::BatchItem], s: bool) -> Result<()> {
            self.inner.write(b, s)
        }
        fn sync(&self) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn walk_skips_exactly_the_damaged_span() {
        let inner = crate::MemStore::default();
        let keys: Vec<Vec<u8>> = (0u64..5000).map(|i| schema::data_key(64, i)).collect();
        inner
            .write(
                &keys
                    .iter()
                    .map(|k| (k.clone(), Some(vec![1])))
                    .collect::<Vec<_>>(),
                false,
            )
            .unwrap();
        let s = Damaged {
            inner,
            bad: (keys[2000].clone(), keys[2040].clone()),
        };
        let mut seen = Vec::new();
        let damaged = readable_records(&s, |k, _| {
            seen.push(k.to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(seen.len(), 5000 - 40);
        assert!(
            seen.contains(&keys[1999]) && seen.contains(&keys[2040]) && !seen.contains(&keys[2000])
        );
        assert_eq!(damaged.len(), 1);
        assert!(damaged[0].0 <= keys[2000] && pad(&damaged[0].1) <= pad(&keys[2040]));
    }
}
