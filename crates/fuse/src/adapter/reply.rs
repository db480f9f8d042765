//! Replies for both modes: errors to errno (the one place), attributes and
//! entries for the kernel, xattr values and names, the chattr ioctls,
//! fallocate's and lseek's arguments.

use fuser::{Errno, FileAttr, FileType, INodeNo, ReplyEmpty, ReplyIoctl, ReplyXattr, TimeOrNow};
use shoal_core::{Attr, Error, Kind, TimeSet, Ts};

/// Answer a request whose success carries nothing.
pub(crate) fn reply_empty(reply: ReplyEmpty, r: shoal_core::Result<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(&e)),
    }
}

/// Answer getxattr with a value: its size when the caller asked (size 0),
/// ERANGE when it does not fit, else the bytes. Both adapters answer so.
pub(crate) fn reply_xattr_value(reply: ReplyXattr, r: shoal_core::Result<Vec<u8>>, size: u32) {
    match r {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) if v.len() > size as usize => reply.error(Errno::from_i32(libc::ERANGE)),
        Ok(v) => reply.data(&v),
        Err(e) => reply.error(errno(&e)),
    }
}

/// Answer listxattr with names, each NUL-terminated, as `reply_xattr_value`.
pub(crate) fn reply_xattr_names(reply: ReplyXattr, r: shoal_core::Result<Vec<Vec<u8>>>, size: u32) {
    reply_xattr_value(
        reply,
        r.map(|names| {
            names
                .into_iter()
                .flat_map(|mut n| {
                    n.push(0);
                    n
                })
                .collect()
        }),
        size,
    )
}

/// The one place an engine error becomes an errno.
pub fn errno(e: &Error) -> Errno {
    let code = match e {
        Error::NotFound => libc::ENOENT,
        Error::Exists => libc::EEXIST,
        Error::NotEmpty => libc::ENOTEMPTY,
        Error::NotDir => libc::ENOTDIR,
        Error::IsDir => libc::EISDIR,
        Error::NameTooLong => libc::ENAMETOOLONG,
        Error::NoSpace => libc::ENOSPC,
        Error::Invalid => libc::EINVAL,
        Error::PermissionDenied => libc::EACCES,
        Error::NotPermitted => libc::EPERM,
        Error::TooManyLinks => libc::EMLINK,
        Error::NoAttr => libc::ENODATA,
        Error::Range => libc::ERANGE,
        Error::FileTooBig => libc::EFBIG,
        Error::ReadOnly => libc::EROFS,
        Error::PastEnd => libc::ENXIO,
        Error::NotSupported => libc::EOPNOTSUPP,
        Error::Corrupted(m) => {
            tracing::error!("corrupted store: {m}; the file being read gets EIO; unmount and run `shoal fsck` (what is damaged) then `shoal fsck --repair` (save what can be read)");
            libc::EIO
        }
        Error::Io(m) => {
            tracing::error!("I/O error: {m}");
            libc::EIO
        }
        #[allow(unreachable_patterns)]
        _ => libc::EIO,
    };
    Errno::from_i32(code)
}

pub(crate) fn kind(k: Kind) -> FileType {
    match k {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::Socket => FileType::Socket,
        Kind::CharDev => FileType::CharDevice,
        Kind::BlockDev => FileType::BlockDevice,
    }
}

/// Attributes for the kernel; `allocated` is the bytes the file takes on
/// disk (`Engine::allocated`).
pub fn file_attr_on_disk(a: &Attr, allocated: u64) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: allocated.div_ceil(512),
        atime: a.atime.to_system(),
        mtime: a.mtime.to_system(),
        ctime: a.ctime.to_system(),
        crtime: a.crtime.to_system(),
        kind: kind(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: 4096,
        flags: 0,
    }
}

/// Attributes for the kernel, with blocks from the size (the root's at
/// init, and what needs no engine).
pub fn file_attr(a: &Attr) -> FileAttr {
    file_attr_on_disk(a, a.blocks() * 512)
}

/// The attributes of a negative entry (inode 0): the kernel caches the
/// miss for the entry's lifetime (seed 001's negative cache, one level up).
pub(crate) fn negative_attr() -> FileAttr {
    let mut a = file_attr(&Attr {
        ino: 0,
        kind: Kind::File,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        size: 0,
        atime: Ts::default(),
        mtime: Ts::default(),
        ctime: Ts::default(),
        crtime: Ts::default(),
        version: 0,
    });
    a.ino = INodeNo(0);
    a
}

pub(crate) fn time(t: TimeOrNow) -> TimeSet {
    match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(s) => TimeSet::At(Ts::from_system(s)),
    }
}

/// fallocate(2)'s mode as shoal's (`FALLOC_*`), for both modes; None for
/// a mode shoal does not take (EOPNOTSUPP).
pub(crate) fn falloc_mode(mode: i32) -> Option<u32> {
    let m = mode as u32;
    let mut em = 0;
    if m & libc::FALLOC_FL_KEEP_SIZE as u32 != 0 {
        em |= shoal_core::engine::FALLOC_KEEP_SIZE;
    }
    if m & libc::FALLOC_FL_PUNCH_HOLE as u32 != 0 {
        em |= shoal_core::engine::FALLOC_PUNCH_HOLE;
    }
    if m & libc::FALLOC_FL_ZERO_RANGE as u32 != 0 {
        em |= shoal_core::engine::FALLOC_ZERO_RANGE;
    }
    let known = (libc::FALLOC_FL_KEEP_SIZE
        | libc::FALLOC_FL_PUNCH_HOLE
        | libc::FALLOC_FL_ZERO_RANGE) as u32;
    (m & !known == 0).then_some(em)
}

/// The chattr ioctls, as both modes answer them: `FS_IOC_GETFLAGS` and
/// `SETFLAGS`, `FS_IOC_FSGETXATTR` and `FSSETXATTR` (xfs_io's; the flags
/// as `fsx_xflags`, `rules::flags::to_xflags`), with `get` reading an
/// inode's flags and `set` setting them all at once. Any other ioctl:
/// ENOTTY, as for a file that has none.
pub(crate) fn flags_ioctl(
    cmd: u32,
    in_data: &[u8],
    out_size: u32,
    reply: ReplyIoctl,
    get: impl Fn() -> shoal_core::Result<u32>,
    set: impl Fn(u32) -> shoal_core::Result<()>,
) {
    use shoal_core::rules::flags;
    let word = |b: &[u8], at: usize| {
        b.get(at..at + 4)
            .map(|w| u32::from_ne_bytes(w.try_into().unwrap()))
    };
    match cmd as libc::c_ulong {
        libc::FS_IOC_GETFLAGS => match get() {
            Ok(f) => {
                let b = f.to_ne_bytes();
                reply.ioctl(0, &b[..b.len().min(out_size as usize)])
            }
            Err(e) => reply.error(errno(&e)),
        },
        libc::FS_IOC_SETFLAGS => match word(in_data, 0) {
            Some(f) => match set(f) {
                Ok(()) => reply.ioctl(0, &[]),
                Err(e) => reply.error(errno(&e)),
            },
            None => reply.error(Errno::from_i32(libc::EINVAL)),
        },
        FS_IOC_FSGETXATTR => match get() {
            Ok(f) => {
                // struct fsxattr: xflags, extsize, nextents, projid,
                // cowextsize, 8 bytes of padding.
                let mut b = [0u8; FSXATTR_SIZE];
                b[..4].copy_from_slice(&flags::to_xflags(f).to_ne_bytes());
                reply.ioctl(0, &b[..b.len().min(out_size as usize)])
            }
            Err(e) => reply.error(errno(&e)),
        },
        FS_IOC_FSSETXATTR => {
            let (Some(x), Some(ext), Some(proj), Some(cow)) = (
                word(in_data, 0),
                word(in_data, 4),
                word(in_data, 12),
                word(in_data, 16),
            ) else {
                return reply.error(Errno::from_i32(libc::EINVAL));
            };
            // No extent size hints or project ids to keep.
            if ext != 0 || proj != 0 || cow != 0 {
                return reply.error(Errno::from_i32(libc::EOPNOTSUPP));
            }
            match get()
                .and_then(|old| flags::from_xflags(x, old))
                .and_then(set)
            {
                Ok(()) => reply.ioctl(0, &[]),
                Err(e) => reply.error(errno(&e)),
            }
        }
        _ => reply.error(Errno::from_i32(libc::ENOTTY)),
    }
}

/// `FS_IOC_FSGETXATTR`, `_IOR('X', 31, struct fsxattr)` (not in `libc`).
const FS_IOC_FSGETXATTR: libc::c_ulong = 0x801c_581f;
/// `FS_IOC_FSSETXATTR`, `_IOW('X', 32, struct fsxattr)`.
const FS_IOC_FSSETXATTR: libc::c_ulong = 0x401c_5820;
/// `sizeof(struct fsxattr)`.
const FSXATTR_SIZE: usize = 28;

/// An lseek request's offset and whether it asks for data (SEEK_DATA) or a
/// hole (SEEK_HOLE): the kernel answers SEEK_SET, SEEK_CUR and SEEK_END
/// itself, anything else is EINVAL, a negative offset ENXIO (both adapters).
pub(crate) fn seek_args(offset: i64, whence: i32) -> std::result::Result<(u64, bool), Errno> {
    let data = match whence {
        libc::SEEK_DATA => true,
        libc::SEEK_HOLE => false,
        _ => return Err(Errno::from_i32(libc::EINVAL)),
    };
    if offset < 0 {
        return Err(Errno::from_i32(libc::ENXIO));
    }
    Ok((offset as u64, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The open flags the rules read are Linux's.
    #[test]
    fn open_flags_of_the_rules_are_libcs() {
        use shoal_core::rules::perm;
        assert_eq!(perm::O_ACCMODE, libc::O_ACCMODE);
        assert_eq!(perm::O_WRONLY, libc::O_WRONLY);
        assert_eq!(perm::O_TRUNC, libc::O_TRUNC);
    }

    /// Every engine error maps to a specific errno, and the table stays explicit.
    #[test]
    fn errno_table() {
        let table = [
            (Error::NotFound, libc::ENOENT),
            (Error::Exists, libc::EEXIST),
            (Error::NotEmpty, libc::ENOTEMPTY),
            (Error::NotDir, libc::ENOTDIR),
            (Error::IsDir, libc::EISDIR),
            (Error::NameTooLong, libc::ENAMETOOLONG),
            (Error::NoSpace, libc::ENOSPC),
            (Error::Invalid, libc::EINVAL),
            (Error::PermissionDenied, libc::EACCES),
            (Error::NotPermitted, libc::EPERM),
            (Error::TooManyLinks, libc::EMLINK),
            (Error::NoAttr, libc::ENODATA),
            (Error::Range, libc::ERANGE),
            (Error::FileTooBig, libc::EFBIG),
            (Error::ReadOnly, libc::EROFS),
            (Error::PastEnd, libc::ENXIO),
            (Error::NotSupported, libc::EOPNOTSUPP),
            (Error::Corrupted("x".into()), libc::EIO),
            (Error::Io("x".into()), libc::EIO),
        ];
        for (e, code) in table {
            assert_eq!(errno(&e).code(), code, "{e:?}");
        }
    }
}
