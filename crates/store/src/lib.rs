//! shoal-store: persistence behind `shoal_core::Store`.
//!
//! - [`fjall_store::FjallStore`]: the embedded default, an LSM (fjall) under
//!   `STORE/`, chosen by measurement (docs/design.md).
//! - [`fsck`]: checks every invariant of the key schema and repairs what is safe.
//! - [`salvage`]: `fsck --repair` of a store that cannot be read whole.

pub mod fjall_store;
pub mod fsck;
pub mod salvage;

pub use fjall_store::FjallStore;
