//! The cluster namespace's side of the one namespace surface
//! (`shoal_core::surface::Namespace`, issue 45 point 2).

use shoal_core::engine::SetAttr;
use shoal_core::error::{Error, Result};
use shoal_core::rules;
use shoal_core::surface::{checking, Entry, Namespace};
use shoal_core::types::{Attr, Ctx, Ino, Kind};

use crate::ns::{ClusterFs, NewNode};

impl Namespace for ClusterFs {
    fn lookup(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.lookup_as(ctx, parent, name)
    }
    fn getattr(&self, _ctx: &Ctx, ino: Ino) -> Result<Attr> {
        ClusterFs::getattr(self, ino)
    }
    fn setattr(&self, ctx: &Ctx, ino: Ino, sa: &SetAttr) -> Result<Attr> {
        self.setattr_as(ctx, ino, sa)
    }
    fn mknod(&self, ctx: &Ctx, parent: Ino, name: &[u8], mode: u32, rdev: u32) -> Result<Attr> {
        let kind = rules::new_inode::mknod_kind(mode)?;
        let new = NewNode {
            kind,
            perm: (mode & 0o7777) as u16,
            rdev,
            target: b"",
        };
        ClusterFs::mknod(self, ctx, parent, name, &new)
    }
    fn mkdir(&self, ctx: &Ctx, parent: Ino, name: &[u8], perm: u32) -> Result<Attr> {
        let new = NewNode {
            kind: Kind::Dir,
            perm: (perm & 0o7777) as u16,
            rdev: 0,
            target: b"",
        };
        ClusterFs::mknod(self, ctx, parent, name, &new)
    }
    fn symlink(&self, ctx: &Ctx, parent: Ino, name: &[u8], target: &[u8]) -> Result<Attr> {
        let new = NewNode {
            kind: Kind::Symlink,
            perm: 0o777,
            rdev: 0,
            target,
        };
        ClusterFs::mknod(self, ctx, parent, name, &new)
    }
    fn unlink(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        self.unlink_as(ctx, parent, name)
    }
    fn rmdir(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        self.rmdir_as(ctx, parent, name)
    }
    fn link(&self, ctx: &Ctx, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        self.link_as(ctx, ino, newparent, newname)
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
        self.rename_as(ctx, parent, name, newparent, newname, flags)
    }
    fn readlink(&self, _ctx: &Ctx, ino: Ino) -> Result<Vec<u8>> {
        ClusterFs::readlink(self, ino)
    }
    fn list(&self, _ctx: &Ctx, dir: Ino) -> Result<Vec<Entry>> {
        if ClusterFs::getattr(self, dir)?.kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        let mut out: Vec<Entry> = Vec::new();
        loop {
            let after = out.last().map(|e| e.0.clone());
            let page = ClusterFs::readdir(self, dir, after.as_deref(), 256)?;
            let more = page.len() == 256;
            out.extend(page);
            if !more {
                return Ok(out);
            }
        }
    }
    fn getxattr(&self, ctx: &Ctx, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.getxattr_as(ctx, ino, name)
    }
    fn setxattr(&self, ctx: &Ctx, ino: Ino, name: &[u8], value: &[u8], flags: u32) -> Result<()> {
        self.setxattr_as(ctx, ino, name, value, flags)
    }
    fn listxattr(&self, _ctx: &Ctx, ino: Ino) -> Result<Vec<Vec<u8>>> {
        ClusterFs::listxattr(self, ino)
    }
    fn removexattr(&self, ctx: &Ctx, ino: Ino, name: &[u8]) -> Result<()> {
        self.removexattr_as(ctx, ino, name)
    }
    fn access(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<()> {
        rules::perm::access(&checking(ctx), &ClusterFs::getattr(self, ino)?, mask)
    }
    fn open(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<Attr> {
        self.open_for(ctx, ino, mask, false, false)
    }
    fn release(&self, _ctx: &Ctx, ino: Ino) -> Result<()> {
        ClusterFs::release(self, ino)
    }
    fn read(&self, _ctx: &Ctx, ino: Ino, off: u64, len: u32) -> Result<Vec<u8>> {
        ClusterFs::read(self, ino, off, len)
    }
    fn write(&self, _ctx: &Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<u32> {
        ClusterFs::write(self, ino, off, data)
    }
    fn fsync(&self, _ctx: &Ctx, ino: Ino) -> Result<()> {
        ClusterFs::fsync(self, ino)
    }
}
