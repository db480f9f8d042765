//! One namespace surface over the two mechanisms (issue 45, point 2): the
//! embedded engine ([`Engine`]) and the namespace on a shared store
//! (`shoal_cluster::ClusterFs`, etcd or TiKV) answer the same operations, each with the
//! caller's [`Ctx`], and give the same answers but for the differences
//! `rules::modes` lists (docs/rules.md).
//!
//! With `Ctx::check_perms` each mechanism checks who may, with the rules of
//! `crate::rules`, inside its own critical section: the engine under its
//! name and inode locks, the shared namespace inside the operation's
//! transaction on the records the transaction read (so a chmod by another
//! daemon between the check and the commit conflicts). Without it (a FUSE
//! mount whose kernel checks, `default_permissions`) neither reads anything
//! for a check. A library caller gets POSIX permissions from either with
//! `Ctx::user`.
//!
//! The trait is the surface, not the whole of either API: paging through a
//! directory (cookies on the engine, names on a shared store), file locks,
//! leases, chattr flags and the mount-only calls stay on each type.

use crate::engine::SetAttr;
use crate::error::Result;
use crate::types::{Attr, Ctx, Ino, Kind};
use crate::Engine;

/// A directory entry as [`Namespace::list`] gives it.
pub type Entry = (Vec<u8>, Ino, Kind);

/// The namespace operations both mechanisms answer, the caller's context
/// on each. Errors are `crate::Error`, the same variant for the same case.
pub trait Namespace: Send + Sync {
    /// `name` in directory `parent` (search permission on `parent`).
    fn lookup(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<Attr>;
    fn getattr(&self, ctx: &Ctx, ino: Ino) -> Result<Attr>;
    /// chmod, chown, truncate, times (`rules::perm::may_setattr`).
    fn setattr(&self, ctx: &Ctx, ino: Ino, sa: &SetAttr) -> Result<Attr>;
    /// A file, device, fifo or socket; `mode` carries the type (0: a file),
    /// `rules::new_inode::mknod_kind`.
    fn mknod(&self, ctx: &Ctx, parent: Ino, name: &[u8], mode: u32, rdev: u32) -> Result<Attr>;
    /// A regular file (O_CREAT|O_EXCL), not opened.
    fn create(&self, ctx: &Ctx, parent: Ino, name: &[u8], perm: u32) -> Result<Attr> {
        self.mknod(ctx, parent, name, perm & 0o7777, 0)
    }
    fn mkdir(&self, ctx: &Ctx, parent: Ino, name: &[u8], perm: u32) -> Result<Attr>;
    fn symlink(&self, ctx: &Ctx, parent: Ino, name: &[u8], target: &[u8]) -> Result<Attr>;
    fn unlink(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()>;
    fn rmdir(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()>;
    fn link(&self, ctx: &Ctx, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr>;
    /// renameat2(2) with `flags` (`crate::RENAME_NOREPLACE`, ...).
    fn rename(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: u32,
    ) -> Result<()>;
    fn readlink(&self, ctx: &Ctx, ino: Ino) -> Result<Vec<u8>>;
    /// Every entry of directory `dir` but `.` and `..`, in name order.
    fn list(&self, ctx: &Ctx, dir: Ino) -> Result<Vec<Entry>>;
    fn getxattr(&self, ctx: &Ctx, ino: Ino, name: &[u8]) -> Result<Vec<u8>>;
    fn setxattr(&self, ctx: &Ctx, ino: Ino, name: &[u8], value: &[u8], flags: u32) -> Result<()>;
    fn listxattr(&self, ctx: &Ctx, ino: Ino) -> Result<Vec<Vec<u8>>>;
    fn removexattr(&self, ctx: &Ctx, ino: Ino, name: &[u8]) -> Result<()>;
    /// access(2) of `mask` (R_OK, W_OK, X_OK), checked whatever
    /// `ctx.check_perms` says.
    fn access(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<()>;
    /// Open a file for `mask` (R_OK, W_OK): it lives, even unlinked,
    /// until its `release`.
    fn open(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<Attr>;
    fn release(&self, ctx: &Ctx, ino: Ino) -> Result<()>;
    fn read(&self, ctx: &Ctx, ino: Ino, off: u64, len: u32) -> Result<Vec<u8>>;
    fn write(&self, ctx: &Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<u32>;
    fn fsync(&self, ctx: &Ctx, ino: Ino) -> Result<()>;
}

/// `ctx` with its checks on: access(2) asks whatever the mount does.
pub fn checking(ctx: &Ctx) -> Ctx {
    Ctx {
        check_perms: true,
        ..ctx.clone()
    }
}

impl Namespace for Engine {
    fn lookup(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<Attr> {
        Engine::lookup(self, ctx, parent, name)
    }
    fn getattr(&self, _ctx: &Ctx, ino: Ino) -> Result<Attr> {
        Engine::getattr(self, ino)
    }
    fn setattr(&self, ctx: &Ctx, ino: Ino, sa: &SetAttr) -> Result<Attr> {
        Engine::setattr(self, ctx, ino, sa)
    }
    fn mknod(&self, ctx: &Ctx, parent: Ino, name: &[u8], mode: u32, rdev: u32) -> Result<Attr> {
        Engine::mknod(self, ctx, parent, name, mode, rdev)
    }
    fn mkdir(&self, ctx: &Ctx, parent: Ino, name: &[u8], perm: u32) -> Result<Attr> {
        Engine::mkdir(self, ctx, parent, name, perm)
    }
    fn symlink(&self, ctx: &Ctx, parent: Ino, name: &[u8], target: &[u8]) -> Result<Attr> {
        Engine::symlink(self, ctx, parent, name, target)
    }
    fn unlink(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        Engine::unlink(self, ctx, parent, name)
    }
    fn rmdir(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        Engine::rmdir(self, ctx, parent, name)
    }
    fn link(&self, ctx: &Ctx, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        Engine::link(self, ctx, ino, newparent, newname)
    }
    fn rename(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: u32,
    ) -> Result<()> {
        Engine::rename(self, ctx, parent, name, newparent, newname, flags)
    }
    fn readlink(&self, _ctx: &Ctx, ino: Ino) -> Result<Vec<u8>> {
        Engine::readlink(self, ino)
    }
    fn list(&self, _ctx: &Ctx, dir: Ino) -> Result<Vec<Entry>> {
        let mut out = Vec::new();
        let mut cookie = 0;
        loop {
            let page = Engine::readdir(self, dir, cookie, 256)?;
            let Some(last) = page.last() else { break };
            cookie = last.cookie;
            out.extend(
                page.into_iter()
                    .filter(|d| d.name != b"." && d.name != b"..")
                    .map(|d| (d.name, d.ino, d.kind)),
            );
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
    fn getxattr(&self, ctx: &Ctx, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        Engine::getxattr(self, ctx, ino, name)
    }
    fn setxattr(&self, ctx: &Ctx, ino: Ino, name: &[u8], value: &[u8], flags: u32) -> Result<()> {
        Engine::setxattr(self, ctx, ino, name, value, flags)
    }
    fn listxattr(&self, _ctx: &Ctx, ino: Ino) -> Result<Vec<Vec<u8>>> {
        Engine::listxattr(self, ino)
    }
    fn removexattr(&self, ctx: &Ctx, ino: Ino, name: &[u8]) -> Result<()> {
        Engine::removexattr(self, ctx, ino, name)
    }
    fn access(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<()> {
        Engine::access(self, ctx, ino, mask)
    }
    fn open(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<Attr> {
        Engine::open_file(self, ctx, ino, mask)
    }
    fn release(&self, _ctx: &Ctx, ino: Ino) -> Result<()> {
        Engine::release(self, ino)
    }
    fn read(&self, _ctx: &Ctx, ino: Ino, off: u64, len: u32) -> Result<Vec<u8>> {
        Engine::read(self, ino, off, len)
    }
    fn write(&self, _ctx: &Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<u32> {
        Engine::write(self, ino, off, data)
    }
    fn fsync(&self, _ctx: &Ctx, ino: Ino) -> Result<()> {
        Engine::fsync(self, ino)
    }
}
