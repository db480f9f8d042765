#!/usr/bin/env bash
# Every test: unit and integration tests (model, power-cut, corruption, kill
# on a real mount), then the CLI checks, pjdfstest, fsx, the tree test and
# xfstests' generic quick group on real mounts. Needs root and /dev/fuse. Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
bash scripts/install-deps.sh --tests
cargo build --release --workspace -q
install -m 755 scripts/mount.fuse.shoal /sbin/mount.fuse.shoal
# The suites run on the default transport, FUSE over io_uring, which
# scripts/setup.sh enables (tests/scripts/transport.sh covers /dev/fuse).
P=/sys/module/fuse/parameters/enable_uring
[ -e $P ] && echo Y > $P && echo "fuse.enable_uring=Y, as scripts/setup.sh sets it"
# A run that was killed leaves mounts whose daemons are gone.
bash -c "source tests/scripts/lib.sh; unmount_leftovers"
# SHOAL_REQUIRE_ETCD, _WEED: tests that start an etcd cluster or SeaweedFS fail, not skip, without it.
export SHOAL=$PWD/target/release/shoal SHOAL_REQUIRE_MOUNT=1 SHOAL_REQUIRE_ETCD=1 SHOAL_REQUIRE_WEED=1
passed=0; failed=0; failures=()
suite() {
  local name=$1; shift
  echo "=== $name"
  local t0=$SECONDS
  if "$@"; then passed=$((passed+1)); echo "=== $name: ok ($((SECONDS-t0)) s)"
  else failed=$((failed+1)); failures+=("$name"); echo "=== $name: FAILED ($((SECONDS-t0)) s)"; fi
}
core_has_no_fuse_or_store() {
  # shoal-core and shoal-cluster must not depend on FUSE or on a storage
  # engine (STYLE.md §1).
  ! cargo tree -p shoal-core -p shoal-cluster -e normal --prefix none | grep -E '^(fuser|fjall|lsm-tree|rocksdb) '
}
suite "core dependency rule" core_has_no_fuse_or_store
suite "lint: rustfmt --check, clippy -D warnings" bash scripts/lint.sh
suite "cargo test" cargo test --release --workspace
suite "shared store: conformance (simulator, TiKV mode, 3-member etcd), daemons racing, etcd members killed, frozen, quorum lost, cut off from each other, a daemon cut off by a partition" \
  bash -c 'cargo test --release -q -p shoal-cluster --test cluster_store && cargo test --release -q -p shoal-etcd -- --nocapture'
suite "TiKV backend: conformance and daemons racing on the model of TiKV's transactions, with the client compiled in" \
  cargo test --release -q -p shoal-tikv --features client -- --nocapture
suite "shoal on etcd: mkfs, fsck, one-line errors, the shared-directory benchmark" bash tests/scripts/etcd.sh
suite "secured across machines: etcd over TLS with client certificates, users and RBAC roles per prefix; S3 over HTTPS with signed requests only; secrets never shown; shoal config; the daemon's files private; root_squash, all_squash" bash tests/scripts/etcd-secure.sh
suite "two mounts on etcd, data on SeaweedFS: cross-mount checks, fcntl and flock locks, SQLite from both, remount, kill -9, fsx" bash tests/scripts/etcd-mounts.sh
suite "pjdfstest on an etcd mount (the kernel checks permissions and ACLs, the default), its exit status checked" bash tests/scripts/pjdfstest-etcd.sh
suite "pjdfstest on an etcd mount (the daemon checks: daemon_permissions), its exit status checked" env MOUNT_OPTS=allow_other,daemon_permissions bash tests/scripts/pjdfstest-etcd.sh
suite "an etcd mount as an embedded one: chattr flags across mounts, O_TMPFILE, RENAME_EXCHANGE, overlayfs upper layer, statfs figures" bash tests/scripts/etcd-posix.sh
suite "an etcd mount whose object store is killed mid-write: the fsync and close get EIO, never success, no hang" bash tests/scripts/etcd-objects-faults.sh
suite "loom models: the name lock, the commit gate, reclaim against fills" bash scripts/loom.sh
# The fault points are compiled in only here (a build of shoal-core apart
# from the shipped binary's).
suite "fault points" cargo test --release -p shoal-core --features faults --test faults
suite "cli" bash tests/scripts/cli.sh
suite "the client without FUSE (docs/client.md): its changes seen through the mount at once and back despite hour-long kernel caches, a second user refused, malformed requests EINVAL, kill -9 of the daemon ENOTCONN (also in cargo test; about 3 s)" cargo test --release -p shoal --test client
suite "the client's C ABI: a C program built with cc against include/shoal.h and libshoal_client.so, on a real mount (about 2 s)" bash tests/scripts/client-c.sh
suite "the client's Python package: a wheel built by maturin, installed in a venv, os-like calls and file objects on a real mount (about 1 min with a fresh build)" bash tests/scripts/client-python.sh
suite "the preload shim (shoal run): an unmodified program's open, fstat, close, rename, mkdir, unlink, fork and threads served by the client and seen through the mount; a descriptor passed over a Unix socket; a write seen through the mount before close; EMFILE; a C crunl in 1 and 2 processes; fsck clean (about 10 s)" bash tests/scripts/client-shim.sh
suite "the client on etcd mounts: a 3-member cluster, two mounts; the client's changes seen at once through its mount (hour-long kernel caches) and the other, the other's seen by the client, a uid 1000 child refused in root's 0700 directory, file opens continuing on the mount (about 10 s)" bash tests/scripts/client-etcd.sh
suite "pjdfstest through the preload shim (shoal run): every test as on the mount but the shim's known limits (tests/pjdfstest/exclude-shim.txt); at least 1000 calls served by the daemon (about 15 s)" bash tests/scripts/pjdfstest-shim.sh
suite "real programs under the preload shim give the results they give on the mount: relative paths after chdir, cp -a, find, tar/untar, mv, rm -r, sqlite3 delete and wal, make, fsx, a static Go program, git init/add/commit/status/clone, a Python venv and pip install; the shim's log (about 30 s)" bash tests/scripts/client-shim-programs.sh
suite "first run: scripts/setup.sh on a bare Debian 12 (debootstrap minbase), a fuse.shoal mount, plain remount,ro and rw" bash tests/scripts/firstrun.sh
suite "metrics endpoint (parsed by the Prometheus Python parser) and shoal status, embedded and on etcd" bash tests/scripts/metrics.sh
suite "dump and load: embedded to etcd (data on SeaweedFS) to embedded, judged by rsync -aHAXn, getfattr, lsattr; a dump while writers run is a prefix of their log" bash tests/scripts/dump.sh
suite "POSIX answers found outside (ACLs, truncate, atime, remount, handles, writeback cache)" bash tests/scripts/posix.sh
suite "the kernel's caches kept an hour: what the daemon changes on its own (setuid, atime, chattr, ACL modes, mappings) seen by stat at once; name storms seen by a second process; both transports" bash tests/scripts/kernel-cache.sh
suite "enospc" bash tests/scripts/enospc.sh
suite "faults: the store's tables or journal made immutable, its directory removed at unmount, EIO injected on the journal (serving, unmount, mount), the tables and a data object, a full device: EIO, no hang, umount bounded with the reason, remount recovers what was fsync'ed" bash tests/scripts/faults.sh
suite "file data: holes, SEEK_DATA/SEEK_HOLE, space back after delete, flat memory" bash tests/scripts/data.sh
suite "a damaged store: fsck --repair salvages and lists what was lost" bash tests/scripts/salvage.sh
suite "read-only: -o ro and fsck change nothing, also on read-only media" bash tests/scripts/readonly.sh
suite "fsck within --memory-mb 64 on 1M files (peak RSS checked; its sorts spill)" bash tests/scripts/fsck-budget.sh
suite "the daemon within memory_mb=200 through 1M creates in one directory, ls -f, rm -rf (peak RSS checked)" bash tests/scripts/memory-bound.sh
suite "concurrent renames through a mount" bash tests/scripts/renames.sh
suite "pjdfstest (kernel checks permissions and ACLs, the default)" bash tests/scripts/pjdfstest.sh
suite "pjdfstest (daemon checks: daemon_permissions)" env MOUNT_OPTS=allow_other,daemon_permissions bash tests/scripts/pjdfstest.sh
suite "daemon-checked permissions: no walk through a directory the caller may not search, whoever walked it first (daemon_permissions, root_squash; about 3 s)" bash tests/scripts/daemon-perms.sh
suite "fsx" bash tests/scripts/fsx.sh
suite "fsx through a passthrough handle (truncates to inline sizes and back)" env FSX_PASSTHROUGH=1 FSX_OPS=30000 bash tests/scripts/fsx.sh
suite "power cut right after a new data object's first fsync (ext4 in each data mode and without a journal; XFS): the object and its bytes are there, and the daemon syncs no directory for it (about 10 s)" bash tests/scripts/powercut-names.sh
suite "PostgreSQL: kill -9 of the daemon mid-pgbench, the server recovers with every acknowledged transaction (about 30 s)" bash tests/scripts/pg-crash.sh
suite "FUSE transports: io_uring used by default with passthrough; pjdfstest, fsx, SIGKILL on /dev/fuse (nouring)" bash tests/scripts/transport.sh
suite "tree" bash tests/scripts/tree.sh
suite "xfstests (generic quick group)" bash tests/scripts/xfstests.sh
suite "xfstests on etcd mounts (tests/xfstests/etcd-ci.txt: the quick group's short tests)" \
  env XFSTESTS_STORE=etcd XFSTESTS_TAG=-etcd bash -c 'bash tests/scripts/xfstests.sh $(grep -v "^#" tests/xfstests/etcd-ci.txt)'
echo
if [ $failed -gt 0 ]; then echo "failed suites: ${failures[*]}"; fi
echo "suites: $passed passed, $failed failed"
[ $failed -eq 0 ]
