//! The on-disk key schema and value encodings. Hand-written because the format
//! is the product: every byte is documented in docs/design.md, and every value
//! carries a CRC32 that is checked on read (a corrupt record is reported, never
//! served).
//!
//! Keys (big-endian integers, so order = numeric order):
//!
//! | key                                   | value                                   |
//! |---------------------------------------|-----------------------------------------|
//! | `S`                                   | superblock: magic, format, AG count     |
//! | `A` ag:u32                            | next inode sequence number of the AG    |
//! | `I` ino:u64                           | inode record (attrs, inline data, xattrs, primary pointer, file flags) |
//! | `E` parent:u64 hash:u64 name          | entry: child ino, kind, sole flag       |
//! | `D` ino:u64 block:u64                 | one 4 KiB data block (files > 4 KiB)    |
//! | `O` ino:u64                           | orphan: unlinked while open             |
//!
//! A directory's entries are contiguous and ordered by name hash, so a listing
//! is one range scan and the hash is a stable readdir cookie. Inode numbers are
//! `ag << 40 | seq`, and placement puts a directory's children in its AG, so
//! their inode records are contiguous too (seed 004's locality, in key space).

use crate::error::{Error, Result};
use crate::types::{Attr, Ino, Kind, Ts};
use xxhash_rust::xxh3::xxh3_64;

pub const MAGIC: &[u8; 8] = b"SHOALFS1";
/// Format 2 added the sole-link flag of entries and the primary-entry
/// pointer of inodes (both optional: a format-1 store reads as one with no
/// sole entries, and is marked format 2 when first opened for writing).
/// Format 3 keeps the bytes of files past INLINE_MAX in data objects
/// (`crate::data`) instead of `K_DATA` records; an older store's records are
/// moved there when it is first opened for writing (`Engine::open`).
pub const FORMAT: u32 = 3;
/// The first format whose file data past INLINE_MAX is in data objects.
pub const FORMAT_DATA_OBJECTS: u32 = 3;
pub const FORMAT_MIN: u32 = 1;
pub const AG_SHIFT: u32 = 40;

pub const K_SUPER: u8 = b'S';
pub const K_AG: u8 = b'A';
pub const K_INODE: u8 = b'I';
pub const K_ENTRY: u8 = b'E';
pub const K_DATA: u8 = b'D';
pub const K_ORPHAN: u8 = b'O';

/// The readdir cookie and index key of a name: 63 bits of xxh3, never 0, 1
/// or 2 (offsets 1 and 2 are "." and "..").
pub fn name_hash(name: &[u8]) -> u64 {
    (xxh3_64(name) >> 1).max(3)
}

pub fn super_key() -> Vec<u8> {
    vec![K_SUPER]
}
pub fn ag_key(ag: u32) -> Vec<u8> {
    let mut k = vec![K_AG];
    k.extend_from_slice(&ag.to_be_bytes());
    k
}
pub fn inode_key(ino: Ino) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(K_INODE);
    k.extend_from_slice(&ino.to_be_bytes());
    k
}
pub fn entry_key(parent: Ino, hash: u64, name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(17 + name.len());
    k.push(K_ENTRY);
    k.extend_from_slice(&parent.to_be_bytes());
    k.extend_from_slice(&hash.to_be_bytes());
    k.extend_from_slice(name);
    k
}
/// Bounds of a directory's entries with hash >= `from_hash`.
pub fn entry_range(parent: Ino, from_hash: u64) -> (Vec<u8>, Vec<u8>) {
    let mut lo = vec![K_ENTRY];
    lo.extend_from_slice(&parent.to_be_bytes());
    lo.extend_from_slice(&from_hash.to_be_bytes());
    let mut hi = vec![K_ENTRY];
    hi.extend_from_slice(&(parent + 1).to_be_bytes());
    (lo, hi)
}
pub fn data_key(ino: Ino, block: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(K_DATA);
    k.extend_from_slice(&ino.to_be_bytes());
    k.extend_from_slice(&block.to_be_bytes());
    k
}
pub fn data_range(ino: Ino, from_block: u64) -> (Vec<u8>, Vec<u8>) {
    (data_key(ino, from_block), data_key(ino + 1, 0))
}
/// Every data block record of a store of format 1 or 2.
pub fn data_records() -> (Vec<u8>, Vec<u8>) {
    (vec![K_DATA], vec![K_DATA + 1])
}
pub fn orphan_key(ino: Ino) -> Vec<u8> {
    let mut k = vec![K_ORPHAN];
    k.extend_from_slice(&ino.to_be_bytes());
    k
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().unwrap())
}

/// The inode an inode, data or orphan key belongs to (None for other keys).
pub fn owner_ino(k: &[u8]) -> Option<Ino> {
    match k.first() {
        Some(&K_INODE) | Some(&K_DATA) | Some(&K_ORPHAN) if k.len() >= 9 => Some(be64(&k[1..])),
        _ => None,
    }
}

/// Parse an entry key into (parent, hash, name).
pub fn parse_entry_key(k: &[u8]) -> Result<(Ino, u64, &[u8])> {
    if k.len() < 18 || k[0] != K_ENTRY {
        return Err(Error::Corrupted(format!("bad entry key {k:?}")));
    }
    Ok((be64(&k[1..]), be64(&k[9..]), &k[17..]))
}
pub fn parse_inode_key(k: &[u8]) -> Result<Ino> {
    if k.len() != 9 || k[0] != K_INODE {
        return Err(Error::Corrupted(format!("bad inode key {k:?}")));
    }
    Ok(be64(&k[1..]))
}
pub fn parse_data_key(k: &[u8]) -> Result<(Ino, u64)> {
    if k.len() != 17 || k[0] != K_DATA {
        return Err(Error::Corrupted(format!("bad data key {k:?}")));
    }
    Ok((be64(&k[1..]), be64(&k[9..])))
}
pub fn parse_orphan_key(k: &[u8]) -> Result<Ino> {
    if k.len() != 9 || k[0] != K_ORPHAN {
        return Err(Error::Corrupted(format!("bad orphan key {k:?}")));
    }
    Ok(be64(&k[1..]))
}

/// Frame a payload with its CRC32.
fn seal(mut payload: Vec<u8>) -> Vec<u8> {
    let crc = crc32fast::hash(&payload[4..]);
    payload[..4].copy_from_slice(&crc.to_le_bytes());
    payload
}
fn open<'a>(what: &str, v: &'a [u8]) -> Result<&'a [u8]> {
    if v.len() < 4 {
        return Err(Error::Corrupted(format!("{what} record truncated")));
    }
    let crc = u32::from_le_bytes(v[..4].try_into().unwrap());
    if crc32fast::hash(&v[4..]) != crc {
        return Err(Error::Corrupted(format!(
            "{what} record fails its checksum"
        )));
    }
    Ok(&v[4..])
}

struct Reader<'a> {
    what: &'static str,
    b: &'a [u8],
}
impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.b.len() < n {
            return Err(Error::Corrupted(format!("{} record truncated", self.what)));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn ts(&mut self) -> Result<Ts> {
        let sec = self.u64()? as i64;
        let nsec = self.u32()?;
        Ok(Ts { sec, nsec })
    }
    /// LEB128 unsigned varint, at most 10 bytes.
    fn var(&mut self) -> Result<u64> {
        let mut x = 0u64;
        for i in 0..10 {
            let b = self.u8()?;
            x |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(x);
            }
        }
        Err(Error::Corrupted(format!(
            "{} record: bad varint",
            self.what
        )))
    }
    fn var32(&mut self) -> Result<u32> {
        u32::try_from(self.var()?)
            .map_err(|_| Error::Corrupted(format!("{} record: field out of range", self.what)))
    }
    /// A timestamp: zigzag varint seconds, fixed nanoseconds.
    fn var_ts(&mut self) -> Result<Ts> {
        let z = self.var()?;
        let sec = ((z >> 1) as i64) ^ -((z & 1) as i64);
        let nsec = self.u32()?;
        Ok(Ts { sec, nsec })
    }
}

fn put_var(v: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        v.push(x as u8 | 0x80);
        x >>= 7;
    }
    v.push(x as u8);
}
fn put_var_ts(v: &mut Vec<u8>, t: Ts) {
    put_var(v, ((t.sec << 1) ^ (t.sec >> 63)) as u64);
    v.extend_from_slice(&t.nsec.to_le_bytes());
}

/// Bit of an inode record's kind byte: the record uses the compact layout
/// (varints; written since format 2). Without it, the fixed layout of format 1.
const COMPACT: u8 = 0x40;

/// What an inode record holds besides attributes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InodeExtra {
    /// Symlink target, or inline data of a file whose size <= INLINE_MAX.
    pub blob: Vec<u8>,
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// `(parent, name hash)` of the entry that names this inode with the
    /// sole flag set (see `encode_entry`), if one does.
    pub primary: Option<(Ino, u64)>,
    /// chattr(1) flags (`FS_*_FL`, `engine::flags`); 0 for almost every inode.
    pub flags: u32,
}

/// Tag of the optional primary-entry trailer of an inode record.
const TAG_PRIMARY: u8 = b'P';
/// Tag of the optional file-flags trailer (after the primary pointer when
/// both are present; written only when the flags are not 0, so a store that
/// never saw chattr has no such record and older binaries read it).
const TAG_FLAGS: u8 = b'F';

/// The compact layout: kind | COMPACT, then varints for the integers and
/// seconds (nanoseconds stay 4 fixed bytes: they are uniformly spread), the
/// blob and xattrs with varint lengths, and the optional primary pointer
/// (tag, varint parent, fixed hash). An empty file's record is about 60
/// bytes instead of the fixed layout's 97: every create writes one, and the
/// store carries it through its memtable, flushes and compactions.
pub fn encode_inode(
    a: &Attr,
    extra_blob: &[u8],
    xattrs: &[(Vec<u8>, Vec<u8>)],
    primary: Option<(Ino, u64)>,
    flags: u32,
) -> Vec<u8> {
    let mut v = Vec::with_capacity(96 + extra_blob.len());
    v.extend_from_slice(&[0; 4]);
    v.push(a.kind as u8 | COMPACT);
    for x in [
        a.perm as u64,
        a.nlink as u64,
        a.uid as u64,
        a.gid as u64,
        a.rdev as u64,
        a.size,
    ] {
        put_var(&mut v, x);
    }
    for t in [a.atime, a.mtime, a.ctime, a.crtime] {
        put_var_ts(&mut v, t);
    }
    put_var(&mut v, a.version);
    put_var(&mut v, extra_blob.len() as u64);
    v.extend_from_slice(extra_blob);
    put_var(&mut v, xattrs.len() as u64);
    for (n, val) in xattrs {
        put_var(&mut v, n.len() as u64);
        v.extend_from_slice(n);
        put_var(&mut v, val.len() as u64);
        v.extend_from_slice(val);
    }
    if let Some((parent, hash)) = primary {
        v.push(TAG_PRIMARY);
        put_var(&mut v, parent);
        v.extend_from_slice(&hash.to_le_bytes());
    }
    if flags != 0 {
        v.push(TAG_FLAGS);
        put_var(&mut v, flags as u64);
    }
    seal(v)
}

pub fn decode_inode(ino: Ino, v: &[u8]) -> Result<(Attr, InodeExtra)> {
    let mut r = Reader {
        what: "inode",
        b: open("inode", v)?,
    };
    let k = r.u8()?;
    let kind = Kind::from_u8(k & !COMPACT)
        .ok_or_else(|| Error::Corrupted(format!("inode {ino}: bad kind")))?;
    if k & COMPACT != 0 {
        return decode_inode_compact(ino, kind, r);
    }
    let perm = r.u16()?;
    let nlink = r.u32()?;
    let uid = r.u32()?;
    let gid = r.u32()?;
    let rdev = r.u32()?;
    let size = r.u64()?;
    let atime = r.ts()?;
    let mtime = r.ts()?;
    let ctime = r.ts()?;
    let crtime = r.ts()?;
    let version = r.u64()?;
    let blen = r.u32()? as usize;
    let blob = r.take(blen)?.to_vec();
    let nx = r.u16()?;
    let mut xattrs = Vec::with_capacity(nx as usize);
    for _ in 0..nx {
        let nl = r.u16()? as usize;
        let n = r.take(nl)?.to_vec();
        let vl = r.u32()? as usize;
        xattrs.push((n, r.take(vl)?.to_vec()));
    }
    // The fixed layout is format 1's, which had no primary pointers.
    if !r.b.is_empty() {
        return Err(Error::Corrupted(format!("inode {ino}: trailing bytes")));
    }
    let a = Attr {
        ino,
        kind,
        perm,
        nlink,
        uid,
        gid,
        rdev,
        size,
        atime,
        mtime,
        ctime,
        crtime,
        version,
    };
    Ok((
        a,
        InodeExtra {
            blob,
            xattrs,
            primary: None,
            flags: 0,
        },
    ))
}

fn decode_inode_compact(ino: Ino, kind: Kind, mut r: Reader<'_>) -> Result<(Attr, InodeExtra)> {
    let perm =
        u16::try_from(r.var()?).map_err(|_| Error::Corrupted(format!("inode {ino}: bad mode")))?;
    let nlink = r.var32()?;
    let uid = r.var32()?;
    let gid = r.var32()?;
    let rdev = r.var32()?;
    let size = r.var()?;
    let atime = r.var_ts()?;
    let mtime = r.var_ts()?;
    let ctime = r.var_ts()?;
    let crtime = r.var_ts()?;
    let version = r.var()?;
    let blen = r.var()? as usize;
    let blob = r.take(blen)?.to_vec();
    let nx = r.var()?;
    let mut xattrs = Vec::new();
    for _ in 0..nx {
        let nl = r.var()? as usize;
        let n = r.take(nl)?.to_vec();
        let vl = r.var()? as usize;
        xattrs.push((n, r.take(vl)?.to_vec()));
    }
    let mut primary = None;
    if r.b.first() == Some(&TAG_PRIMARY) && kind != Kind::Dir {
        r.u8()?;
        let parent = r.var()?;
        primary = Some((parent, r.u64()?));
    }
    let mut flags = 0;
    if r.b.first() == Some(&TAG_FLAGS) {
        r.u8()?;
        flags = r.var32()?;
    }
    if !r.b.is_empty() {
        return Err(Error::Corrupted(format!("inode {ino}: trailing bytes")));
    }
    let a = Attr {
        ino,
        kind,
        perm,
        nlink,
        uid,
        gid,
        rdev,
        size,
        atime,
        mtime,
        ctime,
        crtime,
        version,
    };
    Ok((
        a,
        InodeExtra {
            blob,
            xattrs,
            primary,
            flags,
        },
    ))
}

/// Bit of an entry's kind byte: the entry is its inode's only name and the
/// inode has no records but its `I` key (nlink 1, not a directory, no data
/// blocks), and the inode's primary pointer names this entry. unlink then
/// deletes the inode without reading it.
const SOLE: u8 = 0x80;

pub fn encode_entry(ino: Ino, kind: Kind, sole: bool) -> Vec<u8> {
    debug_assert!(!(sole && kind == Kind::Dir));
    let mut v = vec![0; 4];
    v.extend_from_slice(&ino.to_le_bytes());
    v.push(kind as u8 | if sole { SOLE } else { 0 });
    seal(v)
}
/// (child, kind, sole).
pub fn decode_entry(v: &[u8]) -> Result<(Ino, Kind, bool)> {
    let mut r = Reader {
        what: "entry",
        b: open("entry", v)?,
    };
    let ino = r.u64()?;
    let b = r.u8()?;
    let kind =
        Kind::from_u8(b & !SOLE).ok_or_else(|| Error::Corrupted("entry: bad kind".into()))?;
    let sole = b & SOLE != 0;
    if sole && kind == Kind::Dir {
        return Err(Error::Corrupted("entry: a directory marked sole".into()));
    }
    Ok((ino, kind, sole))
}

pub fn encode_data(block: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + block.len());
    v.extend_from_slice(&[0; 4]);
    v.extend_from_slice(block);
    seal(v)
}
pub fn decode_data(v: &[u8]) -> Result<&[u8]> {
    let d = open("data", v)?;
    if d.len() as u64 > crate::types::BLOCK {
        return Err(Error::Corrupted("data block larger than a block".into()));
    }
    Ok(d)
}

pub fn encode_u64(x: u64) -> Vec<u8> {
    let mut v = vec![0; 4];
    v.extend_from_slice(&x.to_le_bytes());
    seal(v)
}
pub fn decode_u64(what: &str, v: &[u8]) -> Result<u64> {
    let d = open(what, v)?;
    if d.len() != 8 {
        return Err(Error::Corrupted(format!("{what} record has wrong size")));
    }
    Ok(u64::from_le_bytes(d.try_into().unwrap()))
}

pub fn encode_super(ags: u32) -> Vec<u8> {
    encode_super_format(ags, FORMAT)
}
/// A superblock of an older format (the upgrade tests make such stores).
pub fn encode_super_format(ags: u32, format: u32) -> Vec<u8> {
    let mut v = vec![0; 4];
    v.extend_from_slice(MAGIC);
    v.extend_from_slice(&format.to_le_bytes());
    v.extend_from_slice(&ags.to_le_bytes());
    seal(v)
}
/// Returns the AG count.
pub fn decode_super(v: &[u8]) -> Result<u32> {
    Ok(decode_super_format(v)?.0)
}
/// Returns (AG count, format).
pub fn decode_super_format(v: &[u8]) -> Result<(u32, u32)> {
    let d = open("superblock", v)?;
    if d.len() != 16 || &d[..8] != MAGIC {
        return Err(Error::Corrupted("superblock: not a shoal store".into()));
    }
    let fmt = u32::from_le_bytes(d[8..12].try_into().unwrap());
    if !(FORMAT_MIN..=FORMAT).contains(&fmt) {
        return Err(Error::Corrupted(format!(
            "superblock: format {fmt}, this shoal reads {FORMAT_MIN} to {FORMAT}"
        )));
    }
    Ok((u32::from_le_bytes(d[12..16].try_into().unwrap()), fmt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inode_roundtrip_and_checksum() {
        let a = Attr {
            ino: 7,
            kind: Kind::File,
            perm: 0o644,
            nlink: 1,
            uid: 1,
            gid: 2,
            rdev: 0,
            size: 3,
            atime: Ts { sec: -5, nsec: 3 },
            mtime: Ts::default(),
            ctime: Ts::default(),
            crtime: Ts::default(),
            version: 9,
        };
        let x = vec![(b"user.a".to_vec(), b"v".to_vec())];
        let mut v = encode_inode(&a, b"abc", &x, None, 0);
        let (b, e) = decode_inode(7, &v).unwrap();
        assert_eq!(a, b);
        assert_eq!(e.blob, b"abc");
        assert_eq!(e.xattrs, x);
        assert_eq!(e.primary, None);
        let (_, e) = decode_inode(7, &encode_inode(&a, b"abc", &x, Some((5, 99)), 0)).unwrap();
        assert_eq!((e.primary, e.flags), (Some((5, 99)), 0));
        // File flags, with and without a primary pointer; a directory's too.
        for (p, f) in [(Some((5, 99)), 0x30), (None, 0x10)] {
            let (_, e) = decode_inode(7, &encode_inode(&a, b"", &x, p, f)).unwrap();
            assert_eq!((e.primary, e.flags), (p, f));
        }
        let d = Attr {
            kind: Kind::Dir,
            ..a
        };
        let (_, e) = decode_inode(7, &encode_inode(&d, b"", &[], None, 0x20)).unwrap();
        assert_eq!(e.flags, 0x20);
        v[10] ^= 1;
        assert!(matches!(decode_inode(7, &v), Err(Error::Corrupted(_))));
        assert!(matches!(decode_inode(7, &v[..3]), Err(Error::Corrupted(_))));
    }

    #[test]
    fn compact_inode_roundtrips_extremes_and_format1_inodes_still_read() {
        let t = |sec, nsec| Ts { sec, nsec };
        let a = Attr {
            ino: 1 << 41,
            kind: Kind::Symlink,
            perm: 0o7777,
            nlink: u32::MAX,
            uid: u32::MAX,
            gid: 0,
            rdev: 77,
            size: u64::MAX,
            atime: t(i64::MIN, 999_999_999),
            mtime: t(-1, 0),
            ctime: t(i64::MAX, 1),
            crtime: t(1_763_800_000, 5),
            version: u64::MAX,
        };
        let x = vec![(b"user.k".to_vec(), vec![9u8; 300]), (vec![], vec![])];
        let v = encode_inode(&a, &[1u8; 200], &x, Some((u64::MAX, 42)), 0);
        let (b, e) = decode_inode(a.ino, &v).unwrap();
        assert_eq!(
            (a, e.blob.len(), e.xattrs, e.primary),
            (b, 200, x, Some((u64::MAX, 42)))
        );
        // An empty file's record: under two thirds of the fixed layout's 97 bytes.
        let f = Attr {
            kind: Kind::File,
            perm: 0o644,
            nlink: 1,
            uid: 0,
            size: 0,
            rdev: 0,
            version: 1,
            ..a
        };
        let f = Attr {
            atime: f.crtime,
            mtime: f.crtime,
            ctime: f.crtime,
            ..f
        };
        let small = encode_inode(&f, &[], &[], None, 0).len();
        assert!(small <= 64, "{small} bytes");
        // A format-1 record (fixed layout, as format 1 wrote it).
        let mut old = vec![0; 4];
        old.push(Kind::File as u8);
        old.extend_from_slice(&0o600u16.to_le_bytes());
        for x in [1u32, 5, 6, 0] {
            old.extend_from_slice(&x.to_le_bytes());
        }
        old.extend_from_slice(&3u64.to_le_bytes());
        for _ in 0..4 {
            old.extend_from_slice(&(-7i64 as u64).to_le_bytes());
            old.extend_from_slice(&8u32.to_le_bytes());
        }
        old.extend_from_slice(&2u64.to_le_bytes());
        old.extend_from_slice(&3u32.to_le_bytes());
        old.extend_from_slice(b"abc");
        old.extend_from_slice(&0u16.to_le_bytes());
        let (o, e) = decode_inode(9, &seal(old)).unwrap();
        assert_eq!(
            (o.perm, o.nlink, o.uid, o.gid, o.size, o.mtime, o.version),
            (0o600, 1, 5, 6, 3, t(-7, 8), 2)
        );
        assert_eq!((e.blob, e.primary), (b"abc".to_vec(), None));
    }

    #[test]
    fn entry_sole_flag_roundtrips_and_old_entries_read_as_not_sole() {
        assert_eq!(
            decode_entry(&encode_entry(9, Kind::File, true)).unwrap(),
            (9, Kind::File, true)
        );
        assert_eq!(
            decode_entry(&encode_entry(9, Kind::Symlink, false)).unwrap(),
            (9, Kind::Symlink, false)
        );
        // A format-1 entry is the same bytes with the flag clear.
        let mut old = vec![0; 4];
        old.extend_from_slice(&9u64.to_le_bytes());
        old.push(Kind::File as u8);
        assert_eq!(decode_entry(&seal(old)).unwrap(), (9, Kind::File, false));
        let mut bad = vec![0; 4];
        bad.extend_from_slice(&9u64.to_le_bytes());
        bad.push(Kind::Dir as u8 | SOLE);
        assert!(matches!(decode_entry(&seal(bad)), Err(Error::Corrupted(_))));
    }

    #[test]
    fn entry_keys_sort_by_parent_then_hash() {
        let a = entry_key(5, 10, b"zz");
        let b = entry_key(5, 11, b"aa");
        let c = entry_key(6, 0, b"");
        assert!(a < b && b < c);
        let (lo, hi) = entry_range(5, 11);
        assert!(b >= lo && b < hi && a < lo);
        assert_eq!(parse_entry_key(&a).unwrap(), (5, 10, &b"zz"[..]));
    }
}
