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
//! answers; what it does not know is read); finding one with no links, it
//! holds it: it puts `H ino sid` on its session's lease, requiring the
//! record unchanged since it read it. Its last close of the file gives
//! the hold back and, if no other daemon holds it, removes the inode.
//!
//! Why a held file is never removed: a removal requires `[H ino, H ino+1)`
//! empty (`Cond::Empty`), a hold requires the record as read; of the two
//! commits the one etcd orders second fails, so either the hold stands and
//! the removal waits for its daemon's last close (or its session's end,
//! which takes the hold with its lease), or the removal happened first and
//! the hold finds the record gone. What is *not* guaranteed: a daemon that
//! does not see the unlink within the grace (its stream and its reads
//! stalled that long while its session lived) loses the file, as every
//! daemon did before holds existed.
//!
//! Who removes: the daemon that unlinked it, at the end of the grace and
//! again every grace while someone holds it; a holder at its last close;
//! and when the unlinking daemon's session is gone, the next daemon to
//! join (`reclaim_orphans`), each only with no hold left.

use super::ns::{ikey, okey, Node, SharedFs, Tx};
use super::Cond;
use crate::error::Result;
use crate::types::Ino;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// `H ino sid`: session `sid` holds `ino`, unlinked, open.
pub(super) fn hkey(ino: Ino, sid: u64) -> Vec<u8> {
    let mut k = vec![b'H'];
    k.extend_from_slice(&ino.to_be_bytes());
    k.extend_from_slice(&sid.to_be_bytes());
    k
}

/// Every hold of `ino`: `[H ino, H ino+1)`.
fn hrange(ino: Ino) -> (Vec<u8>, Vec<u8>) {
    let lo = {
        let mut k = vec![b'H'];
        k.extend_from_slice(&ino.to_be_bytes());
        k
    };
    let mut hi = vec![b'H'];
    hi.extend_from_slice(&(ino + 1).to_be_bytes());
    (lo, hi)
}

/// What a daemon keeps of holds and removals to come.
#[derive(Default)]
pub(super) struct Holds {
    /// Inodes this daemon holds (`H ino sid`).
    held: Mutex<HashSet<Ino>>,
    /// Inodes this daemon unlinked, and when to try to remove each.
    due: Mutex<Vec<(Instant, Ino)>>,
}

impl SharedFs {
    /// The last name of `n` went and it is not open here: keep its record,
    /// with no links, and its orphan key; remove it after the grace.
    pub(super) fn remove_later(&self, tx: &mut Tx, n: &mut Node) -> Result<()> {
        n.attr.nlink = 0;
        n.attr.ctime = crate::types::Ts::now();
        tx.put_node(n)?;
        tx.put_plain(okey(self.sid, n.attr.ino), vec![]);
        // Noted before the commit: a removal that finds the inode named
        // again or gone does nothing.
        self.remove_after_grace(n.attr.ino);
        Ok(())
    }

    /// Try to remove `ino`, an orphan of this daemon, after the grace.
    pub(super) fn remove_after_grace(&self, ino: Ino) {
        let at = Instant::now() + self.grace;
        self.holds.due.lock().unwrap().push((at, ino));
    }

    /// Remove `ino` if it has no links and no daemon holds it: Ok(true)
    /// gone (now or before), Ok(false) held. `own`: this daemon's hold
    /// goes in the same commit; `orphan`: the orphan key to delete with it.
    pub(super) fn remove_unheld(
        &self,
        ino: Ino,
        own: bool,
        orphan: Option<Vec<u8>>,
    ) -> Result<bool> {
        self.run(|tx| {
            let (lo, hi) = hrange(ino);
            let holds = self.scan_holds(&lo, &hi)?;
            if own {
                tx.del(hkey(ino, self.sid));
            }
            let others = holds.iter().filter(|&&s| !(own && s == self.sid)).count();
            if others > 0 {
                return Ok(false);
            }
            let mine = hkey(ino, self.sid);
            if own {
                // Every hold but this daemon's, which goes with this commit.
                tx.require_cond(Cond::Empty(lo, mine.clone()));
                let mut after = mine;
                after.push(0);
                tx.require_cond(Cond::Empty(after, hi));
            } else {
                tx.require_cond(Cond::Empty(lo, hi));
            }
            if let Some(v) = tx.get(ikey(ino))? {
                let n = Node::decode(ino, &v.value)?;
                if n.attr.nlink > 0 {
                    // Named again (a link raced the unlink): it stays.
                    if let Some(k) = &orphan {
                        tx.del(k.clone());
                    }
                    return Ok(true);
                }
                tx.del(ikey(ino));
                Self::forget_data(tx, &n);
            }
            if let Some(k) = &orphan {
                tx.del(k.clone());
            }
            Ok(true)
        })
    }

    fn scan_holds(&self, lo: &[u8], hi: &[u8]) -> Result<Vec<u64>> {
        self.stats.reads.fetch_add(1, Ordering::Relaxed);
        let (kvs, _) = self.patient(|| self.store.scan(lo, hi, 1000))?;
        Ok(kvs
            .iter()
            .filter(|(k, _)| k.len() == 17)
            .map(|(k, _)| u64::from_be_bytes(k[9..17].try_into().unwrap()))
            .collect())
    }

    /// Whether this daemon holds `ino` (its last close gives it back).
    pub(super) fn holds_open(&self, ino: Ino) -> bool {
        self.holds.held.lock().unwrap().contains(&ino)
    }

    /// The last close here of `ino`, which this daemon holds: give the
    /// hold back, and remove the inode if no one else holds it.
    pub(super) fn unhold(&self, ino: Ino) -> Result<()> {
        if !self.holds.held.lock().unwrap().remove(&ino) {
            return Ok(());
        }
        self.remove_unheld(ino, true, None).map(|_| ())
    }

    /// Hold every file open here whose last name went elsewhere.
    fn hold_unlinked(&self) -> Result<()> {
        let open = self.open_inodes();
        let held = self.holds.held.lock().unwrap().clone();
        let want: Vec<Ino> = open.into_iter().filter(|i| !held.contains(i)).collect();
        if want.is_empty() {
            return Ok(());
        }
        let keys: Vec<Vec<u8>> = want.iter().map(|&i| ikey(i)).collect();
        let vs = self.read_records(keys)?;
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
                self.holds.held.lock().unwrap().insert(ino);
                // Closed while this committed: give it back now.
                if !self.is_open(ino) {
                    self.unhold(ino)?;
                }
            }
        }
        Ok(())
    }

    /// Try the removals whose grace ended; those still held wait another.
    fn remove_due(&self) -> Result<()> {
        let now = Instant::now();
        let ready: Vec<Ino> = {
            let mut due = self.holds.due.lock().unwrap();
            let (ready, wait): (Vec<_>, Vec<_>) = due.drain(..).partition(|(t, _)| *t <= now);
            *due = wait;
            ready.into_iter().map(|(_, i)| i).collect()
        };
        for ino in ready {
            if self.is_open(ino) {
                // Opened here again by handle: its last close removes it.
                self.note_orphan(ino);
                continue;
            }
            if !self.remove_unheld(ino, false, Some(okey(self.sid, ino)))? {
                self.remove_after_grace(ino);
            }
        }
        Ok(())
    }

    /// Start the thread that holds what is open here and removes what
    /// this daemon unlinked, once their grace ends.
    pub(super) fn start_holds(fs: &Arc<SharedFs>) {
        if fs.grace.is_zero() {
            return;
        }
        let every = (fs.grace / 10).min(Duration::from_millis(500));
        let weak: Weak<SharedFs> = Arc::downgrade(fs);
        std::thread::Builder::new()
            .name("shoal-holds".into())
            .spawn(move || loop {
                std::thread::sleep(every);
                let Some(fs) = weak.upgrade() else { return };
                if fs.stop.load(Ordering::Relaxed) || fs.lost.load(Ordering::Relaxed) {
                    return;
                }
                if let Err(e) = fs.hold_unlinked().and_then(|_| fs.remove_due()) {
                    tracing::warn!("files unlinked while open: {e}; trying again");
                }
            })
            .expect("spawn holds");
    }
}
