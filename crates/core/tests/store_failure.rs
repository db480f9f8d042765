//! A store that fails on its own (an LSM's background flush, issue 43) is
//! a failure of the filesystem: the committer finds it within a tick and
//! shuts the engine down. Changes then get EIO (`errors=shutdown`, the
//! default) or EROFS (`errors=ro`), no fsync reports success, reads go on,
//! and the reason is kept for `shoal stats`.

use shoal_core::store::{BatchItem, StoreCounters};
use shoal_core::{Config, Ctx, Engine, Error, MemStore, OnError, Result, Store, ROOT_INO};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `MemStore` with a failure that can be set from outside, as fjall's
/// poisoned database after a worker's error.
struct Failing {
    inner: Arc<MemStore>,
    failed: Mutex<Option<String>>,
}

impl Store for Failing {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan(&self, lo: &[u8], hi: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.inner.scan(lo, hi, limit)
    }
    fn write(&self, batch: &[BatchItem], sync: bool) -> Result<()> {
        if let Some(why) = self.failure() {
            return Err(Error::Io(why));
        }
        self.inner.write(batch, sync)
    }
    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }
    fn data(&self) -> Arc<dyn shoal_core::data::DataStore> {
        self.inner.data()
    }
    fn failure(&self) -> Option<String> {
        self.failed.lock().unwrap().clone()
    }
    fn counters(&self) -> StoreCounters {
        self.inner.counters()
    }
}

fn run(on_error: OnError, want: fn(&Error) -> bool) {
    let store = Arc::new(Failing {
        inner: shoal_testkit::setup::fresh_store(),
        failed: Mutex::new(None),
    });
    let ctx = Ctx::root();
    let cfg = Config {
        on_error,
        ..Config::default()
    };
    let e = Engine::open(store.clone() as Arc<dyn Store>, cfg).unwrap();
    let f = e.create(&ctx, ROOT_INO, b"kept", 0o644).unwrap();
    e.write(f.ino, 0, b"synced").unwrap();
    e.fsync(f.ino).unwrap();
    *store.failed.lock().unwrap() = Some("a flush failed in the test".into());
    // Found without any change to commit: within a few ticks.
    let t0 = Instant::now();
    while !e.committer.is_poisoned() {
        assert!(t0.elapsed() < Duration::from_secs(5), "failure not found");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        e.committer.failure().as_deref(),
        Some("store I/O error: a flush failed in the test")
    );
    let r = e.create(&ctx, ROOT_INO, b"after", 0o644);
    assert!(r.as_ref().is_err_and(want), "a change after: {:?}", r.err());
    // No fsync reports success, not even of a file durable before.
    assert!(matches!(e.fsync(f.ino), Err(Error::Io(_))));
    assert!(matches!(e.sync(), Err(Error::Io(_))));
    // Reads go on.
    assert_eq!(e.read(f.ino, 0, 64).unwrap(), b"synced");
    assert!(e.lookup(&ctx, ROOT_INO, b"kept").is_ok());
    assert!(e.shutdown().is_err());
}

#[test]
fn store_failure_shuts_down_with_eio() {
    run(OnError::Shutdown, |e| matches!(e, Error::Io(_)));
}

#[test]
fn store_failure_with_errors_ro_gives_erofs() {
    run(OnError::ReadOnly, |e| matches!(e, Error::ReadOnly));
}
