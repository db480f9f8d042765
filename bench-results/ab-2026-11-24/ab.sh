#!/usr/bin/env bash
# Before (70951d9, the session's start) and after (HEAD) side by side in one run.
set -uo pipefail
BEF=/tmp/before/target/release/shoal
AFT=/work/main/target/release/shoal
FLOOR=/work/main/target/release/shoal-floor
OUT=/work/main/bench-results/ab-2026-11-24
mkdir -p $OUT
echo "== seed000 (engine, memory only), alternated twice"
for r in 1 2; do
  for side in before after; do
    b=$BEF; [ $side = after ] && b=$AFT
    echo "-- $side round $r"; $b bench seed000 --workers 2 --iters 600000 --json $OUT/seed000-$side.jsonl 2>&1 | tail -12
  done
done
echo "== 8 x 1M files, own directories, fjall store, group commit, 2 GiB bound (the 50M run's quick form)"
for side in before after; do
  b=$BEF; [ $side = after ] && b=$AFT
  rm -rf /var/tmp/ab-s8
  echo "-- $side"; /usr/bin/time -f "maxrss %M KB, %e s" $b bench fsmark --own-dirs --workers 8 --files 1000000 --commit group --cache-mb 2048 --memory-mb 2048 --store-dir /var/tmp/ab-s8 --json $OUT/fsmark8x1m-$side.jsonl 2>&1 | tail -8
done
rm -rf /var/tmp/ab-s8
echo "== through FUSE: floor, shoal before, shoal after (group commit, store on /var/tmp)"
B=/mnt/ab; mkdir -p $B/floor $B/before $B/after
for s in before after; do
  b=$BEF; [ $s = after ] && b=$AFT
  mountpoint -q $B/$s && $b umount $B/$s
  rm -rf /var/tmp/ab-$s.store; $b mkfs /var/tmp/ab-$s.store >/dev/null; $b mount -d /var/tmp/ab-$s.store $B/$s -o allow_other >/dev/null
done
mountpoint -q $B/floor && umount $B/floor
setsid $FLOOR $B/floor >/dev/null 2>&1 < /dev/null &
for i in $(seq 100); do mountpoint -q $B/floor && break; sleep 0.05; done
T="floor=$B/floor,before=$B/before,after=$B/after"
J="--json $OUT/path.jsonl"
$AFT bench crunl --mode path --target "$T" --workers 1,2 --iters 20000 $J
$AFT bench rndrename --mode path --target "$T" --workers 1,2 --iters 10000 $J
$AFT bench fsmark --mode path --target "$T" --workers 1,2 --files 20000 $J
$AFT bench fsmark --mode path --target "$T" --workers 2 --files 20000 --own-dirs $J
$AFT bench mdtest-hard --mode path --target "$T" --workers 1,2 --files 5000 $J
$AFT bench postmark --mode path --target "$T" --workers 1,2 --files 20000 --transactions 50000 $J
$BEF umount $B/before; $AFT umount $B/after; umount $B/floor
rm -rf /var/tmp/ab-before.store /var/tmp/ab-after.store
echo AB-DONE
