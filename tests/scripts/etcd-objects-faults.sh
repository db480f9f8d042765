#!/usr/bin/env bash
# An etcd mount whose object store fails (issue 43): SeaweedFS killed, then
# a file created and bytes past the inline size written to it: the write is acknowledged from the daemon's buffer, its fsync reports
# EIO (within a bound: the client's retries of a refused connection take
# about 5 s), so does a second fsync and the close, never success; an inline
# file (its bytes in etcd) still reads, the size of a file closed before
# the fault is still known; unmount ends within a bound.
# Ports 25100-25113 (etcd), 25150-25158 (SeaweedFS).
source "$(dirname "$0")/lib.sh"
fail() { echo "etcd-objects-faults: $*"; exit 1; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$WORK/eof-cluster W=$WORK/eof-weed A=$WORK/eof.mnt
BOUND=60
unmount_stale "$A"
cleanup() {
  grep -qs " $A " /proc/mounts && { timeout 30 "$SHOAL" umount "$A" || umount -l "$A"; }
  bash "$ROOT/scripts/etcd-cluster.sh" stop "$D"
  bash "$ROOT/scripts/seaweed.sh" stop "$W"
}
trap cleanup EXIT
EPS=$(bash "$ROOT/scripts/etcd-cluster.sh" start "$D" 25100)
export AWS_ACCESS_KEY_ID=shoal-eof AWS_SECRET_ACCESS_KEY=shoal-eof-secret
S3=$(SEAWEED_KEYS=$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY bash "$ROOT/scripts/seaweed.sh" start "$W" 25150)
U=etcd://$EPS/eof
"$SHOAL" mkfs "$U" --data "s3://shoal/eof?endpoint=$S3" >/dev/null
mkdir -p "$A"
"$SHOAL" mount -d "$U" "$A" -o allow_other >/dev/null || fail "mount"
echo small > "$A/small"
head -c 1M /dev/urandom > "$A/before"; sync "$A/before"
t0=$SECONDS
# Bytes past the inline size written after the store went (into a new
# file: no object to read back first), so the write is acknowledged from
# the daemon's buffer and the upload at fsync meets the fault.
pkill -KILL -f -- "weed server -dir=$W " || fail "no SeaweedFS to kill"
out=$(timeout $((BOUND * 3)) python3 "$ROOT/tests/scripts/steps.py" "$A/during" write:102400 fsync fsync close 2>&1) || fail "fsync after the object store went away did not return within $((BOUND * 3)) s: $out"
out=$(echo "$out" | tr '\n' ' ')
echo "  after $((SECONDS - t0)) s: $out"
[[ $out == "write ok fsync Input/output error fsync Input/output error"* ]] || fail "expected the write acknowledged and its fsync EIO with the object store gone: $out"
[[ $out != *"fsync ok"* ]] || fail "an fsync reported success for data the object store never took: $out"
[ $((SECONDS - t0)) -le $((BOUND * 2)) ] || fail "the failing fsyncs took $((SECONDS - t0)) s"
[ "$(timeout $BOUND cat "$A/small")" = small ] || fail "an inline file does not read after the object store went away"
[ "$(timeout $BOUND stat -c %s "$A/before")" = 1048576 ] || fail "the size of a file closed before the fault"
rc=0; out=$(timeout $BOUND "$SHOAL" umount "$A" 2>&1) || rc=$?
[ $rc -ne 124 ] || fail "shoal umount still waiting after $BOUND s: $out"
echo "  umount: status $rc ${out:0:200}"
echo "etcd-objects-faults: ok"
