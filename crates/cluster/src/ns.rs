//! A namespace that several daemons share on one [`ClusterStore`] (issue 24):
//! every operation is one optimistic transaction, acknowledged only after
//! its conditional commit succeeded.
//!
//! **Transactions.** An operation runs its body against a [`Tx`]: each read
//! through it records the key's version (or its absence) as a condition,
//! each write is queued. The commit applies the writes only if every key
//! read is unchanged (serializable, per operation) and the daemon's session
//! key still exists (fencing, below). On a conflict the body runs again on
//! fresh reads; a stale cache can cost a retry, never a lost update.
//!
//! **No hot key in a shared directory.** A create reads its parent's inode
//! record (a condition: a concurrent rmdir, rename-away or chmod of the
//! parent changes it and so conflicts) but never writes it. The parent's
//! modification time goes to its own key, `T`, written without a condition
//! (the last writer wins: times are relaxed across daemons), with every
//! change (`SessionOpts::dir_time` can thin them out). A directory's link count is
//! not kept: it is reported as 1, as btrfs does ("unknown"; `find` then
//! does not use it to skip directories), and its size as 0. So creates of
//! different names in one directory from several daemons never conflict.
//!
//! **Inode numbers** are claimed by each daemon in chunks of
//! [`CHUNK`] by compare-and-swap on the counter key `N`, so
//! one daemon's inodes are contiguous keys (a daemon's files, made together,
//! are near each other in the store: seed 004's placement, per daemon).
//!
//! **Sessions and fencing.** Each daemon holds a lease and a session key
//! `S sid` attached to it, renewed by a thread. Every commit requires the
//! session key: a daemon that was cut off past its lease can no longer
//! commit anything (its commits fail with an error that says to remount).
//!
//! **A commit whose result is unknown** (the connection broke after the
//! request left) is resolved by reading back what it wrote: if every put
//! key holds the value written (inode records carry a version and a
//! nanosecond time, entries the inode number) and every deleted key is
//! gone, it applied; otherwise the operation runs again from fresh reads.
//!
//! Keys, under the filesystem's prefix: `V` format, `N` next inode chunk,
//! `I ino` inode record (the engine's encoding: attributes, and the blob:
//! a small file's bytes or a larger one's chunk table, a symlink's target,
//! a directory's parent), `D` the object store of file data, `T ino`
//! a directory's modification time, `E parent name` an entry (the child's
//! inode number and kind), `S sid` a session.
//!
//! Files, by concept: this one holds the type ([`ClusterFs`]) and the
//! operations; `keys.rs` the keys' encodings, `txn.rs` the transaction
//! loop (`Tx`, `run_at`), `session.rs` sessions and fencing (joining,
//! renewal, leaving), `format.rs` mkfs and the format keys, `check.rs`
//! fsck; `dirlease.rs`, `filedata.rs`, `filelocks.rs`, `holds.rs`,
//! `change_stream.rs` and `record_cache.rs` beside them.

use super::blob::Blobs;
use super::filedata::{FileBuf, Table};
use super::{ClusterStore, Cond, KvError, LeaseId, Op, Outcome};
use shoal_core::acl;
use shoal_core::error::{Error, Result};
use shoal_core::rules::names::{self, NameOp};
use shoal_core::rules::{self, modes};
use shoal_core::schema::{decode_inode, encode_inode};
use shoal_core::sync::PlainMutex;
use shoal_core::types::{Attr, Ctx, Ino, Kind, Ts, ROOT_INO};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::check::{check, SharedCheck};
pub use crate::format::*;
pub(crate) use crate::keys::*;
pub use crate::session::SessionOpts;
pub use crate::txn::Tx;
pub(crate) use crate::txn::*;

/// Inode numbers one claim gives a daemon.
pub const CHUNK: u64 = 1024;
/// The format of a shared namespace (`V`).
pub const SHARED_FORMAT: u32 = 1;
/// Bytes a file keeps in its inode record; a larger file keeps a chunk
/// table there and its bytes in an object store (`super::filedata`).
pub const SHARED_INLINE_MAX: u64 = shoal_core::INLINE_MAX;

/// An inode's attributes as every answer shows them: a directory's link
/// count is 1 (no record counts its subdirectories, see the module comment),
/// whether the answer comes from a create, a stat or a setattr, so that what
/// the kernel cached from one equals what it gets from the next.
fn as_seen(mut a: Attr) -> Attr {
    if a.kind == Kind::Dir {
        a.nlink = 1;
    }
    a
}

/// The most bytes of names and values of one inode's xattrs on a shared
/// namespace: the record rides in etcd transactions (1.5 MiB), and every
/// operation on the inode rewrites it (`rules::modes`, docs/rules.md).
pub const XATTRS_MAX: usize = modes::SHARED.xattr_total;

/// May `ctx` remove directory `p`'s name of `n` (unlink, rmdir)? In the
/// engine's order (Linux's): the directory's flags, the caller's rights,
/// the inode's flags. For the transactions and the directory lease's
/// answers from memory alike (`super::dirlease`).
pub(super) fn may_remove_name(ctx: &Ctx, p: &Node, n: &Node) -> Result<()> {
    rules::flags::may_remove(p.flags, None)?;
    rules::perm::may_delete(ctx, &p.attr, &n.attr)?;
    rules::flags::may_remove(p.flags, Some(n.flags))
}

/// An inode as the shared namespace keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub attr: Attr,
    /// A small file's bytes, a symlink's target, a directory's parent (8 bytes LE).
    pub blob: Vec<u8>,
    /// Extended attributes (`user.`, `trusted.`, `security.` and the two
    /// POSIX ACLs), in the inode's record as the embedded engine keeps them.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// chattr flags (`rules::flags`; `super::flags`), in the record's
    /// trailer as the embedded engine keeps them; 0 for almost every inode.
    pub flags: u32,
}

impl Node {
    pub(super) fn encode(&self) -> Vec<u8> {
        encode_inode(&self.attr, &self.blob, &self.xattrs, None, self.flags)
    }
    pub(super) fn decode(ino: Ino, v: &[u8]) -> Result<Node> {
        let (attr, extra) = decode_inode(ino, v)?;
        Ok(Node {
            attr,
            blob: extra.blob,
            xattrs: extra.xattrs,
            flags: extra.flags,
        })
    }
    pub fn parent(&self) -> Ino {
        if self.attr.kind == Kind::Dir && self.blob.len() == 8 {
            u64::from_le_bytes(self.blob[..8].try_into().unwrap())
        } else {
            0
        }
    }
}

/// Counters for `shoal stats` and the benchmarks.
#[derive(Default, Debug)]
pub struct SharedStats {
    pub ops: AtomicU64,
    pub commits: AtomicU64,
    pub conflicts: AtomicU64,
    pub unknown: AtomicU64,
    pub reads: AtomicU64,
    /// Records a commit rested on without reading them: known from the
    /// record cache and required at their revision (`Tx::node_known`,
    /// the batches of unlinks under a directory lease).
    pub guesses: AtomicU64,
    /// Writes of one file committed on a base another mount had changed
    /// since: the chunks both changed were merged byte by byte
    /// (`super::filedata`).
    pub data_merges: AtomicU64,
    pub chunk_claims: AtomicU64,
    /// Answers `Unavailable` waited out (elections, lost quorum).
    pub unavailable: AtomicU64,
    /// Object store calls for file data.
    pub blob_puts: AtomicU64,
    pub blob_gets: AtomicU64,
    pub blob_deletes: AtomicU64,
    /// Directory leases (`super::dirlease`): taken, given back, creates
    /// acknowledged from memory, their batch commits, commits that found
    /// another daemon's lease (and asked for it), and the entries read to
    /// take them (a directory's listing).
    pub leases_taken: AtomicU64,
    pub leases_given: AtomicU64,
    /// Leased name ranges split between two daemons (`super::dirlease`).
    pub lease_splits: AtomicU64,
    pub lease_creates: AtomicU64,
    pub lease_batches: AtomicU64,
    pub lease_waits: AtomicU64,
    pub lease_listed: AtomicU64,
    /// Changes to queued creates made in memory (`dirlease::amend_queued`).
    pub lease_amends: AtomicU64,
    /// Unlinks and rmdirs answered from memory (`super::dirlease`).
    pub lease_removals: AtomicU64,
    /// Lock leases (`super::filelocks`): taken, given back, lock requests
    /// answered from memory under one, and requests that waited for
    /// another daemon's.
    pub lock_leases_taken: AtomicU64,
    pub lock_leases_given: AtomicU64,
    pub lock_lease_answers: AtomicU64,
    pub lock_lease_waits: AtomicU64,
    /// Stats and lookups answered by the record cache (`super::record_cache`),
    /// and those that read the store.
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    /// Per-operation counts and sampled latencies, as the embedded
    /// engine's (`Engine::stats`), kept by the FUSE adapter.
    pub op_stats: shoal_core::stats::OpStats,
}

pub struct ClusterFs {
    pub(super) store: Arc<dyn ClusterStore>,
    pub(super) sid: u64,
    pub(super) lease: LeaseId,
    pub(super) chunk: PlainMutex<(u64, u64)>,
    /// Directory -> when this daemon last wrote its time.
    pub(super) touched: PlainMutex<HashMap<Ino, Instant>>,
    pub(super) dir_time: Duration,
    pub(super) unavailable_wait: Duration,
    pub stats: Arc<SharedStats>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) keeper: PlainMutex<Option<std::thread::JoinHandle<()>>>,
    /// The session's lease ended: every later commit would be fenced.
    pub(super) lost: Arc<AtomicBool>,
    /// Open handles per inode on this daemon: an inode whose last name goes
    /// while it is open here stays, as an orphan of this session.
    pub(super) opens: PlainMutex<HashMap<Ino, u32>>,
    /// Revisions of this daemon's latest commits: the change stream's
    /// events at them are its own, which the kernel already knows.
    pub(super) own: PlainMutex<(
        std::collections::VecDeque<u64>,
        std::collections::HashSet<u64>,
    )>,
    /// Inodes this daemon made orphans (their last close removes them).
    pub(super) orphaned: PlainMutex<std::collections::HashSet<Ino>>,
    /// The last statfs figures and when they were read (`super::space`).
    pub(super) statfs_seen: PlainMutex<Option<(Instant, shoal_core::types::StatFs)>>,
    /// O_TMPFILEs of this daemon not named yet (`super::tmpfile`).
    pub(super) linkable: PlainMutex<std::collections::HashSet<Ino>>,
    /// File data past the inline size (None: such writes get EFBIG).
    pub(super) blobs: Option<Arc<dyn Blobs>>,
    /// Files with writes not yet committed (`super::filedata`).
    pub(super) bufs: PlainMutex<HashMap<Ino, Arc<PlainMutex<FileBuf>>>>,
    /// This session's object counter (object names are unique per session).
    pub(super) blob_seq: AtomicU64,
    /// Bytes of every file's buffered writes (`super::filedata`), and their bound.
    pub(super) dirty_total: AtomicU64,
    pub(super) dirty_max: u64,
    /// Chunks read whole (`super::filedata`).
    pub(super) chunks: Arc<super::filedata::ChunkReader>,
    /// Directory leases and the creates acknowledged under them.
    pub(super) leases: super::dirlease::DirLeases,
    /// The store has a change stream (`super::change_stream`; TiKV has none).
    pub(super) has_watch: bool,
    /// Records, directory times and entries read, kept current by the
    /// stream (`super::record_cache`).
    pub(super) cache: super::record_cache::RecordCache,
    /// Who gets the stream's changes (`subscribe`).
    pub(super) subscribers: PlainMutex<Vec<std::sync::mpsc::Sender<Vec<super::Event>>>>,
    /// The session lease's time to live.
    pub(super) ttl: Duration,
    /// When the last renewal that succeeded was sent: the lease lives at
    /// least `ttl` past it (`super::dirlease` acknowledges from memory only
    /// within half of that).
    pub(super) renewed: Arc<PlainMutex<Instant>>,
    /// This daemon's file locks (`super::filelocks`).
    pub(super) locks: super::filelocks::Held,
    /// How long an inode whose last name went waits before it is removed,
    /// for daemons that have it open to hold it (`super::holds`; zero:
    /// removed with its last name unless open here).
    pub(super) grace: Duration,
    /// Holds of this daemon and its removals to come (`super::holds`).
    pub(super) holds: super::holds::Holds,
}

/// What `mknod` makes.
#[derive(Clone, Copy, Debug)]
pub struct NewNode<'a> {
    pub kind: Kind,
    pub perm: u16,
    /// A device's number.
    pub rdev: u32,
    /// A symlink's target.
    pub target: &'a [u8],
}

impl ClusterFs {
    pub(super) fn should_touch(&self, dir: Ino) -> bool {
        if self.dir_time.is_zero() {
            // Every change (the default): nothing to remember.
            return true;
        }
        let mut t = self.touched.lock();
        let now = Instant::now();
        match t.get(&dir) {
            Some(&last) if now.duration_since(last) < self.dir_time => false,
            _ => {
                if t.len() > 4096 {
                    t.clear();
                }
                t.insert(dir, now);
                true
            }
        }
    }

    /// A new inode number from this daemon's chunk; claims the next chunk
    /// by compare-and-swap when it is used up.
    pub(super) fn new_ino(&self) -> Result<Ino> {
        let mut c = self.chunk.lock();
        if c.0 >= c.1 {
            let since = Instant::now();
            let chunk = loop {
                let v = self
                    .patient(|| self.store.get(NEXT_CHUNK))?
                    .ok_or_else(|| {
                        Error::Corrupted("shared namespace has no inode counter".into())
                    })?;
                let n = u64::from_le_bytes(
                    v.value[..8]
                        .try_into()
                        .map_err(|_| Error::Corrupted("inode counter".into()))?,
                );
                let op = Op::Put(NEXT_CHUNK.to_vec(), (n + 1).to_le_bytes().to_vec(), None);
                match self
                    .store
                    .commit(&[Cond::ModRev(NEXT_CHUNK.to_vec(), v.mod_rev)], &[op])
                {
                    Ok(Outcome::Committed(_)) => break n,
                    Ok(Outcome::Conflict(_)) => {
                        self.stats.conflicts.fetch_add(1, Ordering::Relaxed);
                    }
                    // Unknown: the chunk may be ours or not; skipping it
                    // wastes 1024 numbers, never reuses one.
                    Err(KvError::Unknown(_)) => {}
                    Err(KvError::Unavailable(m)) => self.wait_available(since, &m)?,
                    Err(e) => return Err(kv(e)),
                }
            };
            self.stats.chunk_claims.fetch_add(1, Ordering::Relaxed);
            *c = (chunk * CHUNK, (chunk + 1) * CHUNK);
        }
        let ino = c.0;
        c.0 += 1;
        Ok(ino)
    }

    /// An inode's attributes, from the record cache if it knows them: at
    /// most the change stream's lag behind the store (`super::record_cache`).
    pub fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.attr_of(ino, false)
    }

    /// A directory's parent, as its record says (0 for the root).
    pub fn parent_of(&self, dir: Ino) -> Result<Ino> {
        let n = match self.pending_seen(dir) {
            Some(n) => n,
            None => {
                let v = self
                    .read_known(vec![ikey(dir)], false)?
                    .pop()
                    .flatten()
                    .ok_or(Error::NotFound)?;
                Node::decode(dir, &v)?
            }
        };
        if n.attr.kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        Ok(n.parent())
    }

    /// `getattr`; `fresh`: read the store, whatever the cache knows (an
    /// open: close-to-open).
    fn attr_of(&self, ino: Ino, fresh: bool) -> Result<Attr> {
        if let Some(n) = self.pending_seen(ino) {
            // Made here from memory, not committed yet (`super::dirlease`).
            return Ok(as_seen(self.with_buffered(n.attr)));
        }
        // Names of it this daemon removed from memory (`super::dirlease`):
        // subtracted from a record read while no batch of them committed.
        let settled = self.unlinks_settled(ino);
        // The record and, for a directory, its time key: one round trip,
        // or none if the cache knows the record (and it is not a directory
        // whose time it does not know).
        let both = || -> Result<(Attr, Option<Vec<u8>>)> {
            let mut vs = self.read_known(vec![ikey(ino), tkey(ino)], fresh)?;
            let t = vs.pop().flatten();
            let v = vs.pop().flatten().ok_or(Error::NotFound)?;
            Ok((Node::decode(ino, &v)?.attr, t))
        };
        let known = if fresh {
            None
        } else {
            self.cache.get(&ikey(ino))
        };
        let (a, t) = match known {
            Some(None) => {
                self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                return Err(Error::NotFound);
            }
            Some(Some(v)) => match Node::decode(ino, &v)?.attr {
                a if a.kind != Kind::Dir => {
                    self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                    (a, None)
                }
                _ => both()?,
            },
            None => both()?,
        };
        let mut a = as_seen(a);
        if a.kind == Kind::File {
            a = self.with_buffered(a);
        }
        if let Some(since) = settled {
            match self.queued_unlinks_since(ino, since) {
                Some(n) => a.nlink = a.nlink.saturating_sub(n),
                // A batch went meanwhile: the record may be before or
                // after it.
                None => return self.attr_of(ino, fresh),
            }
        }
        if a.kind == Kind::Dir {
            if let Some(t) = t {
                if t.len() == 12 {
                    let t = Ts {
                        sec: i64::from_le_bytes(t[..8].try_into().unwrap()),
                        nsec: u32::from_le_bytes(t[8..].try_into().unwrap()),
                    };
                    a.mtime = a.mtime.max(t);
                    a.ctime = a.ctime.max(t);
                }
            }
            if let Some(t) = self.pending_dir_time(ino) {
                a.mtime = a.mtime.max(t);
                a.ctime = a.ctime.max(t);
            }
        }
        Ok(a)
    }

    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.lookup_as(&Ctx::root(), parent, name)
    }

    /// `lookup` by `ctx`: with `check_perms`, search permission on
    /// `parent` (`rules::perm`), as the engine checks (the record cache's
    /// or one read of `parent`'s record; none without `check_perms`).
    pub fn lookup_as(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<Attr> {
        names::check(NameOp::Lookup, name)?;
        // ("." and ".." as the engine answers them: unchecked.)
        if ctx.check_perms && name != b"." && name != b".." {
            let p = self.getattr(parent)?;
            if p.kind != Kind::Dir {
                return Err(Error::NotDir);
            }
            rules::perm::access(ctx, &p, rules::perm::X_OK)?;
        }
        // "." of any inode and ".." of a directory: the kernel asks these
        // for a file handle whose inode it no longer caches
        // (open_by_handle_at, NFS export). Inode numbers are never reused,
        // so a handle to a removed inode finds nothing (ESTALE).
        if name == b"." {
            // An unlinked inode kept for the grace (`super::holds`) or
            // open somewhere is no handle's: ESTALE, as on ext4.
            let a = self.getattr(parent)?;
            if a.nlink == 0 {
                return Err(Error::NotFound);
            }
            return Ok(a);
        }
        if name == b".." {
            let n = self.load_known(parent, false)?;
            if n.attr.kind != Kind::Dir {
                return Err(Error::NotDir);
            }
            return self.getattr(n.parent());
        }
        // In a directory this daemon holds, its listing knows.
        match self.known(parent, name) {
            Some(super::dirlease::Known::Absent) => return Err(Error::NotFound),
            Some(super::dirlease::Known::At(ino)) => return self.getattr(ino),
            None => {}
        }
        let v = self
            .read_known(vec![ekey(parent, name)], false)?
            .pop()
            .flatten()
            .ok_or(Error::NotFound)?;
        let (ino, _) = dec_entry(&v)?;
        self.getattr(ino)
    }

    /// The inode entry `name` of `parent` names, if the record cache knows
    /// (a guess: the operation reads it again as a condition).
    fn cached_child(&self, parent: Ino, name: &[u8]) -> Option<Ino> {
        let v = self.cache.get(&ekey(parent, name))??;
        dec_entry(&v).ok().map(|(ino, _)| ino)
    }

    /// The values of `keys` (None: absent), from the record cache if it
    /// knows them all (and not `fresh`), else from the store in one round
    /// trip (and then known). For answers, never for a commit's
    /// conditions (`Tx` reads).
    pub(super) fn read_known(
        &self,
        keys: Vec<Vec<u8>>,
        fresh: bool,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        if !fresh {
            let known: Option<Vec<_>> = keys.iter().map(|k| self.cache.get(k)).collect();
            if let Some(vs) = known {
                self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                return Ok(vs);
            }
        }
        self.stats.cache_misses.fetch_add(1, Ordering::Relaxed);
        let (vs, at) = self.patient(|| self.store.get_many(&keys))?;
        Ok(keys
            .iter()
            .zip(vs)
            .map(|(k, v)| {
                let written = v.as_ref().map_or(0, |v| v.mod_rev);
                let v = v.map(|v| v.value);
                self.cache.learn(k, v.as_deref(), at, written);
                v
            })
            .collect())
    }

    /// Whether this daemon's change stream follows the store (its record
    /// cache answers only then).
    pub fn stream_follows(&self) -> bool {
        self.cache.following()
    }

    /// Keys the record cache holds and what they cost in bytes (for
    /// `stats`).
    pub fn cached_keys(&self) -> (usize, usize) {
        self.cache.len()
    }

    /// A directory's entries in name order, after `after` (exclusive), at
    /// most `limit`.
    pub fn readdir(
        &self,
        dir: Ino,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Ino, Kind)>> {
        // Creates and removals in this directory acknowledged from memory
        // are in the listing.
        self.settle_dirs(&[dir])?;
        let (lo, hi) = erange(dir);
        let lo = match after {
            Some(a) => {
                let mut k = ekey(dir, a);
                k.push(0);
                k
            }
            None => lo,
        };
        let (kvs, _) = self.patient(|| self.store.scan(&lo, &hi, limit))?;
        // A small directory listed whole (rm -rf lists each directory
        // before it removes what is there): its next create or removal
        // takes its lease at once, not after `STREAK` transactions, which
        // each commit (and its rmdir then commits in the queue's batch).
        if after.is_none() && !kvs.is_empty() && kvs.len() < limit {
            self.want_lease(dir);
        }
        kvs.into_iter()
            .map(|(k, v)| {
                let (ino, kind) = dec_entry(&v.value)?;
                Ok((k[9..].to_vec(), ino, kind))
            })
            .collect()
    }

    /// `mknod`, without the lease wish.
    fn mknod_in(&self, ctx: &Ctx, parent: Ino, name: &[u8], new: &NewNode) -> Result<Attr> {
        names::check(NameOp::Create, name)?;
        if new.kind == Kind::Symlink {
            rules::new_inode::symlink_target(new.target)?;
        }
        let ino = self.new_ino()?;
        // On the parent's record as the transaction or the lease read it:
        // no read of its own, checked or not.
        let make = |p: &Node, t: Ts| {
            rules::perm::may_add(ctx, &p.attr)?;
            Self::new_node(ctx, p, ino, new, t)
        };
        let mut redirect = true;
        let mut elsewhere = true;
        loop {
            // In a directory this daemon holds: from memory.
            if let Some(a) = self.lease_create(ctx, parent, name, ino, &make)? {
                return Ok(as_seen(a));
            }
            let r = self.run(|tx| {
                // (Once: a lease held but not answering from memory, the
                // store being slow, is given back by this transaction.)
                if redirect && self.holds_name(parent, name) {
                    // Taken meanwhile by another thread of this daemon.
                    return Err(LEASED);
                }
                tx.creating = true;
                // (Once: another daemon's lease met, this name's range is
                // asked for and taken; the second time the whole
                // directory is asked back.)
                if elsewhere {
                    tx.want = Some(name.to_vec());
                }
                // The parent and the name in one round trip.
                let vs = tx.get_many(vec![ikey(parent), ekey(parent, name)])?;
                let p = match &vs[0] {
                    Some(v) => Node::decode(parent, &v.value)?,
                    None => return Err(Error::NotFound),
                };
                if p.attr.kind != Kind::Dir {
                    return Err(Error::NotDir);
                }
                rules::perm::access(ctx, &p.attr, rules::perm::X_OK)?;
                if vs[1].is_some() {
                    return Err(Error::Exists);
                }
                let t = Ts::now();
                let mut n = make(&p, t)?;
                let kind = n.attr.kind;
                tx.put_node(&mut n)?;
                tx.put_entry(parent, name, ino, kind)?;
                tx.touch_dir(parent, t);
                Ok(n.attr)
            });
            match r {
                Err(LEASED) => redirect = false,
                Err(LEASED_ELSEWHERE) => elsewhere = false,
                r => return r.map(as_seen),
            }
        }
    }

    /// Create `name` in `parent` (O_EXCL: EEXIST if it is there): a file,
    /// a directory, or a symlink to `target`. A directory made is leased
    /// at the first create in it (its listing is empty: the lease costs
    /// one commit, where the creates it saves would each be a transaction,
    /// and so would each change to them: untar makes a directory and then
    /// its files).
    pub fn mknod(&self, ctx: &Ctx, parent: Ino, name: &[u8], new: &NewNode) -> Result<Attr> {
        let a = self.mknod_in(ctx, parent, name, new)?;
        if a.kind == Kind::Dir {
            self.want_lease(a.ino);
        }
        Ok(a)
    }

    /// A new inode's record, in directory `p` (its owner and mode:
    /// `rules::new_inode`, on the parent's record as the transaction or the
    /// lease read it).
    pub(super) fn new_node(ctx: &Ctx, p: &Node, ino: Ino, new: &NewNode, t: Ts) -> Result<Node> {
        rules::flags::may_add(p.flags)?;
        let (kind, perm, target) = (new.kind, new.perm, new.target);
        let parent = rules::new_inode::Parent {
            gid: p.attr.gid,
            setgid: p.attr.perm & 0o2000 != 0,
            default_acl: p
                .xattrs
                .iter()
                .find(|(k, _)| k == acl::DEFAULT)
                .map(|(_, v)| &v[..]),
        };
        let made = rules::new_inode::new_inode(ctx, parent, kind, perm)?;
        let mut a = Attr::root(t);
        a.ino = ino;
        a.kind = kind;
        a.perm = made.perm;
        a.uid = made.uid;
        a.gid = made.gid;
        a.nlink = 1;
        a.rdev = new.rdev;
        let xattrs = made.xattrs;
        let blob = match kind {
            Kind::Dir => p.attr.ino.to_le_bytes().to_vec(),
            Kind::Symlink => target.to_vec(),
            _ => vec![],
        };
        a.size = if kind == Kind::Symlink {
            target.len() as u64
        } else {
            0
        };
        Ok(Node {
            attr: a,
            blob,
            xattrs,
            flags: 0,
        })
    }

    /// The whiteout a RENAME_WHITEOUT leaves at the old name in directory
    /// `p`: a character device 0:0, mode 0, owned by the caller (the
    /// directory's group under setgid), as the embedded engine makes it.
    fn whiteout_node(ctx: &Ctx, p: &Node, ino: Ino, t: Ts) -> Node {
        let mut a = Attr::root(t);
        a.ino = ino;
        a.kind = Kind::CharDev;
        a.perm = 0;
        a.uid = ctx.uid;
        a.gid = if p.attr.perm & 0o2000 != 0 {
            p.attr.gid
        } else {
            ctx.gid
        };
        a.nlink = 1;
        a.rdev = 0;
        a.size = 0;
        Node {
            attr: a,
            blob: vec![],
            xattrs: vec![],
            flags: 0,
        }
    }

    pub fn create(&self, parent: Ino, name: &[u8], perm: u16) -> Result<Attr> {
        let new = NewNode {
            kind: Kind::File,
            perm,
            rdev: 0,
            target: b"",
        };
        self.mknod(&Ctx::root(), parent, name, &new)
    }

    pub fn mkdir(&self, parent: Ino, name: &[u8], perm: u16) -> Result<Attr> {
        let new = NewNode {
            kind: Kind::Dir,
            perm,
            rdev: 0,
            target: b"",
        };
        self.mknod(&Ctx::root(), parent, name, &new)
    }

    /// Remove a non-directory's name; the inode goes with its last name.
    pub fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.unlink_as(&Ctx::root(), parent, name)
    }

    /// `unlink` by `ctx` (`rules::perm::may_delete` on the records read).
    pub fn unlink_as(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        names::check(NameOp::Unlink, name)?;
        // In a range this daemon holds: from memory (`super::dirlease`).
        if self.lease_unlink(ctx, parent, name)? {
            return Ok(());
        }
        let guess = self.cached_child(parent, name);
        self.run(|tx| {
            // Counts towards taking the directory's lease (rm -rf).
            tx.creating = true;
            let (p, found) = tx.dir_entry_node(parent, name, guess)?;
            let (_, kind, mut n) = found.ok_or(Error::NotFound)?;
            if kind == Kind::Dir {
                return Err(Error::IsDir);
            }
            may_remove_name(ctx, &p, &n)?;
            tx.del_entry(parent, name)?;
            self.drop_link(tx, &mut n)?;
            tx.touch_dir(parent, Ts::now());
            Ok(())
        })
    }

    /// The record of `ino` for a removal's rules answered from memory
    /// (`super::dirlease`): as the record cache knows it, else read.
    pub(super) fn removal_node(&self, ino: Ino) -> Result<Node> {
        match self.read_known(vec![ikey(ino)], false)?.pop().flatten() {
            Some(v) => Node::decode(ino, &v),
            None => Err(Error::NotFound),
        }
    }

    /// What a transactional unlink writes for `n` losing one name
    /// (`drop_link`), for a batch of the lease's queue: the writes, the
    /// objects to delete and the inodes to remove after the grace, once
    /// the batch committed.
    pub(super) fn unlink_ops(&self, n: &mut Node) -> Result<(Vec<Op>, Vec<String>, Vec<Ino>)> {
        let mut tx = Tx {
            fs: self,
            conds: vec![],
            seen: HashMap::new(),
            ops: vec![],
            doomed: vec![],
            later: vec![],
            creating: true,
            want: None,
            trips: 0,
            untracked: false,
            guessing: false,
        };
        self.drop_link(&mut tx, n)?;
        Ok((tx.ops, tx.doomed, tx.later))
    }

    /// A removed inode's objects go after the commit.
    pub(super) fn forget_data(tx: &mut Tx, n: &Node) {
        match Table::of(n) {
            Ok(t) => tx.forget(n.attr.ino, &t.0),
            // Left for `shoal fsck --repair`, which finds them named by nothing.
            Err(e) => tracing::warn!("{e}: its objects stay for `shoal fsck --repair`"),
        }
    }

    fn drop_link(&self, tx: &mut Tx, n: &mut Node) -> Result<()> {
        if n.attr.nlink <= 1 && self.is_open(n.attr.ino) {
            // Open here: it stays, nameless, until its last close.
            n.attr.nlink = 0;
            n.attr.ctime = Ts::now();
            tx.put_node(n)?;
            // Not on the lease: when the session dies, survivors find it and reclaim.
            tx.ops
                .push(Op::Put(okey(self.sid, n.attr.ino), vec![], None));
            // Noted before the commit: a release that finds no orphan is a no-op.
            self.orphaned.lock().insert(n.attr.ino);
        } else if n.attr.nlink <= 1 && !self.grace.is_zero() {
            // Another daemon may have it open: it stays for the grace.
            self.remove_later(tx, n)?;
        } else if n.attr.nlink <= 1 {
            tx.del(ikey(n.attr.ino));
            Self::forget_data(tx, n);
        } else {
            n.attr.nlink -= 1;
            n.attr.ctime = Ts::now();
            tx.put_node(n)?;
        }
        Ok(())
    }

    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.rmdir_as(&Ctx::root(), parent, name)
    }

    /// `rmdir` by `ctx` (`rules::perm::may_delete` on the records read).
    pub fn rmdir_as(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        names::check(NameOp::Rmdir, name)?;
        // In a range this daemon holds: from memory, or committed under
        // the lease (`super::dirlease`).
        if self.lease_rmdir(ctx, parent, name)? {
            return Ok(());
        }
        let guess = self.cached_child(parent, name);
        self.run(|tx| {
            // Counts towards taking the directory's lease (rm -rf).
            tx.creating = true;
            let (p, found) = tx.dir_entry_node(parent, name, guess)?;
            let (ino, kind, n) = found.ok_or(Error::NotFound)?;
            if kind != Kind::Dir {
                return Err(Error::NotDir);
            }
            may_remove_name(ctx, &p, &n)?;
            if !tx.require_empty(ino)? {
                return Err(Error::NotEmpty);
            }
            tx.del_entry(parent, name)?;
            tx.del(ikey(ino));
            tx.del(tkey(ino));
            tx.del(pkey(ino));
            tx.touch_dir(parent, Ts::now());
            Ok(())
        })
    }

    pub fn link(&self, ino: Ino, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.link_as(&Ctx::root(), ino, parent, name)
    }

    /// `link` by `ctx` (`rules::perm::may_add` on the directory's record).
    pub fn link_as(&self, ctx: &Ctx, ino: Ino, parent: Ino, name: &[u8]) -> Result<Attr> {
        names::check(NameOp::Create, name)?;
        // An O_TMPFILE of this daemon not named yet (`super::tmpfile`).
        let linkable = self.is_linkable(ino);
        let a = self.run(|tx| {
            let mut n = tx.node(ino)?;
            let p = tx.dir(parent)?;
            // Linux's order: search on the directory (the path walk),
            // the name's test (EEXIST, `filename_create`), then write on
            // it (`may_create`).
            rules::perm::access(ctx, &p.attr, rules::perm::X_OK)?;
            if tx.entry(parent, name)?.is_some() {
                return Err(Error::Exists);
            }
            rules::perm::may_add(ctx, &p.attr)?;
            rules::flags::may_add(p.flags)?;
            if rules::flags::pinned(n.flags) {
                return Err(Error::NotPermitted);
            }
            // A directory EPERM, LINK_MAX names EMLINK, and a file with no
            // name left ENOENT (unlinked while open here or on another
            // daemon), unless it is an O_TMPFILE.
            rules::link::may_link(n.attr.kind, n.attr.nlink, linkable)?;
            if n.attr.nlink == 0 {
                // Named: no longer an orphan of this session.
                tx.del(okey(self.sid, ino));
            }
            n.attr.nlink += 1;
            n.attr.ctime = Ts::now();
            tx.put_node(&mut n)?;
            tx.put_entry(parent, name, ino, n.attr.kind)?;
            tx.touch_dir(parent, n.attr.ctime);
            Ok(n.attr)
        })?;
        if linkable {
            self.named(ino);
        }
        Ok(a)
    }

    /// rename(2) without flags: replaces a file, or an empty directory with
    /// a directory; a directory cannot move under itself.
    pub fn rename(&self, p1: Ino, n1: &[u8], p2: Ino, n2: &[u8]) -> Result<()> {
        self.rename_flags(p1, n1, p2, n2, false)
    }

    /// rename(2); with `noreplace` (RENAME_NOREPLACE) EEXIST if `n2` is there.
    pub fn rename_flags(
        &self,
        p1: Ino,
        n1: &[u8],
        p2: Ino,
        n2: &[u8],
        noreplace: bool,
    ) -> Result<()> {
        let flags = if noreplace {
            shoal_core::RENAME_NOREPLACE
        } else {
            0
        };
        self.rename_as(&Ctx::root(), p1, n1, p2, n2, flags)
    }

    /// renameat2(2) by `ctx`, in one transaction: RENAME_NOREPLACE,
    /// RENAME_EXCHANGE (both names must exist; each inode takes the other's
    /// name) and RENAME_WHITEOUT (the old name becomes a character device
    /// 0:0 owned by `ctx`, overlayfs's whiteout, in the same commit). The
    /// flags' rules are `rules::rename`; with `check_perms`,
    /// `rules::perm::may_delete` of the source and of a replaced target and
    /// `may_add` in the destination, on the records the transaction read
    /// (the source's and the target's only when the check needs their
    /// owner: a sticky directory); a directory cannot move under itself;
    /// chattr flags as `rules::flags` says.
    pub fn rename_as(
        &self,
        ctx: &Ctx,
        p1: Ino,
        n1: &[u8],
        p2: Ino,
        n2: &[u8],
        flags: u32,
    ) -> Result<()> {
        rules::rename::check_flags(flags)?;
        names::check(NameOp::Rename, n1)?;
        names::check(NameOp::Rename, n2)?;
        let exchange = flags & shoal_core::RENAME_EXCHANGE != 0;
        // The whiteout's inode number, the same on every try.
        let whiteout = if flags & shoal_core::engine::RENAME_WHITEOUT != 0 {
            Some(self.new_ino()?)
        } else {
            None
        };
        self.run(|tx| {
            let d1 = tx.dir(p1)?;
            let d2 = tx.dir(p2)?;
            let (ino, kind) = tx.entry(p1, n1)?.ok_or(Error::NotFound)?;
            let target = tx.entry(p2, n2)?;
            if rules::perm::may_delete_in(ctx, &d1.attr)? {
                rules::perm::sticky(ctx, tx.node(ino)?.attr.uid)?;
            }
            rules::perm::may_add(ctx, &d2.attr)?;
            rules::rename::check_target(flags, target.is_some())?;
            if target.is_some_and(|(t, _)| t == ino) {
                return Ok(());
            }
            if let Some((t, _)) = target {
                if rules::perm::may_delete_in(ctx, &d2.attr)? {
                    rules::perm::sticky(ctx, tx.node(t)?.attr.uid)?;
                }
            }
            let mut n = tx.node(ino)?;
            let tnode = match target {
                Some((t, _)) => Some(tx.node(t)?),
                None => None,
            };
            // Moving out of `p1` removes a name, into `p2` adds one (and
            // removes the replaced one's); an exchange does both both ways.
            rules::flags::may_remove(d1.flags, Some(n.flags))?;
            rules::flags::may_add(d2.flags)?;
            if let Some(tn) = &tnode {
                rules::flags::may_remove(d2.flags, Some(tn.flags))?;
                if exchange {
                    rules::flags::may_add(d1.flags)?;
                }
            }
            if p1 != p2 {
                // Not into its own subtree: walk the destination's
                // ancestors (each read is a condition, so a concurrent
                // rename that changes them conflicts); an exchanged
                // directory not into the source's either.
                for (moved, mkind, into) in [(ino, kind, p2)]
                    .into_iter()
                    .chain(target.filter(|_| exchange).map(|(t, k)| (t, k, p1)))
                {
                    if mkind != Kind::Dir {
                        continue;
                    }
                    let mut a = into;
                    while a != ROOT_INO {
                        if a == moved {
                            return Err(Error::Invalid);
                        }
                        a = tx.dir(a)?.parent();
                    }
                }
            }
            if let Some((t, Kind::Dir)) = target.filter(|_| p1 != p2 && !exchange) {
                // The target is an ancestor of the source (Linux's "trap"):
                // ENOTEMPTY before the kinds, as the engine answers. Each
                // read is a condition, as for the walk above.
                let mut a = p1;
                while a != ROOT_INO {
                    if a == t {
                        return Err(Error::NotEmpty);
                    }
                    a = tx.dir(a)?.parent();
                }
            }
            let t = Ts::now();
            if exchange {
                let (tino, tkind) = target.expect("rules::rename::check_target");
                let mut tn = tnode.expect("read with the target");
                for (node, newp) in [(&mut n, p2), (&mut tn, p1)] {
                    node.attr.ctime = t;
                    if node.attr.kind == Kind::Dir && p1 != p2 {
                        node.blob = newp.to_le_bytes().to_vec();
                    }
                    tx.put_node(node)?;
                }
                // Two puts: etcd refuses a key twice in one transaction.
                tx.put_entry(p1, n1, tino, tkind)?;
                tx.put_entry(p2, n2, ino, kind)?;
            } else {
                if let (Some((tino, tkind)), Some(mut tn)) = (target, tnode) {
                    rules::rename::check_kinds(flags, kind, tkind)?;
                    if tkind == Kind::Dir {
                        if !tx.require_empty(tino)? {
                            return Err(Error::NotEmpty);
                        }
                        tx.del(ikey(tino));
                        tx.del(tkey(tino));
                        tx.del(pkey(tino));
                    } else {
                        self.drop_link(tx, &mut tn)?;
                    }
                }
                n.attr.ctime = t;
                if kind == Kind::Dir && p1 != p2 {
                    n.blob = p2.to_le_bytes().to_vec();
                }
                tx.put_node(&mut n)?;
                match whiteout {
                    Some(w) => {
                        let mut wn = Self::whiteout_node(ctx, &d1, w, t);
                        tx.put_node(&mut wn)?;
                        tx.put_entry(p1, n1, w, Kind::CharDev)?;
                    }
                    None => tx.del_entry(p1, n1)?,
                }
                tx.put_entry(p2, n2, ino, kind)?;
            }
            tx.touch_dir(p1, t);
            if p2 != p1 {
                tx.touch_dir(p2, t);
            }
            Ok(())
        })
    }

    /// chmod, chown, truncate and times; the caller (the kernel, with
    /// default_permissions) checked who may. A chown without a mode clears
    /// setuid/setgid as root's would (`setattr_as`).
    pub fn setattr(&self, ino: Ino, sa: &shoal_core::SetAttr) -> Result<Attr> {
        self.setattr_as(&Ctx::root(), ino, sa)
    }

    /// `setattr` by `ctx`: with `check_perms`, who may
    /// (`rules::perm::may_setattr`, on the record the transaction read);
    /// its groups decide whether a chown without a mode clears setgid
    /// (`rules::privs::chown_perm`).
    pub fn setattr_as(&self, ctx: &Ctx, ino: Ino, sa: &shoal_core::SetAttr) -> Result<Attr> {
        if let Some(size) = sa.size {
            rules::link::check_size(size)?;
        }
        if sa.size.is_some_and(|s| s > SHARED_INLINE_MAX) && self.blobs.is_none() {
            return Err(Error::FileTooBig);
        }
        if sa.size.is_some() {
            // A truncate applies to the file with its buffered writes.
            self.flush(ino)?;
        }
        let sets_dir_time = sa.mtime.is_some() || sa.ctime.is_some();
        if sets_dir_time && self.pending_dir_time(ino).is_some() {
            // Creates from memory in this directory would move its times
            // past the ones set here when their batch commits: first them.
            self.settle()?;
            self.forget_dir_time(ino);
        }
        // A file created from memory and not committed yet: changed there.
        if sa.size.is_none() {
            if let Some(r) = self.amend_queued(ino, |n| {
                // Linux's order: the flags (EPERM), then who may.
                rules::flags::may_setattr(n.flags, sa)?;
                rules::perm::may_setattr(ctx, &n.attr, sa)?;
                Self::set_attrs(ctx, n, sa, Ts::now())?;
                Ok(n.attr)
            }) {
                return r.map(|a| as_seen(self.with_buffered(a)));
            }
        }
        // Objects a try uploaded (an inline file grown past the inline
        // size): a retried try's are named by nothing.
        let mut uploaded: Vec<String> = vec![];
        let r = self.run(|tx| {
            for name in uploaded.drain(..) {
                self.delete_object(&name);
            }
            let mut n = tx.node(ino)?;
            if sa.size.is_some() {
                match n.attr.kind {
                    Kind::Dir => return Err(Error::IsDir),
                    Kind::File => {}
                    _ => return Err(Error::Invalid),
                }
            }
            rules::flags::may_setattr(n.flags, sa)?;
            rules::perm::may_setattr(ctx, &n.attr, sa)?;
            let t = Ts::now();
            if let Some(size) = sa.size {
                self.resize_data(tx, &mut n, size, &mut uploaded)?;
                if size != n.attr.size || sa.mtime.is_none() {
                    n.attr.mtime = t;
                }
                n.attr.size = size;
            }
            Self::set_attrs(ctx, &mut n, sa, t)?;
            if n.attr.kind == Kind::Dir && sets_dir_time {
                // The times set here are the directory's, not the newest
                // of them and its entries' changes (`T dir`, `getattr`):
                // `touch -d` of a directory with entries sets an older time.
                tx.del(tkey(ino));
            }
            tx.put_node(&mut n)?;
            Ok(n.attr)
        });
        if r.is_err() {
            for name in uploaded {
                self.delete_object(&name);
            }
        }
        r.map(|a| as_seen(self.with_buffered(a)))
    }

    /// setattr's mode, owner and times (its size is the caller's), on the
    /// record as the transaction read it.
    fn set_attrs(ctx: &Ctx, n: &mut Node, sa: &shoal_core::SetAttr, t: Ts) -> Result<()> {
        let before = n.attr;
        if let Some(m) = sa.mode {
            n.attr.perm = rules::perm::chmod_perm(ctx, &before, (m & 0o7777) as u16);
            // chmod rewrites the access ACL's owner, mask and other entries
            // (one that does not decode fails the chmod, as on ext4).
            let perm = n.attr.perm;
            acl::chmod(&mut n.xattrs, perm)?;
        } else if sa.uid.is_some() || sa.gid.is_some() {
            n.attr.perm = rules::privs::chown_perm(ctx, &before);
        }
        if let Some(u) = sa.uid {
            n.attr.uid = u;
        }
        if let Some(g) = sa.gid {
            n.attr.gid = g;
        }
        let at = |x: shoal_core::TimeSet| match x {
            shoal_core::TimeSet::Now => t,
            shoal_core::TimeSet::At(v) => v,
        };
        if let Some(a) = sa.atime {
            n.attr.atime = at(a);
        }
        if let Some(m) = sa.mtime {
            n.attr.mtime = at(m);
        }
        n.attr.ctime = sa.ctime.unwrap_or(t);
        Ok(())
    }

    /// Set an extended attribute (`XATTR_CREATE`/`XATTR_REPLACE` in
    /// `flags`). The kernel has checked who may (trusted.* needs
    /// CAP_SYS_ADMIN, user.* only on files and directories); the namespaces
    /// are ext4's but for POSIX ACLs, which these mounts do not enforce and
    /// so refuse (EOPNOTSUPP) rather than keep and ignore. All of an inode's
    /// xattrs ride in its record, one transaction: at most `XATTRS_MAX`
    /// bytes (ext4 keeps 4 KiB in an inode's block; ENOSPC past it, too).
    pub fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], flags: u32) -> Result<()> {
        self.setxattr_as(&Ctx::root(), ino, name, value, flags)
    }

    /// `setxattr` by the caller `ctx`. The POSIX ACLs are kept in step with
    /// the mode as in the embedded engine (`shoal_core::acl`; the kernel
    /// enforces them, FUSE_POSIX_ACL): an access ACL sets the mode's
    /// permission bits and clears setgid unless the caller is root or in
    /// the file's group; one the mode alone expresses is not stored; an
    /// empty default ACL removes it; only directories have default ACLs.
    pub fn setxattr_as(
        &self,
        ctx: &Ctx,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        flags: u32,
    ) -> Result<()> {
        rules::xattr::check_name(ctx, name)?;
        rules::xattr::check_value(value)?;
        let parsed = if name == acl::ACCESS || name == acl::DEFAULT {
            Some(acl::Acl::decode(value)?)
        } else {
            None
        };
        self.run(|tx| {
            let mut n = tx.node(ino)?;
            // xattr_permission's order: the flags (EPERM), then who may.
            if rules::flags::pinned(n.flags) {
                return Err(Error::NotPermitted);
            }
            rules::xattr::may_access(ctx, &n.attr, name, true)?;
            let mut remove = false;
            if let Some(a) = &parsed {
                let keeps_setgid = rules::perm::in_group_or_root(ctx, n.attr.gid);
                match acl::set(name, a, n.attr.kind, &mut n.attr.perm, keeps_setgid)? {
                    None => return Ok(()),
                    Some(r) => remove = r,
                }
            }
            let pos = n.xattrs.iter().position(|(k, _)| k == name);
            match (pos, flags) {
                (Some(_), shoal_core::XATTR_CREATE) => return Err(Error::Exists),
                (None, shoal_core::XATTR_REPLACE) => return Err(Error::NoAttr),
                (Some(p), _) if remove => {
                    n.xattrs.remove(p);
                }
                (None, _) if remove => {}
                (pos, _) => {
                    rules::xattr::check_fits(XATTRS_MAX, &n.xattrs, name, value)?;
                    match pos {
                        Some(p) => n.xattrs[p].1 = value.to_vec(),
                        None => n.xattrs.push((name.to_vec(), value.to_vec())),
                    }
                }
            }
            n.attr.ctime = Ts::now();
            tx.put_node(&mut n)?;
            Ok(())
        })
    }

    pub fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.getxattr_as(&Ctx::root(), ino, name)
    }

    /// `getxattr` by `ctx` (`rules::xattr::may_access`, on the record read).
    pub fn getxattr_as(&self, ctx: &Ctx, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        // A read of an ACL's name is no error whoever checks: none is kept.
        rules::xattr::check_name(&Ctx::root(), name)?;
        // From the cache when it knows the record: the kernel asks for
        // security.capability before every write.
        let n = self.load_known(ino, false)?;
        rules::xattr::may_access(ctx, &n.attr, name, false)?;
        n.xattrs
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .ok_or(Error::NoAttr)
    }

    pub fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        Ok(self
            .load_known(ino, false)?
            .xattrs
            .into_iter()
            .map(|(k, _)| k)
            .collect())
    }

    pub fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        self.removexattr_as(&Ctx::root(), ino, name)
    }

    /// `removexattr` by `ctx` (`rules::xattr::may_access`, in the transaction).
    pub fn removexattr_as(&self, ctx: &Ctx, ino: Ino, name: &[u8]) -> Result<()> {
        rules::xattr::check_name(ctx, name)?;
        self.run(|tx| {
            let mut n = tx.node(ino)?;
            // xattr_permission's order: the flags (EPERM), then who may.
            if rules::flags::pinned(n.flags) {
                return Err(Error::NotPermitted);
            }
            rules::xattr::may_access(ctx, &n.attr, name, true)?;
            let pos = n
                .xattrs
                .iter()
                .position(|(k, _)| k == name)
                .ok_or(Error::NoAttr)?;
            n.xattrs.remove(pos);
            n.attr.ctime = Ts::now();
            tx.put_node(&mut n)?;
            Ok(())
        })
    }

    /// An inode's record from the record cache when it knows it, else (or
    /// `fresh`) from the store. What the cache answers is at least as new
    /// as what this daemon's last read of the store saw (an open's, for
    /// close-to-open): it only ever moves forward (`super::record_cache`).
    pub(super) fn load_known(&self, ino: Ino, fresh: bool) -> Result<Node> {
        if let Some(n) = self.pending_node(ino) {
            return Ok(n);
        }
        let v = self
            .read_known(vec![ikey(ino)], fresh)?
            .pop()
            .flatten()
            .ok_or(Error::NotFound)?;
        Node::decode(ino, &v)
    }

    /// An inode's record, read outside any transaction.
    pub(super) fn load(&self, ino: Ino) -> Result<Node> {
        if let Some(n) = self.pending_node(ino) {
            return Ok(n);
        }
        let key = ikey(ino);
        let v = self
            .patient(|| self.store.get(&key))?
            .ok_or(Error::NotFound)?;
        Node::decode(ino, &v.value)
    }

    pub fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let n = self.load_known(ino, false)?;
        if n.attr.kind != Kind::Symlink {
            return Err(Error::Invalid);
        }
        Ok(n.blob)
    }

    /// fsync(2) of a file: its buffered writes, and every create this
    /// daemon acknowledged from memory before (its own among them).
    pub fn fsync(&self, ino: Ino) -> Result<()> {
        self.flush(ino)?;
        self.settle()
    }

    /// fsync(2) of a directory: every create acknowledged from memory.
    pub fn fsyncdir(&self) -> Result<()> {
        self.settle()
    }

    /// A handle to an inode this daemon just made (its attributes are known).
    pub fn open_new(&self, ino: Ino) {
        *self.opens.lock().entry(ino).or_default() += 1;
    }

    pub(super) fn is_open(&self, ino: Ino) -> bool {
        self.opens.lock().get(&ino).is_some_and(|&n| n > 0)
    }

    /// The inodes open on this daemon.
    pub(super) fn open_inodes(&self) -> Vec<Ino> {
        let opens = self.opens.lock();
        opens
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(&i, _)| i)
            .collect()
    }

    /// `ino`, an orphan of this daemon, is open here: its last close
    /// removes it.
    pub(super) fn note_orphan(&self, ino: Ino) {
        self.orphaned.lock().insert(ino);
    }

    /// `ino` got a name again (`super::tmpfile`): its last close keeps it.
    pub(super) fn forget_orphan(&self, ino: Ino) {
        self.orphaned.lock().remove(&ino);
    }

    /// A handle to `ino` opened on this daemon.
    pub fn open_file(&self, ino: Ino) -> Result<Attr> {
        self.open_as(&Ctx::root(), ino, 0)
    }

    /// `open_file` by `ctx`, for `mask` (R_OK, W_OK: `rules::perm::access`
    /// on the attributes the open reads).
    pub fn open_as(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<Attr> {
        *self.opens.lock().entry(ino).or_default() += 1;
        // From the store: what another daemon wrote before its close is
        // seen by an open after it (close-to-open), stream or not.
        let a = self.attr_of(ino, true).and_then(|a| {
            rules::perm::access(ctx, &a, mask & 7)?;
            Ok(a)
        });
        if a.is_err() {
            self.release(ino)?;
        }
        a
    }

    /// A handle closed: the last one of an inode with no name left removes it.
    pub fn release(&self, ino: Ino) -> Result<()> {
        {
            let mut o = self.opens.lock();
            let n = o.entry(ino).or_default();
            *n = n.saturating_sub(1);
            if *n > 0 {
                return Ok(());
            }
            o.remove(&ino);
        }
        self.closed_unnamed(ino);
        if self.holds_open(ino) {
            self.unhold(ino)?;
        }
        if !self.orphaned.lock().remove(&ino) {
            // Not made an orphan here: nothing to remove (no round trip).
            return Ok(());
        }
        if !self.remove_batch(&[(ino, okey(self.sid, ino))])?.is_empty() {
            // Another daemon holds it: try again after the grace.
            self.remove_after_grace(ino);
        }
        Ok(())
    }
}
