//! Sorting within a memory bound, for fsck: e2fsck's scratch files.
//!
//! A `Sorter` takes records (byte strings whose byte order is the order
//! wanted: big-endian integers first) into one buffer of at most `limit`
//! bytes, counting its index; when the buffer is full it is sorted and
//! written to a run file in a private scratch directory. `finish` merges
//! the runs (a heap over one buffered reader per run), first merging groups
//! of runs into longer runs while there are more than the bound allows
//! readers for. A sorter that never filled its buffer sorts in memory and
//! touches no disk, so a small store is checked as fast as before.
//!
//! Invariants: the buffer and its index never hold more than `limit` bytes
//! (capacity reserved once; pages only become resident as they are
//! written); the readers of a merge hold at most `limit` bytes of buffers;
//! the scratch directory is removed when the sorter or its merge is
//! dropped, on errors too. No locks: one thread owns a sorter.

use crate::{Error, Result};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The most runs one merge reads at once (open files, and seeks between
/// them on a disk).
const MAX_FANIN: usize = 64;

fn io(what: &str, p: &Path, e: std::io::Error) -> Error {
    Error::Io(format!("fsck scratch: {what} {}: {e}", p.display()))
}

/// A private directory under the scratch base, removed with its files
/// when dropped. Made at the first spill.
struct Scratch {
    base: PathBuf,
    dir: Option<PathBuf>,
    files: u64,
}

impl Scratch {
    fn file(&mut self) -> Result<(PathBuf, File)> {
        if self.dir.is_none() {
            static N: AtomicU64 = AtomicU64::new(0);
            let d = self.base.join(format!(
                "shoal-fsck-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&d).map_err(|e| io("make", &d, e))?;
            self.dir = Some(d);
        }
        let p = self
            .dir
            .as_ref()
            .unwrap()
            .join(format!("run-{}", self.files));
        self.files += 1;
        let f = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
            .map_err(|e| io("create", &p, e))?;
        Ok((p, f))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

pub(crate) struct Sorter {
    limit: usize,
    arena: Vec<u8>,
    /// (offset, length) of each record in `arena`.
    idx: Vec<(u32, u32)>,
    runs: Vec<PathBuf>,
    scratch: Scratch,
    /// Bytes written to run files, merges included.
    pub(crate) spilled: u64,
}

impl Sorter {
    /// A sorter holding at most `limit` bytes in memory (at least 4 KiB),
    /// spilling under `base`.
    pub(crate) fn new(limit: usize, base: &Path) -> Sorter {
        let limit = limit.max(4096);
        // Three quarters for the records, a quarter for their index.
        let arena = (limit / 4 * 3).min(u32::MAX as usize);
        Sorter {
            limit,
            arena: Vec::with_capacity(arena),
            idx: Vec::with_capacity(limit / 4 / std::mem::size_of::<(u32, u32)>()),
            runs: Vec::new(),
            scratch: Scratch {
                base: base.to_path_buf(),
                dir: None,
                files: 0,
            },
            spilled: 0,
        }
    }

    pub(crate) fn push(&mut self, rec: &[u8]) -> Result<()> {
        if self.arena.len() + rec.len() > self.arena.capacity()
            || self.idx.len() == self.idx.capacity()
        {
            self.spill()?;
        }
        if rec.len() > self.arena.capacity() {
            return Err(Error::Io(format!(
                "fsck: a record of {} bytes does not fit a sort buffer of {} (raise --memory-mb)",
                rec.len(),
                self.limit
            )));
        }
        self.idx.push((self.arena.len() as u32, rec.len() as u32));
        self.arena.extend_from_slice(rec);
        Ok(())
    }

    fn sort(&mut self) {
        let a = &self.arena;
        let at = |&(o, l): &(u32, u32)| &a[o as usize..o as usize + l as usize];
        self.idx.sort_unstable_by(|x, y| at(x).cmp(at(y)));
    }

    fn spill(&mut self) -> Result<()> {
        if self.idx.is_empty() {
            return Ok(());
        }
        self.sort();
        let (p, f) = self.scratch.file()?;
        let mut w = BufWriter::with_capacity(64 << 10, f);
        for &(o, l) in &self.idx {
            let rec = &self.arena[o as usize..(o + l) as usize];
            w.write_all(&l.to_le_bytes())
                .and_then(|_| w.write_all(rec))
                .map_err(|e| io("write", &p, e))?;
            self.spilled += 4 + l as u64;
        }
        w.flush().map_err(|e| io("write", &p, e))?;
        self.runs.push(p);
        self.arena.clear();
        self.idx.clear();
        Ok(())
    }

    /// Runs written so far.
    #[cfg(test)]
    pub(crate) fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The records in order.
    pub(crate) fn finish(mut self) -> Result<Merged> {
        if self.runs.is_empty() {
            self.sort();
            return Ok(Merged {
                src: Src::Mem {
                    arena: std::mem::take(&mut self.arena),
                    idx: std::mem::take(&mut self.idx).into_iter(),
                },
                spilled: 0,
                _scratch: None,
            });
        }
        self.spill()?;
        // The buffer's memory goes back before the readers take theirs.
        self.arena = Vec::new();
        self.idx = Vec::new();
        let (fanin, buf) = fanin(self.limit);
        while self.runs.len() > fanin {
            let group: Vec<PathBuf> = self.runs.drain(..fanin).collect();
            let mut heap = Heap::open(&group, buf)?;
            let (p, f) = self.scratch.file()?;
            let mut w = BufWriter::with_capacity(buf, f);
            while let Some(rec) = heap.next()? {
                w.write_all(&(rec.len() as u32).to_le_bytes())
                    .and_then(|_| w.write_all(&rec))
                    .map_err(|e| io("write", &p, e))?;
                self.spilled += 4 + rec.len() as u64;
            }
            w.flush().map_err(|e| io("write", &p, e))?;
            drop(heap);
            for g in group {
                let _ = std::fs::remove_file(g);
            }
            self.runs.push(p);
        }
        let heap = Heap::open(&self.runs, buf)?;
        let scratch = Scratch {
            base: self.scratch.base.clone(),
            dir: self.scratch.dir.take(),
            files: 0,
        };
        Ok(Merged {
            src: Src::Disk(heap),
            spilled: self.spilled,
            _scratch: Some(scratch),
        })
    }
}

/// How many runs one merge reads, and each reader's buffer, within `limit`
/// (one more buffer for the writer of an intermediate merge).
fn fanin(limit: usize) -> (usize, usize) {
    let buf = (limit / 16).clamp(4 << 10, 256 << 10);
    ((limit / buf).saturating_sub(1).clamp(2, MAX_FANIN), buf)
}

struct Heap {
    readers: Vec<BufReader<File>>,
    paths: Vec<PathBuf>,
    heap: BinaryHeap<Reverse<(Vec<u8>, usize)>>,
}

impl Heap {
    fn open(runs: &[PathBuf], buf: usize) -> Result<Heap> {
        let mut h = Heap {
            readers: Vec::with_capacity(runs.len()),
            paths: runs.to_vec(),
            heap: BinaryHeap::with_capacity(runs.len()),
        };
        for (i, p) in runs.iter().enumerate() {
            let f = File::open(p).map_err(|e| io("open", p, e))?;
            h.readers.push(BufReader::with_capacity(buf, f));
            if let Some(rec) = h.read(i)? {
                h.heap.push(Reverse((rec, i)));
            }
        }
        Ok(h)
    }

    fn read(&mut self, i: usize) -> Result<Option<Vec<u8>>> {
        let r = &mut self.readers[i];
        let mut len = [0u8; 4];
        match r.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(io("read", &self.paths[i], e)),
        }
        let mut rec = vec![0u8; u32::from_le_bytes(len) as usize];
        r.read_exact(&mut rec)
            .map_err(|e| io("read", &self.paths[i], e))?;
        Ok(Some(rec))
    }

    fn next(&mut self) -> Result<Option<Vec<u8>>> {
        let Some(Reverse((rec, i))) = self.heap.pop() else {
            return Ok(None);
        };
        if let Some(n) = self.read(i)? {
            self.heap.push(Reverse((n, i)));
        }
        Ok(Some(rec))
    }
}

enum Src {
    Mem {
        arena: Vec<u8>,
        idx: std::vec::IntoIter<(u32, u32)>,
    },
    Disk(Heap),
}

/// A sorter's records in order, with one record of look-ahead.
pub(crate) struct Merged {
    src: Src,
    /// Bytes the sorter wrote to its runs.
    pub(crate) spilled: u64,
    _scratch: Option<Scratch>,
}

impl Merged {
    pub(crate) fn next(&mut self) -> Result<Option<Vec<u8>>> {
        match &mut self.src {
            Src::Mem { arena, idx } => Ok(idx
                .next()
                .map(|(o, l)| arena[o as usize..(o + l) as usize].to_vec())),
            Src::Disk(h) => h.next(),
        }
    }
}

/// A `Merged` with its head looked at before it is taken.
pub(crate) struct Peek {
    m: Merged,
    head: Option<Vec<u8>>,
}

impl Peek {
    pub(crate) fn new(mut m: Merged) -> Result<Peek> {
        let head = m.next()?;
        Ok(Peek { m, head })
    }
    /// The first 8 bytes of the head as a big-endian number (the inode
    /// number every fsck record starts with).
    pub(crate) fn key(&self) -> Option<u64> {
        self.head
            .as_ref()
            .map(|h| u64::from_be_bytes(h[..8].try_into().unwrap()))
    }
    pub(crate) fn take(&mut self) -> Result<Option<Vec<u8>>> {
        let next = self.m.next()?;
        Ok(std::mem::replace(&mut self.head, next))
    }
    pub(crate) fn spilled(&self) -> u64 {
        self.m.spilled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(limit: usize, n: u64) -> (Vec<Vec<u8>>, usize, u64) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sorter::new(limit, dir.path());
        // A permutation of 0..n with names of varying length.
        for i in 0..n {
            let x = (i * 7919) % n;
            let mut rec = x.to_be_bytes().to_vec();
            rec.extend(std::iter::repeat_n(b'x', (x % 13) as usize));
            s.push(&rec).unwrap();
        }
        let runs = s.runs();
        let mut m = s.finish().unwrap();
        let mut out = vec![];
        while let Some(r) = m.next().unwrap() {
            out.push(r);
        }
        let spilled = m.spilled;
        drop(m);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "scratch removed"
        );
        (out, runs, spilled)
    }

    #[test]
    fn spilled_runs_merge_to_the_in_memory_order() {
        let (mem, runs, spilled) = sorted(64 << 20, 20_000);
        assert_eq!((runs, spilled), (0, 0));
        assert_eq!(mem.len(), 20_000);
        assert!(mem.windows(2).all(|w| w[0] < w[1]));
        // 4 KiB: hundreds of runs, merged in several rounds of 2.
        let (disk, runs, spilled) = sorted(4096, 20_000);
        assert!(runs > 100, "{runs} runs");
        assert!(spilled > 0);
        assert_eq!(disk, mem);
        assert_eq!(fanin(4096), (2, 4096));
    }
}
