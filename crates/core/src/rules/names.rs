//! Name validity, per operation: what Linux answers for a last path
//! component. Through a mount the kernel filters most of these before a
//! request arrives (it never sends `.`, `..` or an empty name); a library
//! caller gets the same answers from both mechanisms.

use crate::error::{Error, Result};
use crate::types::NAME_MAX;

/// What a name is checked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameOp {
    /// A new name: create, mknod, mkdir, symlink, link's new name.
    Create,
    Unlink,
    Rmdir,
    /// Either name of a rename.
    Rename,
    /// A name looked up (`.` and `..` are the caller's to resolve).
    Lookup,
}

/// `.` or `..`.
pub fn is_dot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

/// Whether `name` may be used for `op`, with Linux's errno otherwise:
/// - empty: ENOENT (an empty path; `open("")`, `mkdir("")`);
/// - `.` or `..`: create EEXIST (`mkdir(".")`), unlink EISDIR, rmdir `.`
///   EINVAL and `..` ENOTEMPTY, rename EINVAL (Linux says EBUSY, which
///   POSIX also allows; shoal's errors have no EBUSY);
/// - longer than NAME_MAX (255): ENAMETOOLONG;
/// - a `/` or a NUL inside: EINVAL (no path component can hold one).
pub fn check(op: NameOp, name: &[u8]) -> Result<()> {
    if name.is_empty() {
        return Err(Error::NotFound);
    }
    if is_dot(name) {
        return match op {
            NameOp::Create => Err(Error::Exists),
            NameOp::Unlink => Err(Error::IsDir),
            NameOp::Rmdir if name == b"." => Err(Error::Invalid),
            NameOp::Rmdir => Err(Error::NotEmpty),
            NameOp::Rename => Err(Error::Invalid),
            NameOp::Lookup => Ok(()),
        };
    }
    if name.len() > NAME_MAX {
        return Err(Error::NameTooLong);
    }
    if name.contains(&b'/') || name.contains(&0) {
        return Err(Error::Invalid);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use NameOp::*;

    #[test]
    fn an_empty_name_is_enoent_for_every_operation() {
        for op in [Create, Unlink, Rmdir, Rename, Lookup] {
            assert_eq!(check(op, b""), Err(Error::NotFound), "{op:?}");
        }
    }

    #[test]
    fn creating_dot_or_dotdot_is_eexist() {
        assert_eq!(check(Create, b"."), Err(Error::Exists));
        assert_eq!(check(Create, b".."), Err(Error::Exists));
    }

    #[test]
    fn unlinking_dot_or_dotdot_is_eisdir() {
        assert_eq!(check(Unlink, b"."), Err(Error::IsDir));
        assert_eq!(check(Unlink, b".."), Err(Error::IsDir));
    }

    #[test]
    fn rmdir_of_dot_is_einval_and_of_dotdot_enotempty() {
        assert_eq!(check(Rmdir, b"."), Err(Error::Invalid));
        assert_eq!(check(Rmdir, b".."), Err(Error::NotEmpty));
    }

    #[test]
    fn renaming_from_or_to_dot_is_einval() {
        assert_eq!(check(Rename, b"."), Err(Error::Invalid));
        assert_eq!(check(Rename, b".."), Err(Error::Invalid));
    }

    #[test]
    fn looking_up_dot_is_left_to_the_caller() {
        assert_eq!(check(Lookup, b"."), Ok(()));
        assert_eq!(check(Lookup, b".."), Ok(()));
    }

    #[test]
    fn a_name_past_name_max_is_enametoolong_and_at_it_fine() {
        for op in [Create, Unlink, Rmdir, Rename, Lookup] {
            assert_eq!(check(op, &[b'a'; 256]), Err(Error::NameTooLong));
            assert_eq!(check(op, &[b'a'; 255]), Ok(()));
        }
    }

    #[test]
    fn a_slash_or_nul_inside_a_name_is_einval() {
        for op in [Create, Unlink, Rmdir, Rename, Lookup] {
            assert_eq!(check(op, b"a/b"), Err(Error::Invalid));
            assert_eq!(check(op, b"a\0b"), Err(Error::Invalid));
        }
    }

    #[test]
    fn names_starting_with_dots_are_ordinary() {
        assert_eq!(check(Create, b"..."), Ok(()));
        assert_eq!(check(Create, b".hidden"), Ok(()));
    }
}
