//! A sequential reference model of a POSIX namespace, a random operation
//! generator, and one trait over what is tested (the engine through its
//! library API, or any mounted path through system calls). The model test,
//! the power-cut test and the kill test all use it, so "the tree equals the
//! model" means the same thing everywhere.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};

/// Error classes compared between model and target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum E {
    NotFound,
    Exists,
    NotEmpty,
    NotDir,
    IsDir,
    Invalid,
    NotPermitted,
    Other(String),
}

pub type R<T> = std::result::Result<T, E>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum K {
    File,
    Dir,
}

/// What the tests drive: paths are relative to the filesystem root, '/'-separated.
pub trait Target: Sync {
    fn create(&self, p: &str) -> R<()>;
    fn mkdir(&self, p: &str) -> R<()>;
    fn unlink(&self, p: &str) -> R<()>;
    fn rmdir(&self, p: &str) -> R<()>;
    fn rename(&self, a: &str, b: &str) -> R<()>;
    fn link(&self, a: &str, b: &str) -> R<()>;
    fn write(&self, p: &str, off: u64, data: &[u8]) -> R<()>;
    fn truncate(&self, p: &str, size: u64) -> R<()>;
    fn fsync(&self, p: &str) -> R<()>;
    fn read_all(&self, p: &str) -> R<Vec<u8>>;
    /// (name, kind, nlink) of each entry.
    fn list(&self, dir: &str) -> R<Vec<(String, K, u32)>>;
}

#[derive(Clone, Debug)]
pub enum Op {
    Create(String),
    Mkdir(String),
    Unlink(String),
    Rmdir(String),
    Rename(String, String),
    Link(String, String),
    Write(String, u64, Vec<u8>),
    Truncate(String, u64),
    Fsync(String),
}

#[derive(Clone, Debug)]
enum Node {
    File { data: Vec<u8>, nlink: u32 },
    Dir { children: BTreeMap<String, usize> },
}

/// The model: an arena of nodes; node 0 is the root.
#[derive(Clone, Debug)]
pub struct Model {
    nodes: Vec<Node>,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            nodes: vec![Node::Dir {
                children: BTreeMap::new(),
            }],
        }
    }
}

fn split(p: &str) -> (&str, &str) {
    match p.rfind('/') {
        Some(i) => (&p[..i], &p[i + 1..]),
        None => ("", p),
    }
}

impl Model {
    /// The node at path `p`: the model's inode identity (links share it,
    /// renames keep it).
    pub fn node_of(&self, p: &str) -> Option<usize> {
        self.resolve(p)
    }
    fn resolve(&self, p: &str) -> Option<usize> {
        let mut n = 0;
        for c in p.split('/').filter(|c| !c.is_empty()) {
            match &self.nodes[n] {
                Node::Dir { children } => n = *children.get(c)?,
                Node::File { .. } => return None,
            }
        }
        Some(n)
    }
    fn parent_dir(&self, p: &str) -> R<usize> {
        let (d, _) = split(p);
        let n = self.resolve(d).ok_or(E::NotFound)?;
        match self.nodes[n] {
            Node::Dir { .. } => Ok(n),
            _ => Err(E::NotDir),
        }
    }
    fn children(&mut self, d: usize) -> &mut BTreeMap<String, usize> {
        match &mut self.nodes[d] {
            Node::Dir { children } => children,
            _ => unreachable!("not a dir"),
        }
    }
    fn is_dir(&self, n: usize) -> bool {
        matches!(self.nodes[n], Node::Dir { .. })
    }
    fn add(&mut self, p: &str, node: Node) -> R<()> {
        let d = self.parent_dir(p)?;
        let (_, name) = split(p);
        if self.children(d).contains_key(name) {
            return Err(E::Exists);
        }
        self.nodes.push(node);
        let id = self.nodes.len() - 1;
        self.children(d).insert(name.to_string(), id);
        Ok(())
    }
    fn file(&mut self, p: &str) -> R<&mut Vec<u8>> {
        let n = self.resolve(p).ok_or(E::NotFound)?;
        match &mut self.nodes[n] {
            Node::File { data, .. } => Ok(data),
            Node::Dir { .. } => Err(E::IsDir),
        }
    }
    fn contains(&self, anc: usize, mut target: &str, p_anc: &str) -> bool {
        // Is path `target` inside (or equal to) the directory at path `p_anc`?
        let _ = anc;
        loop {
            if target == p_anc {
                return true;
            }
            match target.rfind('/') {
                Some(i) => target = &target[..i],
                None => return p_anc.is_empty(),
            }
        }
    }

    /// Apply an op; the result is what a POSIX filesystem must answer.
    pub fn apply(&mut self, op: &Op) -> R<()> {
        match op {
            Op::Create(p) => self.add(
                p,
                Node::File {
                    data: vec![],
                    nlink: 1,
                },
            ),
            Op::Mkdir(p) => self.add(
                p,
                Node::Dir {
                    children: BTreeMap::new(),
                },
            ),
            Op::Unlink(p) => {
                let d = self.parent_dir(p)?;
                let (_, name) = split(p);
                let n = *self.children(d).get(name).ok_or(E::NotFound)?;
                if self.is_dir(n) {
                    return Err(E::IsDir);
                }
                self.children(d).remove(name);
                if let Node::File { nlink, .. } = &mut self.nodes[n] {
                    *nlink -= 1;
                }
                Ok(())
            }
            Op::Rmdir(p) => {
                let d = self.parent_dir(p)?;
                let (_, name) = split(p);
                let n = *self.children(d).get(name).ok_or(E::NotFound)?;
                match &self.nodes[n] {
                    Node::File { .. } => return Err(E::NotDir),
                    Node::Dir { children } if !children.is_empty() => return Err(E::NotEmpty),
                    _ => {}
                }
                self.children(d).remove(name);
                Ok(())
            }
            Op::Rename(a, b) => {
                let da = self.parent_dir(a)?;
                let (_, na) = split(a);
                let sa = *self.children(da).get(na).ok_or(E::NotFound)?;
                let db = self.parent_dir(b)?;
                let (_, nb) = split(b);
                if a == b {
                    return Ok(());
                }
                if self.is_dir(sa) && self.contains(sa, b, a) {
                    return Err(E::Invalid);
                }
                // The target is an ancestor of the source: Linux says ENOTEMPTY
                // before looking at kinds.
                if b.len() < a.len() && self.contains(0, a, b) && self.children(db).contains_key(nb)
                {
                    return Err(E::NotEmpty);
                }
                if let Some(&tb) = self.children(db).get(nb) {
                    if tb == sa {
                        return Ok(());
                    }
                    match (self.is_dir(sa), &self.nodes[tb]) {
                        (true, Node::File { .. }) => return Err(E::NotDir),
                        (false, Node::Dir { .. }) => return Err(E::IsDir),
                        (true, Node::Dir { children }) if !children.is_empty() => {
                            return Err(E::NotEmpty)
                        }
                        _ => {}
                    }
                    if let Node::File { nlink, .. } = &mut self.nodes[tb] {
                        *nlink -= 1;
                    }
                }
                self.children(da).remove(na);
                self.children(db).insert(nb.to_string(), sa);
                Ok(())
            }
            Op::Link(a, b) => {
                let sa = self.resolve(a).ok_or(E::NotFound)?;
                let db = self.parent_dir(b)?;
                let (_, nb) = split(b);
                // Linux checks the new name before the kind of the old one.
                if self.children(db).contains_key(nb) {
                    return Err(E::Exists);
                }
                if self.is_dir(sa) {
                    return Err(E::NotPermitted);
                }
                self.children(db).insert(nb.to_string(), sa);
                if let Node::File { nlink, .. } = &mut self.nodes[sa] {
                    *nlink += 1;
                }
                Ok(())
            }
            Op::Write(p, off, data) => {
                let f = self.file(p)?;
                let end = *off as usize + data.len();
                if f.len() < end {
                    f.resize(end, 0);
                }
                f[*off as usize..end].copy_from_slice(data);
                Ok(())
            }
            Op::Truncate(p, size) => {
                let f = self.file(p)?;
                f.resize(*size as usize, 0);
                Ok(())
            }
            Op::Fsync(p) => self.resolve(p).map(|_| ()).ok_or(E::NotFound),
        }
    }

    /// Directories (paths) under the root whose names pass `own`, plus `shared` ones.
    pub fn dirs(&self, own: &dyn Fn(&str) -> bool) -> Vec<String> {
        let mut out = vec![String::new()];
        let mut stack = vec![(0usize, String::new())];
        while let Some((n, p)) = stack.pop() {
            if let Node::Dir { children } = &self.nodes[n] {
                for (name, &c) in children {
                    if self.is_dir(c) && own(name) {
                        let cp = if p.is_empty() {
                            name.clone()
                        } else {
                            format!("{p}/{name}")
                        };
                        out.push(cp.clone());
                        stack.push((c, cp));
                    }
                }
            }
        }
        out
    }

    /// Canonical state: (path, kind, nlink, data) of every entry passing `own`.
    pub fn state(&self, own: &dyn Fn(&str) -> bool) -> State {
        let mut out = BTreeSet::new();
        let mut stack = vec![(0usize, String::new())];
        while let Some((n, p)) = stack.pop() {
            if let Node::Dir { children } = &self.nodes[n] {
                for (name, &c) in children {
                    if !own(name) {
                        continue;
                    }
                    let cp = if p.is_empty() {
                        name.clone()
                    } else {
                        format!("{p}/{name}")
                    };
                    match &self.nodes[c] {
                        Node::File { data, nlink } => {
                            out.insert((cp, K::File, *nlink, data.clone()));
                        }
                        Node::Dir { .. } => {
                            out.insert((cp.clone(), K::Dir, 0, vec![]));
                            stack.push((c, cp));
                        }
                    }
                }
            }
        }
        out
    }
}

/// A tree's canonical state: (path, kind, nlink, content) of every entry.
pub type State = BTreeSet<(String, K, u32, Vec<u8>)>;

/// Walk a target and return its canonical state, with the same filter.
pub fn target_state(t: &dyn Target, own: &dyn Fn(&str) -> bool) -> R<State> {
    let mut out = BTreeSet::new();
    let mut stack = vec![String::new()];
    while let Some(p) = stack.pop() {
        for (name, k, nlink) in t.list(&p)? {
            if !own(&name) {
                continue;
            }
            let cp = if p.is_empty() {
                name.clone()
            } else {
                format!("{p}/{name}")
            };
            match k {
                K::File => {
                    let data = t.read_all(&cp)?;
                    out.insert((cp, K::File, nlink, data));
                }
                K::Dir => {
                    out.insert((cp.clone(), K::Dir, 0, vec![]));
                    stack.push(cp);
                }
            }
        }
    }
    Ok(out)
}

/// Random operations over one thread's names (`t{tid}_{k}`) in the shared
/// directories and the thread's own directories.
pub struct Gen {
    pub rng: SmallRng,
    pub tid: usize,
    pub names: usize,
    pub max_off: u64,
}

impl Gen {
    pub fn new(seed: u64, tid: usize) -> Gen {
        Gen {
            rng: SmallRng::seed_from_u64(seed ^ (tid as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            tid,
            names: 6,
            max_off: 20000,
        }
    }
    pub fn own(&self) -> impl Fn(&str) -> bool + '_ {
        let prefix = format!("t{}_", self.tid);
        move |n: &str| n.starts_with(&prefix) || n.starts_with("s")
    }
    fn path(&mut self, m: &Model) -> String {
        let prefix = format!("t{}_", self.tid);
        let dirs = m.dirs(&|n: &str| n.starts_with(&prefix) || n.starts_with('s'));
        let d = &dirs[self.rng.gen_range(0..dirs.len())];
        let name = format!("t{}_{}", self.tid, self.rng.gen_range(0..self.names));
        if d.is_empty() {
            name
        } else {
            format!("{d}/{name}")
        }
    }
    pub fn next(&mut self, m: &Model) -> Op {
        let p = self.path(m);
        match self.rng.gen_range(0..100) {
            0..=19 => Op::Create(p),
            20..=27 => Op::Mkdir(p),
            28..=39 => Op::Unlink(p),
            40..=44 => Op::Rmdir(p),
            45..=59 => {
                let q = self.path(m);
                Op::Rename(p, q)
            }
            60..=66 => {
                let q = self.path(m);
                Op::Link(p, q)
            }
            67..=86 => {
                let off = if self.rng.gen_bool(0.2) {
                    self.rng.gen_range(0..self.max_off)
                } else {
                    self.rng.gen_range(0..6000)
                };
                let len = self.rng.gen_range(1..5000);
                let byte = self.rng.gen::<u8>();
                Op::Write(p, off, vec![byte; len])
            }
            87..=94 => Op::Truncate(p, self.rng.gen_range(0..9000)),
            _ => Op::Fsync(p),
        }
    }
}

/// Apply `op` to a target.
pub fn run(t: &dyn Target, op: &Op) -> R<()> {
    match op {
        Op::Create(p) => t.create(p),
        Op::Mkdir(p) => t.mkdir(p),
        Op::Unlink(p) => t.unlink(p),
        Op::Rmdir(p) => t.rmdir(p),
        Op::Rename(a, b) => t.rename(a, b),
        Op::Link(a, b) => t.link(a, b),
        Op::Write(p, o, d) => t.write(p, *o, d),
        Op::Truncate(p, s) => t.truncate(p, *s),
        Op::Fsync(p) => t.fsync(p),
    }
}

// ------------------------------------------------------------------ targets

/// The engine, driven as `NsTarget` drives either mode (through
/// `shoal_core::Namespace`, as root; paths resolved by lookups).
pub struct EngineTarget<'a> {
    pub e: &'a shoal_core::Engine,
}

fn ee(e: shoal_core::Error) -> E {
    use shoal_core::Error as X;
    match e {
        X::NotFound => E::NotFound,
        X::Exists => E::Exists,
        X::NotEmpty => E::NotEmpty,
        X::NotDir => E::NotDir,
        X::IsDir => E::IsDir,
        X::Invalid => E::Invalid,
        X::NotPermitted => E::NotPermitted,
        other => E::Other(other.to_string()),
    }
}

impl EngineTarget<'_> {
    /// The engine through the one namespace surface, as root: the same
    /// driver as for a shared namespace (`NsTarget`).
    fn ns(&self) -> NsTarget<'_> {
        NsTarget {
            ns: self.e,
            ctx: shoal_core::Ctx::root(),
        }
    }
    /// The inode number at path `p`.
    pub fn resolve(&self, p: &str) -> R<u64> {
        self.ns().resolve(p)
    }
}

impl Target for EngineTarget<'_> {
    fn create(&self, p: &str) -> R<()> {
        self.ns().create(p)
    }
    fn mkdir(&self, p: &str) -> R<()> {
        self.ns().mkdir(p)
    }
    fn unlink(&self, p: &str) -> R<()> {
        self.ns().unlink(p)
    }
    fn rmdir(&self, p: &str) -> R<()> {
        self.ns().rmdir(p)
    }
    fn rename(&self, a: &str, b: &str) -> R<()> {
        self.ns().rename(a, b)
    }
    fn link(&self, a: &str, b: &str) -> R<()> {
        self.ns().link(a, b)
    }
    fn write(&self, p: &str, off: u64, data: &[u8]) -> R<()> {
        self.ns().write(p, off, data)
    }
    fn truncate(&self, p: &str, size: u64) -> R<()> {
        self.ns().truncate(p, size)
    }
    fn fsync(&self, p: &str) -> R<()> {
        self.ns().fsync(p)
    }
    fn read_all(&self, p: &str) -> R<Vec<u8>> {
        self.ns().read_all(p)
    }
    fn list(&self, dir: &str) -> R<Vec<(String, K, u32)>> {
        self.ns().list(dir)
    }
}

/// Either mode through the one namespace surface (`shoal_core::Namespace`:
/// the embedded engine, or a namespace on a shared store), as the caller
/// `ctx` (`Ctx::user` for a permission-checked one). Paths resolve by
/// lookups, as `ctx`.
pub struct NsTarget<'a> {
    pub ns: &'a dyn shoal_core::Namespace,
    pub ctx: shoal_core::Ctx,
}

impl NsTarget<'_> {
    /// The inode number at path `p`.
    pub fn resolve(&self, p: &str) -> R<u64> {
        let mut ino = shoal_core::ROOT_INO;
        for c in p.split('/').filter(|c| !c.is_empty()) {
            ino = self
                .ns
                .lookup(&self.ctx, ino, c.as_bytes())
                .map_err(ee)?
                .ino;
        }
        Ok(ino)
    }
    fn parent(&self, p: &str) -> R<(u64, String)> {
        let (d, n) = split(p);
        Ok((self.resolve(d)?, n.to_string()))
    }
}

impl Target for NsTarget<'_> {
    fn create(&self, p: &str) -> R<()> {
        let (d, n) = self.parent(p)?;
        self.ns
            .create(&self.ctx, d, n.as_bytes(), 0o644)
            .map(|_| ())
            .map_err(ee)
    }
    fn mkdir(&self, p: &str) -> R<()> {
        let (d, n) = self.parent(p)?;
        self.ns
            .mkdir(&self.ctx, d, n.as_bytes(), 0o755)
            .map(|_| ())
            .map_err(ee)
    }
    fn unlink(&self, p: &str) -> R<()> {
        let (d, n) = self.parent(p)?;
        self.ns.unlink(&self.ctx, d, n.as_bytes()).map_err(ee)
    }
    fn rmdir(&self, p: &str) -> R<()> {
        let (d, n) = self.parent(p)?;
        self.ns.rmdir(&self.ctx, d, n.as_bytes()).map_err(ee)
    }
    fn rename(&self, a: &str, b: &str) -> R<()> {
        let (da, na) = self.parent(a)?;
        let (db, nb) = self.parent(b)?;
        self.ns
            .rename(&self.ctx, da, na.as_bytes(), db, nb.as_bytes(), 0)
            .map_err(ee)
    }
    fn link(&self, a: &str, b: &str) -> R<()> {
        let ino = self.resolve(a)?;
        let (db, nb) = self.parent(b)?;
        self.ns
            .link(&self.ctx, ino, db, nb.as_bytes())
            .map(|_| ())
            .map_err(ee)
    }
    fn write(&self, p: &str, off: u64, data: &[u8]) -> R<()> {
        let ino = self.resolve(p)?;
        // open(2) for writing: a directory EISDIR before any permission.
        if self.ns.getattr(&self.ctx, ino).map_err(ee)?.kind == shoal_core::Kind::Dir {
            return Err(E::IsDir);
        }
        self.ns.open(&self.ctx, ino, 2).map_err(ee)?;
        let w = self.ns.write(&self.ctx, ino, off, data).map(|_| ());
        let r = self.ns.release(&self.ctx, ino);
        w.and(r).map_err(ee)
    }
    fn truncate(&self, p: &str, size: u64) -> R<()> {
        let ino = self.resolve(p)?;
        let sa = shoal_core::SetAttr {
            size: Some(size),
            ..Default::default()
        };
        self.ns.setattr(&self.ctx, ino, &sa).map(|_| ()).map_err(ee)
    }
    fn fsync(&self, p: &str) -> R<()> {
        let ino = self.resolve(p)?;
        self.ns.fsync(&self.ctx, ino).map_err(ee)
    }
    fn read_all(&self, p: &str) -> R<Vec<u8>> {
        let ino = self.resolve(p)?;
        let size = self.ns.getattr(&self.ctx, ino).map_err(ee)?.size;
        self.ns.read(&self.ctx, ino, 0, size as u32).map_err(ee)
    }
    fn list(&self, dir: &str) -> R<Vec<(String, K, u32)>> {
        let ino = self.resolve(dir)?;
        let mut out = Vec::new();
        for (name, ino, kind) in self.ns.list(&self.ctx, ino).map_err(ee)? {
            let k = if kind == shoal_core::Kind::Dir {
                K::Dir
            } else {
                K::File
            };
            let nlink = match k {
                K::Dir => 0,
                K::File => self.ns.getattr(&self.ctx, ino).map_err(ee)?.nlink,
            };
            out.push((String::from_utf8_lossy(&name).into_owned(), k, nlink));
        }
        Ok(out)
    }
}

/// A mounted path through system calls.
pub struct PathTarget {
    pub root: std::path::PathBuf,
}

fn ie(e: std::io::Error) -> E {
    match e.raw_os_error() {
        Some(libc::ENOENT) => E::NotFound,
        Some(libc::EEXIST) => E::Exists,
        Some(libc::ENOTEMPTY) => E::NotEmpty,
        Some(libc::ENOTDIR) => E::NotDir,
        Some(libc::EISDIR) => E::IsDir,
        Some(libc::EINVAL) => E::Invalid,
        Some(libc::EPERM) => E::NotPermitted,
        _ => E::Other(e.to_string()),
    }
}

impl PathTarget {
    fn p(&self, p: &str) -> std::path::PathBuf {
        self.root.join(p)
    }
}

impl Target for PathTarget {
    fn create(&self, p: &str) -> R<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.p(p))
            .map(|_| ())
            .map_err(ie)
    }
    fn mkdir(&self, p: &str) -> R<()> {
        std::fs::create_dir(self.p(p)).map_err(ie)
    }
    fn unlink(&self, p: &str) -> R<()> {
        std::fs::remove_file(self.p(p)).map_err(ie)
    }
    fn rmdir(&self, p: &str) -> R<()> {
        std::fs::remove_dir(self.p(p)).map_err(ie)
    }
    fn rename(&self, a: &str, b: &str) -> R<()> {
        std::fs::rename(self.p(a), self.p(b)).map_err(ie)
    }
    fn link(&self, a: &str, b: &str) -> R<()> {
        std::fs::hard_link(self.p(a), self.p(b)).map_err(ie)
    }
    fn write(&self, p: &str, off: u64, data: &[u8]) -> R<()> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(self.p(p))
            .map_err(ie)?;
        f.write_all_at(data, off).map_err(ie)
    }
    fn truncate(&self, p: &str, size: u64) -> R<()> {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(self.p(p))
            .map_err(ie)?;
        f.set_len(size).map_err(ie)
    }
    fn fsync(&self, p: &str) -> R<()> {
        let f = std::fs::File::open(self.p(p)).map_err(ie)?;
        f.sync_all().map_err(ie)
    }
    fn read_all(&self, p: &str) -> R<Vec<u8>> {
        std::fs::read(self.p(p)).map_err(ie)
    }
    fn list(&self, dir: &str) -> R<Vec<(String, K, u32)>> {
        use std::os::unix::fs::MetadataExt;
        let mut out = Vec::new();
        for e in std::fs::read_dir(self.p(dir)).map_err(ie)? {
            let e = e.map_err(ie)?;
            let md = std::fs::symlink_metadata(e.path()).map_err(ie)?;
            let k = if md.is_dir() { K::Dir } else { K::File };
            out.push((
                e.file_name().to_string_lossy().into_owned(),
                k,
                if k == K::Dir { 0 } else { md.nlink() as u32 },
            ));
        }
        Ok(out)
    }
}

/// A short description of how two states differ (paths only, data by length
/// and first differing offset), for assertion messages.
pub fn diff(got: &State, want: &State) -> String {
    let g: BTreeMap<&String, (&K, &u32, &Vec<u8>)> =
        got.iter().map(|(p, k, n, d)| (p, (k, n, d))).collect();
    let w: BTreeMap<&String, (&K, &u32, &Vec<u8>)> =
        want.iter().map(|(p, k, n, d)| (p, (k, n, d))).collect();
    let mut out = String::new();
    for (p, (k, n, d)) in &w {
        match g.get(p) {
            None => out += &format!("missing {p} ({k:?})\n"),
            Some((k2, n2, d2)) if (k, n) != (k2, n2) || d != d2 => {
                let first = d.iter().zip(d2.iter()).position(|(a, b)| a != b);
                out += &format!(
                    "differs {p}: kind {k:?}/{k2:?} nlink {n}/{n2} len {}/{} first diff at {first:?}\n",
                    d.len(),
                    d2.len()
                );
            }
            _ => {}
        }
    }
    for p in g.keys() {
        if !w.contains_key(p) {
            out += &format!("unexpected {p}\n");
        }
    }
    out
}
