//! Who a request acts as, for both modes: the uid and gid after
//! `root_squash`/`all_squash` (`crate::Squash`), whether the daemon checks
//! its permissions, and its supplementary groups when a rule asks for them.

use crate::Squash;
use fuser::Request;
use shoal_core::Ctx;

/// How a mount turns a request into the caller's [`Ctx`].
#[derive(Clone, Debug)]
pub struct Caller {
    pub squash: Squash,
    /// `-o daemon_permissions`: the daemon checks every request (the mount
    /// is then without the kernel's `default_permissions`).
    pub daemon_permissions: bool,
    /// Entry replies take the kernel's reference inside the operation
    /// (the embedded engine counts them, `crate::embedded`).
    pub kernel_ref: bool,
}

impl Caller {
    /// The uid and gid `req` acts as, and whether squashed (no
    /// supplementary groups then).
    pub fn who(&self, req: &Request) -> (u32, u32, bool) {
        self.squash.map(req.uid(), req.gid())
    }

    /// Who is asking, and whether the daemon checks: with
    /// `daemon_permissions`, and for a request that acts as another (the
    /// kernel checked the caller's own uid, or nothing; the embedded mount
    /// turns `daemon_permissions` on with any squash). The supplementary
    /// groups only when they are asked for (a /proc read): checking and
    /// not squashed.
    pub fn ctx(&self, req: &Request) -> Ctx {
        let (uid, gid, squashed) = self.who(req);
        let check = self.daemon_permissions || squashed;
        Ctx {
            uid,
            gid,
            groups: if check && !squashed {
                caller_groups(req)
            } else {
                vec![]
            },
            check_perms: check,
            umask: 0,
            kernel_ref: self.kernel_ref,
        }
    }

    /// `ctx` with the caller's supplementary groups even when the kernel
    /// checks: a chown without a mode and an access ACL clear setgid unless
    /// the caller is in the file's group (`rules::privs`, `shoal_core::acl`).
    pub fn ctx_with_groups(&self, req: &Request) -> Ctx {
        let mut c = self.ctx(req);
        if c.groups.is_empty() && !self.who(req).2 {
            c.groups = caller_groups(req);
        }
        c
    }

    /// `ctx` for a create: the namespace applies the umask unless the
    /// directory's default ACL replaces it (FUSE_DONT_MASK).
    pub fn ctx_umask(&self, req: &Request, umask: u32) -> Ctx {
        Ctx {
            umask,
            ..self.ctx(req)
        }
    }

    /// The supplementary groups of who `req` acts as.
    pub fn groups_as(&self, req: &Request) -> Vec<u32> {
        if self.who(req).2 {
            vec![]
        } else {
            groups_of(req.pid())
        }
    }
}

/// The supplementary groups of a request's caller, read only when they can
/// matter: never for root (who is in every group for these rules).
fn caller_groups(req: &Request) -> Vec<u32> {
    if req.uid() == 0 {
        vec![]
    } else {
        groups_of(req.pid())
    }
}

/// The caller's supplementary groups, from /proc (FUSE requests carry only
/// uid, gid and pid). Read only for non-root callers when the daemon checks.
fn groups_of(pid: u32) -> Vec<u32> {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return vec![];
    };
    s.lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}
