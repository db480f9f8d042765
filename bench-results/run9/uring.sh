#!/usr/bin/env bash
# Ran at git e5f07d5, where shoal-floor had --raw and --uring on a
# hand-written transport (crates/bench/src/uring_floor.rs, since removed: the
# vendored fuser now speaks io_uring, see shoal-uring.sh). Kept as the record.
# Issue 5's io_uring lever, measured on the floor: the fuser floor, the
# floor's own transport over classic /dev/fuse reads (--raw), and the same
# over FUSE-over-io_uring (--uring, per-CPU queues, threads pinned), side by
# side in one bench invocation per workload (the bench-path.sh workloads).
# Needs root and fuse.enable_uring (set here). Usage, from the repo root:
#   bash bench-results/run9/uring.sh [OUT_DIR]
set -euo pipefail
OUT=${1:-bench-results/run9}
S=${S:-target/release/shoal}
F=${F:-target/release/shoal-floor}
echo Y > /sys/module/fuse/parameters/enable_uring
B=$(mktemp -d /tmp/shoal-uring.XXXXXX)
mkdir -p "$B"/{fuser,raw,uring}
down() { for m in fuser raw uring; do umount "$B/$m" 2>/dev/null || umount -l "$B/$m" 2>/dev/null || true; done; }
trap down EXIT
setsid "$F" "$B/fuser" >/dev/null 2>&1 < /dev/null &
setsid "$F" --raw "$B/raw" >/dev/null 2>&1 < /dev/null &
setsid "$F" --uring "$B/uring" > "$OUT/uring-floor.log" 2>&1 < /dev/null &
for m in fuser raw uring; do for i in $(seq 100); do mountpoint -q "$B/$m" && break; sleep 0.05; done; done
T="fuser=$B/fuser,raw=$B/raw,uring=$B/uring"
J="--json $OUT/uring.jsonl"
$S bench crunl --mode path --target "$T" --workers 1,2 --iters 20000 $J
$S bench rndrename --mode path --target "$T" --workers 1,2 --iters 10000 $J
$S bench fsmark --mode path --target "$T" --workers 1,2 --files 20000 $J
$S bench fsmark --mode path --target "$T" --workers 2 --files 20000 --own-dirs $J
$S bench mdtest-hard --mode path --target "$T" --workers 1,2 --files 5000 $J
$S bench postmark --mode path --target "$T" --workers 1,2 --files 20000 --transactions 50000 $J
for p in $(pgrep -f "shoal-floor --uring $B/uring"); do bash -c "for t in /proc/$p/task/*; do echo \"\$(basename \$t) \$(cut -d' ' -f14,15 \$t/stat) \$(grep ^voluntary \$t/status)\"; done" > "$OUT/uring-threads.txt"; done
