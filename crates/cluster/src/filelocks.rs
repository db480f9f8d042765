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
//! **Lock leases** (docs/design.md, "Lock leases"): a daemon whose lock
//! commit found no lock of another session on the inode also puts `K ino
//! L` = its session, on its lease, requiring it absent. While it holds
//! that key it answers the inode's locks, unlocks and lock tests from
//! `mine` in memory, since every other daemon's commit that adds or
//! widens a lock requires `K ino L` absent: no other session holds a
//! lock there until the key goes. Another daemon meeting the key puts
//! `K ino R` and waits; the holder, told by the change stream, gives the
//! lease back between two of its transactions (an unlock that empties
//! its list, at least `SLICE` after taking it; at the latest `TURN`), in
//! one commit that writes its list, moves the epoch and deletes both keys.
//!
//! Semantics are Linux's: POSIX locks belong to an owner (the kernel's id
//! of the process's file table), cover byte ranges, merge with the owner's
//! neighbouring locks of the same type and split on partial unlock, and go
//! at the owner's first close of the file (`unlock_owner`, from FUSE's
//! flush); flock locks belong to an open file, cover the whole file and go
//! at its last close (FUSE's release). The two kinds do not conflict with
//! each other, as on a local Linux filesystem.

use super::ns::{ClusterFs, Tx};
use super::{Cond, Op, Outcome, Versioned};
use shoal_core::error::{Error, Result};
use shoal_core::sync::PlainMutex;
use shoal_core::types::Ino;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// `K ino L`: the inode's lock lease (the holder's session, little-endian).
fn lease_key(ino: Ino) -> Vec<u8> {
    let mut k = epoch_key(ino);
    k.push(b'L');
    k
}

/// `K ino R`: another daemon asks for the lock lease back (its session).
fn ask_key(ino: Ino) -> Vec<u8> {
    let mut k = epoch_key(ino);
    k.push(b'R');
    k
}

/// A holder asked for its lock lease keeps it at least this long after
/// taking it, and gives it back at its next moment holding no lock there
/// (between two transactions of the program that locks).
const SLICE: Duration = Duration::from_millis(50);
/// ... and at the latest this long after taking it, whatever it holds.
const TURN: Duration = Duration::from_millis(200);
/// After giving a lock lease back on request, not taken again for this
/// long (the asker takes the next turn).
const HANDOFF_GAP: Duration = Duration::from_millis(20);
/// Lock leases held at most (each is a key in the store).
const LEASES_MAX: usize = 1024;

/// This daemon's locks, per inode: what its `K ino sid` keys hold, and
/// its views of the others'. Each inode's mutex makes one lock change of
/// this daemon on it at a time (held across the commit); locks on
/// different inodes commit in parallel. The table's own mutex is held only
/// to find or drop an inode's slot, never while waiting for a slot's. The
/// count of inodes it holds locks on lets a close on a daemon that holds
/// no lock skip both.
pub struct Held(
    PlainMutex<HashMap<Ino, Arc<PlainMutex<Slot>>>>,
    AtomicUsize,
    Leasing,
);

/// This daemon's lock leases: which inodes, since when, whether asked for
/// (the source of truth is each slot's `leased`, under its mutex; this
/// table lets the stream thread find the due ones). protects: `LeaseTable`.
struct Leasing {
    enabled: bool,
    st: PlainMutex<LeaseTable>,
}

#[derive(Default)]
struct LeaseTable {
    /// Inode -> when its lease was taken, and whether another asked.
    held: HashMap<Ino, (Instant, bool)>,
    /// Given back on request: not taken again before this.
    not_before: HashMap<Ino, Instant>,
}

/// One inode's locks held here, and the view of the others'.
#[derive(Default)]
struct Slot {
    mine: Vec<Lock>,
    view: Option<View>,
    /// This daemon holds the inode's lock lease: `mine` is answered from
    /// memory, and the store's `K ino sid` is as of the lease's take.
    leased: bool,
}

/// One try at a lock change through the store.
enum Step {
    Done,
    Blocked(Lock),
    /// Another session holds the lock lease.
    Leased,
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
    pub(super) fn new(leases: bool) -> Held {
        Held(
            Default::default(),
            AtomicUsize::new(0),
            Leasing {
                enabled: leases,
                st: Default::default(),
            },
        )
    }

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
        t.retain(|_, s| {
            let s2 = s.lock();
            Arc::strong_count(s) > 1 || !s2.mine.is_empty() || s2.leased
        });
    }
}

impl ClusterFs {
    /// The other sessions' locks on `ino` and its epoch, read from the
    /// store (one scan of the inode's lock keys).
    /// And the session holding the inode's lock lease.
    fn scan_leased(&self, ino: Ino) -> Result<(Others, Option<Versioned>, Option<u64>)> {
        let lo = epoch_key(ino);
        let hi = epoch_key(ino + 1);
        self.stats.reads.fetch_add(1, Ordering::Relaxed);
        let (keys, _) = self.patient(|| self.store.scan(&lo, &hi, 100_000))?;
        let mut epoch = None;
        let mut lessee = None;
        let mut others = Vec::new();
        for (k, v) in keys {
            if k.len() == 10 {
                if k[9] == b'L' && v.value.len() == 8 {
                    lessee = Some(u64::from_le_bytes(v.value[..8].try_into().unwrap()));
                }
                continue;
            }
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
        Ok((others, epoch, lessee))
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
        let since = Instant::now();
        let r = loop {
            if st.leased {
                break self.leased_setlk(ino, &mut st, req, want);
            }
            match self.store_setlk(ino, &mut st, req, want) {
                Ok(Step::Done) => break Ok(None),
                Ok(Step::Blocked(l)) => break Ok(Some(l)),
                Ok(Step::Leased) => {
                    if let Err(e) = self.wait_lock_lease(ino, since) {
                        break Err(e);
                    }
                }
                Err(e) => break Err(e),
            }
        };
        drop(st);
        self.locks.tidy(slot);
        r
    }

    /// `setlk` on an inode whose lock lease this daemon holds: from
    /// `mine` alone (no other session holds a lock on it), in memory.
    fn leased_setlk(
        &self,
        ino: Ino,
        st: &mut Slot,
        req: &Lock,
        want: Want,
    ) -> Result<Option<Lock>> {
        self.lock_lease_sure()?;
        let mine = &st.mine;
        if want != Want::Unlock {
            if let Some(l) = self.blocking(mine, &[], req) {
                return Ok(Some(l));
            }
        }
        let next = apply(mine, req, want);
        if mine.is_empty() && !next.is_empty() {
            self.locks.1.fetch_add(1, Ordering::AcqRel);
        } else if !mine.is_empty() && next.is_empty() {
            self.locks.1.fetch_sub(1, Ordering::AcqRel);
        }
        st.mine = next;
        self.stats
            .lock_lease_answers
            .fetch_add(1, Ordering::Relaxed);
        // Asked for, past its slice, and holding nothing now: between two
        // transactions of the program, the moment to give it back.
        if st.mine.is_empty() {
            let due = self
                .locks
                .2
                .st
                .lock()
                .held
                .get(&ino)
                .is_some_and(|&(at, asked)| asked && at.elapsed() >= SLICE);
            if due {
                if let Err(e) = self.give_back_locks(ino, st) {
                    tracing::warn!("giving back the lock lease of inode {ino}: {e}");
                }
            }
        }
        Ok(None)
    }

    /// Answers from memory need the session surely alive (as a directory
    /// lease's creates: `session_sure`); wait for a renewal, up to the
    /// bound any operation waits for the store.
    fn lock_lease_sure(&self) -> Result<()> {
        let since = Instant::now();
        while !self.session_sure() {
            if self.lost.load(Ordering::Relaxed) || since.elapsed() >= self.unavailable_wait {
                return Err(Error::Io(
                    "this mount's etcd session expired (cut off longer than its lease): remount"
                        .into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// One try of `setlk` through the store (the slot's lease not held).
    fn store_setlk(&self, ino: Ino, st: &mut Slot, req: &Lock, want: Want) -> Result<Step> {
        let mine = st.mine.clone();
        let next = apply(&mine, req, want);
        if next == mine {
            return Ok(Step::Done); // nothing changes (an unlock of nothing)
        }
        if want == Want::Unlock {
            // What this daemon answered from memory before the unlock (a
            // journal created and unlinked under a directory lease) is in
            // the store before another mount can take the lock.
            self.settle()?;
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
        // inode at a time). With no other session's lock on the inode, the
        // commit also takes its lock lease (`K ino L`).
        let mut view = st.view.clone();
        let mut seen = None;
        let mut take = false;
        let done = self.run_at(|tx: &mut Tx| {
            take = false;
            if grows {
                let (others, epoch, lessee) = match view.take() {
                    Some(v) if self.blocking(&mine, &v.others, req).is_none() => {
                        let epoch = Versioned {
                            value: vec![FORMAT],
                            mod_rev: v.epoch,
                        };
                        (v.others, Some(epoch), None)
                    }
                    _ => self.scan_leased(ino)?,
                };
                match lessee {
                    Some(s) if s != self.sid => return Ok(Step::Leased),
                    // Ours in the store and not in memory (a lost answer
                    // read back): given back by this commit.
                    Some(_) => tx.del(lease_key(ino)),
                    None => tx.require_cond(Cond::Absent(lease_key(ino))),
                }
                if let Some(l) = self.blocking(&mine, &others, req) {
                    return Ok(Step::Blocked(l));
                }
                tx.require(epoch_key(ino), &epoch)?;
                tx.put_on_session(epoch_key(ino), vec![FORMAT]);
                take = lessee.is_none() && others.is_empty() && self.may_take_lock_lease(ino);
                if take {
                    tx.put_on_session(lease_key(ino), self.sid.to_le_bytes().to_vec());
                }
                seen = Some(others);
            }
            if next.is_empty() {
                tx.del(session_key(ino, self.sid));
            } else {
                tx.put_on_session(session_key(ino, self.sid), encode(&next));
            }
            Ok(Step::Done)
        });
        // Counted (before, or just now) but holding nothing after: uncount.
        let holds_after = match &done {
            Ok((Step::Done, _)) => !next.is_empty(),
            _ => !mine.is_empty(),
        };
        if (grows || !mine.is_empty()) && !holds_after {
            self.locks.1.fetch_sub(1, Ordering::AcqRel);
        }
        let (step, rev) = match done {
            Ok(d) => d,
            Err(e) => {
                st.view = None;
                return Err(e);
            }
        };
        if let Step::Done = step {
            st.mine = next;
            // The epoch is this commit's now (a release leaves it, and the
            // view, as they were).
            if let Some(others) = seen {
                st.view = rev.map(|epoch| View { epoch, others });
            }
            if take {
                st.leased = true;
                self.locks
                    .2
                    .st
                    .lock()
                    .held
                    .insert(ino, (Instant::now(), false));
                self.stats.lock_leases_taken.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            st.view = None;
        }
        Ok(step)
    }

    /// Whether a lock commit on `ino` may take its lock lease.
    fn may_take_lock_lease(&self, ino: Ino) -> bool {
        if !self.locks.2.enabled || !self.session_sure() {
            return false;
        }
        let mut t = self.locks.2.st.lock();
        if t.held.len() >= LEASES_MAX {
            return false;
        }
        match t.not_before.get(&ino) {
            Some(&at) if at > Instant::now() => false,
            Some(_) => {
                t.not_before.remove(&ino);
                true
            }
            None => true,
        }
    }

    /// Another session holds `ino`'s lock lease: ask for it (again every
    /// 100 ms) and wait until it is given back (or its session ended), up
    /// to twice the session's lease from `since`.
    fn wait_lock_lease(&self, ino: Ino, since: Instant) -> Result<()> {
        self.stats.lock_lease_waits.fetch_add(1, Ordering::Relaxed);
        let op = Op::Put(
            ask_key(ino),
            self.sid.to_le_bytes().to_vec(),
            Some(self.lease),
        );
        if let Ok(Outcome::Committed(rev)) = self.store.commit(&[], std::slice::from_ref(&op)) {
            self.note_own(rev, &[op]);
        }
        let until = Instant::now() + Duration::from_millis(100);
        let mut pause = Duration::from_millis(1);
        while Instant::now() < until {
            if self.patient(|| self.store.get(&lease_key(ino)))?.is_none() {
                return Ok(());
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
        if since.elapsed() > self.ttl * 2 + Duration::from_secs(5) {
            return Err(Error::Io(format!(
                "another mount holds the locks of inode {ino} and did not give them back within {:?}: try again",
                self.ttl * 2
            )));
        }
        Ok(())
    }

    /// Give back `ino`'s lock lease (its slot locked by the caller): one
    /// commit writes this daemon's locks as they are, moves the epoch and
    /// deletes the lease and the request. After it the others' locks are
    /// none, at its revision: the view.
    fn give_back_locks(&self, ino: Ino, st: &mut Slot) -> Result<()> {
        if !st.leased {
            return Ok(());
        }
        let mine = st.mine.clone();
        // As an unlock: what was answered from memory under the lock goes
        // first (`settle`), then the lock to the other mount.
        let r = self.settle().and_then(|()| {
            self.run_at(|tx: &mut Tx| {
                if mine.is_empty() {
                    tx.del(session_key(ino, self.sid));
                } else {
                    tx.put_on_session(session_key(ino, self.sid), encode(&mine));
                }
                tx.put_on_session(epoch_key(ino), vec![FORMAT]);
                tx.del(lease_key(ino));
                tx.del(ask_key(ino));
                Ok(())
            })
        });
        st.leased = false;
        st.view = match &r {
            Ok(((), Some(epoch))) => Some(View {
                epoch: *epoch,
                others: Vec::new(),
            }),
            _ => None,
        };
        let mut t = self.locks.2.st.lock();
        let asked = t.held.remove(&ino).is_some_and(|(_, a)| a);
        if asked {
            if t.not_before.len() > 4096 {
                t.not_before.clear();
            }
            t.not_before.insert(ino, Instant::now() + HANDOFF_GAP);
        }
        drop(t);
        self.stats.lock_leases_given.fetch_add(1, Ordering::Relaxed);
        r.map(|_| ())
    }

    /// The change stream's requests for this daemon's lock leases.
    pub(super) fn lock_lease_events(&self, evs: &[super::Event]) {
        if !self.locks.2.enabled {
            return;
        }
        let mut t = self.locks.2.st.lock();
        if t.held.is_empty() {
            return;
        }
        for e in evs {
            if e.key.len() != 10 || e.key[0] != b'K' || e.key[9] != b'R' {
                continue;
            }
            let Some(v) = e.value.as_deref().filter(|v| v.len() == 8) else {
                continue;
            };
            if v == self.sid.to_le_bytes() {
                continue;
            }
            let ino = u64::from_be_bytes(e.key[1..9].try_into().unwrap());
            if let Some(h) = t.held.get_mut(&ino) {
                h.1 = true;
            }
        }
    }

    /// How long the stream may wait before a requested lock lease is due.
    pub(super) fn lock_lease_wait(&self) -> Duration {
        let t = self.locks.2.st.lock();
        if t.held.values().any(|&(_, asked)| asked) {
            Duration::from_millis(5)
        } else {
            Duration::from_secs(1)
        }
    }

    /// Give back the requested lock leases past their slice whose holder
    /// holds no lock there now, and those past their turn whatever it holds.
    pub(super) fn give_back_due_locks(&self) {
        let due: Vec<(Ino, bool)> = {
            let t = self.locks.2.st.lock();
            t.held
                .iter()
                .filter(|(_, &(at, asked))| asked && at.elapsed() >= SLICE)
                .map(|(&ino, &(at, _))| (ino, at.elapsed() >= TURN))
                .collect()
        };
        for (ino, late) in due {
            let Some(slot) = self.locks.0.lock().get(&ino).cloned() else {
                self.locks.2.st.lock().held.remove(&ino);
                continue;
            };
            let mut st = slot.lock();
            if st.mine.is_empty() || late {
                if let Err(e) = self.give_back_locks(ino, &mut st) {
                    tracing::warn!("giving back the lock lease of inode {ino}: {e}");
                }
            }
        }
    }

    /// Lock leases held now (for `shoal stats` and tests).
    pub fn lock_leases_held(&self) -> usize {
        self.locks.2.st.lock().held.len()
    }

    /// F_GETLK: the first lock of another owner that would stop `req`.
    pub fn getlk(&self, ino: Ino, req: &Lock) -> Result<Option<Lock>> {
        let slot = self.locks.0.lock().get(&ino).cloned();
        let since = Instant::now();
        loop {
            let (mine, leased) = match &slot {
                Some(s) => {
                    let s = s.lock();
                    (s.mine.clone(), s.leased)
                }
                None => Default::default(),
            };
            if leased {
                self.lock_lease_sure()?;
                return Ok(self.blocking(&mine, &[], req));
            }
            let (others, _, lessee) = self.scan_leased(ino)?;
            match lessee {
                Some(s) if s != self.sid => self.wait_lock_lease(ino, since)?,
                _ => return Ok(self.blocking(&mine, &others, req)),
            }
        }
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
