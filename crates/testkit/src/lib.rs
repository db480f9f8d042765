//! shoal-testkit: what the tests of several crates share, kept out of the
//! shipped `shoal` binary.
//!
//! - [`model`]: a plain in-memory filesystem, the reference the engine
//!   (`EngineTarget`) and a mounted path (`PathTarget`) are compared with,
//!   and the generator of random operation sequences.
//! - [`conformance`]: the one suite every shared store (`shoal_cluster`)
//!   must pass: the simulator, and etcd.
//! - [`etcd`]: a real three-member etcd cluster on loopback, started and
//!   stopped by the tests, with members to kill and freeze.
//! - [`objects`]: the check every object store for file data passes, and
//!   a real SeaweedFS S3 server started by the tests.
//! - [`crash`]: whether a tree recovered after a crash can be a state of
//!   the history (metadata exactly, file data as the data seam promises).
//! - [`cluster_ns`]: several daemons on one shared namespace racing on the
//!   same names, for the simulator and for etcd.
//! - [`setup`]: a fresh store and engine, the seeds of randomized tests,
//!   fsck of the result.

pub mod cluster_ns;
pub mod conformance;
pub mod crash;
pub mod etcd;
pub mod model;
pub mod objects;
pub mod proxy;
pub mod setup;
