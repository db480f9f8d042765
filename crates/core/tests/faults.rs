//! Tests that arm the engine's named fault points (crates/core/src/fault.rs).
//! The points exist only with the `faults` feature, which the shipped binary
//! does not have: `cargo test --release -p shoal-core --features faults --test
//! faults` (a suite of scripts/test.sh). The points are process-wide, so
//! these tests live in a binary of their own and each arms only what it then
//! triggers itself.
#![cfg(feature = "faults")]

use shoal_core::{fault, Config, Ctx, Engine, Error, Store, ROOT_INO};
use std::sync::Arc;

/// A commit that fails at `commit.before_write` with a full disk: fsync of
/// the change reports ENOSPC (not success, not EIO), every later change is
/// refused with ENOSPC, and after a reopen everything synced before the
/// failure is there and nothing of the failed epoch is.
#[test]
fn commit_failing_with_enospc_turns_read_only() {
    let store = shoal_testkit::setup::fresh_store();
    let ctx = Ctx::root();
    let e = Engine::open(store.clone() as Arc<dyn Store>, Config::default()).unwrap();
    let f = e.create(&ctx, ROOT_INO, b"kept", 0o644).unwrap();
    e.write(f.ino, 0, b"synced").unwrap();
    e.fsync(f.ino).unwrap();
    fault::arm("commit.before_write", Error::NoSpace);
    let g = e.create(&ctx, ROOT_INO, b"lost", 0o644).unwrap();
    assert!(
        matches!(e.fsync(g.ino), Err(Error::NoSpace)),
        "fsync after the failed commit: {:?}",
        e.fsync(g.ino)
    );
    assert!(
        matches!(
            e.create(&ctx, ROOT_INO, b"after", 0o644),
            Err(Error::NoSpace)
        ),
        "read-only with ENOSPC after the failure"
    );
    drop(e);
    let e = Engine::open(store.clone() as Arc<dyn Store>, Config::default()).unwrap();
    let f2 = e.lookup(&ctx, ROOT_INO, b"kept").unwrap();
    assert_eq!(e.read(f2.ino, 0, 64).unwrap(), b"synced");
    assert!(matches!(
        e.lookup(&ctx, ROOT_INO, b"lost"),
        Err(Error::NotFound)
    ));
    assert!(matches!(
        e.lookup(&ctx, ROOT_INO, b"after"),
        Err(Error::NotFound)
    ));
}
