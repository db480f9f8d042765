//! Where the two modes answer differently, on purpose: the embedded engine
//! and the namespace on a shared store (etcd, TiKV) apply the same rules
//! (the rest of this module), except in the rows of `DIFFERENCES`, each of
//! which docs/rules.md argues ("Where the modes differ"). A unit test reads
//! that table and fails when it and this one part; the limits the code
//! uses (`EMBEDDED`, `SHARED`) are checked against the rows too.

/// What differs between the modes, as code reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes of names and values of one inode's xattrs
    /// (`xattr::check_fits`).
    pub xattr_total: usize,
    /// A directory's link count is 2 + its subdirectories (else always 1).
    pub dir_nlink_counts_subdirs: bool,
    /// atime is kept (relatime, strictatime, noatime, the NOATIME flag);
    /// else never updated by a read.
    pub keeps_atime: bool,
}

/// The embedded engine: 4 x 64 KiB of xattrs (room for an ACL pair and a
/// full-size value besides).
pub const EMBEDDED: Limits = Limits {
    xattr_total: 4 * crate::types::XATTR_SIZE_MAX,
    dir_nlink_counts_subdirs: true,
    keeps_atime: true,
};

/// A namespace on a shared store.
pub const SHARED: Limits = Limits {
    xattr_total: crate::types::XATTR_SIZE_MAX,
    dir_nlink_counts_subdirs: false,
    keeps_atime: false,
};

/// One intended difference: the rule, the embedded answer, the answer on a
/// shared store (etcd), as docs/rules.md's table has them, word for word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Difference {
    pub rule: &'static str,
    pub embedded: &'static str,
    pub shared: &'static str,
}

/// Every intended difference between the modes. docs/rules.md has the same
/// rows (and the argument for each); `the_docs_table_is_this_table` checks.
pub const DIFFERENCES: &[Difference] = &[
    Difference {
        rule: "xattr total per inode",
        embedded: "262144 bytes",
        shared: "65536 bytes",
    },
    Difference {
        rule: "directory link count",
        embedded: "2 + subdirectories",
        shared: "1",
    },
    Difference {
        rule: "directory size",
        embedded: "entries in it",
        shared: "0",
    },
    Difference {
        rule: "atime",
        embedded: "relatime, strictatime, noatime, the NOATIME flag",
        shared: "not kept (noatime; strictatime refused)",
    },
    Difference {
        rule: "directory mtime and ctime",
        embedded: "in the directory's record, every change",
        shared: "a time key written blind, thinned",
    },
    Difference {
        rule: "unlinked while open",
        embedded: "orphan record, reclaimed at mount",
        shared: "a hold on the session lease, removed after a grace",
    },
    Difference {
        rule: "file locks",
        embedded: "the kernel's, on one mount (in /proc/locks)",
        shared: "in etcd, across mounts (not in /proc/locks)",
    },
    Difference {
        rule: "statfs figures",
        embedded: "the store's filesystem; 2^32 inodes free",
        shared: "the object store's room; inodes as etcd's quota fits",
    },
    Difference {
        rule: "holes in a file",
        embedded: "kept: st_blocks counts what was written, SEEK_HOLE finds them",
        shared: "none tracked: st_blocks is the size's, SEEK_HOLE finds the end",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows of docs/rules.md's differences table: the lines between
    /// its heading and the next heading that start with `|`, less the
    /// header and the rule under it; the first three cells of each.
    fn docs_rows() -> Vec<(String, String, String)> {
        let doc = include_str!("../../../../docs/rules.md");
        let start = doc
            .find("## Where the modes differ")
            .expect("docs/rules.md has its differences table");
        let rest = &doc[start..];
        let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
        rest[..end]
            .lines()
            .filter(|l| l.starts_with('|'))
            .skip(2)
            .map(|l| {
                let cells: Vec<String> = l
                    .trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().trim_matches('`').to_string())
                    .collect();
                (cells[0].clone(), cells[1].clone(), cells[2].clone())
            })
            .collect()
    }

    #[test]
    fn the_docs_table_is_this_table() {
        let ours: Vec<(String, String, String)> = DIFFERENCES
            .iter()
            .map(|d| (d.rule.into(), d.embedded.into(), d.shared.into()))
            .collect();
        assert_eq!(docs_rows(), ours);
    }

    fn row(rule: &str) -> &'static Difference {
        DIFFERENCES.iter().find(|d| d.rule == rule).expect(rule)
    }

    #[test]
    fn the_limits_the_code_uses_are_the_tables() {
        let x = row("xattr total per inode");
        assert_eq!(x.embedded, format!("{} bytes", EMBEDDED.xattr_total));
        assert_eq!(x.shared, format!("{} bytes", SHARED.xattr_total));
        let n = row("directory link count");
        assert!(EMBEDDED.dir_nlink_counts_subdirs && n.embedded.contains("subdirectories"));
        assert!(!SHARED.dir_nlink_counts_subdirs && n.shared == "1");
        let a = row("atime");
        assert!(EMBEDDED.keeps_atime && !SHARED.keeps_atime && a.shared.starts_with("not kept"));
    }
}
