//! shoal-bench: the seeds' workloads (see `workloads`), runnable in-process on
//! the engine or on any mounted path, with the cures switchable.

pub mod cli;
#[cfg(feature = "floor")]
pub mod floor;
pub mod plot;
pub mod shared;
pub mod tree;
pub mod workloads;
