//! The cluster namespace's keys under the filesystem's prefix (the list is
//! in `ns.rs`'s module comment): their encodings and an entry's value.

use shoal_core::error::{Error, Result};
use shoal_core::types::{Ino, Kind};

/// A key of one letter and one number (big-endian: numeric order is key order).
pub(crate) fn tagged(tag: u8, n: u64) -> Vec<u8> {
    let mut k = vec![tag];
    k.extend_from_slice(&n.to_be_bytes());
    k
}
pub(super) fn ikey(ino: Ino) -> Vec<u8> {
    tagged(b'I', ino)
}
pub(super) fn tkey(ino: Ino) -> Vec<u8> {
    tagged(b'T', ino)
}
pub(super) fn ekey(parent: Ino, name: &[u8]) -> Vec<u8> {
    let mut k = vec![b'E'];
    k.extend_from_slice(&parent.to_be_bytes());
    k.extend_from_slice(name);
    k
}
/// Every entry of `dir`: `[E dir, E dir+1)`.
pub(super) fn erange(dir: Ino) -> (Vec<u8>, Vec<u8>) {
    (ekey(dir, b""), ekey(dir + 1, b""))
}
/// An inode this daemon holds open after its last name went (`O sid ino`).
pub(super) fn okey(sid: u64, ino: Ino) -> Vec<u8> {
    let mut k = vec![b'O'];
    k.extend_from_slice(&sid.to_be_bytes());
    k.extend_from_slice(&ino.to_be_bytes());
    k
}
pub(super) fn skey(sid: u64) -> Vec<u8> {
    tagged(b'S', sid)
}

/// The lease on `dir`'s first name range (`super::dirlease`): the holder's session.
pub(super) fn lkey(dir: Ino) -> Vec<u8> {
    tagged(b'L', dir)
}

/// The lease on `dir`'s name range from split point `lo` (`lo` empty: the
/// first range, `lkey`).
pub(super) fn lkey_at(dir: Ino, lo: &[u8]) -> Vec<u8> {
    let mut k = lkey(dir);
    k.extend_from_slice(lo);
    k
}

/// Every lease on `dir`'s names: `[L dir, L dir+1)`.
pub(super) fn lrange(dir: Ino) -> (Vec<u8>, Vec<u8>) {
    (lkey(dir), tagged(b'L', dir.saturating_add(1)))
}

/// `dir`'s split points: where its name ranges begin (absent: one range).
pub(super) fn pkey(dir: Ino) -> Vec<u8> {
    tagged(b'P', dir)
}

/// Another daemon asks for a directory's lease back (the value: its
/// session and the name it wants, none: every range).
pub(super) fn rkey(dir: Ino) -> Vec<u8> {
    tagged(b'R', dir)
}
pub(crate) const NEXT_CHUNK: &[u8] = b"N";
pub(crate) const FORMAT_KEY: &[u8] = b"V";
/// Where file data past the inline size goes (a URL, given to mkfs).
pub(crate) const DATA_KEY: &[u8] = b"D";

pub(super) fn enc_entry(ino: Ino, kind: Kind) -> Vec<u8> {
    let mut v = ino.to_le_bytes().to_vec();
    v.push(kind as u8);
    v
}
pub(super) fn dec_entry(v: &[u8]) -> Result<(Ino, Kind)> {
    if v.len() != 9 {
        return Err(Error::Corrupted("shared entry: bad length".into()));
    }
    let ino = u64::from_le_bytes(v[..8].try_into().unwrap());
    let kind =
        Kind::from_u8(v[8]).ok_or_else(|| Error::Corrupted("shared entry: bad kind".into()))?;
    Ok((ino, kind))
}
