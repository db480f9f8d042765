//! The floor: a minimal in-memory FUSE filesystem on the same library
//! (fuser) and the same settings as shoal's mount (its worker threads, cloned
//! fds, 1 s entry/attribute/negative TTLs, readdirplus, no FLUSH, no OPENDIR).
//! One global mutex, a hash map of nodes, nothing persisted: the best any
//! FUSE filesystem can do here, against which shoal's mount is measured.

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

const TTL: Duration = Duration::from_secs(1);

/// A directory's entries: a hash map for lookups, and an insertion sequence
/// that is the readdir cookie, so a listing resumes after the last entry it
/// returned however many entries were removed meanwhile (rm -rf removes the
/// names it was given between readdir calls; positional offsets would skip
/// or repeat names). O(log n) to resume, not a sort per call.
#[derive(Default)]
struct Children {
    by_name: HashMap<OsString, (u64, u64)>,
    by_seq: BTreeMap<u64, (OsString, u64)>,
    next: u64,
}

impl Children {
    fn get(&self, name: &OsStr) -> Option<u64> {
        self.by_name.get(name).map(|x| x.0)
    }
    fn contains_key(&self, name: &OsStr) -> bool {
        self.by_name.contains_key(name)
    }
    fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
    /// Insert or replace; returns the replaced inode.
    fn insert(&mut self, name: OsString, ino: u64) -> Option<u64> {
        let old = self.remove(&name);
        // Cookies 1 and 2 would be taken for "." and ".." by some tools: start at 3.
        let seq = self.next.max(3);
        self.next = seq + 1;
        self.by_seq.insert(seq, (name.clone(), ino));
        self.by_name.insert(name, (ino, seq));
        old
    }
    fn remove(&mut self, name: &OsStr) -> Option<u64> {
        let (ino, seq) = self.by_name.remove(name)?;
        self.by_seq.remove(&seq);
        Some(ino)
    }
    /// Entries after cookie `after`, in cookie order: (cookie, name, inode).
    fn after(&self, after: u64) -> impl Iterator<Item = (u64, &OsString, u64)> {
        self.by_seq
            .range(after.saturating_add(1)..)
            .map(|(k, (n, i))| (*k, n, *i))
    }
}

struct Node {
    attr: FileAttr,
    children: Children,
    parent: u64,
    data: Vec<u8>,
}

struct State {
    nodes: HashMap<u64, Node>,
    next: u64,
}

pub struct Floor {
    st: Mutex<State>,
    /// Ask for FUSE over io_uring (as shoal's `-o uring` does).
    uring: bool,
}

fn attr(ino: u64, kind: FileType, perm: u16, uid: u32, gid: u32) -> FileAttr {
    let now = SystemTime::now();
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind,
        perm,
        nlink: if kind == FileType::Directory { 2 } else { 1 },
        uid,
        gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl Default for Floor {
    fn default() -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            1,
            Node {
                attr: attr(1, FileType::Directory, 0o755, 0, 0),
                children: Children::default(),
                parent: 1,
                data: vec![],
            },
        );
        Floor {
            st: Mutex::new(State { nodes, next: 2 }),
            uring: false,
        }
    }
}

impl Floor {
    /// The state, taken back from a request that panicked holding it
    /// (std's poisoning): one bad request does not take the mount down.
    /// std's Mutex, not parking_lot's, to stay the minimal reference the
    /// C floor is.
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Floor {
    fn make(
        &self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        kind: FileType,
        mode: u32,
    ) -> Result<FileAttr, Errno> {
        let mut s = self.state();
        let ino = s.next;
        let p = s.nodes.get_mut(&parent).ok_or(Errno::ENOENT)?;
        if p.children.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        p.children.insert(name.to_os_string(), ino);
        p.attr.mtime = SystemTime::now();
        if kind == FileType::Directory {
            p.attr.nlink += 1;
        }
        s.next += 1;
        let a = attr(ino, kind, (mode & 0o7777) as u16, req.uid(), req.gid());
        s.nodes.insert(
            ino,
            Node {
                attr: a,
                children: Children::default(),
                parent,
                data: vec![],
            },
        );
        Ok(a)
    }

    fn remove(&self, parent: u64, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let mut s = self.state();
        let ino = s
            .nodes
            .get(&parent)
            .ok_or(Errno::ENOENT)?
            .children
            .get(name)
            .ok_or(Errno::ENOENT)?;
        let n = &s.nodes[&ino];
        let is_dir = n.attr.kind == FileType::Directory;
        if dir && !is_dir {
            return Err(Errno::ENOTDIR);
        }
        if !dir && is_dir {
            return Err(Errno::EISDIR);
        }
        if is_dir && !n.children.is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        s.nodes.get_mut(&parent).unwrap().children.remove(name);
        let n = s.nodes.get_mut(&ino).unwrap();
        n.attr.nlink = n.attr.nlink.saturating_sub(1);
        if n.attr.nlink == 0 || is_dir {
            s.nodes.remove(&ino);
        }
        Ok(())
    }
}

impl Filesystem for Floor {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let mut want = InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO;
        if self.uring {
            // Served by the vendored fuser's rings (vendor/fuser/PATCHED.md).
            want |= InitFlags::FUSE_OVER_IO_URING;
        }
        let _ = config.add_capabilities(want & config.capabilities());
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let s = self.state();
        match s
            .nodes
            .get(&parent.0)
            .and_then(|p| p.children.get(name))
            .and_then(|i| s.nodes.get(&i))
        {
            Some(n) => reply.entry(&TTL, &n.attr, Generation(0)),
            None => {
                let mut a = attr(0, FileType::RegularFile, 0, 0, 0);
                a.ino = INodeNo(0);
                reply.entry_with_ttls(&TTL, &Duration::ZERO, &a, Generation(0))
            }
        }
    }
    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.state().nodes.get(&ino.0) {
            Some(n) => reply.attr(&TTL, &n.attr),
            None => reply.error(Errno::ENOENT),
        }
    }
    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _c: Option<SystemTime>,
        _g: Option<SystemTime>,
        _b: Option<SystemTime>,
        _f: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut s = self.state();
        let Some(n) = s.nodes.get_mut(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        if let Some(m) = mode {
            n.attr.perm = (m & 0o7777) as u16;
        }
        if let Some(u) = uid {
            n.attr.uid = u;
        }
        if let Some(g) = gid {
            n.attr.gid = g;
        }
        if let Some(sz) = size {
            n.data.resize(sz as usize, 0);
            n.attr.size = sz;
        }
        let t = |x: TimeOrNow| match x {
            TimeOrNow::Now => SystemTime::now(),
            TimeOrNow::SpecificTime(t) => t,
        };
        if let Some(a) = atime {
            n.attr.atime = t(a);
        }
        if let Some(m) = mtime {
            n.attr.mtime = t(m);
        }
        n.attr.ctime = SystemTime::now();
        reply.attr(&TTL, &n.attr)
    }
    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        match self.make(req, parent.0, name, FileType::RegularFile, mode) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }
    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        match self.make(req, parent.0, name, FileType::Directory, mode) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }
    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.remove(parent.0, name, false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.remove(parent.0, name, true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        np: INodeNo,
        nn: &OsStr,
        _f: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut s = self.state();
        let Some(ino) = s
            .nodes
            .get_mut(&parent.0)
            .and_then(|p| p.children.remove(name))
        else {
            return reply.error(Errno::ENOENT);
        };
        let old = s
            .nodes
            .get_mut(&np.0)
            .and_then(|p| p.children.insert(nn.to_os_string(), ino));
        if let Some(o) = old {
            s.nodes.remove(&o);
        }
        if let Some(n) = s.nodes.get_mut(&ino) {
            n.parent = np.0;
        }
        reply.ok()
    }
    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty())
    }
    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        off: u64,
        size: u32,
        _f: OpenFlags,
        _l: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        let s = self.state();
        let Some(n) = s.nodes.get(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        let start = (off as usize).min(n.data.len());
        let end = (start + size as usize).min(n.data.len());
        reply.data(&n.data[start..end])
    }
    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        off: u64,
        data: &[u8],
        _w: WriteFlags,
        _f: OpenFlags,
        _l: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut s = self.state();
        let Some(n) = s.nodes.get_mut(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        let end = off as usize + data.len();
        if n.data.len() < end {
            n.data.resize(end, 0);
        }
        n.data[off as usize..end].copy_from_slice(data);
        n.attr.size = n.data.len() as u64;
        n.attr.mtime = SystemTime::now();
        reply.written(data.len() as u32)
    }
    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.error(Errno::ENOSYS)
    }
    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let s = self.state();
        let Some(n) = s.nodes.get(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        for (cookie, name, c) in n.children.after(offset) {
            let k = s
                .nodes
                .get(&c)
                .map(|x| x.attr.kind)
                .unwrap_or(FileType::RegularFile);
            if reply.add(INodeNo(c), cookie, k, name) {
                break;
            }
        }
        reply.ok()
    }
    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let s = self.state();
        let Some(n) = s.nodes.get(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        for (cookie, name, c) in n.children.after(offset) {
            let Some(x) = s.nodes.get(&c) else { continue };
            if reply.add(INodeNo(c), cookie, name, &TTL, &x.attr, Generation(0)) {
                break;
            }
        }
        reply.ok()
    }
    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        link: &std::path::Path,
        reply: ReplyEntry,
    ) {
        // The target is kept as the node's data (the tree workload has symlinks).
        match self.make(req, parent.0, name, FileType::Symlink, 0o777) {
            Ok(mut a) => {
                let mut s = self.state();
                let n = s.nodes.get_mut(&a.ino.0).unwrap();
                n.data = link.as_os_str().as_encoded_bytes().to_vec();
                n.attr.size = n.data.len() as u64;
                a.size = n.attr.size;
                reply.entry(&TTL, &a, Generation(0))
            }
            Err(e) => reply.error(e),
        }
    }
    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.state().nodes.get(&ino.0) {
            Some(n) if n.attr.kind == FileType::Symlink => reply.data(&n.data),
            Some(_) => reply.error(Errno::EINVAL),
            None => reply.error(Errno::ENOENT),
        }
    }
    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        match self.make(req, parent.0, name, FileType::RegularFile, mode) {
            Ok(a) => reply.created(&TTL, &a, Generation(0), FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }
}

/// Mount the floor at `mnt` and serve until unmounted.
/// `uring`: FUSE over io_uring when the kernel offers it.
pub fn mount(
    mnt: &std::path::Path,
    threads: usize,
    kernel_permissions: bool,
    uring: bool,
) -> std::io::Result<()> {
    let mut cfg = fuser::Config::default();
    cfg.mount_options = vec![fuser::MountOption::FSName("floor".into())];
    if kernel_permissions {
        cfg.mount_options
            .push(fuser::MountOption::DefaultPermissions);
    }
    cfg.n_threads = Some(threads);
    cfg.clone_fd = true;
    cfg.acl = fuser::SessionACL::All;
    fuser::mount(
        Floor {
            uring,
            ..Floor::default()
        },
        mnt,
        &cfg,
    )
}
