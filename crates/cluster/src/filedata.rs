//! File data of a shared namespace: files past the inline size keep their
//! bytes in an object store ([`Blobs`]), in chunks of [`DATA_CHUNK`] bytes,
//! one immutable object per chunk version.
//!
//! **Layout.** A file of at most `SHARED_INLINE_MAX` bytes keeps them in its
//! inode record, as before. A larger one keeps there a chunk table instead
//! (the record's blob, [`Table`]): for each chunk that has data, the object
//! holding it and how many of its bytes count (`len`; the rest of the chunk,
//! up to the file's size, reads as zeros). The rule is one: *inline if and
//! only if the size is at most the inline size*, so every change of size
//! across it converts (truncate down reads the bytes back inline).
//!
//! **Objects are never rewritten.** A changed chunk is uploaded as a new
//! object named `INO/CHUNK-SID-SEQ` (inode, chunk index, the writing
//! session, a counter of that session): unique across daemons without a
//! round trip. The commit that points the table at it is the operation's one
//! conditional transaction; what it replaced is deleted after that commit
//! (`Tx::forget`). So a reader always reads a consistent version: the one
//! the inode record it read names.
//!
//! **Writes are buffered per file on the daemon** ([`FileBuf`]): a write
//! changes the chunk in memory (read from its object first when the write
//! covers only part of it); close, fsync, a truncate, 32 MiB of the file's
//! dirty chunks, or the daemon's bound on all files' (`SessionOpts::dirty_max`,
//! 256 MiB) upload them and commit the table and size in one transaction.
//! A chunk written whole is uploaded at once in the background ([`Upload`]),
//! so the flush mostly waits for the commit; a sequential reader's next
//! chunks are fetched ahead ([`ChunkReader`]).
//! This is close-to-open: another mount sees the bytes after the writer's
//! close or fsync, as with NFS and JuiceFS. Two daemons writing one file at
//! once: the last commit wins per chunk (documented in docs/design.md).
//!
//! **Crash argument.** An object is uploaded before the commit that names
//! it, so a committed table never names a missing object (unless someone
//! deleted it by hand: fsck reports it). A daemon that dies between upload
//! and commit, or between commit and delete, leaves objects no table names;
//! their names carry the session, and `collect` deletes unnamed objects of
//! sessions that are gone (`shoal fsck --repair`). Objects of a live
//! session are never collected: its uploads may be about to be committed.

use super::blob::Blobs;
use super::ns::SharedStats;
use super::ns::{ikey, ClusterFs, Node, Tx, SHARED_INLINE_MAX};
use shoal_core::error::{Error, Result};
use shoal_core::sync::PlainMutex;
use shoal_core::types::{Attr, Ino, Kind, Ts};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Bytes per chunk: one object holds at most this much of a file.
pub const DATA_CHUNK: u64 = 4 << 20;
/// A file's dirty chunks in memory before a write uploads and commits them.
const DIRTY_MAX: u64 = 32 << 20;
/// Uploads of one flush in flight at once.
const UPLOADS: usize = 4;
/// Whole chunks a daemon keeps from its reads (4 MiB each at most).
const CACHED_CHUNKS: usize = 16;
/// Chunks fetched ahead of a sequential reader, and fetches ahead in
/// flight on a daemon at most.
const READ_AHEAD: u32 = 2;
const AHEAD_MAX: usize = 4;
/// The first byte of an encoded chunk table.
const TABLE_TAG: u8 = b'C';
/// Written byte ranges a buffer keeps apart per chunk, for a merge with
/// another mount's commit of the chunk (`FileBuf::spans`); past this the
/// chunk is this buffer's whole.
const SPANS_MAX: usize = 64;
/// Merges one flush makes at most before its version of the chunks wins
/// (another mount committing the file again and again meanwhile).
const MERGES_MAX: u32 = 8;

/// One chunk's object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub chunk: u32,
    /// The session that wrote it, and its counter.
    pub sid: u64,
    pub seq: u64,
    /// Bytes of the object that count, from the chunk's start.
    pub len: u32,
}

impl Piece {
    pub fn name(&self, ino: Ino) -> String {
        format!(
            "{ino:016x}/{:08x}-{:016x}-{:x}",
            self.chunk, self.sid, self.seq
        )
    }
}

/// The session that wrote an object, from its name.
pub fn object_session(name: &str) -> Option<u64> {
    let (_, rest) = name.split_once('/')?;
    let mut it = rest.split('-');
    let _chunk = it.next()?;
    u64::from_str_radix(it.next()?, 16).ok()
}

/// A file's chunks in chunk order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table(pub Vec<Piece>);

impl Table {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(1 + self.0.len() * 24);
        v.push(TABLE_TAG);
        for p in &self.0 {
            v.extend_from_slice(&p.chunk.to_le_bytes());
            v.extend_from_slice(&p.sid.to_le_bytes());
            v.extend_from_slice(&p.seq.to_le_bytes());
            v.extend_from_slice(&p.len.to_le_bytes());
        }
        v
    }
    pub fn decode(ino: Ino, b: &[u8]) -> Result<Table> {
        let bad = || Error::Corrupted(format!("inode {ino}: bad chunk table"));
        if b.first() != Some(&TABLE_TAG) || !(b.len() - 1).is_multiple_of(24) {
            return Err(bad());
        }
        let t = Table(
            b[1..]
                .chunks_exact(24)
                .map(|c| Piece {
                    chunk: u32::from_le_bytes(c[..4].try_into().unwrap()),
                    sid: u64::from_le_bytes(c[4..12].try_into().unwrap()),
                    seq: u64::from_le_bytes(c[12..20].try_into().unwrap()),
                    len: u32::from_le_bytes(c[20..24].try_into().unwrap()),
                })
                .collect(),
        );
        if t.0.windows(2).any(|w| w[0].chunk >= w[1].chunk)
            || t.0.iter().any(|p| p.len as u64 > DATA_CHUNK)
        {
            return Err(bad());
        }
        Ok(t)
    }
    /// The table of a node: empty for an inline file.
    pub fn of(n: &Node) -> Result<Table> {
        if n.attr.kind == Kind::File && n.attr.size > SHARED_INLINE_MAX {
            Table::decode(n.attr.ino, &n.blob)
        } else {
            Ok(Table::default())
        }
    }
    pub fn get(&self, chunk: u32) -> Option<&Piece> {
        self.0
            .binary_search_by_key(&chunk, |p| p.chunk)
            .ok()
            .map(|i| &self.0[i])
    }
    /// Point `p.chunk` at `p`; the piece it replaces, if any.
    fn set(&mut self, p: Piece) -> Option<Piece> {
        match self.0.binary_search_by_key(&p.chunk, |x| x.chunk) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i], p)),
            Err(i) => {
                self.0.insert(i, p);
                None
            }
        }
    }
    /// Cut to `size` bytes: chunks past it go (into `gone`), the one it
    /// ends in counts only its bytes below it.
    fn cut(&mut self, size: u64, gone: &mut Vec<Piece>) {
        self.0.retain_mut(|p| {
            let start = p.chunk as u64 * DATA_CHUNK;
            if start >= size {
                gone.push(*p);
                false
            } else {
                p.len = p.len.min((size - start).min(DATA_CHUNK) as u32);
                true
            }
        });
    }
}

/// Chunks read whole from the object store, by object name, least
/// recently used first. Objects never change, so an entry is never stale:
/// a file's new bytes are a new object with a new name.
#[derive(Default)]
struct ChunkCache {
    lru: std::collections::VecDeque<(String, Arc<Vec<u8>>)>,
}

impl ChunkCache {
    fn get(&mut self, name: &str) -> Option<Arc<Vec<u8>>> {
        let i = self.lru.iter().position(|(n, _)| n == name)?;
        let e = self.lru.remove(i)?;
        let v = e.1.clone();
        self.lru.push_back(e);
        Some(v)
    }
    fn put(&mut self, name: String, v: Arc<Vec<u8>>) {
        if self.lru.len() >= CACHED_CHUNKS {
            self.lru.pop_front();
        }
        self.lru.push_back((name, v));
    }
}

/// A fetch of one object, shared by everyone who wants it while it runs.
type Fetch = Arc<OnceLock<Result<Arc<Vec<u8>>>>>;

/// How a daemon reads chunks: the cache of whole chunks, the fetches in
/// flight (a reader that wants an object being fetched ahead waits for
/// that fetch instead of starting its own), and where each file's last
/// read ended, to tell a sequential reader and fetch ahead of it.
#[derive(Default)]
pub struct ChunkReader {
    cache: PlainMutex<ChunkCache>,
    fetching: PlainMutex<HashMap<String, Fetch>>,
    last_end: PlainMutex<HashMap<Ino, u64>>,
    ahead: AtomicUsize,
}

impl ChunkReader {
    /// Object `name`, at least its first `len` bytes, from the cache or
    /// read whole once.
    fn fetch(
        &self,
        blobs: &dyn Blobs,
        stats: &SharedStats,
        name: &str,
        len: u64,
    ) -> Result<Arc<Vec<u8>>> {
        if let Some(v) = self.cache.lock().get(name) {
            if v.len() as u64 >= len {
                return Ok(v);
            }
        }
        let get = || -> Result<Arc<Vec<u8>>> {
            let mut v = blobs.get(name, 0, len)?;
            stats.blob_gets.fetch_add(1, Ordering::Relaxed);
            v.resize(len as usize, 0);
            let v = Arc::new(v);
            self.cache.lock().put(name.to_string(), v.clone());
            Ok(v)
        };
        let cell = self
            .fetching
            .lock()
            .entry(name.to_string())
            .or_default()
            .clone();
        let r = cell.get_or_init(get).clone();
        {
            let mut f = self.fetching.lock();
            if f.get(name).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                f.remove(name);
            }
        }
        match r {
            // A fetch of fewer bytes (a piece cut by a truncate since).
            Ok(v) if (v.len() as u64) < len => get(),
            r => r,
        }
    }

    /// Whether `name` is cached or being fetched.
    fn has(&self, name: &str) -> bool {
        self.fetching.lock().contains_key(name)
            || self.cache.lock().lru.iter().any(|(n, _)| n == name)
    }
}

/// A file's writes not yet committed, on the daemon that made them.
#[derive(Default)]
pub struct FileBuf {
    /// The file's size with the buffered writes.
    size: u64,
    mtime: Option<Ts>,
    /// Changed chunks: each chunk's bytes from its start (shorter than a
    /// chunk when the rest is a hole or past the end). Shared with an
    /// upload of the chunk in flight: a write into it then copies it, and
    /// the upload is of an older version (`stale`).
    dirty: BTreeMap<u32, Arc<Vec<u8>>>,
    /// Uploads started as soon as a chunk was written whole (a sequential
    /// writer does not come back to it), so that the flush finds them done.
    uploads: BTreeMap<u32, Upload>,
    /// Uploads of versions written over since: their objects go at the
    /// flush.
    stale: Vec<Upload>,
    /// Chunks written again after their early upload: not uploaded early
    /// again (each such write copies the chunk away from the upload, and
    /// an upload per write of a few bytes into a whole chunk held a 4 MiB
    /// copy each until the flush: xfstests' holetest on etcd grew a daemon
    /// to 23 GB). So a chunk holds at most two versions in memory.
    rewritten: std::collections::BTreeSet<u32>,
    dirty_bytes: u64,
    /// The table the buffer started from (for the chunks it did not change).
    base: Table,
    /// An inline file's bytes when the buffer started (chunk 0's).
    inline: Vec<u8>,
    /// The base's size, and the end of the furthest write into the buffer.
    base_size: u64,
    end: u64,
    /// Whether the base is the record cache's (this daemon's last commit
    /// of the file, or the change stream's), not read from the store: the
    /// commit checks it (`commit_buffer`), and a chunk that stops keeping
    /// its spans confirms it first (`confirm_base`).
    guessed: bool,
    /// Per changed chunk, the byte ranges written into it (from the chunk's
    /// start, sorted, neither overlapping nor touching), None past
    /// `SPANS_MAX`: what this buffer's commit keeps of its version where
    /// another mount committed the chunk since the base (`merge_moved`).
    spans: BTreeMap<u32, Option<Vec<(u32, u32)>>>,
}

/// Add `[s, e)` to sorted ranges that neither overlap nor touch.
fn add_span(v: &mut Vec<(u32, u32)>, s: u32, e: u32) {
    let i = v.partition_point(|r| r.1 < s);
    let mut j = i;
    let (mut lo, mut hi) = (s, e);
    while j < v.len() && v[j].0 <= e {
        lo = lo.min(v[j].0);
        hi = hi.max(v[j].1);
        j += 1;
    }
    v.splice(i..j, [(lo, hi)]);
}

/// A file's inline bytes as its record holds them (none past the inline
/// size: it has a table then).
fn inline_of(n: &Node) -> Vec<u8> {
    if n.attr.size <= SHARED_INLINE_MAX {
        let mut v = n.blob.clone();
        v.resize(n.attr.size as usize, 0);
        v
    } else {
        vec![]
    }
}

impl FileBuf {
    /// Changed chunks another commit changed since the base: their piece
    /// (or chunk 0's inline bytes) in `n` is not the base's.
    fn moved(&self, n: &Node) -> Result<Vec<u32>> {
        let t = Table::of(n)?;
        let inline = inline_of(n);
        Ok(self
            .dirty
            .keys()
            .copied()
            .filter(|&c| {
                self.base.get(c) != t.get(c)
                    || (c == 0 && t.get(0).is_none() && self.inline != inline)
            })
            .collect())
    }

    /// The size to commit over record `n`: the buffer's, or, when another
    /// commit changed the size since the base, the larger of that one and
    /// the end of this buffer's writes.
    fn size_over(&self, n: &Node) -> u64 {
        if n.attr.size == self.base_size {
            self.size
        } else {
            n.attr.size.max(self.end)
        }
    }
}

/// A chunk's upload running in the background.
pub(super) struct Upload {
    piece: Piece,
    /// The version uploaded (the buffer's while it was not written over).
    bytes: Arc<Vec<u8>>,
    done: std::thread::JoinHandle<Result<()>>,
}

impl Upload {
    fn wait(self) -> Result<()> {
        self.done
            .join()
            .unwrap_or_else(|_| Err(Error::Io("upload thread panicked".into())))
    }
}

impl ClusterFs {
    fn blobs(&self) -> Result<&Arc<dyn Blobs>> {
        self.blobs.as_ref().ok_or(Error::FileTooBig)
    }

    /// The buffer of `ino`, if this daemon has writes of it not committed.
    pub(super) fn buffered(&self, ino: Ino) -> Option<Arc<PlainMutex<FileBuf>>> {
        self.bufs.lock().get(&ino).cloned()
    }

    /// The size and time a stat shows on this daemon: with its buffered writes.
    pub(super) fn with_buffered(&self, mut a: Attr) -> Attr {
        if let Some(b) = self.buffered(a.ino) {
            let b = b.lock();
            // A buffer holds writes once it has a time (one whose first
            // write failed before that holds none).
            if let Some(t) = b.mtime {
                a.size = b.size;
                a.mtime = a.mtime.max(t);
                a.ctime = a.ctime.max(t);
            }
        }
        a
    }

    /// Write into a file: in its record while it stays within the inline
    /// size, else into its buffer (committed by `flush`).
    pub fn write(&self, ino: Ino, off: u64, data: &[u8]) -> Result<u32> {
        let end = off
            .checked_add(data.len() as u64)
            .ok_or(Error::FileTooBig)?;
        // The largest file, as on the embedded mount.
        shoal_core::rules::link::check_size(end)?;
        // Into the record while the file is that small (not when this
        // daemon knows it is larger: a database's page 1, a journal's
        // header, would read the record only to find that out).
        if end <= SHARED_INLINE_MAX && self.buffered(ino).is_none() && !self.known_larger(ino) {
            match self.write_inline(ino, off, data) {
                Err(Error::FileTooBig) => {}
                other => return other,
            }
        }
        self.blobs()?;
        // Through a handle opened before chattr +i too (as Linux since
        // 5.3), as far as the record cache knows; the commit checks again.
        self.may_write_known(ino)?;
        let buf = {
            let mut m = self.bufs.lock();
            m.entry(ino).or_default().clone()
        };
        let mut b = buf.lock();
        {
            // A flush committed this buffer and took it out of the map
            // while this write waited for it (a write into it would be in
            // no file's buffer: never committed, never read). It is empty
            // now, and becomes the file's buffer again; or another write
            // made a new one since, and this one goes there.
            let mut m = self.bufs.lock();
            match m.get(&ino) {
                Some(x) if Arc::ptr_eq(x, &buf) => {}
                None => {
                    m.insert(ino, buf.clone());
                }
                Some(_) => {
                    drop(m);
                    drop(b);
                    return self.write(ino, off, data);
                }
            }
        }
        if b.mtime.is_none() {
            // A new buffer: from the file as committed, as this daemon
            // knows it (its own last commit of it, a database's every
            // transaction) or else as read now.
            let (n, guessed) = self.load_base(ino)?;
            if n.attr.kind != Kind::File {
                let mut m = self.bufs.lock();
                if m.get(&ino).is_some_and(|x| Arc::ptr_eq(x, &buf)) {
                    m.remove(&ino);
                }
                return Err(Error::IsDir);
            }
            b.size = n.attr.size;
            b.base_size = n.attr.size;
            b.base = Table::of(&n)?;
            b.inline = inline_of(&n);
            b.guessed = guessed;
        }
        let mut pos = off;
        let mut rest = data;
        let mut whole = vec![];
        let mut untracked = vec![];
        while !rest.is_empty() {
            let chunk = (pos / DATA_CHUNK) as u32;
            let at = (pos % DATA_CHUNK) as usize;
            let n = rest.len().min(DATA_CHUNK as usize - at);
            if !b.dirty.contains_key(&chunk) {
                let covers = at == 0 && n as u64 == DATA_CHUNK;
                let old = if covers {
                    vec![]
                } else {
                    self.chunk_bytes(ino, &b.base, &b.inline, chunk)?
                };
                b.dirty_bytes += old.len() as u64;
                // Counted as the buffer grows: a write that fails halfway
                // keeps what it added, and the flush takes it all back.
                self.dirty_total
                    .fetch_add(old.len() as u64, Ordering::Relaxed);
                b.dirty.insert(chunk, Arc::new(old));
            }
            if b.uploads
                .get(&chunk)
                .is_some_and(|u| Arc::ptr_eq(&u.bytes, &b.dirty[&chunk]))
            {
                b.rewritten.insert(chunk);
            }
            let rewritten = b.rewritten.contains(&chunk);
            let v = Arc::make_mut(b.dirty.get_mut(&chunk).unwrap());
            let grow = (at + n).saturating_sub(v.len());
            if v.len() < at + n {
                if v.capacity() < at + n && at + n > DATA_CHUNK as usize / 2 {
                    // Once, not by doubling: a chunk is written in order.
                    v.reserve_exact(DATA_CHUNK as usize - v.len());
                }
                v.resize(at + n, 0);
            }
            v[at..at + n].copy_from_slice(&rest[..n]);
            // Written up to its end by a writer going forward: it will not
            // come back (uploaded once, at most).
            if v.len() == DATA_CHUNK as usize && at + n == DATA_CHUNK as usize && !rewritten {
                whole.push(chunk);
            }
            if let Some(sp) = b.spans.entry(chunk).or_insert_with(|| Some(vec![])) {
                add_span(sp, at as u32, (at + n) as u32);
                if sp.len() > SPANS_MAX {
                    untracked.push(chunk);
                }
            }
            b.dirty_bytes += grow as u64;
            self.dirty_total.fetch_add(grow as u64, Ordering::Relaxed);
            pos += n as u64;
            rest = &rest[n..];
        }
        b.size = b.size.max(end);
        b.end = b.end.max(end);
        b.mtime = Some(Ts::now());
        if !untracked.is_empty() {
            // Past what a merge keeps: from now on the buffer's version of
            // these chunks wins them (as JuiceFS's slices would not), on a
            // base confirmed by the store.
            // A store that cannot answer now leaves them tracked.
            if !b.guessed || self.confirm_base(ino, &mut b).is_ok() {
                for c in untracked {
                    b.spans.insert(c, None);
                }
            }
        }
        for chunk in whole {
            self.upload_early(ino, &mut b, chunk);
        }
        let total = self.dirty_total.load(Ordering::Relaxed);
        // This file's buffer is full, or all files' are: the write that
        // crosses the bound commits its own file (so the total stays within
        // the bound plus one write per writing thread).
        let full = b.dirty_bytes >= DIRTY_MAX || total > self.dirty_max;
        drop(b);
        if full {
            self.flush(ino)?;
        }
        Ok(data.len() as u32)
    }

    /// Whether the record cache knows `ino` larger than the inline size
    /// (a guess: the buffer's commit checks its base).
    fn known_larger(&self, ino: Ino) -> bool {
        self.pending_node(ino).is_none()
            && self
                .cache
                .get_written(&ikey(ino))
                .and_then(|(v, _)| Node::decode(ino, &v?).ok())
                .is_some_and(|n| n.attr.size > SHARED_INLINE_MAX)
    }

    /// The record a new buffer starts from, and whether it is the record
    /// cache's (a guess, `FileBuf::guessed`) rather than the store's.
    fn load_base(&self, ino: Ino) -> Result<(Node, bool)> {
        if self.pending_node(ino).is_none() {
            if let Some((Some(v), _)) = self.cache.get_written(&ikey(ino)) {
                self.stats.guesses.fetch_add(1, Ordering::Relaxed);
                return Ok((Node::decode(ino, &v)?, true));
            }
        }
        Ok((self.load(ino)?, false))
    }

    /// Read the record a guessed base stands for, and merge what another
    /// mount committed since into the buffer (`merge_moved`).
    fn confirm_base(&self, ino: Ino, b: &mut FileBuf) -> Result<()> {
        self.stats.reads.fetch_add(1, Ordering::Relaxed);
        let n = self.load(ino)?;
        self.merge_moved(ino, b, &n)
    }

    /// Make record `n` (newer than the buffer's base) the base: each
    /// changed chunk another commit changed too becomes that commit's
    /// bytes with this buffer's written spans over them (one whose spans
    /// were not kept stays this buffer's: the last commit wins it).
    fn merge_moved(&self, ino: Ino, b: &mut FileBuf, n: &Node) -> Result<()> {
        let t = Table::of(n)?;
        let inline = inline_of(n);
        for c in b.moved(n)? {
            let Some(Some(spans)) = b.spans.get(&c) else {
                continue;
            };
            let ours = &b.dirty[&c];
            let mut merged = self.chunk_bytes(ino, &t, &inline, c)?;
            for &(s, e) in spans {
                let (s, e) = (s as usize, e as usize);
                if merged.len() < e {
                    merged.resize(e, 0);
                }
                merged[s..e].copy_from_slice(&ours[s..e]);
            }
            if merged == **ours {
                continue;
            }
            self.stats.data_merges.fetch_add(1, Ordering::Relaxed);
            let (was, now) = (ours.len() as u64, merged.len() as u64);
            b.dirty_bytes = b.dirty_bytes + now - was;
            if now >= was {
                self.dirty_total.fetch_add(now - was, Ordering::Relaxed);
            } else {
                self.dirty_total.fetch_sub(was - now, Ordering::Relaxed);
            }
            // A new version: an early upload of the old one is stale.
            b.dirty.insert(c, Arc::new(merged));
        }
        b.size = b.size_over(n);
        b.base = t;
        b.inline = inline;
        b.base_size = n.attr.size;
        b.guessed = false;
        Ok(())
    }

    /// Start uploading chunk `chunk` of `b`, written whole, unless the same
    /// version is on its way; an upload of an older version becomes stale.
    fn upload_early(&self, ino: Ino, b: &mut FileBuf, chunk: u32) {
        let Ok(blobs) = self.blobs() else { return };
        let bytes = b.dirty[&chunk].clone();
        if let Some(u) = b.uploads.get(&chunk) {
            if Arc::ptr_eq(&u.bytes, &bytes) {
                return;
            }
        }
        let piece = Piece {
            chunk,
            sid: self.session(),
            seq: self.blob_seq.fetch_add(1, Ordering::Relaxed),
            len: bytes.len() as u32,
        };
        let (blobs, stats, name, v) = (
            blobs.clone(),
            self.stats.clone(),
            piece.name(ino),
            bytes.clone(),
        );
        let done = std::thread::Builder::new()
            .name("shoal-upload".into())
            .spawn(move || {
                blobs.put(&name, &v)?;
                stats.blob_puts.fetch_add(1, Ordering::Relaxed);
                Ok(())
            });
        // No thread to be had: the flush uploads it.
        let Ok(done) = done else { return };
        if let Some(old) = b.uploads.insert(chunk, Upload { piece, bytes, done }) {
            b.stale.push(old);
        }
    }

    /// Write into a file that stays inline; `FileTooBig` when it is not
    /// inline (it has a chunk table).
    fn write_inline(&self, ino: Ino, off: u64, data: &[u8]) -> Result<u32> {
        let end = off + data.len() as u64;
        let write = |n: &mut Node| {
            if n.attr.kind != Kind::File {
                return Err(Error::IsDir);
            }
            Self::may_write(n)?;
            if n.attr.size > SHARED_INLINE_MAX {
                return Err(Error::FileTooBig);
            }
            let mut b = std::mem::take(&mut n.blob);
            b.resize(n.attr.size as usize, 0);
            if (b.len() as u64) < end {
                b.resize(end as usize, 0);
            }
            b[off as usize..end as usize].copy_from_slice(data);
            n.attr.size = b.len() as u64;
            n.blob = b;
            let t = Ts::now();
            n.attr.mtime = t;
            n.attr.ctime = t;
            Ok(data.len() as u32)
        };
        // A file created from memory and not committed yet: written there.
        if let Some(r) = self.amend_queued(ino, write) {
            return r;
        }
        self.run(|tx| {
            let mut n = tx.node(ino)?;
            let r = write(&mut n)?;
            tx.put_node(&mut n)?;
            Ok(r)
        })
    }

    /// A chunk's committed bytes (from its object, or an inline file's).
    fn chunk_bytes(&self, ino: Ino, t: &Table, inline: &[u8], chunk: u32) -> Result<Vec<u8>> {
        if let Some(p) = t.get(chunk) {
            // The cached object may be longer than what counts of it now
            // (a truncate cut `len`): only `len` bytes.
            Ok(self.piece(ino, p)?[..p.len as usize].to_vec())
        } else if chunk == 0 {
            Ok(inline.to_vec())
        } else {
            Ok(vec![])
        }
    }

    /// Commit every file's buffered writes (`shoal sync`, unmount): the
    /// first error, after trying them all.
    /// Bytes of every file's buffered writes on this daemon.
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty_total.load(Ordering::Relaxed)
    }

    pub fn flush_all(&self) -> Result<()> {
        let inos: Vec<Ino> = self.bufs.lock().keys().copied().collect();
        let mut first = Ok(());
        for ino in inos {
            let r = self.flush(ino);
            if first.is_ok() {
                first = r;
            }
        }
        // And every create acknowledged from memory.
        let r = self.settle();
        if first.is_ok() {
            first = r;
        }
        first
    }

    /// A piece's object, at least its `len` bytes (maybe more: a cached
    /// object read before a truncate cut `len`), from the cache or read
    /// whole once.
    fn piece(&self, ino: Ino, p: &Piece) -> Result<Arc<Vec<u8>>> {
        let blobs = self.blobs()?;
        self.chunks
            .fetch(&**blobs, &self.stats, &p.name(ino), p.len as u64)
    }

    /// After a read of `ino` from `off` to `end` (its committed table
    /// `t`): if it began where the file's last read ended, fetch the next
    /// chunks in the background, so that a sequential reader finds them
    /// here instead of waiting for the object store at each chunk.
    fn read_ahead(&self, ino: Ino, off: u64, end: u64, t: &Table) {
        let Some(blobs) = &self.blobs else { return };
        let r = &self.chunks;
        let sequential = {
            let mut last = r.last_end.lock();
            if last.len() >= 4096 {
                last.clear();
            }
            last.insert(ino, end) == Some(off)
        };
        if !sequential {
            return;
        }
        let first = (end / DATA_CHUNK) as u32;
        for chunk in first..=first.saturating_add(READ_AHEAD) {
            let Some(p) = t.get(chunk) else { continue };
            let name = p.name(ino);
            if r.has(&name) {
                continue;
            }
            if r.ahead.fetch_add(1, Ordering::Relaxed) >= AHEAD_MAX {
                r.ahead.fetch_sub(1, Ordering::Relaxed);
                return;
            }
            let (reader, blobs, stats, len) = (r.clone(), blobs.clone(), self.stats.clone(), p.len);
            let spawned = std::thread::Builder::new()
                .name("shoal-read-ahead".into())
                .spawn(move || {
                    // A failure is the reader's to see, when it asks.
                    let _ = reader.fetch(&*blobs, &stats, &name, len as u64);
                    reader.ahead.fetch_sub(1, Ordering::Relaxed);
                });
            if spawned.is_err() {
                r.ahead.fetch_sub(1, Ordering::Relaxed);
                return;
            }
        }
    }

    /// Upload the buffered writes of `ino` and commit them (size, times and
    /// chunk table in one transaction); the objects they replace go after.
    pub fn flush(&self, ino: Ino) -> Result<()> {
        let Some(buf) = self.buffered(ino) else {
            return Ok(());
        };
        let mut b = buf.lock();
        let r = self.commit_buffer(ino, &mut b);
        if matches!(r, Ok(()) | Err(Error::NotFound)) {
            self.dirty_total.fetch_sub(b.dirty_bytes, Ordering::Relaxed);
            *b = FileBuf::default();
            // Out of the map before the buffer's lock goes: a write that
            // waited for it then finds it gone and puts it back (`write`).
            let mut m = self.bufs.lock();
            if m.get(&ino).is_some_and(|x| Arc::ptr_eq(x, &buf)) {
                m.remove(&ino);
            }
            drop(m);
            drop(b);
        }
        match r {
            Err(Error::NotFound) => Ok(()), // removed meanwhile: nothing to keep
            other => other,
        }
    }

    /// An early upload no commit will name: wait for it, and delete what
    /// it made.
    fn discard(&self, ino: Ino, u: Upload) {
        let name = u.piece.name(ino);
        if u.wait().is_ok() {
            self.delete_object(&name);
        }
    }

    fn commit_buffer(&self, ino: Ino, b: &mut FileBuf) -> Result<()> {
        // Uploads of versions written over are named by nothing: they go
        // whatever becomes of this flush.
        for u in std::mem::take(&mut b.stale) {
            self.discard(ino, u);
        }
        let mut early = std::mem::take(&mut b.uploads);
        if b.mtime.is_none() {
            return Ok(());
        }
        let mut merges = 0;
        loop {
            let pieces = self.upload_buffer(ino, b, std::mem::take(&mut early))?;
            let t = b.mtime.unwrap();
            let point = |n: &mut Node| -> Result<Vec<Piece>> {
                // Made immutable (on any mount) since these writes were taken.
                Self::may_write(n)?;
                let size = b.size_over(n);
                let mut table = Table::of(n)?;
                let mut gone = vec![];
                if size <= SHARED_INLINE_MAX {
                    // Another mount cut the file to the inline size since
                    // the base, and this buffer's writes all end below it
                    // (so only chunk 0 changed, merged with that cut):
                    // the bytes go back into the record, no object names
                    // them.
                    let mut bytes = b.dirty.get(&0).map(|d| d.to_vec()).unwrap_or_default();
                    bytes.resize(size as usize, 0);
                    gone.extend(table.0.iter().copied());
                    gone.extend(pieces.iter().copied());
                    n.attr.size = size;
                    n.blob = bytes;
                } else {
                    for p in &pieces {
                        gone.extend(table.set(*p));
                    }
                    table.cut(size, &mut gone);
                    n.attr.size = size;
                    n.blob = table.encode();
                }
                n.attr.mtime = n.attr.mtime.max(t);
                n.attr.ctime = n.attr.ctime.max(t);
                Ok(gone)
            };
            // A file created from memory and not committed yet: its table
            // changes there, and the objects it stops naming were never
            // committed (named only by this queued record). No other
            // mount can have changed it.
            let r = match self.amend_queued(ino, point) {
                Some(r) => r.map(|gone| {
                    for p in gone {
                        self.delete_object(&p.name(ino));
                    }
                    None
                }),
                // The record as this daemon last committed it, without a
                // round trip, as a guess the commit checks (`node_known`).
                // Another mount committed a chunk this buffer changed since
                // its base: nothing is committed, the chunks are merged
                // and uploaded again.
                None => self.run(|tx| {
                    let mut n = tx.node_known(ino)?;
                    if merges < MERGES_MAX && !b.moved(&n)?.is_empty() {
                        return Ok(Some(n));
                    }
                    let gone = point(&mut n)?;
                    tx.forget(ino, &gone);
                    tx.put_node(&mut n)?;
                    Ok(None)
                }),
            };
            match r {
                Ok(None) => {
                    // The chunks as committed, kept as a read of them would
                    // keep them: the next write into a chunk of a file just
                    // synced (a database's next transaction) starts from
                    // these bytes instead of fetching the object it just
                    // uploaded. An object's name is never reused, so a
                    // cached one is its bytes for ever.
                    let mut cache = self.chunks.cache.lock();
                    for p in &pieces {
                        if let Some(bytes) = b.dirty.get(&p.chunk) {
                            if bytes.len() == p.len as usize {
                                cache.put(p.name(ino), bytes.clone());
                            }
                        }
                    }
                    return Ok(());
                }
                Ok(Some(n)) => {
                    // Not committed: the uploads are named by nothing.
                    for p in &pieces {
                        self.delete_object(&p.name(ino));
                    }
                    self.merge_moved(ino, b, &n)?;
                    merges += 1;
                }
                Err(e) => {
                    for p in &pieces {
                        self.delete_object(&p.name(ino));
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Upload the buffer's changed chunks (those uploaded early, in
    /// `early`, are waited for): the pieces a commit is to name. If one
    /// fails, the others' objects are deleted.
    fn upload_buffer(
        &self,
        ino: Ino,
        b: &FileBuf,
        mut early: BTreeMap<u32, Upload>,
    ) -> Result<Vec<Piece>> {
        let blobs = self.blobs()?;
        // The chunks uploaded early whose version is the buffer's, and
        // the ones to upload now.
        let mut started = vec![];
        let mut pieces: Vec<(Piece, &Vec<u8>)> = vec![];
        for (&chunk, bytes) in &b.dirty {
            match early.remove(&chunk) {
                Some(u) if Arc::ptr_eq(&u.bytes, bytes) => started.push(u),
                other => {
                    if let Some(u) = other {
                        // Written over after it was sent (its write copied
                        // the chunk): not this version.
                        self.discard(ino, u);
                    }
                    let p = Piece {
                        chunk,
                        sid: self.session(),
                        seq: self.blob_seq.fetch_add(1, Ordering::Relaxed),
                        len: bytes.len() as u32,
                    };
                    pieces.push((p, &**bytes));
                }
            }
        }
        // Early uploads of chunks a truncate dropped since.
        for (_, u) in early {
            self.discard(ino, u);
        }
        // Uploads run UPLOADS at a time: one PUT after another leaves the
        // object store's latency unhidden (a 256 MiB file is 64 of them).
        let mut failed = None;
        for group in pieces.chunks(UPLOADS) {
            // One upload runs here: a thread each costs a clone and a
            // stack per fsync of a small file (a database's every commit).
            let results: Vec<Result<()>> = if let [(p, bytes)] = group {
                vec![blobs.put(&p.name(ino), bytes)]
            } else {
                std::thread::scope(|sc| {
                    let hs: Vec<_> = group
                        .iter()
                        .map(|(p, bytes)| sc.spawn(move || blobs.put(&p.name(ino), bytes)))
                        .collect();
                    hs.into_iter()
                        .map(|h| {
                            h.join()
                                .unwrap_or_else(|_| Err(Error::Io("upload thread panicked".into())))
                        })
                        .collect()
                })
            };
            for r in results {
                match r {
                    Ok(()) => {
                        self.stats.blob_puts.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => failed = failed.or(Some(e)),
                }
            }
            if failed.is_some() {
                break;
            }
        }
        let mut pieces: Vec<Piece> = pieces.into_iter().map(|(p, _)| p).collect();
        for u in started {
            let p = u.piece;
            if let Err(e) = u.wait() {
                failed = failed.or(Some(e));
            }
            pieces.push(p);
        }
        if let Some(e) = failed {
            // Nothing names them: the ones that were made go now.
            for p in &pieces {
                self.delete_object(&p.name(ino));
            }
            return Err(e);
        }
        Ok(pieces)
    }

    /// Read from a file: its buffered writes, else what is committed.
    pub fn read(&self, ino: Ino, off: u64, len: u32) -> Result<Vec<u8>> {
        if let Some(buf) = self.buffered(ino) {
            let b = buf.lock();
            if b.mtime.is_some() {
                return self.read_from(ino, off, len, b.size, &b.base, &b.inline, &b.dirty);
            }
        }
        // An object deleted under the read (another daemon replaced the
        // chunk after this one read the table): read the new table.
        let mut tries = 0;
        loop {
            // The record as the cache knows it (no round trip per read: the
            // kernel reads 128 KiB at a time); after a missing object, the
            // store's.
            let n = self.load_known(ino, tries > 0)?;
            if n.attr.size <= SHARED_INLINE_MAX || n.attr.kind != Kind::File {
                let mut b = n.blob;
                b.resize(n.attr.size as usize, 0);
                let s = (off as usize).min(b.len());
                let e = (s + len as usize).min(b.len());
                return Ok(b[s..e].to_vec());
            }
            let t = Table::decode(ino, &n.blob)?;
            let r = self.read_from(ino, off, len, n.attr.size, &t, &[], &BTreeMap::new());
            if let Ok(v) = &r {
                self.read_ahead(ino, off, off + v.len() as u64, &t);
            }
            match r {
                Err(Error::NotFound) if tries < 3 => tries += 1,
                Err(Error::NotFound) => {
                    return Err(Error::Corrupted(format!(
                        "inode {ino}: a chunk's object is missing from the object store (shoal fsck lists them)"
                    )))
                }
                other => return other,
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn read_from(
        &self,
        ino: Ino,
        off: u64,
        len: u32,
        size: u64,
        t: &Table,
        inline: &[u8],
        dirty: &BTreeMap<u32, Arc<Vec<u8>>>,
    ) -> Result<Vec<u8>> {
        let end = off.saturating_add(len as u64).min(size);
        if off >= end {
            return Ok(vec![]);
        }
        let mut out = vec![0u8; (end - off) as usize];
        let mut pos = off;
        while pos < end {
            let chunk = (pos / DATA_CHUNK) as u32;
            let at = pos % DATA_CHUNK;
            let n = (end - pos).min(DATA_CHUNK - at);
            let dst = &mut out[(pos - off) as usize..(pos - off + n) as usize];
            if let Some(v) = dirty.get(&chunk) {
                let s = (at as usize).min(v.len());
                let e = ((at + n) as usize).min(v.len());
                dst[..e - s].copy_from_slice(&v[s..e]);
            } else if let Some(p) = t.get(chunk) {
                let want = (p.len as u64).saturating_sub(at).min(n);
                if want > 0 {
                    // The whole chunk, once: the kernel reads 128 KiB at a
                    // time, and a GET each would be 32 round trips a chunk.
                    let v = self.piece(ino, p)?;
                    dst[..want as usize].copy_from_slice(&v[at as usize..(at + want) as usize]);
                }
            } else if chunk == 0 {
                let s = (at as usize).min(inline.len());
                let e = ((at + n) as usize).min(inline.len());
                dst[..e - s].copy_from_slice(&inline[s..e]);
            }
            pos += n;
        }
        Ok(out)
    }

    /// The new table and blob of a file cut or extended to `size` (in a
    /// setattr's transaction): converts between inline and chunks across
    /// the inline size. Objects uploaded for it go into `uploaded`.
    pub(super) fn resize_data(
        &self,
        tx: &mut Tx,
        n: &mut Node,
        size: u64,
        uploaded: &mut Vec<String>,
    ) -> Result<()> {
        let ino = n.attr.ino;
        let old = n.attr.size;
        match (old <= SHARED_INLINE_MAX, size <= SHARED_INLINE_MAX) {
            (true, true) => {
                n.blob.resize(old as usize, 0);
                n.blob.resize(size as usize, 0);
            }
            (true, false) => {
                // Inline bytes become chunk 0.
                let mut bytes = std::mem::take(&mut n.blob);
                bytes.resize(old as usize, 0);
                let mut t = Table::default();
                if bytes.iter().any(|&b| b != 0) {
                    let p = Piece {
                        chunk: 0,
                        sid: self.session(),
                        seq: self.blob_seq.fetch_add(1, Ordering::Relaxed),
                        len: bytes.len() as u32,
                    };
                    self.blobs()?.put(&p.name(ino), &bytes)?;
                    self.stats.blob_puts.fetch_add(1, Ordering::Relaxed);
                    uploaded.push(p.name(ino));
                    t.set(p);
                }
                n.blob = t.encode();
            }
            (false, true) => {
                let t = Table::decode(ino, &n.blob)?;
                let mut bytes = self.chunk_bytes(ino, &t, &[], 0)?;
                bytes.resize(size as usize, 0);
                tx.forget(ino, &t.0);
                n.blob = bytes;
            }
            (false, false) => {
                let mut t = Table::decode(ino, &n.blob)?;
                let mut gone = vec![];
                t.cut(size, &mut gone);
                tx.forget(ino, &gone);
                n.blob = t.encode();
            }
        }
        Ok(())
    }

    /// Delete an object, logging a failure (what stays is collected later).
    pub(super) fn delete_object(&self, name: &str) {
        let Some(blobs) = &self.blobs else { return };
        match blobs.delete(name) {
            Ok(()) => {
                self.stats.blob_deletes.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!("object {name} not deleted ({e}): `shoal fsck --repair` collects it")
            }
        }
    }
}

/// What `collect` found: objects no inode names.
#[derive(Debug, Default)]
pub struct Collected {
    pub objects: u64,
    /// Objects no inode names, whose session is gone (deleted unless dry).
    pub unnamed: u64,
    pub unnamed_bytes: u64,
    /// Objects no inode names, of a live session (its uploads in flight, or
    /// deletes it will retry): kept.
    pub in_flight: u64,
    /// Objects an inode names that the object store does not have.
    pub missing: Vec<String>,
}

/// Compare the object store with the chunk tables; delete the objects no
/// inode names of sessions that are gone, unless `dry`.
pub fn collect(store: &dyn super::ClusterStore, blobs: &dyn Blobs, dry: bool) -> Result<Collected> {
    // Listed first: an object uploaded and committed after the scan of the
    // tables below is not in this list, so it cannot be taken for unnamed.
    let listed = blobs.list()?;
    let named = super::ns::all_tables(store)?;
    let mut c = Collected {
        objects: listed.len() as u64,
        ..Default::default()
    };
    let have: std::collections::HashSet<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    for name in &named {
        if !have.contains(name.as_str()) {
            c.missing.push(name.clone());
        }
    }
    let named: std::collections::HashSet<String> = named.into_iter().collect();
    for (name, size) in &listed {
        if named.contains(name) {
            continue;
        }
        let live = match object_session(name) {
            Some(sid) => super::ns::session_alive(store, sid)?,
            None => false,
        };
        if live {
            c.in_flight += 1;
            continue;
        }
        c.unnamed += 1;
        c.unnamed_bytes += size;
        if !dry {
            blobs.delete(name)?;
        }
    }
    Ok(c)
}
