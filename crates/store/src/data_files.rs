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

use parking_lot::Mutex;
use shoal_core::data::DataStore;
use shoal_core::{Error, Ino, Result};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Open objects kept per shard; past it, half the shard's are closed.
const OPEN_PER_SHARD: usize = 256;
const SHARDS: usize = 16;

pub struct DataFiles {
    dir: PathBuf,
    read_only: bool,
    open: Vec<Mutex<HashMap<Ino, Arc<Object>>>>,
    /// What makes a new object's name durable on the filesystem under the
    /// store (`NameSync::of`).
    name_sync: NameSync,
    /// Per directory of objects (`data/XX`), which names its last sync
    /// covered: the only record of a new object's name not yet durable,
    /// since the open-file cache may close an object before its first
    /// sync and open it again by name.
    names: Vec<DirNames>,
    /// Directory syncs made (for the tests).
    dir_syncs: AtomicU64,
}

/// The names made in one directory of objects and those its syncs made
/// durable, as counts: a name made is counted after it exists, and a sync
/// covers every name counted before it began.
struct DirNames {
    /// Names made in it by this opening of the store, plus one: the
    /// names an earlier daemon made and did not sync (it was killed
    /// before, and the host's cache still holds them) are covered by the
    /// directory's first sync here.
    made: AtomicU64,
    /// The `made` count read before the directory's last successful sync.
    synced: AtomicU64,
}

struct Object {
    file: Arc<File>,
    /// Made by this open: the host's inode has stayed in memory since,
    /// held by this descriptor (`NameSync::WhileOpen`).
    made_here: bool,
    /// Its name is durable once its directory's `synced` count reaches
    /// this: the directory's `made` count after it was made, or when it
    /// was opened (it may have been made here, closed and opened again).
    name: AtomicU64,
}

/// The mount holding `dir` (the longest mount point that is a prefix of
/// it, from /proc/self/mountinfo): its filesystem type and its device
/// (MAJ:MIN), None if unknown.
fn mount_of(dir: &Path) -> Option<(String, String)> {
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
    let mut best: Option<(usize, String, String)> = None;
    for line in info.lines() {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
        let mut parts = line.split(" - ");
        let (Some(left), Some(right)) = (parts.next(), parts.next()) else {
            continue;
        };
        let mut fields = left.split(' ');
        let (Some(dev), Some(mp)) = (fields.nth(2), fields.nth(1).map(unescape)) else {
            continue;
        };
        let Some(t) = right.split(' ').next() else {
            continue;
        };
        let depth = mp.components().count();
        // The last of equal depth wins: a later mount over the same
        // point hides the earlier one.
        if dir.starts_with(&mp) && best.as_ref().is_none_or(|(d, _, _)| depth >= *d) {
            best = Some((depth, t.to_string(), dev.to_string()));
        }
    }
    best.map(|(_, t, dev)| (t, dev))
}

/// Whether the ext4 on device `dev` (MAJ:MIN) has a journal: its
/// /sys/fs/ext4/NAME/journal_task names the journal's thread, or says
/// `<none>`. None when the kernel does not tell.
fn ext4_journalled(dev: &str) -> Option<bool> {
    let sys = std::fs::canonicalize(format!("/sys/dev/block/{dev}")).ok()?;
    let name = sys.file_name()?.to_str()?;
    let task = std::fs::read_to_string(format!("/sys/fs/ext4/{name}/journal_task")).ok()?;
    Some(task.trim() != "<none>")
}

/// What makes a new file's name durable on the filesystem under a store,
/// besides a sync of its directory (the argument, from the kernel's code,
/// is docs/design.md's "File data", case 4). POSIX promises none of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameSync {
    /// The file's own fsync or fdatasync: XFS, and ext4 with a journal in
    /// any data mode, log a new inode and its name in one transaction that
    /// the file's sync forces.
    WithFile,
    /// The file's own sync while the host's inode has stayed in memory
    /// since the file was made: ext4 without a journal, whose fsync writes
    /// the parent directory when the inode carries an in-memory mark
    /// (`EXT4_STATE_NEWENTRY`), lost if the inode is evicted, as it may be
    /// once the open-file cache has closed the object.
    WhileOpen,
    /// Only a sync of the directory: any other filesystem, or one the
    /// kernel does not tell about.
    Directory,
}

impl NameSync {
    /// The filesystem at `dir`'s answer: its type from the store's mount
    /// and, for ext4, whether it has a journal.
    pub fn of(dir: &Path) -> NameSync {
        match mount_of(dir) {
            Some((t, _)) if t == "xfs" => NameSync::WithFile,
            Some((t, dev)) if t == "ext4" => match ext4_journalled(&dev) {
                Some(true) => NameSync::WithFile,
                Some(false) => NameSync::WhileOpen,
                None => NameSync::Directory,
            },
            _ => NameSync::Directory,
        }
    }
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
            name_sync: NameSync::of(store),
            names: (0..256)
                .map(|_| DirNames {
                    made: AtomicU64::new(1),
                    synced: AtomicU64::new(0),
                })
                .collect(),
            dir_syncs: AtomicU64::new(0),
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
        if let Some(o) = self.shard(ino).lock().get(&ino) {
            return Ok(Some(o.clone()));
        }
        let path = self.path(ino);
        let opened = OpenOptions::new()
            .read(true)
            .write(!self.read_only)
            .open(&path);
        let names = &self.names[(ino & 0xff) as usize];
        let (file, name, made_here) = match opened {
            // Perhaps made here and closed by the cache before its first
            // sync: its name may be any counted so far.
            Ok(f) => (f, names.made.load(Ordering::Acquire), false),
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
                // Counted after the name exists, so a directory sync that
                // began after this count was read covers it.
                (f, names.made.fetch_add(1, Ordering::AcqRel) + 1, true)
            }
            Err(e) => return Err(io_err("open", &path, e)),
        };
        let o = Arc::new(Object {
            file: Arc::new(file),
            made_here,
            name: AtomicU64::new(name),
        });
        let mut m = self.shard(ino).lock();
        if m.len() >= OPEN_PER_SHARD {
            // Close about half; an object in use keeps its file open
            // through its Arc until its call returns.
            let drop_n = m.len() / 2;
            let victims: Vec<Ino> = m.keys().take(drop_n).copied().collect();
            for v in victims {
                m.remove(&v);
            }
        }
        let kept = m.entry(ino).or_insert_with(|| o.clone());
        // Another thread opened it meanwhile (before this one made it,
        // perhaps): the one kept waits for the later name count.
        kept.name
            .fetch_max(o.name.load(Ordering::Acquire), Ordering::AcqRel);
        Ok(Some(kept.clone()))
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
        match self.name_sync {
            NameSync::WithFile => return Ok(()),
            NameSync::WhileOpen if o.made_here => return Ok(()),
            _ => {}
        }
        let names = &self.names[(ino & 0xff) as usize];
        if names.synced.load(Ordering::Acquire) >= o.name.load(Ordering::Acquire) {
            return Ok(());
        }
        let path = self.path(ino);
        let parent = path.parent().expect("object path has a directory");
        let covers = names.made.load(Ordering::Acquire);
        File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_err("sync", parent, e))?;
        names.synced.fetch_max(covers, Ordering::AcqRel);
        self.dir_syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn remove(&self, ino: Ino) -> Result<()> {
        self.writable()?;
        self.shard(ino).lock().remove(&ino);
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
        let fs_type = |p: &str| mount_of(Path::new(p)).map(|m| m.0);
        assert_eq!(fs_type("/proc/self").as_deref(), Some("proc"));
        assert_eq!(NameSync::of(Path::new("/proc")), NameSync::Directory);
        if fs_type("/dev/shm").as_deref() == Some("tmpfs") {
            assert_eq!(NameSync::of(Path::new("/dev/shm")), NameSync::Directory);
        }
    }

    /// A new object's name is made durable by its first sync even when the
    /// open-file cache closed the object before it (it is opened again by
    /// name, found on disk): on a filesystem whose file sync does not cover
    /// the name, its directory is synced then. A directory synced once is
    /// not synced again for names it already covered.
    #[test]
    fn a_new_object_closed_before_its_first_sync_still_syncs_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        // An object of an earlier opening of the store, in data/02.
        let before = DataFiles::new(tmp.path(), false);
        before.write(2, 0, b"y").unwrap();
        drop(before);
        let mut d = DataFiles::new(tmp.path(), false);
        d.name_sync = NameSync::Directory;
        d.write(1, 0, b"x").unwrap();
        // The cache closes it (as when its shard is full).
        d.shard(1).lock().remove(&1);
        d.sync(1).unwrap();
        assert_eq!(d.dir_syncs.load(Ordering::Relaxed), 1, "data/01 synced");
        d.sync(1).unwrap();
        assert_eq!(d.dir_syncs.load(Ordering::Relaxed), 1, "data/01 not again");
        // An earlier daemon's object, perhaps never synced: its
        // directory's first sync here covers it, once.
        d.sync(2).unwrap();
        d.shard(2).lock().remove(&2);
        d.sync(2).unwrap();
        assert_eq!(d.dir_syncs.load(Ordering::Relaxed), 2, "data/02 once");
        // Where the file's sync covers its name, no directory is synced.
        let mut e = DataFiles::new(tmp.path(), false);
        e.name_sync = NameSync::WithFile;
        e.write(3, 0, b"z").unwrap();
        e.sync(3).unwrap();
        assert_eq!(e.dir_syncs.load(Ordering::Relaxed), 0);
        // Where it covers it while the inode stayed in memory (ext4
        // without a journal): not for an object kept open since it was
        // made; once for one closed before its first sync.
        let mut w = DataFiles::new(tmp.path(), false);
        w.name_sync = NameSync::WhileOpen;
        w.write(4, 0, b"z").unwrap();
        w.sync(4).unwrap();
        assert_eq!(w.dir_syncs.load(Ordering::Relaxed), 0, "kept open");
        w.write(5, 0, b"z").unwrap();
        w.shard(5).lock().remove(&5);
        w.sync(5).unwrap();
        assert_eq!(w.dir_syncs.load(Ordering::Relaxed), 1, "closed first");
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
