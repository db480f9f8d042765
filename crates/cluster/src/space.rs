//! statfs(2) of a shared namespace, from the stores' own figures
//! (docs/design.md, "statfs on an etcd mount" says what each field means):
//!
//! - **blocks, bfree, bavail** (4 KiB blocks): the object store's room
//!   where it tells (`Blobs::space`: a `file:///DIR` store, its
//!   filesystem's size and the room left to unprivileged writers); an
//!   object store that cannot tell (S3) is shown as `UNTOLD` bytes, all
//!   free; without an object store, file data lives in the inode records,
//!   and the metadata store's quota and what is left of it are shown.
//! - **files, ffree**: inodes in use (a count of the inode records) plus
//!   those that fit in what the metadata store's quota leaves, at the
//!   bytes an inode takes there now (its size over the inodes, at least
//!   `MIN_INODE_BYTES`); ffree is the latter.
//!
//! The quota is what the store reports (etcd 3.6's `dbSizeQuota`), else
//! etcd's default, `ETCD_DEFAULT_QUOTA` (etcd 3.4 and 3.5 do not report
//! theirs). The figures are read at most once a second (`FRESH`): `df` on
//! a busy mount costs two requests to etcd a second at most.

use super::ns::ClusterFs;
use shoal_core::error::Result;
use shoal_core::types::{StatFs, NAME_MAX};
use std::time::{Duration, Instant};

/// Block size reported.
const BSIZE: u64 = 4096;
/// etcd's `--quota-backend-bytes` default, assumed when the store does not
/// report its quota.
pub const ETCD_DEFAULT_QUOTA: u64 = 2 << 30;
/// The room shown for an object store that does not tell (S3): 1 PiB.
pub const UNTOLD: u64 = 1 << 50;
/// The fewest bytes of the metadata store counted per inode.
const MIN_INODE_BYTES: u64 = 512;
/// How long figures read are shown again.
const FRESH: Duration = Duration::from_secs(1);

impl ClusterFs {
    /// The filesystem's figures (statfs(2)).
    pub fn statfs(&self) -> Result<StatFs> {
        if let Some((at, s)) = *self.statfs_seen.lock() {
            if at.elapsed() < FRESH {
                return Ok(s);
            }
        }
        let space = self.patient(|| self.store.space())?;
        let inodes = self.patient(|| self.store.count(b"I", b"J"))?;
        let (used, quota) = match space {
            Some(s) => (s.used, s.quota.unwrap_or(ETCD_DEFAULT_QUOTA)),
            None => (0, ETCD_DEFAULT_QUOTA),
        };
        let meta_free = quota.saturating_sub(used);
        let per_inode = used
            .checked_div(inodes)
            .unwrap_or(MIN_INODE_BYTES)
            .max(MIN_INODE_BYTES);
        let (total, avail) = match &self.blobs {
            Some(b) => b.space().unwrap_or((UNTOLD, UNTOLD)),
            None => (quota, meta_free),
        };
        let s = StatFs {
            blocks: total / BSIZE,
            bfree: avail / BSIZE,
            bavail: avail / BSIZE,
            files: inodes + meta_free / per_inode,
            ffree: meta_free / per_inode,
            bsize: BSIZE as u32,
            namelen: NAME_MAX as u32,
        };
        *self.statfs_seen.lock() = Some((Instant::now(), s));
        Ok(s)
    }
}
