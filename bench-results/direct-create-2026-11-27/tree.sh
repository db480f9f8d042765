#!/usr/bin/env bash
# The kernel tree workload: the floor (in-memory FUSE), the build before
# direct handles for write-only creates (BASE=) and the one with them (NEW=),
# fresh mounts with default settings (stores on /var/tmp), twice with the
# order of the targets reversed.
#   BASE=/var/tmp/shoal-base NEW=/var/tmp/shoal-dio2 bash bench-results/direct-create-2026-11-27/tree.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
FLOOR=$PWD/target/release/shoal-floor; [ -x "$FLOOR" ] || cargo build --release -q -p shoal-bench --features floor --bin shoal-floor; OUT=$(dirname "$0"); B=/mnt/tree-dc
mkdir -p $B/floor $B/before $B/direct
for r in 1 2; do
  for t in before:$BASE direct:$NEW; do
    n=${t%%:*}; S=${t#*:}
    mountpoint -q $B/$n && $S umount $B/$n
    rm -rf /var/tmp/tree-dc-$n.store; $S mkfs /var/tmp/tree-dc-$n.store >/dev/null
    $S mount -d /var/tmp/tree-dc-$n.store $B/$n -o allow_other >/dev/null
  done
  mountpoint -q $B/floor && umount $B/floor
  for i in $(seq 100); do pgrep -f "shoal-floor $B/floor" >/dev/null || break; sleep 0.1; done
  setsid $FLOOR $B/floor >/dev/null 2>&1 < /dev/null &
  for i in $(seq 100); do mountpoint -q $B/floor && break; sleep 0.05; done
  mountpoint -q $B/floor || { echo "the floor did not mount" >&2; exit 1; }
  T="floor=$B/floor,before=$B/before,direct=$B/direct"
  [ $r = 2 ] && T="direct=$B/direct,before=$B/before,floor=$B/floor"
  sync; echo 3 > /proc/sys/vm/drop_caches
  $NEW bench tree --mode path --target "$T" --json $OUT/tree.jsonl
done
$BASE umount $B/before; $NEW umount $B/direct; umount $B/floor; rm -rf /var/tmp/tree-dc-*.store
