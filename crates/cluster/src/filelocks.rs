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
//! A daemon keeps, per inode, the other sessions' locks as its last scan
//! found them and the epoch's revision then, or after its own last commit
//! that rewrote it ([`View`]). A lock that this view shows free commits
//! without a scan, requiring the epoch at that revision: if any session
//! added or widened a lock since, the epoch moved, the commit fails and
//! the lock is taken as before (scan, then commit). One process locking
//! and unlocking a file no other mount locks makes one round trip a
//! change, not two.
//!
//! Semantics are Linux's: POSIX locks belong to an owner (the kernel's id
//! of the process's file table), cover byte ranges, merge with the owner's
//! neighbouring locks of the same type and split on partial unlock, and go
//! at the owner's first close of the file (`unlock_owner`, from FUSE's
//! flush); flock locks belong to an open file, cover the whole file and go
//! at its last close (FUSE's release). The two kinds do not conflict with
//! each other, as on a local Linux filesystem.

use super::ns::{ClusterFs, Tx};
use super::Versioned;
use shoal_core::error::{Error, Result};
use shoal_core::sync::PlainMutex;
use shoal_core::types::Ino;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

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

/// This daemon's locks, per inode: what its `K ino sid` keys hold, and
/// its views of the others'. Each inode's mutex makes one lock change of
/// this daemon on it at a time (held across the commit); locks on
/// different inodes commit in parallel. The table's own mutex is held only
/// to find or drop an inode's slot, never while waiting for a slot's. The
/// count of inodes it holds locks on lets a close on a daemon that holds
/// no lock skip both.
#[derive(Default)]
pub struct Held(PlainMutex<HashMap<Ino, Arc<PlainMutex<Slot>>>>, AtomicUsize);

/// One inode's locks held here, and the view of the others'.
#[derive(Default)]
struct Slot {
    mine: Vec<Lock>,
    view: Option<View>,
}

/// Other sessions' locks on one inode: (session, lock).
type Others = Vec<(u64, Lock)>;

/// Slots kept at most: past that, those of inodes with no lock held here
/// are dropped (their views with them; the next lock of each scans again).
const SLOTS_MAX: usize = 4096;

/// The other sessions' locks on an inode as this daemon last knew them, at
/// the epoch's revision `epoch` (see the module's comment). Only a present
/// epoch makes a view: its revision is unique, so a commit that requires
/// it fails if the epoch was rewritten, or deleted and written again,
/// since. Locks released since may still show here: a view can only stop
/// a lock that is free (then the scan decides), never let one through
/// that is not.
#[derive(Clone, Debug)]
struct View {
    epoch: u64,
    others: Others,
}

impl Held {
    /// `ino`'s slot, made if it has none.
    fn slot(&self, ino: Ino) -> Arc<PlainMutex<Slot>> {
        self.0.lock().entry(ino).or_default().clone()
    }

    /// Done with a slot: past `SLOTS_MAX`, drop the slots of inodes
    /// with no lock held here that no one else is using. (A slot in use
    /// stays: one dropped while another thread waits on it would let two
    /// slots hold one inode's locks.)
    fn tidy(&self, slot: Arc<PlainMutex<Slot>>) {
        drop(slot);
        let mut t = self.0.lock();
        if t.len() <= SLOTS_MAX {
            return;
        }
        // Only the table has it (a thread takes its own clone under the
        // table's mutex, held here): no one can be holding its mutex.
        t.retain(|_, s| Arc::strong_count(s) > 1 || !s.lock().mine.is_empty());
    }
}

impl ClusterFs {
    /// The other sessions' locks on `ino` and its epoch, read from the
    /// store (one scan of the inode's lock keys).
    fn scan_locks(&self, ino: Ino) -> Result<(Others, Option<Versioned>)> {
        let lo = epoch_key(ino);
        let hi = epoch_key(ino + 1);
        self.stats.reads.fetch_add(1, Ordering::Relaxed);
        let (keys, _) = self.patient(|| self.store.scan(&lo, &hi, 100_000))?;
        let mut epoch = None;
        let mut others = Vec::new();
        for (k, v) in keys {
            if k.len() != 17 {
                epoch = Some(v);
                continue;
            }
            let sid = u64::from_be_bytes(k[9..17].try_into().unwrap());
            if sid == self.sid {
                continue; // this daemon's: `mine` is current
            }
            others.extend(decode(&v.value)?.into_iter().map(|l| (sid, l)));
        }
        Ok((others, epoch))
    }

    /// The first lock of another owner that stops `req`: this daemon's
    /// other owners' (`mine`) or another session's (`others`).
    fn blocking(&self, mine: &[Lock], others: &[(u64, Lock)], req: &Lock) -> Option<Lock> {
        mine.iter()
            .find(|l| conflicts(l, self.sid, req, self.sid))
            .or_else(|| {
                others
                    .iter()
                    .find(|(sid, l)| conflicts(l, *sid, req, self.sid))
                    .map(|(_, l)| l)
            })
            .copied()
    }

    /// Take, change or release a lock, once: Ok(None) done, Ok(Some(l))
    /// another owner's lock `l` stops it (F_SETLK's EAGAIN; F_SETLKW polls).
    pub fn setlk(&self, ino: Ino, req: &Lock, want: Want) -> Result<Option<Lock>> {
        if want == Want::Unlock && self.locks.1.load(Ordering::Acquire) == 0 {
            return Ok(None); // this daemon holds no lock at all
        }
        let slot = if want == Want::Unlock {
            // No slot, no lock held here on it (slots with locks stay).
            match self.locks.0.lock().get(&ino) {
                Some(s) => s.clone(),
                None => return Ok(None),
            }
        } else {
            self.locks.slot(ino)
        };
        let mut st = slot.lock();
        let mine = st.mine.clone();
        let next = apply(&mine, req, want);
        if next == mine {
            drop(st);
            self.locks.tidy(slot);
            return Ok(None); // nothing changes (an unlock of nothing)
        }
        let grows = want != Want::Unlock;
        if grows && mine.is_empty() {
            // Counted before the commit: a close racing it takes the
            // slot's mutex and releases what the commit took.
            self.locks.1.fetch_add(1, Ordering::AcqRel);
        }
        // A lock taken or widened: one commit if the view shows it free,
        // else (or if the epoch moved) one scan and one commit. A release:
        // one commit (only this daemon writes its key, one change on the
        // inode at a time).
        let mut view = st.view.clone();
        let mut seen = None;
        let done = self.run_at(|tx: &mut Tx| {
            if grows {
                let (others, epoch) = match view.take() {
                    Some(v) if self.blocking(&mine, &v.others, req).is_none() => {
                        let epoch = Versioned {
                            value: vec![FORMAT],
                            mod_rev: v.epoch,
                        };
                        (v.others, Some(epoch))
                    }
                    _ => self.scan_locks(ino)?,
                };
                if let Some(l) = self.blocking(&mine, &others, req) {
                    return Ok(Some(l));
                }
                tx.require(epoch_key(ino), &epoch)?;
                tx.put_on_session(epoch_key(ino), vec![FORMAT]);
                seen = Some(others);
            }
            if next.is_empty() {
                tx.del(session_key(ino, self.sid));
            } else {
                tx.put_on_session(session_key(ino, self.sid), encode(&next));
            }
            Ok(None)
        });
        // Counted (before, or just now) but holding nothing after: uncount.
        let holds_after = match &done {
            Ok((None, _)) => !next.is_empty(),
            _ => !mine.is_empty(),
        };
        if (grows || !mine.is_empty()) && !holds_after {
            self.locks.1.fetch_sub(1, Ordering::AcqRel);
        }
        let (stop, rev) = match done {
            Ok(d) => d,
            Err(e) => {
                st.view = None;
                drop(st);
                self.locks.tidy(slot);
                return Err(e);
            }
        };
        if stop.is_none() {
            st.mine = next;
            // The epoch is this commit's now (a release leaves it, and the
            // view, as they were).
            if let Some(others) = seen {
                st.view = rev.map(|epoch| View { epoch, others });
            }
        } else {
            st.view = None;
        }
        drop(st);
        self.locks.tidy(slot);
        Ok(stop)
    }

    /// F_GETLK: the first lock of another owner that would stop `req`.
    pub fn getlk(&self, ino: Ino, req: &Lock) -> Result<Option<Lock>> {
        let mine = match self.locks.0.lock().get(&ino) {
            Some(slot) => slot.clone(),
            None => Default::default(),
        };
        let mine = mine.lock().mine.clone();
        let (others, _) = self.scan_locks(ino)?;
        Ok(self.blocking(&mine, &others, req))
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
        let slots: Vec<_> = self.locks.0.lock().values().cloned().collect();
        let held: Vec<usize> = slots
            .iter()
            .map(|s| s.lock().mine.len())
            .filter(|&n| n > 0)
            .collect();
        (held.len(), held.iter().sum())
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
