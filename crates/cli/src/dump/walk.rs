//! A dump: a depth-first walk of a `Tree`, written as records
//! (`format.rs`). Memory: one page of entries per directory on the walk's
//! path, and the numbers of the inodes with more than one name seen so far.

use super::format::{b64, Counts, Head, Name, Node, Rec};
use super::fs_err;
use super::tree::{Cursor, Tree};
use shoal_core::{Error, Ino, Kind};
use std::collections::HashSet;
use std::io::Write;

/// Bytes of file data in one record.
pub const CHUNK: u64 = 1 << 20;
/// Entries listed at a time.
const PAGE: usize = 512;

/// What the walk is doing, for a progress line.
pub trait Progress {
    fn tick(&self, _c: &Counts) {}
}
impl Progress for () {}

pub fn write_rec(out: &mut dyn Write, r: &Rec) -> Result<(), String> {
    serde_json::to_writer(&mut *out, r).map_err(|e| format!("write the dump: {e}"))?;
    out.write_all(b"\n")
        .map_err(|e| format!("write the dump: {e}"))
}

/// The inode at `path` (slash-separated, from the root) in `tree`.
pub fn resolve(tree: &dyn Tree, path: &str) -> Result<Ino, String> {
    let mut ino = shoal_core::ROOT_INO;
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        let a = tree
            .lookup(ino, part.as_bytes())
            .map_err(|e| fs_err(&format!("--subtree {path}: {part}"), e))?;
        if a.kind != Kind::Dir {
            return Err(format!("--subtree {path}: {part} is not a directory"));
        }
        ino = a.ino;
    }
    Ok(ino)
}

/// Dump the tree under `root` to `out`: the head, every record, the end.
/// An error of the source is written as an `error` record (so a reader of
/// the stream knows it is not whole) and returned.
pub fn dump(
    tree: &dyn Tree,
    root: Ino,
    head: Head,
    out: &mut dyn Write,
    progress: &dyn Progress,
) -> Result<Counts, String> {
    write_rec(out, &Rec::Head(head))?;
    let mut w = Walk {
        tree,
        out,
        seen: HashSet::new(),
        counts: Counts::default(),
        progress,
    };
    match w.run(root) {
        Ok(()) => {
            let c = w.counts;
            write_rec(w.out, &Rec::End(c))?;
            w.out.flush().map_err(|e| format!("write the dump: {e}"))?;
            Ok(c)
        }
        Err(msg) => {
            let _ = write_rec(w.out, &Rec::Failed { msg: msg.clone() });
            let _ = w.out.flush();
            Err(msg)
        }
    }
}

struct Walk<'a> {
    tree: &'a dyn Tree,
    out: &'a mut dyn Write,
    /// Inodes with several names, dumped once: later names are links.
    seen: HashSet<Ino>,
    counts: Counts,
    progress: &'a dyn Progress,
}

struct Frame {
    ino: Ino,
    at: Cursor,
    page: std::vec::IntoIter<(Vec<u8>, Ino, Kind)>,
    done: bool,
}

impl Walk<'_> {
    fn run(&mut self, root: Ino) -> Result<(), String> {
        let a = self.tree.getattr(root).map_err(|e| fs_err("the root", e))?;
        self.node(0, b"", &a)?;
        let mut stack = vec![Frame {
            ino: root,
            at: Cursor::default(),
            page: Vec::new().into_iter(),
            done: false,
        }];
        while let Some(f) = stack.last_mut() {
            let next = match f.page.next() {
                Some(x) => Some(x),
                None if f.done => None,
                None => {
                    let got = self
                        .tree
                        .list(f.ino, &mut f.at, PAGE)
                        .map_err(|e| fs_err(&format!("list directory {}", f.ino), e))?;
                    f.done = got.is_empty();
                    f.page = got.into_iter();
                    continue;
                }
            };
            let parent = f.ino;
            let Some((name, ino, _)) = next else {
                write_rec(self.out, &Rec::EndDir { i: parent })?;
                stack.pop();
                continue;
            };
            let a = match self.tree.getattr(ino) {
                Ok(a) => a,
                // Removed since it was listed (a live source).
                Err(Error::NotFound) => continue,
                Err(e) => return Err(fs_err(&format!("inode {ino}"), e)),
            };
            if a.kind != Kind::Dir && a.nlink > 1 && !self.seen.insert(ino) {
                write_rec(
                    self.out,
                    &Rec::Link {
                        p: parent,
                        n: Name::of(&name),
                        i: ino,
                    },
                )?;
                self.counts.links += 1;
                continue;
            }
            self.node(parent, &name, &a)?;
            if a.kind == Kind::Dir {
                stack.push(Frame {
                    ino,
                    at: Cursor::default(),
                    page: Vec::new().into_iter(),
                    done: false,
                });
            }
        }
        Ok(())
    }

    /// An inode's record, and a file's data after it.
    fn node(&mut self, parent: Ino, name: &[u8], a: &shoal_core::Attr) -> Result<(), String> {
        let t = self.tree;
        let what = |e| fs_err(&format!("inode {}", a.ino), e);
        let mut n = Node::of(parent, name, a);
        n.fl = t.flags(a.ino).map_err(what)?;
        if a.kind == Kind::Symlink {
            n.l = Some(Name::of(&t.readlink(a.ino).map_err(what)?));
        }
        n.x = t
            .xattrs(a.ino)
            .map_err(what)?
            .into_iter()
            .map(|(k, v)| (Name::of(&k), b64(&v)))
            .collect();
        write_rec(self.out, &Rec::Node(n))?;
        self.counts.nodes += 1;
        if a.kind == Kind::File && a.size > 0 {
            t.open(a.ino).map_err(what)?;
            let r = self.data(a.ino, a.size);
            t.close(a.ino);
            r?;
        }
        self.progress.tick(&self.counts);
        Ok(())
    }

    /// A file's bytes, holes and all-zero chunks left out.
    fn data(&mut self, ino: Ino, size: u64) -> Result<(), String> {
        let t = self.tree;
        let what = |e| fs_err(&format!("inode {ino}'s data"), e);
        let mut off = 0;
        while let Some(d) = t.data_from(ino, off, size).map_err(what)? {
            let h = t.hole_from(ino, d, size).map_err(what)?.max(d + 1);
            let mut at = d;
            while at < h {
                let len = (h - at).min(CHUNK - at % CHUNK);
                let b = t.read(ino, at, len as u32).map_err(what)?;
                if b.is_empty() {
                    // Cut short since its size was read (a live source).
                    return Ok(());
                }
                if b.iter().any(|&x| x != 0) {
                    write_rec(self.out, &Rec::Data { o: at, b: b64(&b) })?;
                    self.counts.bytes += b.len() as u64;
                }
                at += b.len() as u64;
            }
            off = h;
            if off >= size {
                break;
            }
        }
        Ok(())
    }
}
