//! The change stream: one thread per daemon follows every change to the
//! namespace (`ClusterStore::watch`) and hands each batch, in revision
//! order, to what keeps state from it:
//!
//! - the record cache ([`super::record_cache`]): other daemons' changes replace
//!   what this daemon had read;
//! - the directory leases ([`super::dirlease`]): requests for this daemon's
//!   leases, changes to the listings it keeps of directories it gave back;
//!   requested directories are given back here at the end of their slice;
//! - subscribers ([`ClusterFs::subscribe`]): the FUSE layer drops other
//!   daemons' changes from the kernel's caches on a thread of its own (the
//!   kernel takes a directory's lock for that, and a create holding it may
//!   be waiting for this thread to apply the stream).
//!
//! One stream, not one per user: etcd sends every change once per watcher.
//! A stream that breaks (a member lost its leader, the connection broke,
//! compaction passed it) is opened again from the store's current
//! revision; what it missed is dropped (the record cache and kept listings
//! start empty; the kernel's caches hold it until their TTL).

use super::ns::ClusterFs;
use super::Event;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::time::Duration;

impl ClusterFs {
    /// Start following the change stream, if the store has one; the thread
    /// ends when the daemon does.
    pub(super) fn start_stream(fs: &Arc<ClusterFs>) {
        if !fs.has_watch {
            return;
        }
        let weak: Weak<ClusterFs> = Arc::downgrade(fs);
        std::thread::Builder::new()
            .name("shoal-stream".into())
            .spawn(move || {
                let mut w: Option<Box<dyn super::Watch>> = None;
                loop {
                    let Some(fs) = weak.upgrade() else { return };
                    if fs.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let Some(stream) = w.as_mut() else {
                        w = fs.open_stream();
                        if w.is_none() {
                            drop(fs);
                            std::thread::sleep(Duration::from_millis(200));
                        }
                        continue;
                    };
                    let r = stream
                        .next(fs.lease_wait())
                        .map_err(shoal_core::Error::from)
                        .and_then(|evs| {
                            fs.apply(evs);
                            fs.release_due()
                        });
                    if let Err(e) = r {
                        tracing::debug!("change stream: {e}; following again");
                        fs.cache.restart(None);
                        fs.lease_stream_lost();
                        w = None;
                    }
                }
            })
            .expect("spawn change stream");
    }

    /// Open the stream from the store's current revision on.
    fn open_stream(&self) -> Option<Box<dyn super::Watch>> {
        let at = self.store.revision().ok()?;
        let w = self.store.watch(b"", at + 1).ok()?;
        self.cache.restart(Some(at + 1));
        self.lease_stream_from(at);
        Some(w)
    }

    /// One batch of changes, to each that keeps state from them.
    fn apply(&self, evs: Vec<Event>) {
        if evs.is_empty() {
            return;
        }
        self.cache
            .changes(evs.iter().map(|e| (&e.key[..], e.value.as_deref(), e.rev)));
        self.lease_events(&evs);
        let mut subs = self.subscribers.lock();
        subs.retain(|s| s.send(evs.clone()).is_ok());
    }

    /// Every change from now on, in batches, while the receiver lives (for
    /// the FUSE layer's invalidations). Nothing comes on a store without a
    /// change stream.
    pub fn subscribe(&self) -> mpsc::Receiver<Vec<Event>> {
        let (tx, rx) = mpsc::channel();
        self.subscribers.lock().push(tx);
        rx
    }
}
