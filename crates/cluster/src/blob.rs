//! The seam for the file data of a shared namespace: an object store with
//! immutable objects (S3 and its kin; `shoal_objects::S3Blobs` through the
//! `object_store` crate, a directory for tests and shared file systems).
//!
//! A shared namespace never rewrites an object: a changed chunk of a file
//! is a new object with a new name, and the inode record's chunk table
//! points at it in the same commit that changes the file's size and times
//! (`super::filedata`). So what another daemon reads is whatever the inode
//! record it read names, and an object store that is only eventually
//! consistent for overwrites (S3 before 2020) still answers right.
//!
//! The contract:
//! - `put` stores the whole object, durably, before it returns;
//! - `get` of a range past the object's end returns what there is (maybe
//!   nothing); of an object that does not exist, `Error::NotFound`;
//! - `delete` of an object that does not exist is not an error;
//! - `list` gives every object's name and size (for the collection of
//!   objects no inode names, and for fsck).

use shoal_core::error::{Error, Result};
use shoal_core::sync::PlainMutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a shared namespace keeps file data past the inline size.
pub trait Blobs: Send + Sync + 'static {
    fn put(&self, name: &str, bytes: &[u8]) -> Result<()>;
    /// Bytes `off..off+len` of the object (fewer at its end).
    fn get(&self, name: &str, off: u64, len: u64) -> Result<Vec<u8>>;
    fn delete(&self, name: &str) -> Result<()>;
    /// Every object: (name, size).
    fn list(&self) -> Result<Vec<(String, u64)>>;
    /// The room for objects, (total, available) bytes, where the store can
    /// tell cheaply (a directory: its filesystem's); None where it cannot
    /// (S3 has no such call).
    fn space(&self) -> Option<(u64, u64)> {
        None
    }
}

/// Objects in memory, with counts of the calls (for the tests).
#[derive(Default)]
pub struct MemBlobs {
    objects: PlainMutex<BTreeMap<String, Vec<u8>>>,
    pub puts: AtomicU64,
    pub gets: AtomicU64,
    pub deletes: AtomicU64,
}

impl MemBlobs {
    pub fn len(&self) -> usize {
        self.objects.lock().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Blobs for MemBlobs {
    fn put(&self, name: &str, bytes: &[u8]) -> Result<()> {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.objects.lock().insert(name.to_string(), bytes.to_vec());
        Ok(())
    }
    fn get(&self, name: &str, off: u64, len: u64) -> Result<Vec<u8>> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        let g = self.objects.lock();
        let v = g.get(name).ok_or(Error::NotFound)?;
        let s = (off as usize).min(v.len());
        let e = (off.saturating_add(len) as usize).min(v.len());
        Ok(v[s..e].to_vec())
    }
    fn delete(&self, name: &str) -> Result<()> {
        self.deletes.fetch_add(1, Ordering::Relaxed);
        self.objects.lock().remove(name);
        Ok(())
    }
    fn list(&self) -> Result<Vec<(String, u64)>> {
        Ok(self
            .objects
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.len() as u64))
            .collect())
    }
}
