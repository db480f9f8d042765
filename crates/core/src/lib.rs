//! shoal-core: the metadata engine.
//!
//! Owns the namespace (inodes, indexed directories, per-name locks,
//! allocation groups), the one commit path (group commit over a [`Store`]),
//! and batched reclaim. It has no FUSE dependency and no storage-engine
//! dependency: the embedded store lives in `shoal-store`, the mount in
//! `shoal-fuse`. CI checks this with `cargo tree -p shoal-core`.
//!
//! Locking: docs/locking.md. Commit protocol and key schema: docs/design.md.

pub mod acl;
pub mod cache;
pub mod commit;
pub mod data;
pub mod engine;
pub mod error;
pub mod fault;
pub mod fsck;
#[cfg(all(test, loom))]
mod loom_models;
pub mod rules;
pub mod salvage;
pub mod schema;
pub mod stats;
pub mod store;
pub mod surface;
pub mod sync;
pub mod types;

pub use engine::{
    Engine, SetAttr, TimeSet, RENAME_EXCHANGE, RENAME_NOREPLACE, XATTR_CREATE, XATTR_REPLACE,
};
pub use error::{Error, Result};
pub use store::{MemStore, NullStore, Store};
pub use surface::Namespace;
pub use types::*;
