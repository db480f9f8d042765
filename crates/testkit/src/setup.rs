//! Engine setup and seed choice for the engine's tests, one copy.

use shoal_core::{Config, Engine, MemStore, Store};
use std::sync::Arc;

/// The seed of a randomized test: `SHOAL_SEED` when set (to replay a
/// failure: each test prints its seed), else the clock.
pub fn base_seed() -> u64 {
    match std::env::var("SHOAL_SEED") {
        Ok(s) => s.parse().expect("SHOAL_SEED is a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    }
}

/// `n` seeds from `base_seed`, or only `SHOAL_SEED` when it is set.
pub fn seeds(n: u64) -> Vec<u64> {
    let base = base_seed();
    if std::env::var("SHOAL_SEED").is_ok() {
        return vec![base];
    }
    (0..n).map(|i| base.wrapping_add(i * 7919)).collect()
}

/// A new store in memory, made with 4 allocation groups.
pub fn fresh_store() -> Arc<MemStore> {
    let store = MemStore::new();
    Engine::mkfs(&*store, 4).unwrap();
    store
}

/// An engine with `cfg` on `store`.
pub fn open(store: &Arc<MemStore>, cfg: Config) -> Arc<Engine> {
    Engine::open(store.clone() as Arc<dyn Store>, cfg).unwrap()
}

/// A new store and an engine on it with the default configuration.
pub fn fresh() -> (Arc<MemStore>, Arc<Engine>) {
    let store = fresh_store();
    let e = open(&store, Config::default());
    (store, e)
}

/// fsck of what reached the store must find nothing.
pub fn assert_fsck_clean(store: &Arc<MemStore>) {
    let r = shoal_core::fsck::fsck(&**store as &dyn Store, false).unwrap();
    assert!(r.is_clean(), "fsck: {:?}", r.problems);
}
