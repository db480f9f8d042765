//! Several daemons' namespaces on the TiKV translation over the model of
//! TiKV's transactions: the multi-daemon checks that do not need a change
//! stream (TiKV has none: no directory leases, no record cache), random
//! races checked clean, a session that ends (fencing and its orphans), and
//! a lost answer.

use shoal_cluster::ns::{self, ClusterFs, SessionOpts};
use shoal_cluster::ClusterStore;
use shoal_core::{Error, ROOT_INO};
use shoal_testkit::cluster_ns::{self as checks, assert_clean};
use shoal_tikv::model::{Fault, MemTikv};
use shoal_tikv::TikvStore;
use std::sync::Arc;
use std::time::Duration;

type Store = Arc<TikvStore<Arc<MemTikv>>>;

fn daemons(n: usize) -> (Arc<MemTikv>, Store, Vec<Arc<ClusterFs>>) {
    let kv = MemTikv::new();
    let s = Arc::new(TikvStore::new(kv.clone(), b"/shoal/t/".to_vec()));
    ns::mkfs(&*s).unwrap();
    // A round trip per call, so that the daemons' transactions overlap.
    kv.set_delay(Duration::from_micros(100));
    let fss = (0..n)
        .map(|_| {
            ClusterFs::open(s.clone() as Arc<dyn ClusterStore>, SessionOpts::default()).unwrap()
        })
        .collect();
    (kv, s, fss)
}

#[test]
fn one_daemon_answers_as_posix_does() {
    let (_, s, fss) = daemons(1);
    checks::one_daemon_answers_as_posix_does(&fss, &*s);
}

#[test]
fn one_mount_sees_another_mounts_changes() {
    let (_, s, fss) = daemons(2);
    checks::one_mount_sees_another_mounts_changes(&fss, &*s);
}

#[test]
fn xattrs_are_shared() {
    let (_, s, fss) = daemons(2);
    checks::xattrs_are_shared(&fss, &*s);
}

#[test]
fn locks_exclude_across_daemons() {
    let (_, s, fss) = daemons(3);
    checks::locks_exclude_across_daemons(&fss, &*s);
}

#[test]
fn acls_follow_the_mode_across_daemons() {
    let (_, s, fss) = daemons(2);
    checks::acls_follow_the_mode_across_daemons(&fss, &*s);
}

#[test]
fn same_name_races_have_one_winner() {
    let (_, s, fss) = daemons(3);
    checks::same_name_races_have_one_winner(&fss, &*s);
}

#[test]
fn races_between_daemons_have_posix_answers() {
    let (_, s, fss) = daemons(3);
    checks::races_between_daemons_have_posix_answers(&fss, &*s);
}

#[test]
fn random_races_leave_a_consistent_namespace() {
    for seed in shoal_testkit::setup::seeds(3) {
        let (kv, s, fss) = daemons(3);
        checks::random_races_leave_a_consistent_namespace(&fss, &*s, seed);
        let (commits, conflicts) = kv.counts();
        println!("seed={seed}: {commits} transactions, {conflicts} write conflicts run again");
    }
}

#[test]
fn creates_of_different_names_in_one_directory_never_conflict() {
    let (_, s, fss) = daemons(2);
    checks::creates_of_different_names_in_one_directory_never_conflict(&fss, &*s);
}

#[test]
fn a_daemon_whose_session_ended_cannot_commit_and_its_orphans_are_reclaimed() {
    let (kv, s, fss) = daemons(2);
    let (a, b) = (&fss[0], &fss[1]);
    a.create(ROOT_INO, b"before", 0o644).unwrap();
    // Left open by A, unlinked: an orphan of A's session.
    let h = a.create(ROOT_INO, b"h", 0o644).unwrap();
    a.open_file(h.ino).unwrap();
    a.unlink(ROOT_INO, b"h").unwrap();
    // A stops renewing (frozen, cut off); its lease runs out; B renews.
    a.stop_renewing();
    for _ in 0..10 {
        kv.advance(Duration::from_secs(2));
        s.lease_renew(b.session() as i64).unwrap();
    }
    let e = a.create(ROOT_INO, b"after", 0o644).unwrap_err();
    assert!(matches!(&e, Error::Io(m) if m.contains("remount")), "{e:?}");
    assert_eq!(b.lookup(ROOT_INO, b"after"), Err(Error::NotFound));
    b.create(ROOT_INO, b"b-after", 0o644).unwrap();
    // The next daemon to join removes it, in the background.
    let c = ClusterFs::open(s.clone() as Arc<dyn ClusterStore>, SessionOpts::default()).unwrap();
    shoal_testkit::cluster_ns::soon(
        "a dead daemon's orphan after a join",
        Err(Error::NotFound),
        || c.getattr(h.ino).map(|a| a.nlink),
    );
    assert_clean(&*s);
}

#[test]
fn a_lost_answer_neither_loses_nor_doubles_an_operation() {
    let (kv, s, fss) = daemons(1);
    checks::a_lost_answer_neither_loses_nor_doubles_an_operation(&fss, &*s, &|applied| {
        kv.fail_next(Fault::Undetermined { applied })
    });
}
