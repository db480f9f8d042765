//! What `shoal status etcd://...` shows of a shared namespace, read from
//! the store alone (no session is joined): its format, the sessions of the
//! mounts on it, the files held open past an unlink, file locks, directory
//! leases, and its inodes.
//!
//! The keys read (`super::ns`'s module comment has the full list): `V` the
//! format, `D` the object store, `N` the next inode chunk, `S sid` a
//! session (what its daemon wrote there: `SessionOpts::who`, a JSON object
//! with host, pid, start time and version since 2026-11-28, free text
//! before), `O sid ino` an inode unlinked while open on session `sid`,
//! `H ino sid` a hold of another session on such an inode
//! (`super::holds`), `K ino sid` the file locks of a session on an inode
//! (`super::filelocks`), `L dir lo` a directory lease and `R dir` a request
//! for one (`super::dirlease`), `I ino` the inode records (counted, and the
//! files' sizes summed: a scan of every record, so it takes time on a
//! large namespace).

use super::filelocks::{decode as decode_locks, Lock};
use super::ns::{data_url, scan_all, Node};
use super::ClusterStore;
use shoal_core::error::{Error, Result};
use shoal_core::types::{Ino, Kind};

/// A session of a mount: its id and what its daemon wrote about itself.
#[derive(Clone, Debug)]
pub struct Session {
    pub sid: u64,
    pub who: String,
}

/// A shared namespace as `shoal status` shows it.
#[derive(Clone, Debug, Default)]
pub struct Status {
    pub format: u32,
    /// Where file data past the inline size goes (as given to mkfs).
    pub data: Option<String>,
    /// The next chunk of inode numbers a mount will claim.
    pub next_inode_chunk: u64,
    pub sessions: Vec<Session>,
    /// (session, inode): unlinked while open on that session.
    pub open_unlinked: Vec<(u64, Ino)>,
    /// (inode, session): a session holding an unlinked inode open.
    pub holds: Vec<(Ino, u64)>,
    /// (inode, session, lock).
    pub locks: Vec<(Ino, u64, Lock)>,
    /// (directory, first name of the range, holder's session).
    pub leases: Vec<(Ino, Vec<u8>, u64)>,
    /// Directories whose lease another session asked back.
    pub lease_requests: Vec<Ino>,
    pub inodes: u64,
    pub files: u64,
    pub dirs: u64,
    /// Bytes of every regular file (their sizes).
    pub file_bytes: u64,
}

fn u64_at(k: &[u8], i: usize) -> u64 {
    u64::from_be_bytes(k[i..i + 8].try_into().unwrap())
}

fn sid_le(v: &[u8]) -> u64 {
    v.get(..8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
}

/// Read the status of the namespace on `store`.
pub fn status(store: &dyn ClusterStore) -> Result<Status> {
    let kv = Error::from;
    let format = match store.get(b"V").map_err(kv)? {
        None => {
            return Err(Error::Io(
                "no shoal filesystem here (make one with `shoal mkfs`)".into(),
            ))
        }
        Some(v) => v
            .value
            .get(..4)
            .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap())),
    };
    let mut s = Status {
        format,
        data: data_url(store)?,
        next_inode_chunk: store
            .get(b"N")
            .map_err(kv)?
            .and_then(|v| {
                v.value
                    .get(..8)
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
            })
            .unwrap_or(0),
        ..Status::default()
    };
    for (k, v) in scan_all(store, b"S", b"T")? {
        if k.len() == 9 {
            s.sessions.push(Session {
                sid: u64_at(&k, 1),
                who: String::from_utf8_lossy(&v.value).into_owned(),
            });
        }
    }
    for (k, _) in scan_all(store, b"O", b"P")? {
        if k.len() == 17 {
            s.open_unlinked.push((u64_at(&k, 1), u64_at(&k, 9)));
        }
    }
    for (k, _) in scan_all(store, b"H", b"I")? {
        if k.len() == 17 {
            s.holds.push((u64_at(&k, 1), u64_at(&k, 9)));
        }
    }
    for (k, v) in scan_all(store, b"K", b"L")? {
        // `K ino` alone is the inode's lock epoch, not a lock.
        if k.len() == 17 {
            for l in decode_locks(&v.value)? {
                s.locks.push((u64_at(&k, 1), u64_at(&k, 9), l));
            }
        }
    }
    for (k, v) in scan_all(store, b"L", b"M")? {
        if k.len() >= 9 {
            s.leases
                .push((u64_at(&k, 1), k[9..].to_vec(), sid_le(&v.value)));
        }
    }
    for (k, _) in scan_all(store, b"R", b"S")? {
        if k.len() == 9 {
            s.lease_requests.push(u64_at(&k, 1));
        }
    }
    for (k, v) in scan_all(store, b"I", b"J")? {
        if k.len() != 9 {
            continue;
        }
        s.inodes += 1;
        let n = Node::decode(u64_at(&k, 1), &v.value)?;
        match n.attr.kind {
            Kind::Dir => s.dirs += 1,
            Kind::File => {
                s.files += 1;
                s.file_bytes += n.attr.size;
            }
            _ => {}
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ns::{ClusterFs, SessionOpts};
    use crate::sim::SimStore;
    use shoal_core::types::ROOT_INO;

    /// A session, a file unlinked while open, a lock and a lease all show.
    #[test]
    fn status_shows_sessions_open_unlinked_files_and_locks() {
        let store = SimStore::new();
        crate::ns::mkfs(&*store).unwrap();
        let opts = SessionOpts {
            who: r#"{"host":"h1","pid":7}"#.into(),
            ..SessionOpts::default()
        };
        let fs = ClusterFs::open(store.clone(), opts).unwrap();
        let f = fs.create(ROOT_INO, b"f", 0o644).unwrap();
        fs.open_file(f.ino).unwrap();
        let lock = Lock {
            owner: 1,
            flock: true,
            write: true,
            start: 0,
            end: i64::MAX as u64,
            pid: 42,
        };
        let got = fs.setlk(f.ino, &lock, super::super::filelocks::Want::Write);
        assert_eq!(got.unwrap(), None, "no other lock stops it");
        fs.unlink(ROOT_INO, b"f").unwrap();
        fs.fsyncdir().unwrap();
        let s = status(&*store).unwrap();
        assert_eq!(s.format, crate::ns::SHARED_FORMAT);
        assert_eq!(s.sessions.len(), 1);
        assert_eq!(s.sessions[0].sid, fs.session());
        assert!(s.sessions[0].who.contains("\"host\":\"h1\""));
        assert_eq!(s.open_unlinked, vec![(fs.session(), f.ino)]);
        assert_eq!(s.locks.len(), 1, "{:?}", s.locks);
        assert_eq!((s.locks[0].0, s.locks[0].1), (f.ino, fs.session()));
        assert_eq!(s.locks[0].2.pid, 42);
        assert_eq!(s.inodes, 2, "the root and the unlinked file");
        fs.release(f.ino).unwrap();
        fs.close().unwrap();
        let s = status(&*store).unwrap();
        assert!(s.sessions.is_empty() && s.locks.is_empty() && s.open_unlinked.is_empty());
    }
}
