#!/usr/bin/env bash
# shoal through FUSE over io_uring (-o uring) against shoal on /dev/fuse, the
# fuser floor and the floor over io_uring, side by side in one bench
# invocation per workload (the bench-path.sh workloads; with `tree`, seed
# 004's tree workload instead). Needs root; sets fuse.enable_uring. Usage,
# from the repo root:
#   bash bench-results/run9/shoal-uring.sh [OUT_DIR] [tree]
set -euo pipefail
OUT=${1:-bench-results/run9}
S=${S:-target/release/shoal}
F=${F:-target/release/shoal-floor}
echo Y > /sys/module/fuse/parameters/enable_uring
B=$(mktemp -d /tmp/shoal-uring.XXXXXX)
mkdir -p "$B"/{floor,flooru,shoal,shoalu}
down() { for m in floor flooru shoal shoalu; do umount "$B/$m" 2>/dev/null || umount -l "$B/$m" 2>/dev/null || true; done; }
trap down EXIT
rm -rf /var/tmp/shoal-u1.store /var/tmp/shoal-u2.store
"$S" mkfs /var/tmp/shoal-u1.store >/dev/null
"$S" mkfs /var/tmp/shoal-u2.store >/dev/null
"$S" mount -d /var/tmp/shoal-u1.store "$B/shoal" -o allow_other >/dev/null
"$S" mount -d /var/tmp/shoal-u2.store "$B/shoalu" -o allow_other,uring >/dev/null
setsid "$F" "$B/floor" >/dev/null 2>&1 < /dev/null &
setsid "$F" --uring "$B/flooru" >/dev/null 2>&1 < /dev/null &
for m in floor flooru; do for i in $(seq 100); do mountpoint -q "$B/$m" && break; sleep 0.05; done; done
T="floor=$B/floor,floor-uring=$B/flooru,shoal=$B/shoal,shoal-uring=$B/shoalu"
if [ "${2:-}" = tree ]; then
  $S bench tree --mode path --target "$T" --json "$OUT/tree-uring.jsonl"
  exit
fi
J="--json $OUT/shoal-uring.jsonl"
$S bench crunl --mode path --target "$T" --workers 1,2 --iters 20000 $J
$S bench rndrename --mode path --target "$T" --workers 1,2 --iters 10000 $J
$S bench fsmark --mode path --target "$T" --workers 1,2 --files 20000 $J
$S bench fsmark --mode path --target "$T" --workers 2 --files 20000 --own-dirs $J
$S bench mdtest-hard --mode path --target "$T" --workers 1,2 --files 5000 $J
$S bench postmark --mode path --target "$T" --workers 1,2 --files 20000 --transactions 50000 $J
