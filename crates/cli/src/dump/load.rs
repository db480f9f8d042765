//! A load: records (`format.rs`) read in order and made in a `Sink`
//! through its own operations. Memory: the new numbers of the source's
//! directories and of its inodes with several names, and the records of
//! the directories open on the walk's path (their times and owners are set
//! after their entries, which change them).

use super::format::{char_kind, unb64, unts, Counts, Head, Node, Rec, VERSION};
use super::fs_err;
use super::tree::Sink;
use shoal_core::engine::TimeSet;
use shoal_core::{Ino, Kind, SetAttr, ROOT_INO};
use std::collections::HashMap;
use std::io::BufRead;

/// What a load made, and what it could not keep.
#[derive(Default, Debug)]
pub struct Loaded {
    pub counts: Counts,
    /// Inodes whose chattr flags the destination keeps no place for.
    pub flags_lost: u64,
}

/// The dump's head, read from its first line.
pub fn head(line: &str) -> Result<Head, String> {
    match serde_json::from_str::<Rec>(line) {
        Ok(Rec::Head(h)) if h.version == VERSION => Ok(h),
        Ok(Rec::Head(h)) => Err(format!(
            "a dump of format version {}; this shoal reads version {VERSION}: load it with a shoal that reads it",
            h.version
        )),
        _ => Err("not a shoal dump (its first line is no shoal-dump head)".into()),
    }
}

pub fn load(
    input: &mut dyn BufRead,
    sink: &dyn Sink,
    tick: &dyn Fn(&Counts),
) -> Result<Loaded, String> {
    let mut line = String::new();
    let mut n = 0u64;
    let mut next = |line: &mut String, n: &mut u64| -> Result<bool, String> {
        line.clear();
        *n += 1;
        let got = input
            .read_line(line)
            .map_err(|e| format!("read the dump (line {n}): {e}"))?;
        Ok(got > 0)
    };
    if !next(&mut line, &mut n)? {
        return Err("the dump is empty".into());
    }
    head(line.trim_end())?;
    let mut l = Load {
        sink,
        map: HashMap::new(),
        open_dirs: Vec::new(),
        file: None,
        done: Loaded::default(),
    };
    loop {
        if !next(&mut line, &mut n)? {
            return Err(format!(
                "the dump ends at line {} without its end record: it was cut short; take it again",
                n - 1
            ));
        }
        let rec: Rec = serde_json::from_str(line.trim_end())
            .map_err(|e| format!("line {n} of the dump: {e}"))?;
        let at = |e: String| format!("line {n} of the dump: {e}");
        match rec {
            Rec::Data { o, b } => {
                let f = l
                    .file
                    .as_mut()
                    .ok_or_else(|| at("data with no file before it".into()))?;
                let bytes = unb64(&b).map_err(at)?;
                if !f.opened {
                    sink.open(f.ino).map_err(|e| at(fs_err("open", e)))?;
                    f.opened = true;
                }
                sink.write(f.ino, o, &bytes)
                    .map_err(|e| at(fs_err("write", e)))?;
                f.end = f.end.max(o + bytes.len() as u64);
                l.done.counts.bytes += bytes.len() as u64;
                continue;
            }
            Rec::Head(_) => return Err(at("a second head".into())),
            Rec::Failed { msg } => {
                return Err(format!(
                    "the dump failed at its source at line {n}: {msg}; take it again"
                ))
            }
            _ => {}
        }
        l.end_file().map_err(at)?;
        match rec {
            Rec::Node(node) => l.node(node).map_err(at)?,
            Rec::Link { p, n: name, i } => {
                let ino = l.new_ino(i).map_err(at)?;
                let parent = l.new_ino(p).map_err(at)?;
                sink.link(ino, parent, &name.bytes().map_err(at)?)
                    .map_err(|e| at(fs_err("link", e)))?;
                l.done.counts.links += 1;
            }
            Rec::EndDir { i } => {
                let (ino, node) = l
                    .open_dirs
                    .pop()
                    .filter(|(_, d)| d.i == i)
                    .ok_or_else(|| at(format!("the end of directory {i}, not open")))?;
                l.finish(ino, &node, None).map_err(at)?;
            }
            Rec::End(c) => {
                if c != l.done.counts {
                    return Err(format!(
                        "the dump says it holds {c:?}, the load made {:?}",
                        l.done.counts
                    ));
                }
                sink.finish()
                    .map_err(|e| fs_err("sync the destination", e))?;
                return Ok(l.done);
            }
            Rec::Data { .. } | Rec::Head(_) | Rec::Failed { .. } => unreachable!(),
        }
        tick(&l.done.counts);
    }
}

struct Load<'a> {
    sink: &'a dyn Sink,
    /// Source inode numbers to new ones: directories, and inodes with
    /// several names.
    map: HashMap<u64, Ino>,
    /// The directories on the walk's path, whose attributes are set at
    /// their end record.
    open_dirs: Vec<(Ino, Node)>,
    /// The file whose data records follow.
    file: Option<File>,
    done: Loaded,
}

/// A file made by the load, its data records coming.
struct File {
    ino: Ino,
    node: Node,
    /// Opened at its first data record: a file with none (an empty file,
    /// or all holes) is never opened, an open and a close less (each a
    /// round trip or two to etcd).
    opened: bool,
    /// Where the bytes written end: its size now.
    end: u64,
}

impl Load<'_> {
    fn new_ino(&self, old: u64) -> Result<Ino, String> {
        self.map
            .get(&old)
            .copied()
            .ok_or_else(|| format!("inode {old} named before it was made"))
    }

    fn node(&mut self, n: Node) -> Result<(), String> {
        let kind = char_kind(n.k).ok_or_else(|| format!("unknown kind {:?}", n.k))?;
        if n.p == 0 {
            if kind != Kind::Dir {
                return Err("the dump's root is not a directory".into());
            }
            self.map.insert(n.i, ROOT_INO);
            self.open_dirs.push((ROOT_INO, n));
            self.done.counts.nodes += 1;
            return Ok(());
        }
        let parent = self.new_ino(n.p)?;
        let name = n.n.bytes()?;
        let target = match &n.l {
            Some(t) => t.bytes()?,
            None => Vec::new(),
        };
        // Owner-writable while it is filled; the mode is set at the end
        // (a symlink's, which no setattr changes, at once).
        let perm = if kind == Kind::Symlink { n.m } else { 0o700 };
        let ino = self
            .sink
            .make(parent, &name, kind, perm, n.r, &target)
            .map_err(|e| fs_err(&format!("make {:?}", String::from_utf8_lossy(&name)), e))?;
        self.done.counts.nodes += 1;
        if kind == Kind::Dir || n.nl > 1 {
            self.map.insert(n.i, ino);
        }
        match kind {
            Kind::Dir => self.open_dirs.push((ino, n)),
            Kind::File => {
                self.file = Some(File {
                    ino,
                    node: n,
                    opened: false,
                    end: 0,
                })
            }
            _ => self.finish(ino, &n, None)?,
        }
        Ok(())
    }

    fn end_file(&mut self) -> Result<(), String> {
        if let Some(f) = self.file.take() {
            if f.opened {
                self.sink.close(f.ino).map_err(|e| fs_err("close", e))?;
            }
            self.finish(f.ino, &f.node, Some(f.end))?;
        }
        Ok(())
    }

    /// An inode's size, xattrs, owner, mode, times and flags, in an order
    /// none undoes: the times after the xattrs, the flags last (immutable
    /// refuses the rest). The owner, mode and times go in one setattr: with
    /// the mode in it, a change of owner clears no setuid or setgid bit
    /// (`Engine::setattr`, `ClusterFs::set_attrs`), so it is what a chown
    /// then a chmod would make, in one transaction instead of two. A file's
    /// size is set only when the bytes written (`written`, where they end)
    /// do not make it already: a file made empty and loaded empty needs none.
    fn finish(&mut self, ino: Ino, n: &Node, written: Option<u64>) -> Result<(), String> {
        let s = self.sink;
        let e = |what: &str| {
            let what = what.to_string();
            move |e| fs_err(&what, e)
        };
        if n.k == 'f' && written != Some(n.s) {
            s.setattr(
                ino,
                &SetAttr {
                    size: Some(n.s),
                    ..Default::default()
                },
            )
            .map_err(e("set the size"))?;
        }
        for (k, v) in &n.x {
            s.setxattr(ino, &k.bytes()?, &unb64(v)?)
                .map_err(e("set an xattr"))?;
        }
        s.setattr(
            ino,
            &SetAttr {
                uid: Some(n.u),
                gid: Some(n.g),
                mode: (n.k != 'l').then_some(n.m as u32),
                atime: Some(TimeSet::At(unts(n.a))),
                mtime: Some(TimeSet::At(unts(n.mt))),
                ctime: Some(unts(n.ct)),
                ..Default::default()
            },
        )
        .map_err(e("set the owner, mode and times"))?;
        if n.fl != 0 && !s.set_flags(ino, n.fl).map_err(e("set the flags"))? {
            self.done.flags_lost += 1;
        }
        Ok(())
    }
}
