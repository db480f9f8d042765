#!/usr/bin/env bash
# The kernel tree workload, the floor (in-memory FUSE) beside shoal with
# default settings (store on /var/tmp), fresh mounts, twice with the order
# of targets reversed: bash bench-results/tree-2026-11-26/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
S=$PWD/target/release/shoal; FLOOR=$PWD/target/release/shoal-floor
OUT=bench-results/tree-2026-11-26; B=/mnt/tree-bench
mkdir -p $B/floor $B/shoal
for r in 1 2; do
  mountpoint -q $B/shoal && $S umount $B/shoal
  rm -rf /var/tmp/tree-bench.store; $S mkfs /var/tmp/tree-bench.store >/dev/null
  $S mount -d /var/tmp/tree-bench.store $B/shoal -o allow_other >/dev/null
  mountpoint -q $B/floor && umount $B/floor
  # The last round's floor must be gone before the next mounts there (in
  # the first form of this script it was not, and the second round's floor
  # row measured the directory under the mount point).
  for i in $(seq 100); do pgrep -f "shoal-floor $B/floor" >/dev/null || break; sleep 0.1; done
  setsid $FLOOR $B/floor >/dev/null 2>&1 < /dev/null &
  for i in $(seq 100); do mountpoint -q $B/floor && break; sleep 0.05; done
  mountpoint -q $B/floor || { echo "the floor did not mount" >&2; exit 1; }
  T="floor=$B/floor,shoal=$B/shoal"; [ $r = 2 ] && T="shoal=$B/shoal,floor=$B/floor"
  sync; echo 3 > /proc/sys/vm/drop_caches
  $S bench tree --mode path --target "$T" --json $OUT/tree${RUN:+-$RUN}.jsonl
done
$S umount $B/shoal; umount $B/floor; rm -rf /var/tmp/tree-bench.store
