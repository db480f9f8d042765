//! What a dump reads from and a load writes to, on either kind of store:
//! `Tree` (read: the embedded `Engine`, or a `ClusterFs` on etcd) and
//! `Sink` (write: the same two). Both go through the filesystems' own
//! operations, not their keys, so a dump is the same whichever store it
//! came from and a load keeps every invariant the store's own operations
//! keep (link counts, allocation groups, leases), and fsck finds the store
//! loaded as clean as one made by hand.

use shoal_cluster::ns::{ClusterFs, NewNode};
use shoal_core::{Attr, Ctx, Engine, Error, Ino, Kind, Result, SetAttr, ROOT_INO};
use std::sync::Arc;

/// Where a directory's listing resumes: a cookie (embedded) or the last
/// name listed (etcd).
#[derive(Default)]
pub struct Cursor {
    cookie: u64,
    after: Option<Vec<u8>>,
}

/// A filesystem read for a dump.
pub trait Tree {
    fn getattr(&self, ino: Ino) -> Result<Attr>;
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr>;
    /// The next entries of `dir` after `at`, at most `max` (none: the end).
    fn list(&self, dir: Ino, at: &mut Cursor, max: usize) -> Result<Vec<(Vec<u8>, Ino, Kind)>>;
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>>;
    fn xattrs(&self, ino: Ino) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// chattr flags (FS_*_FL).
    fn flags(&self, ino: Ino) -> Result<u32>;
    fn open(&self, _ino: Ino) -> Result<()> {
        Ok(())
    }
    fn close(&self, _ino: Ino) {}
    fn read(&self, ino: Ino, off: u64, len: u32) -> Result<Vec<u8>>;
    /// The first byte of data at or past `off` (SEEK_DATA), None past the
    /// last; a store that knows no holes answers `off`.
    fn data_from(&self, _ino: Ino, off: u64, size: u64) -> Result<Option<u64>> {
        Ok((off < size).then_some(off))
    }
    /// The first hole at or past `off` (SEEK_HOLE; the size at the end).
    fn hole_from(&self, _ino: Ino, _off: u64, size: u64) -> Result<u64> {
        Ok(size)
    }
}

/// A filesystem written by a load.
pub trait Sink {
    /// Whether the root holds no entry (a load refuses anything else).
    fn root_entries(&self) -> Result<usize>;
    /// A new inode named `name` in `parent`, owned by root, mode `perm`.
    fn make(
        &self,
        parent: Ino,
        name: &[u8],
        kind: Kind,
        perm: u16,
        rdev: u32,
        target: &[u8],
    ) -> Result<Ino>;
    fn link(&self, ino: Ino, parent: Ino, name: &[u8]) -> Result<()>;
    fn open(&self, ino: Ino) -> Result<()>;
    fn write(&self, ino: Ino, off: u64, data: &[u8]) -> Result<()>;
    fn close(&self, ino: Ino) -> Result<()>;
    fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8]) -> Result<()>;
    fn setattr(&self, ino: Ino, sa: &SetAttr) -> Result<()>;
    /// Set chattr flags; false when this store keeps none.
    fn set_flags(&self, ino: Ino, flags: u32) -> Result<bool>;
    /// Everything loaded durable.
    fn finish(&self) -> Result<()>;
}

/// Each of `names` with its value (`get`), those gone meanwhile left out.
fn named_values(
    names: Vec<Vec<u8>>,
    get: impl Fn(&[u8]) -> Result<Vec<u8>>,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    for n in names {
        match get(&n) {
            Ok(v) => out.push((n, v)),
            Err(Error::NoAttr) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// All of `data` at `off`, through a `write` that may take less.
fn write_all(off: u64, data: &[u8], write: impl Fn(u64, &[u8]) -> Result<u32>) -> Result<()> {
    let mut done = 0;
    while done < data.len() {
        done += write(off + done as u64, &data[done..])? as usize;
    }
    Ok(())
}

/// The embedded engine, as root, checking no permissions.
pub struct EngineTree(pub Arc<Engine>);

impl EngineTree {
    fn ctx() -> Ctx {
        Ctx::root()
    }
}

impl Tree for EngineTree {
    fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.0.getattr(ino)
    }
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.0.lookup(&Self::ctx(), parent, name)
    }
    fn list(&self, dir: Ino, at: &mut Cursor, max: usize) -> Result<Vec<(Vec<u8>, Ino, Kind)>> {
        let got = self.0.readdir(dir, at.cookie, max)?;
        if let Some(l) = got.last() {
            at.cookie = l.cookie;
        }
        Ok(got
            .into_iter()
            .filter(|d| d.name != b"." && d.name != b"..")
            .map(|d| (d.name, d.ino, d.kind))
            .collect())
    }
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.0.readlink(ino)
    }
    fn xattrs(&self, ino: Ino) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        named_values(self.0.listxattr(ino)?, |n| {
            self.0.getxattr(&Self::ctx(), ino, n)
        })
    }
    fn flags(&self, ino: Ino) -> Result<u32> {
        self.0.flags(ino)
    }
    fn open(&self, ino: Ino) -> Result<()> {
        self.0.open_file(&Self::ctx(), ino, 0).map(|_| ())
    }
    fn close(&self, ino: Ino) {
        let _ = self.0.release(ino);
    }
    fn read(&self, ino: Ino, off: u64, len: u32) -> Result<Vec<u8>> {
        self.0.read(ino, off, len)
    }
    fn data_from(&self, ino: Ino, off: u64, _size: u64) -> Result<Option<u64>> {
        match self.0.seek(ino, off, true) {
            Ok(x) => Ok(Some(x)),
            Err(Error::PastEnd) => Ok(None),
            Err(e) => Err(e),
        }
    }
    fn hole_from(&self, ino: Ino, off: u64, size: u64) -> Result<u64> {
        match self.0.seek(ino, off, false) {
            Ok(x) => Ok(x),
            Err(Error::PastEnd) => Ok(size),
            Err(e) => Err(e),
        }
    }
}

impl Sink for EngineTree {
    fn root_entries(&self) -> Result<usize> {
        Ok(self.list(ROOT_INO, &mut Cursor::default(), 2)?.len())
    }
    fn make(
        &self,
        parent: Ino,
        name: &[u8],
        kind: Kind,
        perm: u16,
        rdev: u32,
        target: &[u8],
    ) -> Result<Ino> {
        let c = Self::ctx();
        let e = &self.0;
        let perm = perm as u32;
        let a = match kind {
            Kind::Dir => e.mkdir(&c, parent, name, perm)?,
            Kind::File => e.create(&c, parent, name, perm)?,
            Kind::Symlink => e.symlink(&c, parent, name, target)?,
            k => e.mknod(&c, parent, name, k.mode_bits() | perm, rdev)?,
        };
        Ok(a.ino)
    }
    fn link(&self, ino: Ino, parent: Ino, name: &[u8]) -> Result<()> {
        self.0.link(&Self::ctx(), ino, parent, name).map(|_| ())
    }
    fn open(&self, ino: Ino) -> Result<()> {
        self.0
            .open_file(&Self::ctx(), ino, libc::W_OK as u32)
            .map(|_| ())
    }
    fn write(&self, ino: Ino, off: u64, data: &[u8]) -> Result<()> {
        write_all(off, data, |at, b| self.0.write(ino, at, b))
    }
    fn close(&self, ino: Ino) -> Result<()> {
        self.0.release(ino)
    }
    fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8]) -> Result<()> {
        self.0.setxattr(&Self::ctx(), ino, name, value, 0)
    }
    fn setattr(&self, ino: Ino, sa: &SetAttr) -> Result<()> {
        self.0.setattr(&Self::ctx(), ino, sa).map(|_| ())
    }
    fn set_flags(&self, ino: Ino, flags: u32) -> Result<bool> {
        self.0.set_flags(&Self::ctx(), ino, flags).map(|_| true)
    }
    fn finish(&self) -> Result<()> {
        self.0.sync()
    }
}

/// A namespace on etcd, through a session of its own.
pub struct SharedTree(pub Arc<ClusterFs>);

impl Tree for SharedTree {
    fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.0.getattr(ino)
    }
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.0.lookup(parent, name)
    }
    fn list(&self, dir: Ino, at: &mut Cursor, max: usize) -> Result<Vec<(Vec<u8>, Ino, Kind)>> {
        let got = self.0.readdir(dir, at.after.as_deref(), max)?;
        if let Some(l) = got.last() {
            at.after = Some(l.0.clone());
        }
        Ok(got)
    }
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.0.readlink(ino)
    }
    fn xattrs(&self, ino: Ino) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        named_values(self.0.listxattr(ino)?, |n| self.0.getxattr(ino, n))
    }
    fn flags(&self, ino: Ino) -> Result<u32> {
        self.0.flags(ino)
    }
    fn open(&self, ino: Ino) -> Result<()> {
        self.0.open_file(ino).map(|_| ())
    }
    fn close(&self, ino: Ino) {
        let _ = self.0.release(ino);
    }
    fn read(&self, ino: Ino, off: u64, len: u32) -> Result<Vec<u8>> {
        self.0.read(ino, off, len)
    }
}

impl Sink for SharedTree {
    fn root_entries(&self) -> Result<usize> {
        Ok(self.0.readdir(ROOT_INO, None, 2)?.len())
    }
    fn make(
        &self,
        parent: Ino,
        name: &[u8],
        kind: Kind,
        perm: u16,
        rdev: u32,
        target: &[u8],
    ) -> Result<Ino> {
        let n = NewNode {
            kind,
            perm,
            rdev,
            target,
        };
        let a = self.0.mknod(&Ctx::root(), parent, name, &n)?;
        Ok(a.ino)
    }
    fn link(&self, ino: Ino, parent: Ino, name: &[u8]) -> Result<()> {
        self.0.link(ino, parent, name).map(|_| ())
    }
    fn open(&self, ino: Ino) -> Result<()> {
        self.0.open_file(ino).map(|_| ())
    }
    fn write(&self, ino: Ino, off: u64, data: &[u8]) -> Result<()> {
        write_all(off, data, |at, b| self.0.write(ino, at, b))
    }
    fn close(&self, ino: Ino) -> Result<()> {
        self.0.flush(ino)?;
        self.0.release(ino)
    }
    fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8]) -> Result<()> {
        self.0.setxattr(ino, name, value, 0)
    }
    fn setattr(&self, ino: Ino, sa: &SetAttr) -> Result<()> {
        self.0.setattr(ino, sa).map(|_| ())
    }
    fn set_flags(&self, ino: Ino, flags: u32) -> Result<bool> {
        self.0
            .set_flags(&shoal_core::Ctx::root(), ino, flags)
            .map(|_| true)
    }
    fn finish(&self) -> Result<()> {
        self.0.flush_all()
    }
}
