//! Hard links and sizes: what link(2) may name (`vfs_link`) and the
//! largest file.

use crate::error::{Error, Result};
use crate::types::{Kind, LINK_MAX, MAX_FILE_SIZE};

/// Whether an inode of `kind` with `nlink` names may get another
/// (`vfs_link`, after the new name was found free): a directory EPERM; an
/// inode with no name left ENOENT unless `linkable` (an O_TMPFILE made
/// without O_EXCL, Linux's I_LINKABLE; a file unlinked while open is not);
/// LINK_MAX (65000, ext4's) names already EMLINK.
pub fn may_link(kind: Kind, nlink: u32, linkable: bool) -> Result<()> {
    if kind == Kind::Dir {
        return Err(Error::NotPermitted);
    }
    if nlink == 0 && !linkable {
        return Err(Error::NotFound);
    }
    if nlink >= LINK_MAX {
        return Err(Error::TooManyLinks);
    }
    Ok(())
}

/// A file may be `size` bytes long: past MAX_FILE_SIZE (2^50) EFBIG.
pub fn check_size(size: u64) -> Result<()> {
    if size > MAX_FILE_SIZE {
        return Err(Error::FileTooBig);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_gets_no_hard_link() {
        assert_eq!(may_link(Kind::Dir, 2, false), Err(Error::NotPermitted));
    }

    #[test]
    fn an_inode_with_no_name_left_gets_none_unless_it_is_a_linkable_tmpfile() {
        assert_eq!(may_link(Kind::File, 0, false), Err(Error::NotFound));
        assert_eq!(may_link(Kind::File, 0, true), Ok(()));
    }

    #[test]
    fn link_max_names_are_the_most() {
        assert_eq!(may_link(Kind::File, LINK_MAX - 1, false), Ok(()));
        assert_eq!(
            may_link(Kind::File, LINK_MAX, false),
            Err(Error::TooManyLinks)
        );
        assert_eq!(may_link(Kind::Symlink, 1, false), Ok(()));
    }

    #[test]
    fn a_size_past_2_to_the_50_is_efbig() {
        assert_eq!(check_size(MAX_FILE_SIZE), Ok(()));
        assert_eq!(check_size(MAX_FILE_SIZE + 1), Err(Error::FileTooBig));
    }
}
