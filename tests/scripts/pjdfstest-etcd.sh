#!/usr/bin/env bash
# pjdfstest (crates.io) on an etcd mount (`shoal mount etcd://...`), as root
# with the users nobody and tests, on a three-member etcd cluster started
# here (ports BASE+1..BASE+13, BASE 24400 unless PORT_BASE says), file data
# in a file:// object store. MOUNT_OPTS are the mount's options:
# allow_other (the kernel checks permissions and ACLs, the default) or
# allow_other,daemon_permissions (the daemon checks, with the rules of
# shoal_core::rules, inside each operation's transaction). Every test must
# pass except those in tests/pjdfstest/exclude-etcd.txt (each with its
# reason), and pjdfstest must end with its summary: a crash of pjdfstest,
# or an exit status without a failed test to explain it, fails this script.
source "$(dirname "$0")/lib.sh"
fail() { echo "pjdfstest-etcd: $*"; exit 1; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OPTS=${MOUNT_OPTS:-allow_other}
# Short paths: pjdfstest binds sockets under the mount, and a socket's
# path has at most 107 bytes (sun_path): a longer mountpoint fails its
# socket tests with ENAMETOOLONG.
case $OPTS in *daemon_permissions*) TAG=dp ;; *) TAG=kp ;; esac
D=$WORK/pe-$TAG.cluster; P=$WORK/pe-$TAG.mnt; SEC=$WORK/pe-$TAG.secondary
LOG=$WORK/pjdfstest-etcd-$TAG.log
unmount_stale "$P"
cleanup() {
  grep -qs " $P " /proc/mounts && { "$SHOAL" umount "$P" || umount -l "$P"; }
  umount "$SEC" 2>/dev/null || true
  bash "$ROOT/scripts/etcd-cluster.sh" stop "$D"
}
trap cleanup EXIT
EPS=$(bash "$ROOT/scripts/etcd-cluster.sh" start "$D" "${PORT_BASE:-24400}")
U=etcd://$EPS/pjd
rm -rf "$WORK/pe-$TAG.objects"
"$SHOAL" mkfs "$U" --data "file://$WORK/pe-$TAG.objects" >/dev/null
mkdir -p "$P" "$SEC"
"$SHOAL" mount -d "$U" "$P" -o "$OPTS" >/dev/null
mountpoint -q "$SEC" || mount -t tmpfs -o size=64m tmpfs "$SEC"
cd "$P"; set +e
pjdfstest -c "$ROOT/tests/pjdfstest/pjdfstest.toml" -p "$P" -s "$SEC" > "$LOG" 2>&1
rc=$?
set -e; cd /
summary=$(grep '^Summary:' "$LOG" || true)
echo "pjdfstest on etcd ($OPTS): ${summary:-no summary, exit status $rc}"
mapfile -t failed < <(awk '$NF == "FAILED" && $1 ~ /::/ {print $1}' "$LOG")
excluded=$(awk '!/^#/ && NF {print $1}' "$ROOT/tests/pjdfstest/exclude-etcd.txt")
bad=0
for t in "${failed[@]}"; do
  grep -qx "$t" <<<"$excluded" || { echo "pjdfstest on etcd ($OPTS): unexpected failure: $t"; bad=1; }
done
"$SHOAL" umount "$P"
"$SHOAL" fsck "$U" | grep -q " 0 problems" || { "$SHOAL" fsck "$U"; fail "fsck after pjdfstest"; }
# No summary: pjdfstest did not finish (a crash, a signal). An exit status
# that no failed test explains: the same.
if [ $bad -ne 0 ] || [ -z "$summary" ] || { [ $rc -ne 0 ] && [ ${#failed[@]} -eq 0 ]; }; then
  tail -30 "$LOG"; fail "($OPTS) failed (exit status $rc)"
fi
echo "pjdfstest-etcd ($OPTS): ok"
