//! Files unlinked while open on another daemon stay readable there
//! (docs/design.md, "Unlinked while open").
//!
//! A daemon does not tell the store which files it has open (a write per
//! open would cost every reader a commit). Instead the removal of a file's
//! last name waits: the unlinking daemon keeps the inode's record, with
//! no links, and its orphan key `O sid ino` (as for a file open on that
//! daemon itself), and removes the inode only `SessionOpts::unlinked_grace`
//! later (10 s by default), if no daemon holds it then. A daemon that has
//! the file open looks, every `grace / 10` at most, at the records of the
//! files it has open (the record cache, kept current by the change stream,
//! answers; what it does not know is read, and every `grace / 4` all are,
//! in case the stream stalled); finding one with no links, it
//! holds it: it puts `H ino sid` on its session's lease, requiring the
//! record unchanged since it read it. Its last close of the file gives
//! the hold back and, if no other daemon holds it, removes the inode.
//!
//! Why a held file is never removed: a removal requires `[H ino, H ino+1)`
//! empty (`Cond::Empty`), a hold requires the record as read; of the two
//! commits the one etcd orders second fails, so either the hold stands and
//! the removal waits for its daemon's last close (or its session's end,
//! which takes the hold with its lease), or the removal happened first and
//! the hold finds the record gone. What is *not* guaranteed: a daemon
//! whose reads stall for most of the grace while its session lives does
//! not see the unlink in time and loses the file, as every daemon did
//! before holds existed.
//!
//! Who removes: the daemon that unlinked it, at the end of the grace and
//! again every grace while someone holds it (25 a commit); a holder at its
//! last close; and when the unlinking daemon's session is gone, any daemon
//! (`reclaim_orphans`: in the background when it joins, then every
//! minute), each only with no hold left.

use super::ns::{ikey, okey, skey, ClusterFs, Node, Tx};
use super::Cond;
use shoal_core::error::Result;
use shoal_core::sync::PlainMutex;
use shoal_core::types::Ino;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// `H ino`: where the holds of `ino` start.
fn hprefix(ino: Ino) -> Vec<u8> {
    let mut k = vec![b'H'];
    k.extend_from_slice(&ino.to_be_bytes());
    k
}

/// `H ino sid`: session `sid` holds `ino`, unlinked, open.
pub(super) fn hkey(ino: Ino, sid: u64) -> Vec<u8> {
    let mut k = hprefix(ino);
    k.extend_from_slice(&sid.to_be_bytes());
    k
}

/// Every hold of `ino`: `[H ino, H ino+1)`.
fn hrange(ino: Ino) -> (Vec<u8>, Vec<u8>) {
    (hprefix(ino), hprefix(ino + 1))
}

/// What a daemon keeps of holds and removals to come.
#[derive(Default)]
pub(super) struct Holds {
    /// Inodes this daemon holds (`H ino sid`).
    held: PlainMutex<HashSet<Ino>>,
    /// Inodes this daemon unlinked, and when to try to remove each.
    due: PlainMutex<Vec<(Instant, Ino)>>,
    /// When `hold_unlinked` last read every open file's record from the
    /// store rather than the record cache.
    read_fresh: PlainMutex<Option<Instant>>,
}

impl ClusterFs {
    /// The last name of `n` went and it is not open here: keep its record,
    /// with no links, and its orphan key; remove it after the grace (once
    /// the commit is in: `Tx::later`).
    pub(super) fn remove_later(&self, tx: &mut Tx, n: &mut Node) -> Result<()> {
        n.attr.nlink = 0;
        n.attr.ctime = shoal_core::types::Ts::now();
        tx.put_node(n)?;
        tx.put_plain(okey(self.sid, n.attr.ino), vec![]);
        tx.remove_after_grace(n.attr.ino);
        Ok(())
    }

    /// Try to remove `ino`, an orphan of this daemon, after the grace.
    pub(super) fn remove_after_grace(&self, ino: Ino) {
        let at = Instant::now() + self.grace;
        self.holds.due.lock().push((at, ino));
    }

    /// Give back this daemon's hold of `ino` and remove the inode if it
    /// has no links and no other daemon holds it, in one commit.
    fn unhold_and_remove(&self, ino: Ino) -> Result<()> {
        self.run(|tx| {
            let (lo, hi) = hrange(ino);
            let mine = hkey(ino, self.sid);
            tx.del(mine.clone());
            if self
                .scan_holds(&lo, &hi)?
                .iter()
                .any(|&(_, s)| s != self.sid)
            {
                return Ok(());
            }
            // Every hold but this daemon's, which goes with this commit.
            tx.require_cond(Cond::Empty(lo, mine.clone()));
            let mut after = mine;
            after.push(0);
            tx.require_cond(Cond::Empty(after, hi));
            let v = tx.get(ikey(ino))?;
            Self::remove_nameless(tx, ino, v.as_ref())
        })
    }

    /// Delete `ino`'s record `v` (as read) and its data if it still has no
    /// links; named again (a link raced the unlink), it stays.
    fn remove_nameless(tx: &mut Tx, ino: Ino, v: Option<&super::Versioned>) -> Result<()> {
        if let Some(v) = v {
            let n = Node::decode(ino, &v.value)?;
            if n.attr.nlink == 0 {
                tx.del(ikey(ino));
                Self::forget_data(tx, &n);
            }
        }
        Ok(())
    }

    /// The holds in `[lo, hi)`: (inode, session).
    fn scan_holds(&self, lo: &[u8], hi: &[u8]) -> Result<Vec<(Ino, u64)>> {
        self.stats.reads.fetch_add(1, Ordering::Relaxed);
        let (kvs, _) = self.patient(|| self.store.scan(lo, hi, 100_000))?;
        Ok(kvs
            .iter()
            .filter(|(k, _)| k.len() == 17)
            .map(|(k, _)| {
                let n = |r: std::ops::Range<usize>| u64::from_be_bytes(k[r].try_into().unwrap());
                (n(1..9), n(9..17))
            })
            .collect())
    }

    /// Whether this daemon holds `ino` (its last close gives it back).
    pub(super) fn holds_open(&self, ino: Ino) -> bool {
        self.holds.held.lock().contains(&ino)
    }

    /// The last close here of `ino`, which this daemon holds: give the
    /// hold back, and remove the inode if no one else holds it.
    pub(super) fn unhold(&self, ino: Ino) -> Result<()> {
        if !self.holds.held.lock().remove(&ino) {
            return Ok(());
        }
        self.unhold_and_remove(ino)
    }

    /// Hold every file open here whose last name went elsewhere.
    fn hold_unlinked(&self) -> Result<()> {
        let open = self.open_inodes();
        let held = self.holds.held.lock().clone();
        let want: Vec<Ino> = open.into_iter().filter(|i| !held.contains(i)).collect();
        if want.is_empty() {
            return Ok(());
        }
        // The record cache answers for what it knows (the stream keeps it
        // current); the rest is read in one round trip. Every quarter
        // grace all are read: a stream that stalls (the session and the
        // reads fine) must not hide an unlink past the grace.
        let fresh = {
            let mut last = self.holds.read_fresh.lock();
            let due = !self.has_watch || last.is_none_or(|t| t.elapsed() >= self.grace / 4);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        let known: Vec<Option<Option<Vec<u8>>>> = want
            .iter()
            .map(|&i| (!fresh).then(|| self.cache.get(&ikey(i))).flatten())
            .collect();
        let unknown: Vec<Vec<u8>> = want
            .iter()
            .zip(&known)
            .filter(|(_, k)| k.is_none())
            .map(|(&i, _)| ikey(i))
            .collect();
        let mut read = if unknown.is_empty() {
            Vec::new()
        } else {
            self.read_known(unknown, true)?
        }
        .into_iter();
        let vs: Vec<Option<Vec<u8>>> = known
            .into_iter()
            .map(|k| k.unwrap_or_else(|| read.next().flatten()))
            .collect();
        for (ino, v) in want.into_iter().zip(vs) {
            let Some(v) = v else { continue };
            if Node::decode(ino, &v)?.attr.nlink > 0 {
                continue;
            }
            let done = self.run(|tx| {
                let Some(now) = tx.get(ikey(ino))? else {
                    return Ok(false); // removed first: lost
                };
                if Node::decode(ino, &now.value)?.attr.nlink > 0 {
                    return Ok(false);
                }
                tx.put_on_session(hkey(ino, self.sid), vec![]);
                Ok(true)
            })?;
            if done {
                self.holds.held.lock().insert(ino);
                // Closed while this committed: give it back now.
                if !self.is_open(ino) {
                    self.unhold(ino)?;
                }
            }
        }
        Ok(())
    }

    /// Remove these orphans (inode, orphan key) that no daemon holds, up
    /// to `BATCH` a commit: one scan of every hold in the namespace (few:
    /// files unlinked while open elsewhere), one read of the records, one
    /// commit that requires each removed inode's holds empty. The ones
    /// held are returned.
    pub(super) fn remove_batch(&self, orphans: &[(Ino, Vec<u8>)]) -> Result<Vec<Ino>> {
        let mut held = Vec::new();
        for part in orphans.chunks(BATCH) {
            // One orphan (a last close here): its own holds only.
            let (lo, hi) = match part {
                [(ino, _)] => hrange(*ino),
                _ => (b"H".to_vec(), b"I".to_vec()),
            };
            held.extend(self.run(|tx| {
                let holds: HashSet<Ino> = self
                    .scan_holds(&lo, &hi)?
                    .into_iter()
                    .map(|(ino, _)| ino)
                    .collect();
                let (kept, free): (Vec<_>, Vec<_>) =
                    part.iter().partition(|(ino, _)| holds.contains(ino));
                let kept: Vec<Ino> = kept.into_iter().map(|(ino, _)| *ino).collect();
                if free.is_empty() {
                    return Ok(kept);
                }
                let vs = tx.get_many(free.iter().map(|(ino, _)| ikey(*ino)).collect())?;
                for ((ino, okey), v) in free.into_iter().zip(vs) {
                    let (lo, hi) = hrange(*ino);
                    tx.require_cond(Cond::Empty(lo, hi));
                    Self::remove_nameless(tx, *ino, v.as_ref())?;
                    tx.del(okey.clone());
                }
                Ok(kept)
            })?);
        }
        Ok(held)
    }

    /// Try the removals whose grace ended; those still held wait another.
    fn remove_due(&self) -> Result<()> {
        let now = Instant::now();
        let ready: Vec<Ino> = {
            let mut due = self.holds.due.lock();
            let (ready, wait): (Vec<_>, Vec<_>) = due.drain(..).partition(|(t, _)| *t <= now);
            *due = wait;
            ready.into_iter().map(|(_, i)| i).collect()
        };
        let mut free = Vec::new();
        for ino in ready {
            if self.is_open(ino) {
                // Opened here again by handle: its last close removes it.
                self.note_orphan(ino);
            } else {
                free.push((ino, okey(self.sid, ino)));
            }
        }
        for ino in self.remove_batch(&free)? {
            self.remove_after_grace(ino);
        }
        Ok(())
    }

    /// Inodes whose last name a session that is gone removed (its daemon
    /// died or was cut off, or unmounted within their grace): removed, as
    /// that daemon would have, unless held.
    pub(super) fn reclaim_orphans(&self) -> Result<()> {
        let (kvs, _) = self.patient(|| self.store.scan(b"O", b"P", 10_000))?;
        let mut alive: std::collections::HashMap<u64, bool> = Default::default();
        let mut gone = Vec::new();
        for (k, _) in kvs {
            if k.len() != 17 {
                continue;
            }
            let sid = u64::from_be_bytes(k[1..9].try_into().unwrap());
            let ino = u64::from_be_bytes(k[9..17].try_into().unwrap());
            let live = match alive.get(&sid) {
                Some(&l) => l,
                None => {
                    let l = self.patient(|| self.store.get(&skey(sid)))?.is_some();
                    alive.insert(sid, l);
                    l
                }
            };
            if !live {
                gone.push((ino, k));
            }
        }
        // A held one stays, with its orphan key: its holder's last close
        // removes it, and a later round the key.
        self.remove_batch(&gone).map(|_| ())
    }

    /// Start the thread that removes the orphans of sessions that are
    /// gone (at once, then every minute), holds what is open here and
    /// removes what this daemon unlinked once their grace ends.
    pub(super) fn start_holds(fs: &Arc<ClusterFs>) {
        let every = (fs.grace / 10).clamp(Duration::from_millis(10), Duration::from_millis(500));
        let weak: Weak<ClusterFs> = Arc::downgrade(fs);
        std::thread::Builder::new()
            .name("shoal-holds".into())
            .spawn(move || {
                let mut reclaimed: Option<Instant> = None;
                loop {
                    let Some(fs) = weak.upgrade() else { return };
                    if fs.stop.load(Ordering::Relaxed) || fs.lost.load(Ordering::Relaxed) {
                        return;
                    }
                    if reclaimed.is_none_or(|t| t.elapsed() > RECLAIM_EVERY) {
                        if let Err(e) = fs.reclaim_orphans() {
                            tracing::warn!(
                                "removing the orphans of ended sessions: {e}; trying again"
                            );
                        }
                        reclaimed = Some(Instant::now());
                    }
                    if !fs.grace.is_zero() {
                        if let Err(e) = fs.hold_unlinked().and_then(|_| fs.remove_due()) {
                            tracing::warn!("files unlinked while open: {e}; trying again");
                        }
                    }
                    drop(fs);
                    std::thread::sleep(every);
                }
            })
            .expect("spawn holds");
    }
}

/// Orphans removed in one commit (each: a condition, a read, two deletes;
/// etcd takes 128 in a transaction).
const BATCH: usize = 25;

/// How often the orphans of ended sessions are looked for.
const RECLAIM_EVERY: Duration = Duration::from_secs(60);
