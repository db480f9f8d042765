//! fallocate(2) and SEEK_DATA/SEEK_HOLE on a shared namespace, with the
//! embedded engine's answers (`engine/data.rs`, `fallocate`): a range past
//! the end grows the file unless KEEP_SIZE; PUNCH_HOLE (with KEEP_SIZE)
//! and ZERO_RANGE make the range read as zeros; the largest file, the
//! kind of inode and chattr's flags (`rules::flags::may_fallocate`) as
//! there. The object store keeps no holes: zeros are written (as new
//! objects of the chunks touched, committed at close or fsync like any
//! write), and a growth is the size's alone (chunks never written read as
//! zeros). A file has no holes that SEEK_HOLE finds before its end, as
//! on a filesystem that does not track them (the VFS's default answer).

use super::ns::ClusterFs;
use shoal_core::engine::{FALLOC_KEEP_SIZE, FALLOC_PUNCH_HOLE, FALLOC_ZERO_RANGE};
use shoal_core::error::{Error, Result};
use shoal_core::rules;
use shoal_core::types::{Ino, Kind};
use shoal_core::SetAttr;

/// Zeros written at once by a punch or a zeroing.
const ZEROS: u64 = 1 << 20;

impl ClusterFs {
    /// fallocate(2): `mode` of `FALLOC_KEEP_SIZE`, `FALLOC_PUNCH_HOLE`
    /// (with KEEP_SIZE) and `FALLOC_ZERO_RANGE`; any other EOPNOTSUPP.
    pub fn fallocate(&self, ino: Ino, off: u64, len: u64, mode: u32) -> Result<()> {
        let end = off.checked_add(len).ok_or(Error::FileTooBig)?;
        if len == 0 {
            return Err(Error::Invalid);
        }
        rules::link::check_size(end)?;
        // From the store: the flags as another mount may have just set them.
        let n = self.load_known(ino, true)?;
        if n.attr.kind != Kind::File {
            return Err(if n.attr.kind == Kind::Dir {
                Error::IsDir
            } else {
                Error::NotSupported
            });
        }
        rules::flags::may_fallocate(n.flags, mode & !FALLOC_KEEP_SIZE == 0)?;
        let size = self.getattr(ino)?.size;
        let keep = mode & FALLOC_KEEP_SIZE != 0;
        let grow = || -> Result<()> {
            if !keep && end > size {
                let sa = SetAttr {
                    size: Some(end),
                    ..Default::default()
                };
                self.setattr(ino, &sa)?;
            }
            Ok(())
        };
        match mode & !FALLOC_KEEP_SIZE {
            0 => {
                // A request the object store cannot hold fails now, as on
                // ext4, where it tells its room (`Blobs::space`).
                let free = self.blobs.as_ref().and_then(|b| b.space()).map(|s| s.1);
                if free.is_some_and(|f| end.saturating_sub(if keep { 0 } else { size }) > f) {
                    return Err(Error::NoSpace);
                }
                grow()
            }
            FALLOC_PUNCH_HOLE if keep => self.zero_range(ino, off, end.min(size)),
            FALLOC_ZERO_RANGE => {
                self.zero_range(ino, off, end.min(size))?;
                grow()
            }
            _ => Err(Error::NotSupported),
        }
    }

    /// Before a fallocate by `uid` (its group `gid`, its other groups from
    /// `groups`, asked only if the rule needs them): clear the setuid and
    /// setgid bits `rules::privs::write_kills` says, in one transaction, as
    /// the embedded adapter does under KILLPRIV_V2 (the kernel's FUSE code
    /// keeps setgid without group exec: xfstests generic/683-685). Whether
    /// the mode changed.
    pub fn drop_privileges(
        &self,
        uid: u32,
        gid: u32,
        groups: impl FnOnce() -> Vec<u32>,
        ino: Ino,
    ) -> Result<bool> {
        if uid == 0 {
            return Ok(false);
        }
        let mut in_group = rules::privs::caller_in_group(gid, groups);
        let n = self.load_known(ino, false)?;
        if rules::privs::write_kills(uid, n.attr.kind, n.attr.perm, n.attr.gid, &mut in_group) == 0
        {
            return Ok(false);
        }
        self.run(|tx| {
            let mut n = tx.node(ino)?;
            let k =
                rules::privs::write_kills(uid, n.attr.kind, n.attr.perm, n.attr.gid, &mut in_group);
            if k == 0 {
                return Ok(false);
            }
            n.attr.perm &= !k;
            n.attr.ctime = shoal_core::types::Ts::now();
            tx.put_node(&mut n)?;
            Ok(true)
        })
    }

    /// `off..end` reads as zeros: written, `ZEROS` at a time.
    fn zero_range(&self, ino: Ino, off: u64, end: u64) -> Result<()> {
        let mut at = off;
        while at < end {
            let n = (end - at).min(ZEROS);
            self.write(ino, at, &vec![0u8; n as usize])?;
            at += n;
        }
        Ok(())
    }

    /// lseek(2)'s SEEK_DATA (`data`) or SEEK_HOLE from `off`: data
    /// everywhere before the end, the one hole at it; past it ENXIO.
    pub fn seek(&self, ino: Ino, off: u64, data: bool) -> Result<u64> {
        let size = self.getattr(ino)?.size;
        if off >= size {
            return Err(Error::PastEnd);
        }
        Ok(if data { off } else { size })
    }
}
