//! The data seam: where the bytes of files larger than `INLINE_MAX` live.
//!
//! A file of at most `INLINE_MAX` bytes keeps them in its inode record, in
//! the metadata store. Past that, its bytes are one data object named by the
//! inode number, kept by a `DataStore` apart from the metadata: the local
//! implementation is one file per inode under the store's `data/`
//! directory (`shoal_store::DataFiles`), written in place, so reads and
//! writes run at the local filesystem's speed, a deleted file's space comes
//! back when its object is removed, and the kernel can be handed the object
//! as a FUSE passthrough backing file. `MemData` keeps objects in memory
//! for the engine's tests and for memory-only engines.
//!
//! The contract, and the crash argument built on it (docs/design.md, "File
//! data"):
//! - an object that does not exist reads as zeros (a hole): the engine never
//!   needs an object to exist for a file to be valid;
//! - `sync(ino)` makes the object's bytes and length durable; nothing else
//!   does, so bytes not synced may be lost in a crash, reading as zeros or
//!   as older bytes of the same object, never as another object's;
//! - `remove` is called only once the inode's deletion is durable in the
//!   metadata, so a crash leaves at most an object no inode uses (an
//!   orphan, listed by `list` and removed by the engine's sweep and by fsck).

use crate::error::{Error, Result};
use crate::sync::PlainMutex as Mutex;
use crate::types::Ino;
use std::collections::HashMap;

/// Where a file's bytes past `INLINE_MAX` live. Every method is called with
/// the inode's state lock held or on an object no operation can reach, so an
/// implementation needs no ordering of its own between calls for one inode.
pub trait DataStore: Send + Sync + 'static {
    /// Read into `buf` from `off`; bytes past the object's end (or of an
    /// object that does not exist) are left as they are (the caller passes
    /// zeros). Returns the bytes read.
    fn read(&self, ino: Ino, off: u64, buf: &mut [u8]) -> Result<usize>;
    /// Write `data` at `off`, making the object if it does not exist.
    fn write(&self, ino: Ino, off: u64, data: &[u8]) -> Result<()>;
    /// Cut or extend (with zeros) the object to `len` bytes, making it if
    /// needed.
    fn set_len(&self, ino: Ino, len: u64) -> Result<()>;
    /// The object's length (0 when it does not exist).
    fn len(&self, ino: Ino) -> Result<u64>;
    /// Make `off..off+len` read as zeros and free its space where the
    /// implementation can.
    fn punch(&self, ino: Ino, off: u64, len: u64) -> Result<()>;
    /// Reserve space for `off..off+len` (fallocate): ENOSPC now rather than
    /// at a later write. The length does not change.
    fn allocate(&self, ino: Ino, off: u64, len: u64) -> Result<()>;
    /// Bytes the object takes on its device (st_blocks * 512).
    fn allocated(&self, ino: Ino) -> Result<u64>;
    /// SEEK_DATA (`data`) or SEEK_HOLE from `off`: the offset found, or
    /// None past the end (ENXIO).
    fn seek(&self, ino: Ino, off: u64, data: bool) -> Result<Option<u64>>;
    /// Make the object's bytes and length durable.
    fn sync(&self, ino: Ino) -> Result<()>;
    /// Delete the object (no error if it does not exist).
    fn remove(&self, ino: Ino) -> Result<()>;
    /// Every object's inode number: for the sweep of orphans and for fsck.
    fn list(&self) -> Result<Vec<Ino>>;
    /// A file descriptor the kernel can read and write the object through
    /// (FUSE passthrough), when the implementation has one.
    fn backing_file(&self, ino: Ino) -> Option<std::sync::Arc<std::fs::File>> {
        let _ = ino;
        None
    }
    /// The object's (length, modification time), when it exists: what the
    /// kernel changed writing through `backing_file`.
    fn modified(&self, ino: Ino) -> Result<Option<(u64, crate::types::Ts)>> {
        let _ = ino;
        Ok(None)
    }
}

/// Objects in memory. `power_cut` drops what was not synced, as a crash
/// would: each object goes back to its last `sync`, or away if it never was.
/// Its clock never ticks: `modified` answers every object's time as the
/// epoch, as a coarse clock (or a kernel without multigrain timestamps)
/// leaves a file's time unchanged by writes within one tick. A test writes
/// "through the backing file", as the kernel does with FUSE passthrough,
/// by writing to the object with no call to the engine.
#[derive(Default)]
pub struct MemData {
    inner: Mutex<MemInner>,
}

#[derive(Default)]
struct MemInner {
    live: HashMap<Ino, Vec<u8>>,
    synced: HashMap<Ino, Vec<u8>>,
}

impl MemData {
    pub fn power_cut(&self) {
        let mut g = self.inner.lock();
        g.live = g.synced.clone();
    }
}

impl DataStore for MemData {
    fn read(&self, ino: Ino, off: u64, buf: &mut [u8]) -> Result<usize> {
        let g = self.inner.lock();
        let Some(v) = g.live.get(&ino) else {
            return Ok(0);
        };
        let off = off.min(v.len() as u64) as usize;
        let n = buf.len().min(v.len() - off);
        buf[..n].copy_from_slice(&v[off..off + n]);
        Ok(n)
    }
    fn write(&self, ino: Ino, off: u64, data: &[u8]) -> Result<()> {
        let mut g = self.inner.lock();
        let v = g.live.entry(ino).or_default();
        let end = off as usize + data.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        v[off as usize..end].copy_from_slice(data);
        Ok(())
    }
    fn set_len(&self, ino: Ino, len: u64) -> Result<()> {
        self.inner
            .lock()
            .live
            .entry(ino)
            .or_default()
            .resize(len as usize, 0);
        Ok(())
    }
    fn len(&self, ino: Ino) -> Result<u64> {
        Ok(self
            .inner
            .lock()
            .live
            .get(&ino)
            .map_or(0, |v| v.len() as u64))
    }
    fn punch(&self, ino: Ino, off: u64, len: u64) -> Result<()> {
        let mut g = self.inner.lock();
        if let Some(v) = g.live.get_mut(&ino) {
            let end = ((off + len) as usize).min(v.len());
            if (off as usize) < end {
                v[off as usize..end].fill(0);
            }
        }
        Ok(())
    }
    fn allocate(&self, _ino: Ino, _off: u64, _len: u64) -> Result<()> {
        Ok(())
    }
    fn allocated(&self, ino: Ino) -> Result<u64> {
        Ok(self.len(ino)?.next_multiple_of(4096))
    }
    fn seek(&self, ino: Ino, off: u64, data: bool) -> Result<Option<u64>> {
        let len = self.len(ino)?;
        Ok(if off >= len {
            None
        } else if data {
            Some(off)
        } else {
            Some(len)
        })
    }
    fn sync(&self, ino: Ino) -> Result<()> {
        let mut g = self.inner.lock();
        match g.live.get(&ino).cloned() {
            Some(v) => g.synced.insert(ino, v),
            None => g.synced.remove(&ino),
        };
        Ok(())
    }
    fn remove(&self, ino: Ino) -> Result<()> {
        let mut g = self.inner.lock();
        g.live.remove(&ino);
        // A removal is of an object no durable inode uses: it stays removed.
        g.synced.remove(&ino);
        Ok(())
    }
    fn list(&self) -> Result<Vec<Ino>> {
        let mut v: Vec<Ino> = self.inner.lock().live.keys().copied().collect();
        v.sort_unstable();
        Ok(v)
    }
    fn modified(&self, ino: Ino) -> Result<Option<(u64, crate::types::Ts)>> {
        let g = self.inner.lock();
        Ok(g.live
            .get(&ino)
            .map(|v| (v.len() as u64, crate::types::Ts::default())))
    }
}

/// A data object operation that failed, said with the inode it was for.
pub fn about(e: Error, ino: Ino) -> Error {
    e.about(format_args!("inode {ino} data"))
}
