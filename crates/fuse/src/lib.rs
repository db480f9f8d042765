//! The FUSE frontend on `fuser`, for both modes of shoal: one adapter core
//! (`adapter`: kernel request -> `shoal_core::Namespace` call -> reply;
//! errors become errno in exactly one function, [`errno`]) and each mode's
//! own part beside it, as a [`Mode`]: the embedded mount ([`embedded`],
//! [`ShoalFs`]) and the mount of a namespace on etcd ([`shared`],
//! [`cluster::ClusterFuse`]).

pub mod adapter;
pub mod cluster;
pub mod embedded;
mod squash;

pub use adapter::reply::{errno, file_attr, file_attr_on_disk};
pub use adapter::requests::{Requests, REQUEST_NAMES};
pub use adapter::{kernel_subtype, Adapter, Caller, CoreOptions, Mode};
pub use embedded::{FuseOptions, ShoalFs, CACHE_TTL};
pub use squash::{Squash, NOBODY};

pub use fuser;
