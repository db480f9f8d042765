//! File data on the local disk (`shoal_core::data::DataStore`): one file per
//! inode under `STORE/data/XX/`, named by the inode number in hex (`XX`, its
//! low byte, spreads the objects over 256 directories). Written in place
//! with pread/pwrite, so data moves at the local filesystem's speed, holes
//! stay holes, and a removed object's space comes back at once; the kernel
//! can read and write an object directly (FUSE passthrough) through
//! `backing_file`.
//!
//! Written here rather than taken from a crate because it is the product's
//! data layout: a directory of files is all it needs, and what it promises
//! (`shoal_core::data`) is what the crash argument in docs/design.md
//! rests on.

use shoal_core::data::DataStore;
use shoal_core::{Error, Ino, Result};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Open objects kept per shard; past it, half the shard's are closed.
const OPEN_PER_SHARD: usize = 256;
const SHARDS: usize = 16;

pub struct DataFiles {
    dir: PathBuf,
    read_only: bool,
    open: Vec<Mutex<HashMap<Ino, Arc<Object>>>>,
    /// The filesystem under the store makes a new file's name durable
    /// with the file's own sync (`names_durable_with_files`): an object's
    /// first `sync` then needs no sync of its directory.
    names_with_files: bool,
}

struct Object {
    file: Arc<File>,
    /// Made since its directory was last synced: `sync` syncs the directory
    /// too (unless the filesystem's file sync covers the name), so the
    /// object's name is as durable as its bytes.
    fresh: AtomicBool,
}

/// The filesystem type of the mount holding `dir` (the longest mount point
/// that is a prefix of it, from /proc/self/mountinfo), None if unknown.
fn fs_type(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // Mount points escape space, tab, newline and backslash as \ooo.
    let unescape = |s: &str| {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            match (b[i], b.get(i + 1..i + 4)) {
                (b'\\', Some(o)) if o.iter().all(|c| (b'0'..=b'7').contains(c)) => {
                    out.push(o.iter().fold(0u8, |a, c| a * 8 + (c - b'0')));
                    i += 4;
                }
                (c, _) => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        let os: std::ffi::OsString = std::os::unix::ffi::OsStringExt::from_vec(out);
        PathBuf::from(os)
    };
    let mut best: Option<(usize, String)> = None;
    for line in info.lines() {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
        let mut parts = line.split(" - ");
        let (Some(left), Some(right)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Some(mp) = left.split(' ').nth(4).map(unescape) else {
            continue;
        };
        let Some(t) = right.split(' ').next() else {
            continue;
        };
        let depth = mp.components().count();
        // The last of equal depth wins: a later mount over the same
        // point hides the earlier one.
        if dir.starts_with(&mp) && best.as_ref().is_none_or(|(d, _)| depth >= *d) {
            best = Some((depth, t.to_string()));
        }
    }
    best.map(|(_, t)| t)
}

/// Whether fsync (or fdatasync) of a file just made on the filesystem at
/// `dir` also makes its directory entry durable. ext4 (journalled, with or
/// without fast commits, and without a journal through `ext4_sync_parent`)
/// and XFS do: a new inode and its name are logged in one transaction, and
/// the file's sync forces the log through it (`ext4_sync_file`,
/// `xfs_file_fsync`). POSIX does not promise it, so elsewhere, or when the
/// type is unknown, the directory is synced as well. It saves a flush of
/// the device per file made and synced: SQLite's rollback journal is such
/// a file every transaction (docs/perf-log/32-programs.md).
pub fn names_durable_with_files(dir: &Path) -> bool {
    matches!(fs_type(dir).as_deref(), Some("ext4" | "xfs"))
}

/// The two answers of the filesystem under the store that are the caller's
/// to hear: it is full, or the offset is past its largest file (ext4 with 4
/// KiB blocks: 16 TiB; a write there is EFBIG, as on ext4 itself, not EIO:
/// xfstests generic/285). Anything else is an I/O error naming the object.
fn io_err(what: &str, path: &Path, e: std::io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => Error::NoSpace,
        Some(libc::EFBIG) => Error::FileTooBig,
        _ => Error::Io(format!("{what} {}: {e}", path.display())),
    }
}

impl DataFiles {
    /// The objects of the store at `store` (its `data/` directory, made on
    /// the first write).
    pub fn new(store: &Path, read_only: bool) -> DataFiles {
        DataFiles {
            dir: store.join("data"),
            read_only,
            open: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            names_with_files: names_durable_with_files(store),
        }
    }

    fn path(&self, ino: Ino) -> PathBuf {
        self.dir
            .join(format!("{:02x}", ino & 0xff))
            .join(format!("{ino:x}"))
    }

    /// Make `data/` and its 256 directories, durably, once per store (at
    /// its first object; again only if one went missing): an object's
    /// `sync` then syncs only the directory it is in, and making an object
    /// takes no mkdir.
    fn make_dirs(&self) -> Result<()> {
        let err = |p: &Path, e| io_err("create", p, e);
        for b in 0..=0xffu32 {
            let d = self.dir.join(format!("{b:02x}"));
            std::fs::create_dir_all(&d).map_err(|e| err(&d, e))?;
        }
        let store = self.dir.parent().expect("data/ is in a store");
        for d in [&self.dir, store] {
            File::open(d)
                .and_then(|f| f.sync_all())
                .map_err(|e| err(d, e))?;
        }
        Ok(())
    }

    fn shard(&self, ino: Ino) -> &Mutex<HashMap<Ino, Arc<Object>>> {
        &self.open[(ino as usize >> 8) % SHARDS]
    }

    /// The open object, or None when it does not exist and `create` is false.
    fn get(&self, ino: Ino, create: bool) -> Result<Option<Arc<Object>>> {
        if let Some(o) = self.shard(ino).lock().unwrap().get(&ino) {
            return Ok(Some(o.clone()));
        }
        let path = self.path(ino);
        let opened = OpenOptions::new()
            .read(true)
            .write(!self.read_only)
            .open(&path);
        let (file, fresh) = match opened {
            Ok(f) => (f, false),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !create {
                    return Ok(None);
                }
                if self.read_only {
                    return Err(Error::ReadOnly);
                }
                let create = || {
                    OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create(true)
                        .truncate(false)
                        .open(&path)
                };
                let f = match create() {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        self.make_dirs()?;
                        create()
                    }
                    other => other,
                }
                .map_err(|e| io_err("create", &path, e))?;
                (f, true)
            }
            Err(e) => return Err(io_err("open", &path, e)),
        };
        let o = Arc::new(Object {
            file: Arc::new(file),
            fresh: AtomicBool::new(fresh),
        });
        let mut m = self.shard(ino).lock().unwrap();
        if m.len() >= OPEN_PER_SHARD {
            // Close about half; an object in use keeps its file open
            // through its Arc until its call returns.
            let drop_n = m.len() / 2;
            let victims: Vec<Ino> = m.keys().take(drop_n).copied().collect();
            for v in victims {
                m.remove(&v);
            }
        }
        Ok(Some(m.entry(ino).or_insert(o).clone()))
    }

    /// The object's metadata, None when it does not exist.
    fn stat(&self, ino: Ino) -> Result<Option<std::fs::Metadata>> {
        match self.get(ino, false)? {
            None => Ok(None),
            Some(o) => o
                .file
                .metadata()
                .map(Some)
                .map_err(|e| io_err("stat", &self.path(ino), e)),
        }
    }

    fn writable(&self) -> Result<()> {
        if self.read_only {
            Err(Error::ReadOnly)
        } else {
            Ok(())
        }
    }
}

fn fallocate(f: &File, mode: libc::c_int, off: u64, len: u64) -> std::io::Result<()> {
    // SAFETY: fallocate on a descriptor `f` owns, for as long as the call.
    let rc =
        unsafe { libc::fallocate(f.as_raw_fd(), mode, off as libc::off_t, len as libc::off_t) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

impl DataStore for DataFiles {
    fn read(&self, ino: Ino, off: u64, buf: &mut [u8]) -> Result<usize> {
        let Some(o) = self.get(ino, false)? else {
            return Ok(0);
        };
        let mut done = 0;
        while done < buf.len() {
            match o.file.read_at(&mut buf[done..], off + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err("read", &self.path(ino), e)),
            }
        }
        Ok(done)
    }
    fn write(&self, ino: Ino, off: u64, data: &[u8]) -> Result<()> {
        self.writable()?;
        let o = self.get(ino, true)?.expect("created");
        o.file
            .write_all_at(data, off)
            .map_err(|e| io_err("write", &self.path(ino), e))
    }
    fn set_len(&self, ino: Ino, len: u64) -> Result<()> {
        self.writable()?;
        let o = self.get(ino, true)?.expect("created");
        o.file
            .set_len(len)
            .map_err(|e| io_err("truncate", &self.path(ino), e))
    }
    fn len(&self, ino: Ino) -> Result<u64> {
        Ok(self.stat(ino)?.map_or(0, |m| m.len()))
    }
    fn punch(&self, ino: Ino, off: u64, len: u64) -> Result<()> {
        self.writable()?;
        let Some(o) = self.get(ino, false)? else {
            return Ok(());
        };
        let Err(e) = fallocate(
            &o.file,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off,
            len,
        ) else {
            return Ok(());
        };
        if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
            return Err(io_err("punch", &self.path(ino), e));
        }
        // A filesystem without hole punching: write the zeros.
        let end = (off + len).min(self.len(ino)?);
        let zeros = vec![0u8; 1 << 20];
        let mut pos = off;
        while pos < end {
            let n = (end - pos).min(zeros.len() as u64) as usize;
            o.file
                .write_all_at(&zeros[..n], pos)
                .map_err(|e| io_err("write", &self.path(ino), e))?;
            pos += n as u64;
        }
        Ok(())
    }
    fn allocate(&self, ino: Ino, off: u64, len: u64) -> Result<()> {
        self.writable()?;
        let o = self.get(ino, true)?.expect("created");
        let Err(e) = fallocate(&o.file, libc::FALLOC_FL_KEEP_SIZE, off, len) else {
            return Ok(());
        };
        match e.raw_os_error() {
            // Nothing to reserve with: the write finds out later, as on
            // a filesystem without fallocate.
            Some(libc::EOPNOTSUPP) => Ok(()),
            _ => Err(io_err("allocate", &self.path(ino), e)),
        }
    }
    fn allocated(&self, ino: Ino) -> Result<u64> {
        Ok(self.stat(ino)?.map_or(0, |m| m.blocks() * 512))
    }
    fn seek(&self, ino: Ino, off: u64, data: bool) -> Result<Option<u64>> {
        let Some(o) = self.get(ino, false)? else {
            return Ok(None);
        };
        let whence = if data {
            libc::SEEK_DATA
        } else {
            libc::SEEK_HOLE
        };
        // SAFETY: lseek on a descriptor this object owns; the offset is
        // per open file description, and only this call uses it.
        let r = unsafe { libc::lseek(o.file.as_raw_fd(), off as libc::off_t, whence) };
        if r >= 0 {
            return Ok(Some(r as u64));
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENXIO) {
            Ok(None)
        } else {
            Err(io_err("seek", &self.path(ino), e))
        }
    }
    fn sync(&self, ino: Ino) -> Result<()> {
        let Some(o) = self.get(ino, false)? else {
            return Ok(());
        };
        o.file
            .sync_data()
            .map_err(|e| io_err("sync", &self.path(ino), e))?;
        if o.fresh.swap(false, Ordering::AcqRel) && !self.names_with_files {
            let path = self.path(ino);
            let parent = path.parent().expect("object path has a directory");
            File::open(parent)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_err("sync", parent, e))?;
        }
        Ok(())
    }
    fn remove(&self, ino: Ino) -> Result<()> {
        self.writable()?;
        self.shard(ino).lock().unwrap().remove(&ino);
        let path = self.path(ino);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("remove", &path, e)),
        }
    }
    fn list(&self) -> Result<Vec<Ino>> {
        let mut out = Vec::new();
        let subs = match std::fs::read_dir(&self.dir) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io_err("list", &self.dir, e)),
        };
        for sub in subs {
            let sub = sub.map_err(|e| io_err("list", &self.dir, e))?.path();
            let files = std::fs::read_dir(&sub).map_err(|e| io_err("list", &sub, e))?;
            for f in files {
                let f = f.map_err(|e| io_err("list", &sub, e))?;
                // Anything else here (an editor's leftover) is not ours to touch.
                if let Some(ino) = f
                    .file_name()
                    .to_str()
                    .and_then(|n| u64::from_str_radix(n, 16).ok())
                {
                    out.push(ino);
                }
            }
        }
        out.sort_unstable();
        Ok(out)
    }
    fn modified(&self, ino: Ino) -> Result<Option<(u64, shoal_core::Ts)>> {
        Ok(self.stat(ino)?.map(|m| {
            let t = shoal_core::Ts {
                sec: m.mtime(),
                nsec: m.mtime_nsec() as u32,
            };
            (m.len(), t)
        }))
    }
    fn backing_file(&self, ino: Ino) -> Option<Arc<File>> {
        self.get(ino, false).ok().flatten().map(|o| o.file.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file system type is found through the longest mount point:
    /// /proc is procfs, its root's files are not; a tmpfs (/dev/shm, where
    /// mounted) makes no name durable with a file.
    #[test]
    fn names_durable_only_where_the_filesystem_says_so() {
        assert_eq!(fs_type(Path::new("/proc/self")).as_deref(), Some("proc"));
        assert!(!names_durable_with_files(Path::new("/proc")));
        if fs_type(Path::new("/dev/shm")).as_deref() == Some("tmpfs") {
            assert!(!names_durable_with_files(Path::new("/dev/shm")));
        }
    }

    /// On a real filesystem: holes stay holes, a punch frees its blocks, a
    /// removal frees the rest, SEEK_DATA and SEEK_HOLE see the holes, and an
    /// object that does not exist reads as nothing.
    #[test]
    fn objects_free_space_and_keep_holes() {
        let tmp = tempfile::tempdir().unwrap();
        let d = DataFiles::new(tmp.path(), false);
        let mb = 1 << 20;
        d.write(7, 0, &vec![1u8; 4 * mb]).unwrap();
        d.set_len(7, 16 * mb as u64).unwrap();
        d.sync(7).unwrap();
        assert_eq!(d.len(7).unwrap(), 16 * mb as u64);
        let full = d.allocated(7).unwrap();
        assert!(full >= 4 * mb as u64 && full < 5 * mb as u64, "{full}");
        d.punch(7, mb as u64, 2 * mb as u64).unwrap();
        let punched = d.allocated(7).unwrap();
        assert!(punched <= full - 2 * mb as u64, "{punched} of {full}");
        assert_eq!(d.seek(7, mb as u64, true).unwrap(), Some(3 * mb as u64));
        assert_eq!(d.seek(7, 0, false).unwrap(), Some(mb as u64));
        let mut buf = vec![9u8; 8];
        assert_eq!(d.read(7, mb as u64, &mut buf).unwrap(), 8);
        assert_eq!(buf, [0; 8]);
        assert_eq!(d.list().unwrap(), vec![7]);
        d.remove(7).unwrap();
        assert_eq!(d.list().unwrap(), Vec::<Ino>::new());
        assert_eq!(d.read(7, 0, &mut buf).unwrap(), 0);
        let ro = DataFiles::new(tmp.path(), true);
        assert_eq!(ro.write(8, 0, b"x"), Err(Error::ReadOnly));
    }

    /// Past the largest file of the filesystem under the store (ext4: 16
    /// TiB) the caller hears EFBIG, as on that filesystem, not EIO.
    #[test]
    fn file_too_big_and_full_are_the_callers_to_hear() {
        let p = Path::new("/x");
        let os = std::io::Error::from_raw_os_error;
        assert_eq!(io_err("write", p, os(libc::EFBIG)), Error::FileTooBig);
        assert_eq!(io_err("write", p, os(libc::ENOSPC)), Error::NoSpace);
        assert!(matches!(io_err("write", p, os(libc::EIO)), Error::Io(_)));
    }
}
