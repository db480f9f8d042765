//! `cargo xtask <task>`: one entry point for developers' tasks.
//!
//! Each task runs the script or cargo command that CI runs, so a developer
//! and CI do the same thing. Tasks that mount need root and /dev/fuse.

use std::path::PathBuf;
use std::process::{exit, Command};

/// (name, what it does, the command it runs).
const TASKS: &[(&str, &str, &[&str])] = &[
    (
        "test",
        "every suite CI runs (scripts/test.sh; root, /dev/fuse, about 20 minutes)",
        &["bash", "scripts/test.sh"],
    ),
    (
        "unit",
        "cargo's tests: unit, model, power-cut, corruption, same-name races",
        &["cargo", "test", "--release", "--workspace"],
    ),
    (
        "loom",
        "the loom models of the name lock, the commit gate and reclaim against fills",
        &["bash", "scripts/loom.sh"],
    ),
    (
        "lint",
        "rustfmt --check and clippy -D warnings over the workspace",
        &["bash", "scripts/lint.sh"],
    ),
    ("fmt", "rustfmt over the workspace", &["cargo", "fmt"]),
    (
        "pjdfstest",
        "pjdfstest on a fresh mount",
        &["bash", "tests/scripts/pjdfstest.sh"],
    ),
    (
        "fsx",
        "fsx on a fresh mount",
        &["bash", "tests/scripts/fsx.sh"],
    ),
    (
        "xfstests",
        "xfstests' generic quick group (builds xfstests the first time)",
        &["bash", "tests/scripts/xfstests.sh"],
    ),
    (
        "xfstests-etcd",
        "xfstests' whole generic quick group on etcd mounts (a 3-member cluster it starts on ports 24501-24506; about 30 minutes, longer than CI's share: CI runs tests/xfstests/etcd-ci.txt)",
        &["env", "XFSTESTS_STORE=etcd", "XFSTESTS_TAG=-etcd", "bash", "tests/scripts/xfstests.sh"],
    ),
    (
        "bench",
        "the seeds' benchmarks in one run (scripts/bench-engine.sh)",
        &["bash", "scripts/bench-engine.sh"],
    ),
];

fn usage() -> ! {
    eprintln!("usage: cargo xtask <task> [args...]\n\ntasks:");
    for (name, what, cmd) in TASKS {
        eprintln!("  {name:<10} {what}\n  {:<10} runs: {}", "", cmd.join(" "));
    }
    exit(2)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(task) = args.next() else { usage() };
    let Some((_, _, cmd)) = TASKS.iter().find(|t| t.0 == task) else {
        eprintln!("cargo xtask: no task {task:?}");
        usage()
    };
    // The repository's root: xtask's manifest lives one level below it.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the repository")
        .to_path_buf();
    let status = Command::new(cmd[0])
        .args(&cmd[1..])
        .args(args)
        .current_dir(&root)
        .status()
        .unwrap_or_else(|e| {
            eprintln!("cargo xtask {task}: cannot run {}: {e}", cmd[0]);
            exit(1)
        });
    exit(status.code().unwrap_or(1))
}
