//! Object stores for the file data of a shared namespace
//! (`shoal_core::shared::blob::Blobs`), through the `object_store` crate:
//! S3 and its kin (SeaweedFS, MinIO, Ceph RGW, AWS), and a directory (a
//! file system every daemon mounts, and the tests).
//!
//! The URL a namespace is made with (`shoal mkfs etcd://... --data URL`):
//! - `s3://BUCKET[/PREFIX][?endpoint=http://H:P][&region=R]`: credentials
//!   from `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` when set, else
//!   unsigned requests (a server that allows anonymous access, as SeaweedFS
//!   does by default); path-style requests when an endpoint is given;
//! - `file:///DIR`: objects as files under DIR.
//!
//! The calls are synchronous (the namespace's operations run on FUSE
//! worker threads): each runs on a runtime of this crate's own.

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use shoal_core::shared::blob::Blobs;
use shoal_core::{Error, Result};
use std::sync::Arc;

/// An object store reached through `object_store`.
pub struct ObjectBlobs {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    rt: tokio::runtime::Runtime,
    url: String,
}

impl ObjectBlobs {
    /// Open the object store `url` names (see the crate's comment).
    pub fn open(url: &str) -> Result<ObjectBlobs> {
        let bad = |m: &str| Error::Io(format!("object store URL {url:?}: {m}"));
        let (store, prefix): (Arc<dyn ObjectStore>, String) = if let Some(rest) =
            url.strip_prefix("s3://")
        {
            let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
            let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
            if bucket.is_empty() {
                return Err(bad(
                    "no bucket (s3://BUCKET[/PREFIX][?endpoint=http://H:P])",
                ));
            }
            let mut b = object_store::aws::AmazonS3Builder::new()
                .with_bucket_name(bucket)
                .with_region("us-east-1");
            for kv in query.split('&').filter(|s| !s.is_empty()) {
                match kv.split_once('=') {
                    Some(("endpoint", e)) => {
                        let host = e
                            .strip_prefix("http://")
                            .or_else(|| e.strip_prefix("https://"));
                        if host.is_none_or(|h| h.is_empty()) {
                            return Err(bad(
                                "endpoint= takes http://HOST:PORT or https://HOST:PORT",
                            ));
                        }
                        b = b
                            .with_endpoint(e)
                            .with_allow_http(e.starts_with("http://"))
                            .with_virtual_hosted_style_request(false)
                    }
                    Some(("region", r)) => b = b.with_region(r),
                    _ => return Err(bad(&format!("unknown option {kv:?} (endpoint=, region=)"))),
                }
            }
            match (
                std::env::var("AWS_ACCESS_KEY_ID"),
                std::env::var("AWS_SECRET_ACCESS_KEY"),
            ) {
                (Ok(k), Ok(s)) => b = b.with_access_key_id(k).with_secret_access_key(s),
                _ => b = b.with_skip_signature(true),
            }
            let s = b.build().map_err(|e| bad(&e.to_string()))?;
            (Arc::new(s), prefix.trim_matches('/').to_string())
        } else if let Some(dir) = url.strip_prefix("file://") {
            if !dir.starts_with('/') {
                return Err(bad("a file URL takes an absolute path (file:///DIR)"));
            }
            std::fs::create_dir_all(dir).map_err(|e| bad(&e.to_string()))?;
            // Synced: an object must be on disk, under its name, before the
            // commit that names it (docs/design.md, "Crash argument"); the
            // crate's default writes and renames without a sync.
            let s = object_store::local::LocalFileSystem::new_with_prefix(dir)
                .map_err(|e| bad(&e.to_string()))?
                .with_fsync(true);
            (Arc::new(s), String::new())
        } else {
            return Err(bad(
                "expected s3://BUCKET[/PREFIX][?endpoint=...] or file:///DIR",
            ));
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("shoal-objects")
            .enable_all()
            .build()
            .map_err(|e| Error::Io(format!("object store runtime: {e}")))?;
        Ok(ObjectBlobs {
            store,
            prefix,
            rt,
            url: url.to_string(),
        })
    }

    fn path(&self, name: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(name)
        } else {
            Path::from(format!("{}/{name}", self.prefix))
        }
    }

    /// Where this filesystem's objects are listed from: the URL's prefix,
    /// or the bucket's root.
    fn root(&self) -> Option<Path> {
        (!self.prefix.is_empty()).then(|| Path::from(self.prefix.as_str()))
    }

    /// Check that the store answers (a list of at most one object): mkfs
    /// and mount fail early, with the URL, when it does not.
    pub fn probe(&self) -> Result<()> {
        use futures::StreamExt;
        let mut s = self.store.list(self.root().as_ref());
        match self.rt.block_on(s.next()) {
            None | Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(Error::Io(format!(
                "object store {}: {e} (does the bucket exist? SeaweedFS: curl -X PUT http://H:P/BUCKET)",
                self.url
            ))),
        }
    }
}

fn err(e: object_store::Error) -> Error {
    match e {
        object_store::Error::NotFound { .. } => Error::NotFound,
        e => Error::Io(format!("object store: {e}")),
    }
}

impl Blobs for ObjectBlobs {
    fn put(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let p = self.path(name);
        let payload = PutPayload::from(bytes::Bytes::copy_from_slice(bytes));
        self.rt
            .block_on(self.store.put(&p, payload))
            .map(|_| ())
            .map_err(err)
    }
    fn get(&self, name: &str, off: u64, len: u64) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(vec![]);
        }
        let p = self.path(name);
        self.rt
            .block_on(self.store.get_range(&p, off..off + len))
            .map(|b| b.to_vec())
            .map_err(err)
    }
    fn delete(&self, name: &str) -> Result<()> {
        match self.rt.block_on(self.store.delete(&self.path(name))) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(err(e)),
        }
    }
    fn list(&self) -> Result<Vec<(String, u64)>> {
        use futures::TryStreamExt;
        let metas: Vec<object_store::ObjectMeta> = self
            .rt
            .block_on(self.store.list(self.root().as_ref()).try_collect())
            .map_err(err)?;
        let skip = if self.prefix.is_empty() {
            0
        } else {
            self.prefix.len() + 1
        };
        Ok(metas
            .into_iter()
            .map(|m| (m.location.as_ref()[skip..].to_string(), m.size))
            .collect())
    }
}
