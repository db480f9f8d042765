//! rename(2) and renameat2(2): which flags go together, and what may
//! replace what (`do_renameat2`, `vfs_rename`). Whether a directory would
//! move under itself is each mechanism's walk of the tree (under the
//! rename mutex; in the transaction), not a rule over attributes.

use crate::engine::{RENAME_EXCHANGE, RENAME_NOREPLACE, RENAME_WHITEOUT};
use crate::error::{Error, Result};
use crate::types::Kind;

/// renameat2's flags: unknown ones, and EXCHANGE with NOREPLACE or
/// WHITEOUT, are EINVAL.
pub fn check_flags(flags: u32) -> Result<()> {
    if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT) != 0
        || flags & RENAME_EXCHANGE != 0 && flags & (RENAME_NOREPLACE | RENAME_WHITEOUT) != 0
    {
        return Err(Error::Invalid);
    }
    Ok(())
}

/// The new name's first test (`do_renameat2`, before the loops and before
/// comparing inodes): with NOREPLACE a target is EEXIST, even a name of the
/// source's own inode; with EXCHANGE its absence is ENOENT.
pub fn check_target(flags: u32, exists: bool) -> Result<()> {
    if exists && flags & RENAME_NOREPLACE != 0 {
        return Err(Error::Exists);
    }
    if !exists && flags & RENAME_EXCHANGE != 0 {
        return Err(Error::NotFound);
    }
    Ok(())
}

/// Whether a source of kind `src` may replace a target of kind `dst`
/// (`may_delete`'s test, after the checks that a directory moves neither
/// under itself nor onto an ancestor, and after a target that is the
/// source's own inode made the rename a no-op): without EXCHANGE, a
/// directory onto a non-directory ENOTDIR and a non-directory onto a
/// directory EISDIR.
pub fn check_kinds(flags: u32, src: Kind, dst: Kind) -> Result<()> {
    if flags & RENAME_EXCHANGE != 0 {
        return Ok(());
    }
    match (src == Kind::Dir, dst == Kind::Dir) {
        (true, false) => Err(Error::NotDir),
        (false, true) => Err(Error::IsDir),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_flags_and_exchange_with_noreplace_or_whiteout_are_einval() {
        assert_eq!(check_flags(8), Err(Error::Invalid));
        assert_eq!(
            check_flags(RENAME_EXCHANGE | RENAME_NOREPLACE),
            Err(Error::Invalid)
        );
        assert_eq!(
            check_flags(RENAME_EXCHANGE | RENAME_WHITEOUT),
            Err(Error::Invalid)
        );
        assert_eq!(check_flags(RENAME_NOREPLACE | RENAME_WHITEOUT), Ok(()));
        assert_eq!(check_flags(0), Ok(()));
    }

    #[test]
    fn noreplace_onto_any_name_is_eexist() {
        assert_eq!(check_target(RENAME_NOREPLACE, true), Err(Error::Exists));
        assert_eq!(check_target(RENAME_NOREPLACE, false), Ok(()));
        assert_eq!(check_target(0, true), Ok(()));
    }

    #[test]
    fn exchange_needs_a_target_of_any_kind() {
        assert_eq!(check_target(RENAME_EXCHANGE, false), Err(Error::NotFound));
        assert_eq!(check_target(RENAME_EXCHANGE, true), Ok(()));
        assert_eq!(check_kinds(RENAME_EXCHANGE, Kind::Dir, Kind::File), Ok(()));
    }

    #[test]
    fn a_directory_replaces_only_a_directory_and_a_file_only_a_non_directory() {
        assert_eq!(check_kinds(0, Kind::Dir, Kind::File), Err(Error::NotDir));
        assert_eq!(check_kinds(0, Kind::File, Kind::Dir), Err(Error::IsDir));
        assert_eq!(check_kinds(0, Kind::Dir, Kind::Dir), Ok(()));
        assert_eq!(check_kinds(0, Kind::Symlink, Kind::File), Ok(()));
    }
}
