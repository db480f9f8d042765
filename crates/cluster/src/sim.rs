//! A shared store in memory, for tests: what a distributed engine does to
//! the daemons on it, made to happen on demand. Commits really conflict
//! (every daemon in a test process shares one `SimStore`); the change
//! stream can lag (`pause_watches`); leases expire on a fake clock
//! (`advance`); the next commit can fail with its result unknown, applied or
//! not, or with the store unavailable or full (`fail_next`). In TiKV mode
//! (`SimStore::tikv`) revisions are timestamps with gaps and there is no
//! watch, as with TiKV's Rust client.

use super::*;
use shoal_core::sync::{Condvar, PlainMutex, PlainMutexGuard};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A failure for the next commit to meet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The answer is lost; `applied` says whether the commit happened.
    Unknown {
        applied: bool,
    },
    Unavailable,
    NoSpace,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Etcd,
    Tikv,
}

struct Entry {
    value: Vec<u8>,
    mod_rev: Rev,
    lease: Option<LeaseId>,
}

#[derive(Default)]
struct State {
    kv: BTreeMap<Vec<u8>, Entry>,
    rev: Rev,
    /// Every commit's events, oldest first, from `first_kept` on.
    history: Vec<(Rev, Vec<Event>)>,
    first_kept: Rev,
    /// Lease -> deadline on the fake clock.
    leases: HashMap<LeaseId, (Duration, Duration)>,
    next_lease: LeaseId,
    clock: Duration,
    /// Watchers see commits only up to this revision while paused.
    watch_upto: Option<Rev>,
    faults: Vec<Fault>,
    quota: Option<usize>,
    commits: u64,
    conflicts: u64,
}

pub struct SimStore {
    mode: Mode,
    limits: Limits,
    /// Each call waits this long first (a network round trip), so that
    /// operations of several threads interleave as they would on a cluster.
    delay: PlainMutex<Duration>,
    st: Arc<(PlainMutex<State>, Condvar)>,
}

impl SimStore {
    /// etcd's semantics and limits.
    pub fn new() -> Arc<SimStore> {
        Self::with_mode(Mode::Etcd)
    }

    /// TiKV's: revisions are timestamps with gaps, no watch, larger commits.
    pub fn tikv() -> Arc<SimStore> {
        Self::with_mode(Mode::Tikv)
    }

    fn with_mode(mode: Mode) -> Arc<SimStore> {
        let limits = match mode {
            Mode::Etcd => Limits {
                max_ops: 128,
                max_bytes: 1536 * 1024,
            },
            Mode::Tikv => Limits {
                max_ops: 1 << 16,
                max_bytes: 100 << 20,
            },
        };
        Arc::new(SimStore {
            mode,
            limits,
            delay: PlainMutex::new(Duration::ZERO),
            st: Arc::new((
                PlainMutex::new(State {
                    rev: 1,
                    next_lease: 0x5e55_0000,
                    ..State::default()
                }),
                Condvar::new(),
            )),
        })
    }

    fn lock(&self) -> PlainMutexGuard<'_, State> {
        self.st.0.lock()
    }

    /// Every read and commit waits `d` first (outside the store's lock).
    pub fn set_delay(&self, d: Duration) {
        *self.delay.lock() = d;
    }

    fn wait(&self) {
        let d = *self.delay.lock();
        if !d.is_zero() {
            std::thread::sleep(d);
        }
    }

    /// Move the fake clock on: leases past their deadline end, and their
    /// keys go (in one revision, as etcd revokes a lease).
    pub fn advance(&self, d: Duration) {
        let mut s = self.lock();
        s.clock += d;
        let now = s.clock;
        let mut gone: Vec<LeaseId> = s
            .leases
            .iter()
            .filter(|(_, &(deadline, _))| deadline <= now)
            .map(|(&id, _)| id)
            .collect();
        gone.sort_unstable();
        for id in gone {
            self.end_lease(&mut s, id);
        }
        self.st.1.notify_all();
    }

    /// Hold the change stream at the current revision (`true`) or let it
    /// catch up (`false`).
    pub fn pause_watches(&self, on: bool) {
        let mut s = self.lock();
        s.watch_upto = on.then_some(s.rev);
        self.st.1.notify_all();
    }

    /// The next commits meet these failures, one each.
    pub fn fail_next(&self, f: Fault) {
        self.lock().faults.push(f);
    }

    /// Refuse commits once keys and values pass `bytes` (etcd's quota).
    pub fn set_quota(&self, bytes: Option<usize>) {
        self.lock().quota = bytes;
    }

    /// Forget history before the current revision: watches from earlier
    /// answer `Compacted`.
    pub fn compact(&self) {
        let mut s = self.lock();
        s.first_kept = s.rev + 1;
        s.history.clear();
    }

    /// (commits, conflicts) so far.
    pub fn counts(&self) -> (u64, u64) {
        let s = self.lock();
        (s.commits, s.conflicts)
    }

    fn next_rev(&self, s: &mut State) -> Rev {
        s.rev += match self.mode {
            Mode::Etcd => 1,
            // A timestamp oracle's: later, not next.
            Mode::Tikv => 1 + (s.rev * 7919) % 13,
        };
        s.rev
    }

    fn end_lease(&self, s: &mut State, id: LeaseId) {
        s.leases.remove(&id);
        let keys: Vec<Vec<u8>> =
            s.kv.iter()
                .filter(|(_, e)| e.lease == Some(id))
                .map(|(k, _)| k.clone())
                .collect();
        if keys.is_empty() {
            return;
        }
        let rev = self.next_rev(s);
        let mut events = Vec::new();
        for k in keys {
            s.kv.remove(&k);
            events.push(Event {
                key: k,
                value: None,
                rev,
            });
        }
        s.history.push((rev, events));
    }

    fn apply(&self, s: &mut State, ops: &[Op]) -> KvResult<Rev> {
        for op in ops {
            if let Op::Put(_, _, Some(l)) = op {
                if !s.leases.contains_key(l) {
                    return Err(KvError::LeaseExpired(*l));
                }
            }
        }
        if let Some(q) = s.quota {
            let used: usize = s.kv.iter().map(|(k, e)| k.len() + e.value.len()).sum();
            let adds: usize = ops
                .iter()
                .map(|o| match o {
                    Op::Put(k, v, _) => k.len() + v.len(),
                    Op::Delete(_) => 0,
                })
                .sum();
            if adds > 0 && used + adds > q {
                return Err(KvError::NoSpace);
            }
        }
        let rev = self.next_rev(s);
        let mut events = Vec::new();
        for op in ops {
            match op {
                Op::Put(k, v, lease) => {
                    s.kv.insert(
                        k.clone(),
                        Entry {
                            value: v.clone(),
                            mod_rev: rev,
                            lease: *lease,
                        },
                    );
                    events.push(Event {
                        key: k.clone(),
                        value: Some(v.clone()),
                        rev,
                    });
                }
                Op::Delete(k) => {
                    if s.kv.remove(k).is_some() {
                        events.push(Event {
                            key: k.clone(),
                            value: None,
                            rev,
                        });
                    }
                }
            }
        }
        s.history.push((rev, events));
        Ok(rev)
    }
}

impl ClusterStore for SimStore {
    fn get(&self, key: &[u8]) -> KvResult<Option<Versioned>> {
        self.wait();
        Ok(self.lock().kv.get(key).map(|e| Versioned {
            value: e.value.clone(),
            mod_rev: e.mod_rev,
        }))
    }

    fn get_many(&self, keys: &[Vec<u8>]) -> KvResult<super::Got> {
        self.wait();
        let s = self.lock();
        let vs = keys
            .iter()
            .map(|k| {
                s.kv.get(k).map(|e| Versioned {
                    value: e.value.clone(),
                    mod_rev: e.mod_rev,
                })
            })
            .collect();
        Ok((vs, s.rev))
    }

    fn scan(&self, lo: &[u8], hi: &[u8], limit: usize) -> KvResult<Scan> {
        self.wait();
        let s = self.lock();
        let v =
            s.kv.range(lo.to_vec()..hi.to_vec())
                .take(limit)
                .map(|(k, e)| {
                    (
                        k.clone(),
                        Versioned {
                            value: e.value.clone(),
                            mod_rev: e.mod_rev,
                        },
                    )
                })
                .collect();
        Ok((v, s.rev))
    }

    /// Keys and values in bytes against the quota (`set_quota`).
    fn space(&self) -> KvResult<Option<super::StoreSpace>> {
        let s = self.lock();
        let used: usize = s.kv.iter().map(|(k, e)| k.len() + e.value.len()).sum();
        Ok(Some(super::StoreSpace {
            used: used as u64,
            quota: s.quota.map(|q| q as u64),
        }))
    }

    fn commit(&self, conds: &[Cond], ops: &[Op]) -> KvResult<Outcome> {
        self.limits.check(conds, ops)?;
        self.wait();
        let mut s = self.lock();
        let fault = if s.faults.is_empty() {
            None
        } else {
            Some(s.faults.remove(0))
        };
        match fault {
            Some(Fault::Unavailable) => return Err(KvError::Unavailable("injected".into())),
            Some(Fault::NoSpace) => return Err(KvError::NoSpace),
            _ => {}
        }
        let failed: Vec<usize> = conds
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                let found = match c {
                    Cond::Empty(lo, hi) => s.kv.range(lo.clone()..hi.clone()).next().map(|e| e.1),
                    _ => s.kv.get(c.key()),
                };
                !c.holds(found.map(|e| e.mod_rev))
            })
            .map(|(i, _)| i)
            .collect();
        let out = if failed.is_empty() {
            if fault == Some(Fault::Unknown { applied: false }) {
                return Err(KvError::Unknown("injected, not applied".into()));
            }
            let rev = self.apply(&mut s, ops)?;
            s.commits += 1;
            Outcome::Committed(rev)
        } else {
            s.conflicts += 1;
            Outcome::Conflict(failed)
        };
        self.st.1.notify_all();
        if matches!(fault, Some(Fault::Unknown { .. })) {
            return Err(KvError::Unknown("injected".into()));
        }
        Ok(out)
    }

    fn watch(&self, prefix: &[u8], from: Rev) -> KvResult<Box<dyn Watch>> {
        if self.mode == Mode::Tikv {
            return Err(KvError::Unsupported("watch (TiKV has no change stream)"));
        }
        Ok(Box::new(SimWatch {
            st: self.st.clone(),
            prefix: prefix.to_vec(),
            next: from,
        }))
    }

    fn revision(&self) -> KvResult<Rev> {
        Ok(self.lock().rev)
    }

    fn lease_grant(&self, ttl: Duration) -> KvResult<LeaseId> {
        let mut s = self.lock();
        s.next_lease += 1;
        let id = s.next_lease;
        let deadline = s.clock + ttl;
        s.leases.insert(id, (deadline, ttl));
        Ok(id)
    }

    fn lease_renew(&self, id: LeaseId) -> KvResult<()> {
        let mut s = self.lock();
        let now = s.clock;
        match s.leases.get_mut(&id) {
            Some((deadline, ttl)) => {
                *deadline = now + *ttl;
                Ok(())
            }
            None => Err(KvError::LeaseExpired(id)),
        }
    }

    fn lease_revoke(&self, id: LeaseId) -> KvResult<()> {
        let mut s = self.lock();
        if !s.leases.contains_key(&id) {
            return Err(KvError::LeaseExpired(id));
        }
        self.end_lease(&mut s, id);
        self.st.1.notify_all();
        Ok(())
    }

    fn limits(&self) -> Limits {
        self.limits
    }
}

struct SimWatch {
    st: Arc<(PlainMutex<State>, Condvar)>,
    prefix: Vec<u8>,
    /// The first revision not yet delivered.
    next: Rev,
}

impl Watch for SimWatch {
    fn next(&mut self, timeout: Duration) -> KvResult<Vec<Event>> {
        let deadline = std::time::Instant::now() + timeout;
        let mut s = self.st.0.lock();
        loop {
            if self.next < s.first_kept {
                return Err(KvError::Compacted(self.next));
            }
            let upto = s.watch_upto.unwrap_or(Rev::MAX);
            let mut out = Vec::new();
            for (rev, evs) in s.history.iter() {
                if *rev < self.next || *rev > upto {
                    continue;
                }
                out.extend(
                    evs.iter()
                        .filter(|e| e.key.starts_with(&self.prefix))
                        .cloned(),
                );
                self.next = rev + 1;
            }
            if !out.is_empty() {
                return Ok(out);
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Ok(out);
            }
            self.st.1.wait_for(&mut s, deadline - now);
        }
    }
}
