//! Domain errors. The engine never speaks errno; the FUSE adapter maps these
//! in exactly one function.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    NotFound,
    Exists,
    NotEmpty,
    NotDir,
    IsDir,
    NameTooLong,
    NoSpace,
    Invalid,
    PermissionDenied,
    NotPermitted,
    TooManyLinks,
    NoAttr,
    Range,
    FileTooBig,
    ReadOnly,
    NotSupported,
    /// SEEK_DATA or SEEK_HOLE from at or past the end (ENXIO).
    PastEnd,
    /// The store holds something that does not decode or fails its checksum.
    Corrupted(String),
    /// The store failed (a write or sync error). The engine turns read-only.
    Io(String),
    /// Inside the shared namespace only: run the operation again
    /// ([`Again`]). Its transaction loop (`shoal_cluster`, txn.rs) consumes every one;
    /// none reaches a caller (an adapter that met one would answer EIO).
    /// A variant of its own, not a message inside `Io`, so that no
    /// rewording (`about`) can turn a retry into an error users see.
    #[doc(hidden)]
    Again(Again),
}

/// Why the shared namespace runs an operation again (`Error::Again`).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Again {
    /// A key changed between two reads of one transaction.
    Conflict,
    /// A create whose directory this daemon took meanwhile: from memory.
    Leased,
    /// A create met another daemon's lease on its directory: take the
    /// lease of its name's range.
    LeasedElsewhere,
}

pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Corrupted(m) => write!(f, "store is corrupted: {m} (run `shoal fsck`)"),
            Error::Io(m) => write!(f, "store I/O error: {m}"),
            other => write!(f, "{other:?}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// A store failure said with what was being read (`inode 4711`): the
    /// daemon's log line then names what a user lost, not only that
    /// something was.
    pub fn about(self, what: impl fmt::Display) -> Error {
        match self {
            Error::Corrupted(m) => Error::Corrupted(format!("{what}: {m}")),
            Error::Io(m) => Error::Io(format!("{what}: {m}")),
            e => e,
        }
    }
}
