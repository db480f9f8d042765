//! The POSIX rules, written once: pure functions over the caller (`Ctx`:
//! uid, gid, groups, whether the daemon checks permissions) and the
//! attributes involved, each giving Linux's answer (ext4 where Linux leaves
//! it to the filesystem).
//!
//! Both mechanisms call them inside their own critical sections: the
//! embedded engine (`crate::engine`) under its name locks and inode state
//! locks, the namespace on a shared store (`crate::shared`) inside the
//! transaction body, on the records the transaction read (so a rule's
//! inputs are conditions of the commit). Nothing here takes a lock, reads a
//! store or keeps state. docs/rules.md says what each file decides, where
//! each mechanism calls it, and where the two modes differ (`modes`).
//!
//! Permission rules answer `Ok` when `ctx.check_perms` is off: the kernel
//! checked before the request arrived (`default_permissions`), and the
//! caller's supplementary groups may not even be known.

pub mod flags;
pub mod link;
pub mod modes;
pub mod names;
pub mod new_inode;
pub mod perm;
pub mod privs;
pub mod rename;
pub mod xattr;
