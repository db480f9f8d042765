//! O_TMPFILE on a shared namespace: an inode with no name, open on the
//! daemon that made it, which linkat(2) may name.
//!
//! It is born an orphan of this daemon's session, as a file unlinked while
//! open here (`ns.rs`, `drop_link`): its record with no links and its
//! orphan key `O sid ino` commit together, no entry names it, and its last
//! close here removes it (`ClusterFs::release`). If the daemon dies first,
//! its session goes with its lease, and any other daemon reclaims the
//! orphan (`super::holds`, `reclaim_orphans`), as it reclaims every orphan
//! of a dead session. linkat (AT_EMPTY_PATH, or /proc/self/fd) names it
//! once: `link` then deletes the orphan key in the same commit, and the
//! file is an ordinary one. Which inodes are linkable is known only here:
//! no other daemon can reach an unnamed inode (Linux's I_LINKABLE, which a
//! file unlinked while open does not have).

use super::ns::{okey, ClusterFs, NewNode};
use shoal_core::error::Result;
use shoal_core::rules;
use shoal_core::types::{Attr, Ctx, Ino, Kind, Ts};

impl ClusterFs {
    /// An unnamed regular file, open, in directory `parent` (its group,
    /// setgid and default ACL apply, as for a create; `perm` before the
    /// umask in `ctx`), with nlink 0.
    pub fn tmpfile(&self, ctx: &Ctx, parent: Ino, perm: u16) -> Result<Attr> {
        let ino = self.new_ino()?;
        let new = NewNode {
            kind: Kind::File,
            perm,
            rdev: 0,
            target: b"",
        };
        let a = self.run(|tx| {
            let p = tx.dir(parent)?;
            // vfs_tmpfile: write and search on the directory.
            rules::perm::may_add(ctx, &p.attr)?;
            let mut n = Self::new_node(ctx, &p, ino, &new, Ts::now())?;
            n.attr.nlink = 0;
            tx.put_node(&mut n)?;
            // Not on the session's lease: a survivor reclaims it.
            tx.put_plain(okey(self.sid, ino), vec![]);
            Ok(n.attr)
        })?;
        // No name reaches it before this returns: open, orphaned, linkable.
        self.open_new(ino);
        self.note_orphan(ino);
        self.linkable.lock().insert(ino);
        Ok(a)
    }

    /// Whether `ino` is an O_TMPFILE of this daemon, open and never named.
    pub(super) fn is_linkable(&self, ino: Ino) -> bool {
        self.linkable.lock().contains(&ino) && self.is_open(ino)
    }

    /// `ino`, linkable, got its name: an ordinary file from now on (its
    /// last close removes nothing; unlinked while open, it is an orphan
    /// again, and no longer linkable).
    pub(super) fn named(&self, ino: Ino) {
        self.linkable.lock().remove(&ino);
        self.forget_orphan(ino);
    }

    /// A released inode is linkable no more.
    pub(super) fn closed_unnamed(&self, ino: Ino) {
        self.linkable.lock().remove(&ino);
    }
}
