//! Who a request acts as: NFS's export options `root_squash` and
//! `all_squash` as mount options (`-o root_squash`, `-o all_squash=UID:GID`).
//! uids and gids are numbers, compared as numbers on every machine that
//! mounts a namespace; squashing is how a mount says that its root (or
//! every user) is not to be trusted with them.

/// nobody and nogroup on Debian, and NFS's anonuid/anongid.
pub const NOBODY: u32 = 65534;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Squash {
    #[default]
    None,
    /// uid 0 acts as NOBODY:NOBODY (its gid too, whatever it was).
    Root,
    /// Every caller acts as this uid and gid, without supplementary groups.
    All(u32, u32),
}

impl Squash {
    /// `root_squash`, or `all_squash=UID:GID`'s value.
    pub fn parse_all(v: &str) -> Result<Squash, String> {
        let bad = || format!("all_squash={v}: use all_squash=UID:GID (numbers)");
        let (u, g) = v.split_once(':').ok_or_else(bad)?;
        Ok(Squash::All(
            u.parse().map_err(|_| bad())?,
            g.parse().map_err(|_| bad())?,
        ))
    }

    /// The uid and gid a request from `uid`:`gid` acts as, and whether
    /// it was squashed (then its supplementary groups are dropped and the
    /// daemon checks its permissions as that identity).
    pub fn map(self, uid: u32, gid: u32) -> (u32, u32, bool) {
        match self {
            Squash::Root if uid == 0 => (NOBODY, NOBODY, true),
            Squash::All(u, g) => (u, g, true),
            _ => (uid, gid, false),
        }
    }

    /// As shown in the mount's options.
    pub fn option(self) -> Option<String> {
        match self {
            Squash::None => None,
            Squash::Root => Some("root_squash".into()),
            Squash::All(u, g) => Some(format!("all_squash={u}:{g}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_squash_maps_root_only_and_all_squash_everyone() {
        assert_eq!(Squash::Root.map(0, 0), (NOBODY, NOBODY, true));
        assert_eq!(Squash::Root.map(1000, 100), (1000, 100, false));
        assert_eq!(Squash::None.map(0, 0), (0, 0, false));
        let a = Squash::parse_all("1001:1002").unwrap();
        assert_eq!(a.map(0, 0), (1001, 1002, true));
        assert_eq!(a.map(5, 6), (1001, 1002, true));
        assert!(Squash::parse_all("x:1").is_err());
        assert!(Squash::parse_all("1").is_err());
    }
}
