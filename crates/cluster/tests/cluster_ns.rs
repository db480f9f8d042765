//! Several daemons' namespaces (`shoal_cluster::ns::ClusterFs`) on one
//! shared store, racing on the same names: exactly one winner where POSIX
//! says one, never a lost update, a namespace that checks clean after every
//! race; creates of different names in one directory never conflict;
//! a daemon whose session ended cannot commit; a lost answer neither loses
//! nor doubles an operation.

use shoal_cluster::ns::{self, ClusterFs, SessionOpts};
use shoal_cluster::sim::{Fault, SimStore};
use shoal_cluster::ClusterStore;
use shoal_core::{Error, ROOT_INO};
use shoal_testkit::cluster_ns::{self as checks, assert_clean, soon};
use std::sync::Arc;
use std::time::Duration;

fn daemons(n: usize) -> (Arc<SimStore>, Vec<Arc<ClusterFs>>) {
    let s = SimStore::new();
    // A round trip per call, so that the daemons' operations interleave.
    s.set_delay(Duration::from_micros(100));
    ns::mkfs(&*s).unwrap();
    let fss = (0..n)
        .map(|_| {
            ClusterFs::open(s.clone() as Arc<dyn ClusterStore>, SessionOpts::default()).unwrap()
        })
        .collect();
    (s, fss)
}

#[test]
fn one_daemon_answers_as_posix_does() {
    let (s, fss) = daemons(1);
    checks::one_daemon_answers_as_posix_does(&fss, &*s);
}

#[test]
fn one_mount_sees_another_mounts_changes() {
    let (s, fss) = daemons(2);
    checks::one_mount_sees_another_mounts_changes(&fss, &*s);
}

#[test]
fn stats_come_from_memory_and_follow_other_daemons() {
    let (s, fss) = daemons(2);
    checks::stats_come_from_memory_and_follow_other_daemons(&fss, &*s);
}

#[test]
fn xattrs_are_shared() {
    let (s, fss) = daemons(2);
    checks::xattrs_are_shared(&fss, &*s);
}

#[test]
fn locks_exclude_across_daemons() {
    let (s, fss) = daemons(3);
    checks::locks_exclude_across_daemons(&fss, &*s);
}

#[test]
fn an_unlink_under_a_lease_is_answered_from_memory() {
    let (s, fss) = daemons(2);
    checks::an_unlink_under_a_lease_is_answered_from_memory(&fss, &*s);
}

#[test]
fn a_directory_listed_whole_is_emptied_from_memory() {
    let (s, fss) = daemons(2);
    checks::a_directory_listed_whole_is_emptied_from_memory(&fss, &*s);
}

#[test]
fn a_name_unlinked_and_made_again_commits_once() {
    let (s, fss) = daemons(2);
    checks::a_name_unlinked_and_made_again_commits_once(&fss, &*s);
}

#[test]
fn removals_under_a_lease_keep_the_rules() {
    let (s, fss) = daemons(2);
    checks::removals_under_a_lease_keep_the_rules(&fss, &*s);
}

/// A file made from memory under a directory lease, opened and unlinked
/// from memory before its batch left: a stat through the open file says no
/// links (pjdfstest's unlink::open_file_not_freed on etcd got 1).
#[test]
fn an_open_file_unlinked_from_memory_has_no_links() {
    let (s, fss) = daemons(1);
    let a = &fss[0];
    let d = a.mkdir(ROOT_INO, b"d", 0o755).unwrap().ino;
    for i in 0..6 {
        a.create(d, format!("f{i}").as_bytes(), 0o644).unwrap();
    }
    assert!(a.holds_lease(d));
    let f = a.create(d, b"open", 0o644).unwrap().ino;
    a.open_file(f).unwrap();
    a.unlink(d, b"open").unwrap();
    assert_eq!(a.getattr(f).unwrap().nlink, 0, "a stat before the batch");
    // As FUSE's create opens: no read.
    let g = a.create(d, b"open2", 0o644).unwrap().ino;
    a.open_new(g);
    a.unlink(d, b"open2").unwrap();
    assert_eq!(
        a.getattr(g).unwrap().nlink,
        0,
        "a stat before the batch (open_new)"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        a.getattr(g).unwrap().nlink,
        0,
        "a stat after the batch (open_new)"
    );
    a.release(g).unwrap();
    a.fsync(d).unwrap();
    assert_eq!(a.getattr(f).unwrap().nlink, 0, "a stat after the batch");
    a.release(f).unwrap();
    drop(s);
}

#[test]
fn lock_leases_exclude_while_they_move() {
    let (s, fss) = daemons(2);
    checks::lock_leases_exclude_while_they_move(&fss, &*s);
}

/// A daemon holding a file's lock lease that dies loses the lease and its
/// locks with its session: another daemon takes the lock.
#[test]
fn a_dead_lock_holders_lease_goes_with_its_session() {
    use shoal_cluster::filelocks::{Lock, Want};
    let (s, fss) = daemons(1);
    let a = &fss[0];
    let f = a.create(ROOT_INO, b"f", 0o644).unwrap().ino;
    a.fsync(f).unwrap();
    let w = Lock {
        owner: 1,
        flock: false,
        write: true,
        start: 0,
        end: 9,
        pid: 1,
    };
    assert_eq!(a.setlk(f, &w, Want::Write).unwrap(), None);
    a.setlk(f, &w, Want::Unlock).unwrap();
    // Taken again from memory, under the lease: the store still shows no lock.
    assert_eq!(a.setlk(f, &w, Want::Write).unwrap(), None);
    assert_eq!(a.lock_leases_held(), 1);
    a.stop_renewing();
    s.advance(Duration::from_secs(60));
    let c = ClusterFs::open(s.clone() as Arc<dyn ClusterStore>, SessionOpts::default()).unwrap();
    assert_eq!(
        c.setlk(f, &w, Want::Write).unwrap(),
        None,
        "a dead session's lock lease still stops others"
    );
}

/// Locks on different files of one daemon commit in parallel: with every
/// store call taking 150 ms, two first locks on two files at once take
/// about as long as one (a scan and a commit each), not twice as long.
#[test]
fn locks_on_different_files_commit_in_parallel() {
    use shoal_cluster::filelocks::{Lock, Want};
    let (s, fss) = daemons(1);
    let a = &fss[0];
    let files: Vec<u64> = (0..3)
        .map(|i| {
            a.create(ROOT_INO, format!("f{i}").as_bytes(), 0o644)
                .unwrap()
                .ino
        })
        .collect();
    a.fsync(files[2]).unwrap();
    let lk = |owner: u64| Lock {
        owner,
        flock: false,
        write: true,
        start: 0,
        end: 9,
        pid: 1,
    };
    s.set_delay(Duration::from_millis(150));
    let t = std::time::Instant::now();
    assert_eq!(a.setlk(files[0], &lk(1), Want::Write).unwrap(), None);
    let one = t.elapsed();
    let t = std::time::Instant::now();
    std::thread::scope(|sc| {
        for (i, &f) in files[1..].iter().enumerate() {
            sc.spawn(move || assert_eq!(a.setlk(f, &lk(2 + i as u64), Want::Write).unwrap(), None));
        }
    });
    let two = t.elapsed();
    s.set_delay(Duration::ZERO);
    assert!(
        two < one * 3 / 2,
        "two locks on two files took {two:?}, one took {one:?}: one waited for the other"
    );
    for (i, &f) in files.iter().enumerate() {
        a.unlock_owner(f, 1 + i as u64, false).unwrap();
    }
    assert_eq!(a.locks_held(), (0, 0));
}

/// A daemon that dies loses its locks with its session: another takes them.
#[test]
fn a_dead_daemons_locks_go_with_its_session() {
    use shoal_cluster::filelocks::{Lock, Want};
    let (s, fss) = daemons(2);
    let (a, b) = (&fss[0], &fss[1]);
    let f = a.create(ROOT_INO, b"f", 0o644).unwrap().ino;
    let w = Lock {
        owner: 1,
        flock: false,
        write: true,
        start: 0,
        end: 9,
        pid: 1,
    };
    assert_eq!(a.setlk(f, &w, Want::Write).unwrap(), None);
    assert!(b.setlk(f, &w, Want::Write).unwrap().is_some());
    a.stop_renewing();
    s.advance(Duration::from_secs(60));
    // (The fake clock's jump ended b's session too: a new daemon.)
    let c = ClusterFs::open(s.clone() as Arc<dyn ClusterStore>, SessionOpts::default()).unwrap();
    assert_eq!(
        c.setlk(f, &w, Want::Write).unwrap(),
        None,
        "a dead session's lock still stops others"
    );
}

#[test]
fn acls_follow_the_mode_across_daemons() {
    let (s, fss) = daemons(2);
    checks::acls_follow_the_mode_across_daemons(&fss, &*s);
}

#[test]
fn same_name_races_have_one_winner() {
    let (s, fss) = daemons(3);
    checks::same_name_races_have_one_winner(&fss, &*s);
}

#[test]
fn races_between_daemons_have_posix_answers() {
    let (s, fss) = daemons(3);
    checks::races_between_daemons_have_posix_answers(&fss, &*s);
}

/// Random operations from several daemons on a few names, then the
/// namespace checks clean: entries, link counts, parents, no cycles.
#[test]
fn random_races_leave_a_consistent_namespace() {
    for seed in shoal_testkit::setup::seeds(4) {
        let (s, fss) = daemons(3);
        checks::random_races_leave_a_consistent_namespace(&fss, &*s, seed);
        let (commits, conflicts) = s.counts();
        println!("seed={seed}: {commits} commits, {conflicts} conflicts");
    }
}

#[test]
fn creates_of_different_names_in_one_directory_never_conflict() {
    let (s, fss) = daemons(2);
    checks::creates_of_different_names_in_one_directory_never_conflict(&fss, &*s);
}

#[test]
fn a_leased_directory_answers_from_memory_and_gives_it_back() {
    let (s, fss) = daemons(2);
    checks::a_leased_directory_answers_from_memory_and_gives_it_back(&fss, &*s);
}

#[test]
fn daemons_creating_in_one_directory_take_turns() {
    let (s, fss) = daemons(2);
    checks::daemons_creating_in_one_directory_take_turns(&fss, &*s);
}

#[test]
fn daemons_creating_apart_in_one_directory_split_it() {
    let (s, fss) = daemons(2);
    checks::daemons_creating_apart_in_one_directory_split_it(&fss, &*s);
}

#[test]
fn one_winner_per_name_across_split_ranges() {
    let (s, fss) = daemons(3);
    checks::one_winner_per_name_across_split_ranges(&fss, &*s);
}

#[test]
fn a_directory_taken_again_answers_what_others_changed() {
    let (s, fss) = daemons(2);
    checks::a_directory_taken_again_answers_what_others_changed(&fss, &*s);
}

#[test]
fn a_directory_made_here_is_leased_at_its_first_create() {
    let (s, fss) = daemons(2);
    checks::a_directory_made_here_is_leased_at_its_first_create(&fss, &*s);
}

#[test]
fn a_queued_create_is_changed_in_memory() {
    let (s, fss) = daemons(2);
    checks::a_queued_create_is_changed_in_memory(&fss, &*s);
}

#[test]
fn one_winner_per_name_with_leases() {
    let (s, fss) = daemons(2);
    checks::one_winner_per_name_with_leases(&fss, &*s);
}

/// A daemon cut off past its lease while creates it acknowledged from
/// memory are queued: the other daemon sees a prefix of them (in the order
/// they were acknowledged), never one without the ones before; the names
/// of the rest are free; the cut-off daemon answers "remount".
#[test]
fn a_lost_session_loses_a_suffix_of_the_queued_creates() {
    let s = SimStore::new();
    s.set_delay(Duration::from_micros(100));
    ns::mkfs(&*s).unwrap();
    let open = |ttl| {
        let opts = SessionOpts {
            ttl,
            ..SessionOpts::default()
        };
        ClusterFs::open(s.clone() as Arc<dyn ClusterStore>, opts).unwrap()
    };
    // A's lease is short in real time: it stops answering from memory
    // half of it after its last renewal.
    let (a, b) = (open(Duration::from_secs(1)), open(Duration::from_secs(10)));
    let d = a.mkdir(ROOT_INO, b"d", 0o755).unwrap();
    // Slow commits, so that creates queue up behind the flusher.
    s.set_delay(Duration::from_millis(200));
    for i in 0..300 {
        a.create(d.ino, format!("{i:03}").as_bytes(), 0o644)
            .unwrap();
    }
    assert!(
        a.stats
            .lease_creates
            .load(std::sync::atomic::Ordering::Relaxed)
            > 200
    );
    a.stop_renewing();
    std::thread::sleep(Duration::from_millis(600));
    for _ in 0..10 {
        s.advance(Duration::from_secs(2));
        s.lease_renew(b.session() as i64).unwrap();
    }
    s.set_delay(Duration::from_micros(100));
    let e = a.create(d.ino, b"after", 0o644).unwrap_err();
    assert!(matches!(&e, Error::Io(m) if m.contains("remount")), "{e:?}");
    let seen: Vec<Vec<u8>> = b
        .readdir(d.ino, None, 1000)
        .unwrap()
        .into_iter()
        .map(|(n, ..)| n)
        .collect();
    let prefix: Vec<Vec<u8>> = (0..seen.len())
        .map(|i| format!("{i:03}").into_bytes())
        .collect();
    assert_eq!(seen, prefix, "not a prefix of the acknowledged creates");
    assert!(
        seen.len() < 300,
        "nothing was queued when the session ended"
    );
    b.create(d.ino, b"299", 0o644).unwrap();
    assert_clean(&*s);
}

/// With `dir_leases` off no lease is taken: every create commits before
/// it answers.
#[test]
fn without_leases_every_create_commits() {
    let s = SimStore::new();
    ns::mkfs(&*s).unwrap();
    let opts = SessionOpts {
        dir_leases: false,
        ..SessionOpts::default()
    };
    let a = ClusterFs::open(s.clone() as Arc<dyn ClusterStore>, opts).unwrap();
    for i in 0..20 {
        a.create(ROOT_INO, format!("f{i}").as_bytes(), 0o644)
            .unwrap();
    }
    let st = &a.stats;
    assert_eq!(
        st.leases_taken.load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert_eq!(st.commits.load(std::sync::atomic::Ordering::Relaxed), 20);
}

#[test]
fn a_daemon_whose_session_ended_cannot_commit() {
    let (s, fss) = daemons(2);
    let (a, b) = (&fss[0], &fss[1]);
    a.create(ROOT_INO, b"before", 0o644).unwrap();
    // A stops renewing (frozen, cut off); its lease runs out; B renews.
    a.stop_renewing();
    for _ in 0..10 {
        s.advance(Duration::from_secs(2));
        b.getattr(ROOT_INO).unwrap();
        // B's keeper renews every ttl/3 of real time: renew by hand here,
        // since the fake clock moves faster than the thread.
        s.lease_renew(b.session() as i64).unwrap();
    }
    let e = a.create(ROOT_INO, b"after", 0o644).unwrap_err();
    assert!(matches!(&e, Error::Io(m) if m.contains("remount")), "{e:?}");
    assert_eq!(b.lookup(ROOT_INO, b"after"), Err(Error::NotFound));
    b.create(ROOT_INO, b"b-after", 0o644).unwrap();
    assert_clean(&*s);
}

#[test]
fn a_lost_answer_neither_loses_nor_doubles_an_operation() {
    let (s, fss) = daemons(1);
    checks::a_lost_answer_neither_loses_nor_doubles_an_operation(&fss, &*s, &|applied| {
        s.fail_next(Fault::Unknown { applied })
    });
}

/// A simulated namespace whose unlinked files wait `grace`, and a way for
/// daemons to join it.
fn graced(grace: Duration) -> (Arc<SimStore>, impl Fn() -> Arc<ClusterFs>) {
    let s = SimStore::new();
    s.set_delay(Duration::from_micros(100));
    ns::mkfs(&*s).unwrap();
    let opts = SessionOpts {
        unlinked_grace: grace,
        ..SessionOpts::default()
    };
    let store = s.clone();
    let open =
        move || ClusterFs::open(store.clone() as Arc<dyn ClusterStore>, opts.clone()).unwrap();
    (s, open)
}

/// File "f" made by `a`, holding "still here", open there.
fn made_open(a: &ClusterFs) -> shoal_core::types::Attr {
    let f = a.create(ROOT_INO, b"f", 0o644).unwrap();
    a.write(f.ino, 0, b"still here").unwrap();
    a.open_file(f.ino).unwrap();
    f
}

/// An open file keeps its bytes after its last name goes, on the daemon
/// that unlinked it and on any other that has it open (that one holds it),
/// until its last close there; one nobody has open goes after the grace;
/// one left open by a daemon that died is reclaimed by the next daemon
/// that joins.
#[test]
fn an_unlinked_open_file_lives_until_its_last_close_anywhere() {
    let grace = Duration::from_millis(300);
    let (s, open) = graced(grace);
    let (a, b) = (open(), open());
    let f = made_open(&a);
    b.unlink(ROOT_INO, b"f").unwrap();
    // A holds it, so B's removal after the grace finds it held.
    std::thread::sleep(grace * 4);
    assert_eq!(a.read(f.ino, 0, 100).unwrap(), b"still here", "gone for A");
    assert_eq!(a.getattr(f.ino).unwrap().nlink, 0);
    assert_clean(&*s);
    // A's last close removes it (no other daemon holds it).
    a.release(f.ino).unwrap();
    shoal_testkit::cluster_ns::soon(
        "B's stat after A's last close",
        Err(Error::NotFound),
        || b.getattr(f.ino).map(|a| a.nlink),
    );
    // Open nowhere: it goes after the grace.
    let u = a.create(ROOT_INO, b"u", 0o644).unwrap();
    a.unlink(ROOT_INO, b"u").unwrap();
    shoal_testkit::cluster_ns::soon("B's stat after A's unlink", Ok(0), || {
        b.getattr(u.ino).map(|a| a.nlink)
    });
    shoal_testkit::cluster_ns::soon("B's stat after the grace", Err(Error::NotFound), || {
        b.getattr(u.ino).map(|a| a.nlink)
    });
    assert_clean(&*s);
    // Unlinked on the daemon that has it open: it stays until the close.
    let g = a.create(ROOT_INO, b"g", 0o644).unwrap();
    a.write(g.ino, 0, b"open").unwrap();
    a.open_file(g.ino).unwrap();
    a.unlink(ROOT_INO, b"g").unwrap();
    std::thread::sleep(grace * 2);
    assert_eq!(a.read(g.ino, 0, 100).unwrap(), b"open");
    assert_clean(&*s);
    a.release(g.ino).unwrap();
    assert_eq!(a.getattr(g.ino), Err(Error::NotFound));
    // Left open by a daemon that dies.
    let h = a.create(ROOT_INO, b"h", 0o644).unwrap();
    a.open_file(h.ino).unwrap();
    a.unlink(ROOT_INO, b"h").unwrap();
    // Committed (under the root's lease the create and the unlink may be
    // queued: a daemon that dies loses those, a suffix).
    a.fsyncdir().unwrap();
    a.stop_renewing();
    s.advance(Duration::from_secs(60));
    assert_eq!(
        b.getattr(h.ino).unwrap().nlink,
        0,
        "a dead session's orphan went early"
    );
    // The next daemon to join removes it, in the background.
    let c = open();
    shoal_testkit::cluster_ns::soon(
        "a dead daemon's orphan after a join",
        Err(Error::NotFound),
        || c.getattr(h.ino).map(|a| a.nlink),
    );
    assert_clean(&*s);
}

/// A daemon whose change stream stalls (its session and its reads fine)
/// still holds what it has open: it reads its open files' records from the
/// store now and then, not only from the cache the stream keeps.
#[test]
fn an_open_file_is_held_while_the_change_stream_stalls() {
    let grace = Duration::from_millis(300);
    let (s, open) = graced(grace);
    let (a, b) = (open(), open());
    let f = made_open(&a);
    // A's record cache knows the file, named.
    assert_eq!(a.getattr(f.ino).unwrap().nlink, 1);
    s.pause_watches(true);
    b.unlink(ROOT_INO, b"f").unwrap();
    std::thread::sleep(grace * 4);
    s.pause_watches(false);
    // (A's read alone could be answered by its stale cache.)
    assert_eq!(
        b.getattr(f.ino).map(|a| a.nlink),
        Ok(0),
        "removed while open on A"
    );
    assert_eq!(a.read(f.ino, 0, 100).unwrap(), b"still here", "gone for A");
    a.release(f.ino).unwrap();
    shoal_testkit::cluster_ns::soon(
        "B's stat after A's last close",
        Err(Error::NotFound),
        || b.getattr(f.ino).map(|a| a.nlink),
    );
    assert_clean(&*s);
}

#[test]
fn flags_hold_across_daemons() {
    let (s, fss) = daemons(2);
    checks::flags_hold_across_daemons(&fss, &*s);
}

#[test]
fn tmpfiles_are_named_by_link() {
    let (s, fss) = daemons(2);
    checks::tmpfiles_are_named_by_link(&fss, &*s);
}

#[test]
fn rename_exchange_and_whiteout() {
    let (s, fss) = daemons(2);
    checks::rename_exchange_and_whiteout(&fss, &*s);
}

/// An O_TMPFILE left open by a daemon that dies is reclaimed by the next
/// daemon that joins, as a file it unlinked while open is (its orphan key
/// outlives its session).
#[test]
fn a_dead_daemons_tmpfile_is_reclaimed() {
    let (s, open) = graced(Duration::from_millis(300));
    let (a, b) = (open(), open());
    let t = a
        .tmpfile(&shoal_core::Ctx::root(), ROOT_INO, 0o600)
        .unwrap();
    a.write(t.ino, 0, b"never named").unwrap();
    assert_clean(&*s);
    a.stop_renewing();
    s.advance(Duration::from_secs(60));
    assert_eq!(b.getattr(t.ino).unwrap().nlink, 0);
    let c = open();
    shoal_testkit::cluster_ns::soon(
        "a dead daemon's tmpfile after a join",
        Err(Error::NotFound),
        || c.getattr(t.ino).map(|a| a.nlink),
    );
    assert_clean(&*s);
}

/// statfs from the stores' figures: without an object store, the blocks
/// are the metadata store's quota and what is left of it; the inodes are
/// those in use and those that fit in the rest. Before (issue 45): the
/// etcd adapter answered constants (16M blocks, 16M inodes, all free).
#[test]
fn statfs_comes_from_the_stores() {
    let s = SimStore::new();
    ns::mkfs(&*s).unwrap();
    s.set_quota(Some(1 << 20));
    let a = ClusterFs::open(s.clone() as Arc<dyn ClusterStore>, SessionOpts::default()).unwrap();
    for i in 0..50 {
        a.create(ROOT_INO, format!("f{i}").as_bytes(), 0o644)
            .unwrap();
    }
    a.fsyncdir().unwrap();
    let st = a.statfs().unwrap();
    let used = s.space().unwrap().unwrap().used;
    assert_eq!(st.bsize, 4096);
    assert_eq!(st.blocks, (1 << 20) / 4096);
    assert_eq!(st.bfree, ((1 << 20) - used) / 4096);
    // 51 inodes in use (the root and the files).
    assert_eq!(st.files - st.ffree, 51);
    assert!(st.ffree > 0 && st.ffree < (1 << 20) / 512, "{st:?}");
}

/// An unlink on a guess of the file's record older than another daemon's
/// link (B's change stream held): the commit requires the record as
/// guessed, fails, reads it and drops one link of two, not the inode.
#[test]
fn an_unlink_on_a_stale_guess_keeps_the_other_link() {
    use std::sync::atomic::Ordering::Relaxed;
    let (s, fss) = daemons(2);
    let (a, b) = (&fss[0], &fss[1]);
    let f = b.create(ROOT_INO, b"f", 0o644).unwrap().ino;
    b.fsync(ROOT_INO).unwrap();
    soon("A sees f", Ok(f), || {
        a.lookup(ROOT_INO, b"f").map(|x| x.ino)
    });
    // B knows the three records the unlink rests on.
    b.getattr(ROOT_INO).unwrap();
    b.lookup(ROOT_INO, b"f").unwrap();
    b.getattr(f).unwrap();
    s.pause_watches(true);
    a.link(f, ROOT_INO, b"g").unwrap();
    let conflicts = b.stats.conflicts.load(Relaxed);
    b.unlink(ROOT_INO, b"f").unwrap();
    b.fsync(ROOT_INO).unwrap();
    s.pause_watches(false);
    assert_eq!(a.lookup(ROOT_INO, b"g").unwrap().ino, f);
    soon("one link left", Ok(1), || a.getattr(f).map(|x| x.nlink));
    assert!(
        b.stats.guesses.load(Relaxed) > 0 && b.stats.conflicts.load(Relaxed) > conflicts,
        "the unlink did not rest on a guess: guesses {} conflicts {} removals from memory {}",
        b.stats.guesses.load(Relaxed),
        b.stats.conflicts.load(Relaxed) - conflicts,
        b.stats.lease_removals.load(Relaxed)
    );
    assert_clean(&*s);
}

/// rm -rf of a small directory nobody leases (B, which made it, runs
/// without leases): listed whole, every unlink and the rmdir are answered
/// from memory under its lease, taken at the first unlink (the first four
/// unlinks were transactions, one commit each, before).
#[test]
fn a_small_directory_nobody_leases_is_emptied_from_memory() {
    use std::sync::atomic::Ordering::Relaxed;
    let (s, fss) = daemons(1);
    let a = &fss[0];
    let b = ClusterFs::open(
        s.clone() as Arc<dyn ClusterStore>,
        SessionOpts {
            dir_leases: false,
            ..SessionOpts::default()
        },
    )
    .unwrap();
    let p = b.mkdir(ROOT_INO, b"tree", 0o755).unwrap().ino;
    let small = b.mkdir(p, b"small", 0o755).unwrap().ino;
    for i in 0..3 {
        b.create(small, format!("f{i}").as_bytes(), 0o644).unwrap();
    }
    soon("A sees the files", 3, || {
        a.readdir(small, None, 1000).map(|l| l.len()).unwrap_or(0)
    });
    a.readdir(p, None, 1000).unwrap();
    let removals = a.stats.lease_removals.load(Relaxed);
    for (name, _, _) in a.readdir(small, None, 1000).unwrap() {
        a.unlink(small, &name).unwrap();
    }
    a.rmdir(p, b"small").unwrap();
    assert_eq!(a.stats.lease_removals.load(Relaxed) - removals, 4);
    a.fsync(p).unwrap();
    soon("B sees the rmdir", Err(Error::NotFound), || {
        b.lookup(p, b"small").map(|x| x.ino)
    });
    assert_clean(&*s);
}
