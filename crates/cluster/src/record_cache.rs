//! What this daemon has read of records (`I`), directory times (`T`) and
//! entries (`E`), kept current by the change stream, so that a stat or a
//! lookup the kernel's cache no longer answers is answered from memory
//! instead of a round trip to the store (docs/design.md, "Coherence
//! between mounts").
//!
//! The rule that makes it safe: every cached value carries the revision it
//! is known at (the snapshot a read was made at, or the revision of the
//! change that wrote it), and a value only ever replaces one known at an
//! older revision. Every change the stream delivers is put in, cached
//! before or not (so a read that started before a change cannot put its
//! older value in after it: the change's is newer and stays). When the
//! cache is full it drops half of what it holds, and reads older than the
//! newest change it dropped are not kept (`floor`). The cache answers only while
//! the stream follows (`following`); when the stream breaks, everything is
//! dropped and reads older than the new stream's start are not kept. So an
//! answer from here is at most the stream's lag behind the store: the
//! bound the kernel's caches have once the stream invalidates them, and
//! far less than their TTL. The etcd connection requires a leader
//! (`with_require_leader`): a member cut off from the cluster ends the
//! stream instead of keeping it silently open. Mutations do not trust the
//! cache: they read the store and commit on what they read (`ns::Tx`), or
//! (a file's data commit, a batch of unlinks) take a cached value as a
//! guess the commit requires at the revision it was written at
//! (`get_written`), so a stale answer can never become a lost update.

use super::{Op, Rev};
use shoal_core::sync::PlainMutex;
use std::collections::HashMap;

/// What one cached key costs beyond its key's and value's bytes: the
/// map's slot, the two vectors' headers and their allocations' rounding.
/// Measured: a daemon's resident size grew by 192 bytes a key between
/// 120,000 and 556,000 keys of 45 bytes of key and value on average
/// (docs/perf-log/22).
const OVERHEAD: usize = 150;

/// The default budget: 256 MiB, about 1.3 million keys (some 500,000 files
/// of two or three keys each). `SessionOpts::record_cache` sets it.
pub(super) const DEFAULT_BYTES: u64 = 256 << 20;

fn cost(key: &[u8], value: Option<&[u8]>) -> usize {
    key.len() + value.map_or(0, <[u8]>::len) + OVERHEAD
}

/// A cached value (None: absent), the revision it is known at, and the
/// revision it was written at (0 for absent).
type Known = (Option<Vec<u8>>, Rev, Rev);

#[derive(Default)]
struct State {
    /// Key -> its value (None: absent), the revision that is known at,
    /// and the revision the value was written at (its `mod_rev`; 0 for
    /// absent).
    keys: HashMap<Vec<u8>, Known>,
    /// What `keys` costs (`cost`), and the most it may.
    bytes: usize,
    max_bytes: usize,
    /// Reads at a revision below this are not kept: a change after them
    /// may have been dropped (the cache was full, or the stream broke).
    floor: Rev,
    /// The newest change put in.
    newest: Rev,
    following: bool,
}

pub(super) struct RecordCache {
    st: PlainMutex<State>,
}

/// Whether the cache holds this kind of key.
fn cached(key: &[u8]) -> bool {
    matches!(key.first(), Some(b'I' | b'T' | b'E'))
}

impl State {
    fn put(&mut self, key: &[u8], value: Option<&[u8]>, at: Rev, written: Rev) {
        if self.keys.get(key).is_some_and(|(_, r, _)| *r >= at) {
            return;
        }
        let add = cost(key, value);
        if self.bytes + add > self.max_bytes {
            // Any half (the map's order is arbitrary); reads older than
            // the newest change dropped are not kept from now on.
            let mut i = 0u32;
            let mut bytes = 0;
            self.keys.retain(|k, (v, _, _)| {
                i += 1;
                let keep = i.is_multiple_of(2);
                if keep {
                    bytes += cost(k, v.as_deref());
                }
                keep
            });
            self.bytes = bytes;
            self.floor = self.floor.max(self.newest);
            if add > self.max_bytes {
                return;
            }
        }
        let old = self
            .keys
            .insert(key.to_vec(), (value.map(<[u8]>::to_vec), at, written));
        self.bytes += add;
        if let Some((v, _, _)) = old {
            self.bytes -= cost(key, v.as_deref());
        }
    }
}

impl RecordCache {
    /// A cache that holds at most `max_bytes` (`cost`); 0 holds nothing.
    pub(super) fn new(max_bytes: u64) -> RecordCache {
        RecordCache {
            st: PlainMutex::new(State {
                max_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX),
                ..State::default()
            }),
        }
    }

    /// The value of `key` if known (Some(None): known absent), only while
    /// the stream follows.
    pub(super) fn get(&self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        let st = self.st.lock();
        if !st.following {
            return None;
        }
        st.keys.get(key).map(|(v, _, _)| v.clone())
    }

    /// The value of `key` as `get` knows it, with the revision it was
    /// written at (0: absent): a guess a commit may rest on by requiring
    /// the key at that revision (`ns::Tx::node_known`), which fails if the
    /// guess is stale. Only while the stream follows.
    pub(super) fn get_written(&self, key: &[u8]) -> Option<(Option<Vec<u8>>, Rev)> {
        let st = self.st.lock();
        if !st.following {
            return None;
        }
        st.keys.get(key).map(|(v, _, w)| (v.clone(), *w))
    }

    /// `key`'s value if the cache knows it present, as a read would have
    /// answered it (with the revision it was written at): a guess for a
    /// commit's condition (`ns::Tx::node_known` and the removals'
    /// batches), which fails the commit if stale.
    pub(super) fn versioned(&self, key: &[u8]) -> Option<super::Versioned> {
        match self.get_written(key)? {
            (Some(value), mod_rev) if mod_rev > 0 => Some(super::Versioned { value, mod_rev }),
            _ => None,
        }
    }

    /// What a read found: `key` held `value` (written at revision
    /// `written`, 0 if absent) at revision `at`.
    pub(super) fn learn(&self, key: &[u8], value: Option<&[u8]>, at: Rev, written: Rev) {
        if !cached(key) {
            return;
        }
        let mut st = self.st.lock();
        if st.following && at >= st.floor {
            st.put(key, value, at, written);
        }
    }

    /// Changes, each a key, its new value (None: deleted) and the
    /// revision it was made at: a batch of the stream's, or one of this
    /// daemon's commits. One lock for the batch.
    pub(super) fn changes<'a>(
        &self,
        changes: impl IntoIterator<Item = (&'a [u8], Option<&'a [u8]>, Rev)>,
    ) {
        let mut st = self.st.lock();
        if !st.following {
            return;
        }
        for (key, value, rev) in changes {
            if cached(key) {
                // A change's revision is the one its value was written at
                // (a delete's: the key is absent, required as such).
                st.put(key, value, rev, if value.is_some() { rev } else { 0 });
                st.newest = st.newest.max(rev);
            }
        }
    }

    /// A change at revision `rev`.
    #[cfg(test)]
    fn change(&self, key: &[u8], value: Option<&[u8]>, rev: Rev) {
        self.changes([(key, value, rev)]);
    }

    /// What a commit at `rev` wrote.
    pub(super) fn committed(&self, ops: &[Op], rev: Rev) {
        self.changes(ops.iter().map(|op| match op {
            Op::Put(k, v, _) => (&k[..], Some(&v[..]), rev),
            Op::Delete(k) => (&k[..], None, rev),
        }));
    }

    /// Forget what `ops` wrote: a commit whose outcome is not known. (If
    /// it applied, the stream delivers it, newer than any read before it.)
    pub(super) fn unsure(&self, ops: &[Op]) {
        let mut st = self.st.lock();
        for op in ops {
            if let Some((v, _, _)) = st.keys.remove(op.key()) {
                st.bytes -= cost(op.key(), v.as_deref());
            }
        }
    }

    /// The stream follows from revision `from` on (inclusive), or has
    /// stopped (`None`): either way everything known is dropped.
    pub(super) fn restart(&self, from: Option<Rev>) {
        let mut st = self.st.lock();
        st.keys.clear();
        st.bytes = 0;
        st.following = from.is_some();
        if let Some(f) = from {
            // A read before `from - 1` may miss a change the stream will
            // not deliver.
            st.floor = st.floor.max(f.saturating_sub(1));
        }
    }

    /// Whether the cache answers (the change stream follows).
    pub(super) fn following(&self) -> bool {
        self.st.lock().following
    }

    /// Keys held now, and what they cost (for `stats`).
    pub(super) fn len(&self) -> (usize, usize) {
        let st = self.st.lock();
        (st.keys.len(), st.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> RecordCache {
        let c = RecordCache::new(DEFAULT_BYTES);
        c.restart(Some(11));
        c
    }

    #[test]
    fn a_read_older_than_a_change_does_not_undo_it() {
        let c = fresh();
        // The stream delivers a change at 20 to a key nobody read...
        c.change(b"Ia", Some(b"new"), 20);
        // ...then a read made at 15 comes back with the old value.
        c.learn(b"Ia", Some(b"old"), 15, 0);
        assert_eq!(c.get(b"Ia"), Some(Some(b"new".to_vec())));
        // A change before the read, delivered after it, changes nothing.
        c.learn(b"Eb", None, 30, 0);
        c.change(b"Eb", Some(b"x"), 25);
        assert_eq!(c.get(b"Eb"), Some(None));
        // This daemon's own commit delivered again by the stream neither.
        c.committed(&[Op::Put(b"Eb".to_vec(), b"y".to_vec(), None)], 31);
        c.change(b"Eb", Some(b"y"), 31);
        c.change(b"Eb", None, 32);
        assert_eq!(c.get(b"Eb"), Some(None));
    }

    #[test]
    fn nothing_is_answered_without_the_stream() {
        let c = fresh();
        c.learn(b"Ic", Some(b"v"), 12, 0);
        assert!(c.get(b"Ic").is_some());
        c.restart(None);
        assert_eq!(c.get(b"Ic"), None);
        c.learn(b"Ic", Some(b"v"), 12, 0);
        assert_eq!(c.get(b"Ic"), None, "kept while the stream was down");
        // Restarted from 30: a read at 12 may have missed 13..29.
        c.restart(Some(30));
        c.learn(b"Ic", Some(b"v"), 12, 0);
        assert_eq!(c.get(b"Ic"), None);
        c.learn(b"Ic", Some(b"v"), 29, 0);
        assert!(c.get(b"Ic").is_some());
    }

    #[test]
    fn a_full_cache_refuses_reads_older_than_what_it_dropped() {
        let n = 1000u64;
        let one = cost(b"I1000", None) as u64;
        let c = RecordCache::new(n * one);
        c.restart(Some(11));
        for i in 0..n {
            c.change(format!("I{}", 1000 + i).as_bytes(), None, 100 + i);
        }
        assert_eq!(c.len(), (n as usize, (n * one) as usize));
        // Full: the next key drops half; a dropped key's change may be
        // gone, so a read before the newest dropped change is refused.
        c.learn(b"I9999", None, 100 + n, 0);
        assert_eq!(c.len().0, n as usize / 2 + 1);
        assert_eq!(c.len().1, (n / 2 + 1) as usize * one as usize);
        let gone = (0..n)
            .map(|i| format!("I{}", 1000 + i))
            .find(|k| c.get(k.as_bytes()).is_none())
            .unwrap();
        c.learn(gone.as_bytes(), Some(b"old"), 99, 0);
        assert_eq!(c.get(gone.as_bytes()), None);
        c.learn(gone.as_bytes(), Some(b"v"), 100 + n, 0);
        assert!(c.get(gone.as_bytes()).is_some());
    }

    #[test]
    fn what_is_held_is_counted_through_replacements_and_removals() {
        let c = fresh();
        c.learn(b"Ia", Some(b"12345"), 12, 0);
        c.change(b"Ia", Some(b"1"), 13);
        c.change(b"Eb", None, 14);
        assert_eq!(c.len(), (2, cost(b"Ia", Some(b"1")) + cost(b"Eb", None)));
        c.unsure(&[Op::Delete(b"Ia".to_vec())]);
        assert_eq!(c.len(), (1, cost(b"Eb", None)));
        c.restart(Some(20));
        assert_eq!(c.len(), (0, 0));
    }

    #[test]
    fn a_cache_of_no_bytes_answers_nothing() {
        let c = RecordCache::new(0);
        c.restart(Some(11));
        c.change(b"Ia", Some(b"v"), 12);
        c.learn(b"Ib", Some(b"v"), 12, 0);
        assert_eq!((c.get(b"Ia"), c.get(b"Ib")), (None, None));
        assert_eq!(c.len(), (0, 0));
    }

    #[test]
    fn a_value_is_known_with_the_revision_it_was_written_at() {
        let c = fresh();
        // A read at 40 of a value written at 15.
        c.learn(b"Ia", Some(b"v"), 40, 15);
        assert_eq!(c.get_written(b"Ia"), Some((Some(b"v".to_vec()), 15)));
        // A change, and this daemon's commit: written at their revision.
        c.change(b"Ia", Some(b"w"), 41);
        assert_eq!(c.get_written(b"Ia"), Some((Some(b"w".to_vec()), 41)));
        c.committed(&[Op::Delete(b"Ia".to_vec())], 42);
        assert_eq!(c.get_written(b"Ia"), Some((None, 0)));
        c.restart(None);
        assert_eq!(c.get_written(b"Ia"), None);
    }

    #[test]
    fn an_unsure_commit_is_forgotten() {
        let c = fresh();
        c.learn(b"Id", Some(b"v"), 12, 0);
        c.unsure(&[Op::Delete(b"Id".to_vec())]);
        assert_eq!(c.get(b"Id"), None);
    }
}
