//! One reference model for both modes (issue 45, point 7): the same seeded
//! operation sequences run through the one namespace surface
//! (`shoal_core::Namespace`) against the embedded engine and against a
//! namespace on the shared-store simulator, each answer checked against the
//! model and against the other mode's; then both trees against the model,
//! and every inode's attributes between the modes, where the differences
//! table (`rules::modes`, docs/rules.md) allows what differs.
//!
//! The second test puts permission-checked callers (`Ctx::user`) in the
//! sequences, with chmods and xattrs between the model's operations: the
//! model knows no permissions, so an operation refused for permission by
//! both modes leaves it unchanged, and every other answer is the model's.
//! The seed is printed on failure; rerun with SHOAL_SEED=... .

use rand::Rng;
use shoal_cluster::blob::MemBlobs;
use shoal_cluster::ns::{self, ClusterFs, SessionOpts};
use shoal_cluster::sim::SimStore;
use shoal_cluster::ClusterStore;
use shoal_core::rules::modes::{self, Limits};
use shoal_core::{Ctx, Engine, Kind, Namespace, SetAttr, ROOT_INO};
use shoal_testkit::model::{self, Gen, Model, NsTarget, Op, E, K};
use std::sync::Arc;

fn engine() -> Arc<Engine> {
    shoal_testkit::setup::fresh().1
}

/// A namespace on the simulator, with an object store for files past the
/// inline size (the generator writes up to 25 KB).
fn shared() -> Arc<ClusterFs> {
    let s = SimStore::new();
    ns::mkfs(&*s).unwrap();
    ClusterFs::open_with_data(
        s as Arc<dyn ClusterStore>,
        Some(Arc::new(MemBlobs::default())),
        SessionOpts::default(),
    )
    .unwrap()
}

/// Every path of the model's state, and each one's attributes on both
/// modes equal but where `modes` says they differ: a directory's link
/// count (2 + subdirectories, or 1) and its size (not compared: the
/// table's "directory size" row).
fn same_attributes(seed: u64, e: &Engine, s: &ClusterFs, m: &Model, own: &dyn Fn(&str) -> bool) {
    let root = Ctx::root();
    let te = NsTarget {
        ns: e,
        ctx: root.clone(),
    };
    let ts = NsTarget {
        ns: s,
        ctx: root.clone(),
    };
    for (path, k, _, _) in m.state(own) {
        let a = e.getattr(te.resolve(&path).unwrap()).unwrap();
        let b = ClusterFs::getattr(s, ts.resolve(&path).unwrap()).unwrap();
        let what = format!("seed={seed} {path}");
        assert_eq!(
            (a.kind, a.perm, a.uid, a.gid),
            (b.kind, b.perm, b.uid, b.gid),
            "{what}"
        );
        match k {
            K::File => assert_eq!((a.size, a.nlink), (b.size, b.nlink), "{what}"),
            K::Dir => {
                let subdirs = Namespace::list(e, &root, a.ino)
                    .unwrap()
                    .iter()
                    .filter(|x| x.2 == Kind::Dir)
                    .count() as u32;
                let want = |l: Limits| {
                    if l.dir_nlink_counts_subdirs {
                        2 + subdirs
                    } else {
                        1
                    }
                };
                assert_eq!(a.nlink, want(modes::EMBEDDED), "{what}: embedded");
                assert_eq!(b.nlink, want(modes::SHARED), "{what}: shared");
            }
        }
    }
}

#[test]
fn the_model_sequences_answer_the_same_on_both_modes() {
    for seed in shoal_testkit::setup::seeds(4) {
        let (e, s) = (engine(), shared());
        let root = Ctx::root();
        let te = NsTarget {
            ns: &*e,
            ctx: root.clone(),
        };
        let ts = NsTarget {
            ns: &*s,
            ctx: root.clone(),
        };
        let mut m = Model::default();
        for d in ["s0", "s1", "s2"] {
            let op = Op::Mkdir(d.into());
            m.apply(&op).unwrap();
            model::run(&te, &op).unwrap();
            model::run(&ts, &op).unwrap();
        }
        let mut g = Gen::new(seed, 0);
        let mut ok = 0;
        for i in 0..3000 {
            let op = g.next(&m);
            let want = m.apply(&op);
            let got_e = model::run(&te, &op);
            let got_s = model::run(&ts, &op);
            assert_eq!(got_e, want, "seed={seed} op#{i} {op:?}: embedded");
            assert_eq!(got_s, want, "seed={seed} op#{i} {op:?}: shared");
            ok += want.is_ok() as usize;
        }
        assert!(ok > 600, "seed={seed}: only {ok} ops succeeded");
        let own = g.own();
        let want = m.state(&own);
        for (mode, t) in [("embedded", &te), ("shared", &ts)] {
            let got = model::target_state(t, &own).unwrap();
            assert!(
                got == want,
                "seed={seed} {mode}: tree differs from the model:\n{}",
                model::diff(&got, &want)
            );
        }
        same_attributes(seed, &e, &s, &m, &own);
        s.close().unwrap();
    }
}

/// Who runs an operation in the permission-checked sequences: root and two
/// users checked by the namespace, and the kernel-checked caller a FUSE
/// mount with `default_permissions` passes.
fn callers() -> Vec<Ctx> {
    vec![
        Ctx::root(),
        Ctx::user(0, 0),
        Ctx::user(1000, 1000),
        Ctx {
            groups: vec![1000],
            ..Ctx::user(1001, 1001)
        },
    ]
}

/// An answer a permission check gave (EACCES, EPERM).
fn refused(r: &model::R<()>) -> bool {
    match r {
        Err(E::Other(m)) => *m == shoal_core::Error::PermissionDenied.to_string(),
        Err(E::NotPermitted) => true,
        _ => false,
    }
}

#[test]
fn permission_checked_callers_get_the_same_answers_on_both_modes() {
    for seed in shoal_testkit::setup::seeds(4) {
        let (e, s) = (engine(), shared());
        let root = Ctx::root();
        let mut m = Model::default();
        // Directories each caller meets differently: open to all, sticky,
        // root's own, user 1000's private one, and one of group 1000.
        let setup: [(&str, u32, u32, u32); 5] = [
            ("s0", 0o777, 0, 0),
            ("s1", 0o1777, 0, 0),
            ("s2", 0o755, 0, 0),
            ("s3", 0o700, 1000, 1000),
            ("s4", 0o2775, 1000, 1000),
        ];
        for (d, perm, uid, gid) in setup {
            m.apply(&Op::Mkdir(d.into())).unwrap();
            for ns in [&*e as &dyn Namespace, &*s] {
                let a = ns.mkdir(&root, ROOT_INO, d.as_bytes(), 0o755).unwrap();
                let sa = SetAttr {
                    mode: Some(perm),
                    uid: Some(uid),
                    gid: Some(gid),
                    ..Default::default()
                };
                ns.setattr(&root, a.ino, &sa).unwrap();
            }
        }
        let who = callers();
        let mut g = Gen::new(seed, 0);
        let mut rng = shoal_testkit::model::Gen::new(seed ^ 0x5eed, 1).rng;
        let (mut ok, mut denied) = (0, 0);
        for i in 0..2000 {
            let ctx = &who[rng.gen_range(0..who.len())];
            let te = NsTarget {
                ns: &*e,
                ctx: ctx.clone(),
            };
            let ts = NsTarget {
                ns: &*s,
                ctx: ctx.clone(),
            };
            let what = format!(
                "seed={seed} op#{i} uid {} checked {}",
                ctx.uid, ctx.check_perms
            );
            if rng.gen_bool(0.25) {
                // Between the model's operations: a chmod, a chown to
                // oneself, an xattr set and read, by the caller, on a
                // path of the model's.
                let op = g.next(&m);
                let p = match &op {
                    Op::Create(p) | Op::Mkdir(p) | Op::Unlink(p) | Op::Rmdir(p) => p.clone(),
                    Op::Rename(p, _) | Op::Link(p, _) => p.clone(),
                    Op::Write(p, ..) | Op::Truncate(p, _) | Op::Fsync(p) => p.clone(),
                };
                let modes = [0o600, 0o644, 0o755, 0o700, 0o777, 0o1777, 0o2755, 0o4711];
                let sa = match rng.gen_range(0..3) {
                    0 => SetAttr {
                        mode: Some(modes[rng.gen_range(0..modes.len())]),
                        ..Default::default()
                    },
                    1 => SetAttr {
                        gid: Some([0, 1000, 1001][rng.gen_range(0..3)]),
                        ..Default::default()
                    },
                    _ => SetAttr {
                        uid: Some([0, 1000, 1001][rng.gen_range(0..3)]),
                        ..Default::default()
                    },
                };
                let value = [rng.gen::<u8>(); 3];
                let one = |t: &NsTarget| -> Vec<String> {
                    let show = |r: shoal_core::Result<String>| match r {
                        Ok(v) => v,
                        Err(e) => format!("error {e:?}"),
                    };
                    let ino = match t.resolve(&p) {
                        Ok(i) => i,
                        Err(e) => return vec![format!("resolve {e:?}")],
                    };
                    let a =
                        t.ns.setattr(&t.ctx, ino, &sa)
                            .map(|a| format!("{:o} {} {}", a.perm, a.uid, a.gid));
                    let x = t.ns.setxattr(&t.ctx, ino, b"user.k", &value, 0);
                    let y = t.ns.getxattr(&t.ctx, ino, b"user.k");
                    let z = t.ns.access(&t.ctx, ino, 7);
                    vec![
                        show(a),
                        show(x.map(|()| String::new())),
                        show(y.map(|v| format!("{v:?}"))),
                        show(z.map(|()| String::new())),
                    ]
                };
                assert_eq!(one(&te), one(&ts), "{what}: attributes of {p} by {sa:?}");
                continue;
            }
            let op = g.next(&m);
            let got_e = model::run(&te, &op);
            let got_s = model::run(&ts, &op);
            assert_eq!(got_e, got_s, "{what} {op:?}: embedded vs shared");
            let mut next = m.clone();
            let want = next.apply(&op);
            if got_e == want {
                m = next;
                ok += want.is_ok() as usize;
            } else if refused(&got_e) {
                denied += 1;
            } else {
                panic!("{what} {op:?}: both modes {got_e:?}, the model {want:?}");
            }
        }
        assert!(
            ok > 200 && denied > 20,
            "seed={seed}: {ok} ops succeeded, {denied} refused"
        );
        let own = |_: &str| true;
        let want = m.state(&own);
        for (mode, ns) in [("embedded", &*e as &dyn Namespace), ("shared", &*s)] {
            let t = NsTarget {
                ns,
                ctx: root.clone(),
            };
            let got = model::target_state(&t, &own).unwrap();
            assert!(
                got == want,
                "seed={seed} {mode}: tree differs from the model:\n{}",
                model::diff(&got, &want)
            );
        }
        same_attributes(seed, &e, &s, &m, &own);
        s.close().unwrap();
    }
}
