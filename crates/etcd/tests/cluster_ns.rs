//! Several daemons on one namespace on a real three-member etcd cluster
//! (ports 23820-23833), each with its own connection: the same checks as on
//! the simulator (`shoal_testkit::cluster_ns`), and fencing with a real
//! lease. CI sets SHOAL_REQUIRE_ETCD=1, so a missing etcd fails.

use shoal_cluster::ns::{self, ClusterFs, SessionOpts};
use shoal_cluster::ClusterStore;
use shoal_core::{Error, ROOT_INO};
use shoal_etcd::{EtcdStore, EtcdUrl};
use shoal_testkit::cluster_ns as checks;
use shoal_testkit::etcd::Cluster;
use std::sync::Arc;
use std::time::Duration;

struct Fixture {
    cluster: Cluster,
    dir: std::path::PathBuf,
}

fn cluster() -> Option<Fixture> {
    let dir = std::env::temp_dir().join(format!("shoal-etcd-ns-{}", std::process::id()));
    Cluster::start(&dir, 23820).map(|cluster| Fixture { cluster, dir })
}

/// A new namespace `name` and `n` daemons on it, each its own client.
fn daemons(
    f: &Fixture,
    name: &str,
    n: usize,
    ttl: Duration,
) -> (Arc<dyn ClusterStore>, Vec<Arc<ClusterFs>>) {
    let url = EtcdUrl {
        endpoints: f.cluster.endpoints(),
        name: format!("{name}-{}", std::process::id()),
        ..Default::default()
    };
    let connect =
        || EtcdStore::connect(&url, Duration::from_secs(5)).unwrap() as Arc<dyn ClusterStore>;
    let s = connect();
    ns::mkfs(&*s).unwrap();
    let opts = SessionOpts {
        ttl,
        ..SessionOpts::default()
    };
    let fss = (0..n)
        .map(|_| ClusterFs::open(connect(), opts.clone()).unwrap())
        .collect();
    (s, fss)
}

/// One more daemon on namespace `name` of `daemons`.
fn join(f: &Fixture, name: &str, ttl: Duration) -> Arc<ClusterFs> {
    let url = EtcdUrl {
        endpoints: f.cluster.endpoints(),
        name: format!("{name}-{}", std::process::id()),
        ..Default::default()
    };
    let s = EtcdStore::connect(&url, Duration::from_secs(5)).unwrap() as Arc<dyn ClusterStore>;
    let opts = SessionOpts {
        ttl,
        ..SessionOpts::default()
    };
    ClusterFs::open(s, opts).unwrap()
}

/// One test: the cluster starts once (about a second) for every check.
#[test]
fn shared_namespace_on_etcd() {
    let Some(f) = cluster() else { return };
    let ttl = Duration::from_secs(10);
    let (s, fss) = daemons(&f, "posix", 1, ttl);
    checks::one_daemon_answers_as_posix_does(&fss, &*s);
    println!("etcd: one daemon: ok");
    let (s, fss) = daemons(&f, "cross", 2, ttl);
    checks::one_mount_sees_another_mounts_changes(&fss, &*s);
    println!("etcd: two mounts see each other's changes: ok");
    let (s, fss) = daemons(&f, "cached", 2, ttl);
    checks::stats_come_from_memory_and_follow_other_daemons(&fss, &*s);
    println!("etcd: stats from memory, kept current by the stream: ok");
    let (s, fss) = daemons(&f, "races", 3, ttl);
    checks::races_between_daemons_have_posix_answers(&fss, &*s);
    checks::xattrs_are_shared(&fss, &*s);
    checks::acls_follow_the_mode_across_daemons(&fss, &*s);
    checks::locks_exclude_across_daemons(&fss, &*s);
    checks::lock_leases_exclude_while_they_move(&fss[..2], &*s);
    println!("etcd: races between three daemons, xattrs, ACLs and file locks: ok");
    let (s, fss) = daemons(&f, "one-winner", 3, ttl);
    checks::same_name_races_have_one_winner(&fss, &*s);
    println!("etcd: one winner per rename of one source among three daemons: ok");
    let (s, fss) = daemons(&f, "hot", 2, ttl);
    checks::creates_of_different_names_in_one_directory_never_conflict(&fss, &*s);
    println!("etcd: creates in one directory from two daemons: no conflict");
    let (s, fss) = daemons(&f, "unlink", 2, ttl);
    checks::an_unlink_under_a_lease_is_answered_from_memory(&fss, &*s);
    println!("etcd: unlinks and rmdirs under a directory lease: ok");
    let (s, fss) = daemons(&f, "listed", 2, ttl);
    checks::a_directory_listed_whole_is_emptied_from_memory(&fss, &*s);
    println!("etcd: a small directory listed whole is emptied from memory: ok");
    let (s, fss) = daemons(&f, "journal", 2, ttl);
    checks::a_name_unlinked_and_made_again_commits_once(&fss, &*s);
    println!("etcd: a name unlinked and made again under a lease: one batch each time");
    let (s, fss) = daemons(&f, "unlink-rules", 2, ttl);
    checks::removals_under_a_lease_keep_the_rules(&fss, &*s);
    println!("etcd: removals under a directory lease keep the flag and permission rules: ok");
    let (s, fss) = daemons(&f, "lease", 2, ttl);
    checks::a_leased_directory_answers_from_memory_and_gives_it_back(&fss, &*s);
    checks::one_winner_per_name_with_leases(&fss, &*s);
    checks::daemons_creating_in_one_directory_take_turns(&fss, &*s);
    checks::daemons_creating_apart_in_one_directory_split_it(&fss, &*s);
    checks::one_winner_per_name_across_split_ranges(&fss, &*s);
    checks::a_directory_taken_again_answers_what_others_changed(&fss, &*s);
    checks::a_queued_create_is_changed_in_memory(&fss, &*s);
    checks::a_directory_made_here_is_leased_at_its_first_create(&fss, &*s);
    println!("etcd: directory leases taken, given back, taken in turns, split between daemons, one winner per name: ok");
    let (s, fss) = daemons(&f, "posix-more", 2, ttl);
    checks::flags_hold_across_daemons(&fss, &*s);
    checks::tmpfiles_are_named_by_link(&fss, &*s);
    checks::rename_exchange_and_whiteout(&fss, &*s);
    println!("etcd: chattr flags across daemons, O_TMPFILE, RENAME_EXCHANGE and WHITEOUT: ok");

    // Fencing with a real lease: A stops renewing, its 2 s lease ends, and
    // its commits are refused while B's go on.
    let (s, fss) = daemons(&f, "fence", 2, Duration::from_secs(2));
    let (a, b) = (&fss[0], &fss[1]);
    a.create(ROOT_INO, b"before", 0o644).unwrap();
    a.stop_renewing();
    std::thread::sleep(Duration::from_secs(5));
    let e = a.create(ROOT_INO, b"after", 0o644).unwrap_err();
    assert!(matches!(&e, Error::Io(m) if m.contains("remount")), "{e:?}");
    assert_eq!(b.lookup(ROOT_INO, b"after"), Err(Error::NotFound));
    b.create(ROOT_INO, b"b-after", 0o644).unwrap();
    checks::assert_clean(&*s);
    println!("etcd: an expired session is fenced: ok");

    // A daemon that leaves many orphans (it unmounted within their grace)
    // does not cost the next daemon its session: that one removes them in
    // the background, 25 a commit. (The first build removed them before
    // its lease was first renewed, one inode a commit, and lost its 2 s
    // session with 1,000.)
    let ttl = Duration::from_secs(2);
    let (s, fss) = daemons(&f, "orphans", 1, ttl);
    let a = &fss[0];
    let d = a.mkdir(ROOT_INO, b"d", 0o755).unwrap().ino;
    for i in 0..1000 {
        a.create(d, format!("f{i}").as_bytes(), 0o644).unwrap();
    }
    for i in 0..1000 {
        a.unlink(d, format!("f{i}").as_bytes()).unwrap();
    }
    a.close().unwrap();
    assert!(
        ns::check(&*s).unwrap().inodes > 1000,
        "removed within the grace"
    );
    let b = join(&f, "orphans", ttl);
    std::thread::sleep(ttl * 2);
    b.create(ROOT_INO, b"after", 0o644)
        .expect("the daemon that removes the orphans keeps its session");
    checks::soon("inodes after the orphans' removal", 3, || {
        ns::check(&*s).unwrap().inodes
    });
    checks::assert_clean(&*s);
    println!("etcd: 1,000 orphans of an ended session removed in the background: ok");
    drop(f.cluster);
    let _ = std::fs::remove_dir_all(&f.dir);
}
