#!/usr/bin/env bash
# Two FUSE mounts of one namespace on a three-member etcd cluster (started
# here, ports 24201-24213): what one does the other sees (create, write,
# rename, unlink, a directory removed on A takes no new entries from B),
# an unlinked file stays readable on the mount that has it open, a mount
# killed -9 leaves exactly its acknowledged changes, pjdfstest on one mount
# (tests/pjdfstest/exclude-etcd.txt lists what may fail, each with its
# reason), and the namespace checks clean after each step.
source "$(dirname "$0")/lib.sh"
fail() { echo "etcd-mounts: $*"; exit 1; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$WORK/etcd-mounts-cluster; A=$WORK/ea.mnt; B=$WORK/eb.mnt; P=$WORK/pjd.mnt; SEC=$WORK/pjd.secondary
unmount_stale "$A" "$B" "$P"
EPS=$(bash "$ROOT/scripts/etcd-cluster.sh" start "$D" 24200)
cleanup() {
  for m in "$A" "$B" "$P"; do grep -qs " $m " /proc/mounts && { "$SHOAL" umount "$m" || umount -l "$m"; }; done
  umount "$SEC" 2>/dev/null || true
  bash "$ROOT/scripts/etcd-cluster.sh" stop "$D"
}
trap cleanup EXIT
U=etcd://$EPS/mounts
check() { "$SHOAL" fsck "$1" | grep -q " 0 problems" || { "$SHOAL" fsck "$1"; fail "fsck after $2"; }; }
# within SECS CMD...: CMD succeeds within SECS seconds (polls every 50 ms).
within() { local t=$1; shift; for _ in $(seq $((t * 20))); do "$@" 2>/dev/null && return 0; sleep 0.05; done; return 1; }
"$SHOAL" mkfs "$U" >/dev/null
mkdir -p "$A" "$B" "$P"
"$SHOAL" mount -d "$U" "$A" -o allow_other >/dev/null
"$SHOAL" mount -d "$U" "$B" -o allow_other >/dev/null
echo hello > "$A/f"
within 2 grep -qx hello "$B/f" || fail "B does not see A's file"
echo again > "$B/f"
within 2 grep -qx again "$A/f" || fail "A does not see B's write"
mv "$A/f" "$A/g"
within 2 test ! -e "$B/f" || fail "B still sees the old name"
within 2 grep -qx again "$B/g" || fail "B does not see the new name"
mkdir "$A/d"; within 2 test -d "$B/d" || fail "B does not see A's directory"
rmdir "$A/d"
within 2 test ! -e "$B/d" || fail "B still sees a directory A removed"
touch "$B/d/x" 2>/dev/null && fail "B made an entry in a directory A removed"
# Unlinked while open on the same mount: still readable there.
exec 3<"$A/g"; rm "$A/g"; grep -qx again <&3 || fail "an unlinked open file lost its bytes"; exec 3<&-
check "$U" "the cross-mount checks"
# A mount killed -9: every acknowledged create is there for the other.
for i in $(seq 50); do : > "$A/k$i"; done
pkill -9 -f "shoal mount $U $A" || fail "no daemon to kill"
umount -l "$A"
[ "$(ls "$B" | grep -c '^k')" = 50 ] || fail "B sees $(ls "$B" | grep -c '^k') of 50 files after A was killed"
check "$U" "a mount was killed"
"$SHOAL" umount "$B"
# pjdfstest on a mount of a namespace of its own.
U2=etcd://$EPS/pjd
"$SHOAL" mkfs "$U2" >/dev/null
"$SHOAL" mount -d "$U2" "$P" -o allow_other >/dev/null
mkdir -p "$SEC"; mountpoint -q "$SEC" || mount -t tmpfs -o size=64m tmpfs "$SEC"
cd "$P"; set +e
pjdfstest -c "$ROOT/tests/pjdfstest/pjdfstest.toml" -p "$P" -s "$SEC" > "$WORK/pjdfstest-etcd.log" 2>&1
set -e; cd /
echo "pjdfstest on etcd: $(grep '^Summary:' "$WORK/pjdfstest-etcd.log")"
mapfile -t failed < <(awk '$NF == "FAILED" {print $1}' "$WORK/pjdfstest-etcd.log")
excluded=$(awk '!/^#/ && NF {print $1}' "$ROOT/tests/pjdfstest/exclude-etcd.txt")
bad=0
for t in "${failed[@]}"; do
  grep -qx "$t" <<<"$excluded" || { echo "pjdfstest on etcd: unexpected failure: $t"; bad=1; }
done
"$SHOAL" umount "$P"
check "$U2" "pjdfstest"
[ $bad -eq 0 ] || fail "pjdfstest"
echo "etcd-mounts: ok"
