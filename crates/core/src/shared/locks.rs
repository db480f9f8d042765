//! File locks across mounts: POSIX record locks (fcntl F_SETLK, F_SETLKW,
//! F_GETLK, and lockf) and flock(2), kept in the shared store so that a
//! lock taken through one mount excludes the same lock through another
//! (docs/design.md, "File locks across mounts").
//!
//! Keys, under the filesystem's prefix:
//! - `K ino sid`: every lock session `sid` holds on `ino` (a list of
//!   [`Lock`]s), put on the session's lease: a daemon that dies or is cut
//!   off loses its locks with its lease, as a client of NFS's lock manager
//!   does.
//! - `K ino`: the inode's lock epoch, rewritten by every commit that adds
//!   or widens a lock. Such a commit requires the epoch as it read it, so
//!   of two daemons that each found no conflict in the other's locks at the
//!   same moment, one commits and the other reads again. Releases do not
//!   touch it: a lock that goes away can only make a conflict found
//!   stale, and the waiter polls again.
//!
//! Semantics are Linux's: POSIX locks belong to an owner (the kernel's id
//! of the process's file table), cover byte ranges, merge with the owner's
//! neighbouring locks of the same type and split on partial unlock, and go
//! at the owner's first close of the file (`unlock_owner`, from FUSE's
//! flush); flock locks belong to an open file, cover the whole file and go
//! at its last close (FUSE's release). The two kinds do not conflict with
//! each other, as on a local Linux filesystem.

use super::ns::{SharedFs, Tx};
use super::Versioned;
use crate::error::{Error, Result};
use crate::types::Ino;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// One lock held by one owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lock {
    /// The kernel's lock owner: a process's file table (POSIX) or an open
    /// file (flock).
    pub owner: u64,
    pub flock: bool,
    pub write: bool,
    /// First and last byte, inclusive (FUSE's form: to EOF is
    /// `i64::MAX`).
    pub start: u64,
    pub end: u64,
    /// The process that took it, for F_GETLK.
    pub pid: u32,
}

/// What a lock request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    Read,
    Write,
    Unlock,
}

const RECORD: usize = 30;
const FORMAT: u8 = 1;

impl Lock {
    fn overlaps(&self, o: &Lock) -> bool {
        self.start <= o.end && o.start <= self.end
    }
}

/// Whether `held` (of session `held_sid`) stops `req` (of `sid`).
pub fn conflicts(held: &Lock, held_sid: u64, req: &Lock, sid: u64) -> bool {
    held.flock == req.flock
        && !(held_sid == sid && held.owner == req.owner)
        && (held.write || req.write)
        && held.overlaps(req)
}

/// `locks` (one session's) after `req.owner` asks for `want` over `req`'s
/// range: its locks of that kind there are replaced (POSIX: split where
/// the range cuts them; then merged with touching locks of the same type).
pub fn apply(locks: &[Lock], req: &Lock, want: Want) -> Vec<Lock> {
    let mut out = Vec::with_capacity(locks.len() + 2);
    for l in locks {
        if l.owner != req.owner || l.flock != req.flock || !l.overlaps(req) {
            out.push(*l);
            continue;
        }
        // The parts of the owner's lock outside the request's range stay.
        if l.start < req.start {
            out.push(Lock {
                end: req.start - 1,
                ..*l
            });
        }
        if l.end > req.end {
            out.push(Lock {
                start: req.end + 1,
                ..*l
            });
        }
    }
    if want == Want::Unlock {
        return out;
    }
    let mut new = Lock {
        write: want == Want::Write,
        ..*req
    };
    if !new.flock {
        // Merge with the owner's locks of the same type that touch it.
        out.retain(|l| {
            let touches = l.owner == new.owner
                && !l.flock
                && l.write == new.write
                && l.start <= new.end.saturating_add(1)
                && new.start <= l.end.saturating_add(1);
            if touches {
                new.start = new.start.min(l.start);
                new.end = new.end.max(l.end);
            }
            !touches
        });
    }
    out.push(new);
    out
}

pub fn encode(locks: &[Lock]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + locks.len() * RECORD);
    v.push(FORMAT);
    for l in locks {
        v.extend_from_slice(&l.owner.to_be_bytes());
        v.push(l.flock as u8);
        v.push(l.write as u8);
        v.extend_from_slice(&l.start.to_be_bytes());
        v.extend_from_slice(&l.end.to_be_bytes());
        v.extend_from_slice(&l.pid.to_be_bytes());
    }
    v
}

pub fn decode(v: &[u8]) -> Result<Vec<Lock>> {
    if v.first() != Some(&FORMAT) || !(v.len() - 1).is_multiple_of(RECORD) {
        return Err(Error::Corrupted(format!(
            "lock record of {} bytes, format {:?}",
            v.len(),
            v.first()
        )));
    }
    let u64_at = |r: &[u8], i: usize| u64::from_be_bytes(r[i..i + 8].try_into().unwrap());
    Ok(v[1..]
        .chunks(RECORD)
        .map(|r| Lock {
            owner: u64_at(r, 0),
            flock: r[8] != 0,
            write: r[9] != 0,
            start: u64_at(r, 10),
            end: u64_at(r, 18),
            pid: u32::from_be_bytes(r[26..30].try_into().unwrap()),
        })
        .collect())
}

fn epoch_key(ino: Ino) -> Vec<u8> {
    let mut k = vec![b'K'];
    k.extend_from_slice(&ino.to_be_bytes());
    k
}

fn session_key(ino: Ino, sid: u64) -> Vec<u8> {
    let mut k = epoch_key(ino);
    k.extend_from_slice(&sid.to_be_bytes());
    k
}

/// This daemon's locks, per inode: what its `K ino sid` keys hold. Its
/// mutex also makes one lock change of this daemon at a time; the count
/// of inodes in it lets a close on a daemon that holds no lock skip the
/// mutex (which a commit may hold for as long as etcd takes).
#[derive(Default)]
pub struct Held(Mutex<HashMap<Ino, Vec<Lock>>>, AtomicUsize);

impl SharedFs {
    /// The first lock of another owner that stops `req`: this daemon's
    /// other owners' (`mine`) or another daemon's (read from the store, one
    /// scan of the inode's lock keys); and the epoch as that scan found it.
    fn blocking(
        &self,
        ino: Ino,
        mine: &[Lock],
        req: &Lock,
    ) -> Result<(Option<Lock>, Option<Versioned>)> {
        let lo = epoch_key(ino);
        let hi = epoch_key(ino + 1);
        self.stats.reads.fetch_add(1, Ordering::Relaxed);
        let (keys, _) = self.patient(|| self.store.scan(&lo, &hi, 100_000))?;
        let mut epoch = None;
        let mut found = mine
            .iter()
            .find(|l| conflicts(l, self.sid, req, self.sid))
            .copied();
        for (k, v) in keys {
            if k.len() != 17 {
                epoch = Some(v);
                continue;
            }
            let sid = u64::from_be_bytes(k[9..17].try_into().unwrap());
            if sid == self.sid || found.is_some() {
                continue; // this daemon's: `mine` is current
            }
            found = decode(&v.value)?
                .into_iter()
                .find(|l| conflicts(l, sid, req, self.sid));
        }
        Ok((found, epoch))
    }

    /// Take, change or release a lock, once: Ok(None) done, Ok(Some(l))
    /// another owner's lock `l` stops it (F_SETLK's EAGAIN; F_SETLKW polls).
    pub fn setlk(&self, ino: Ino, req: &Lock, want: Want) -> Result<Option<Lock>> {
        if want == Want::Unlock && self.locks.1.load(Ordering::Acquire) == 0 {
            return Ok(None); // this daemon holds no lock at all
        }
        let mut held = self.locks.0.lock().unwrap();
        let mine = held.get(&ino).cloned().unwrap_or_default();
        let next = apply(&mine, req, want);
        if next == mine {
            return Ok(None); // nothing changes (an unlock of nothing)
        }
        let grows = want != Want::Unlock;
        if grows {
            // Counted before the commit: a close racing it takes the mutex
            // and releases what the commit took.
            self.locks.1.store(held.len() + 1, Ordering::Release);
        }
        // A lock taken or widened: one scan and one commit. A release: one
        // commit (only this daemon writes its key, one change at a time).
        let stop = self.run(|tx: &mut Tx| {
            if grows {
                let (found, epoch) = self.blocking(ino, &mine, req)?;
                if found.is_some() {
                    return Ok(found);
                }
                tx.require(epoch_key(ino), &epoch)?;
                tx.put_on_session(epoch_key(ino), vec![FORMAT]);
            }
            if next.is_empty() {
                tx.del(session_key(ino, self.sid));
            } else {
                tx.put_on_session(session_key(ino, self.sid), encode(&next));
            }
            Ok(None)
        })?;
        if stop.is_none() {
            if next.is_empty() {
                held.remove(&ino);
            } else {
                held.insert(ino, next);
            }
        }
        self.locks.1.store(held.len(), Ordering::Release);
        Ok(stop)
    }

    /// F_GETLK: the first lock of another owner that would stop `req`.
    pub fn getlk(&self, ino: Ino, req: &Lock) -> Result<Option<Lock>> {
        let held = self.locks.0.lock().unwrap();
        let mine = held.get(&ino).cloned().unwrap_or_default();
        drop(held);
        Ok(self.blocking(ino, &mine, req)?.0)
    }

    /// Release every lock of one kind `owner` holds on `ino` (POSIX: at
    /// any close of the file by the owner, FUSE's flush; flock: at the
    /// open file's last close). No round trip when it holds none.
    pub fn unlock_owner(&self, ino: Ino, owner: u64, flock: bool) -> Result<()> {
        let req = Lock {
            owner,
            flock,
            write: false,
            start: 0,
            end: u64::MAX,
            pid: 0,
        };
        self.setlk(ino, &req, Want::Unlock).map(|_| ())
    }

    /// Inodes this daemon holds locks on, and how many locks.
    pub fn locks_held(&self) -> (usize, usize) {
        let held = self.locks.0.lock().unwrap();
        (held.len(), held.values().map(Vec::len).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn posix(owner: u64, start: u64, end: u64, write: bool) -> Lock {
        Lock {
            owner,
            flock: false,
            write,
            start,
            end,
            pid: 7,
        }
    }

    #[test]
    fn a_partial_unlock_splits_and_neighbours_merge() {
        let l = apply(&[], &posix(1, 0, 99, true), Want::Write);
        let l = apply(&l, &posix(1, 40, 59, false), Want::Unlock);
        assert_eq!(l, vec![posix(1, 0, 39, true), posix(1, 60, 99, true)]);
        // Filling the hole with the same type merges the three.
        let l = apply(&l, &posix(1, 40, 59, true), Want::Write);
        assert_eq!(l, vec![posix(1, 0, 99, true)]);
        // A read lock in the middle splits the write lock around it.
        let mut l = apply(&l, &posix(1, 10, 19, false), Want::Read);
        l.sort_by_key(|l| l.start);
        assert_eq!(
            l,
            vec![
                posix(1, 0, 9, true),
                posix(1, 10, 19, false),
                posix(1, 20, 99, true)
            ]
        );
        // Another owner's locks are left alone.
        let l = apply(&l, &posix(2, 0, 99, true), Want::Unlock);
        assert_eq!(l.len(), 3);
        let l = apply(&l, &posix(1, 0, u64::MAX, false), Want::Unlock);
        assert!(l.is_empty());
    }

    #[test]
    fn conflicts_need_two_owners_an_overlap_and_a_writer() {
        let w = posix(1, 0, 9, true);
        assert!(conflicts(&w, 5, &posix(2, 9, 20, false), 5));
        assert!(
            conflicts(&w, 5, &posix(1, 0, 9, false), 6),
            "same owner id on another daemon"
        );
        assert!(!conflicts(&w, 5, &posix(1, 0, 9, false), 5), "own lock");
        assert!(!conflicts(&w, 5, &posix(2, 10, 20, true), 5), "apart");
        let r = posix(1, 0, 9, false);
        assert!(!conflicts(&r, 5, &posix(2, 0, 9, false), 5), "two readers");
        let f = Lock { flock: true, ..w };
        assert!(
            !conflicts(&f, 5, &posix(2, 0, 9, true), 5),
            "flock and POSIX locks are apart"
        );
    }

    #[test]
    fn records_round_trip_and_bad_ones_are_errors() {
        let ls = vec![
            posix(1, 0, 9, true),
            Lock {
                flock: true,
                ..posix(u64::MAX, 0, i64::MAX as u64, false)
            },
        ];
        assert_eq!(decode(&encode(&ls)).unwrap(), ls);
        assert!(decode(&[FORMAT, 1, 2]).is_err());
        assert!(decode(&[]).is_err());
    }
}
