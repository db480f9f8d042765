//! shoal-store: persistence behind `shoal_core::Store`. It knows keys and
//! batches, not POSIX: the checks of the namespace (fsck) are the engine's,
//! in `shoal_core::fsck` and `shoal_core::salvage`.
//!
//! - [`fjall_store::FjallStore`]: the embedded default, an LSM (fjall) under
//!   `STORE/`, chosen by measurement (docs/design.md).
//! - [`data_files::DataFiles`]: file data past the inline size, one file
//!   per inode under `STORE/data/`.
//! - [`salvage`]: `fsck --repair` of a fjall store that cannot be read whole
//!   (the store's side: a damaged journal, the new store beside the old).

pub mod data_files;
pub mod fjall_store;
pub mod salvage;

pub use data_files::DataFiles;
pub use fjall_store::FjallStore;
