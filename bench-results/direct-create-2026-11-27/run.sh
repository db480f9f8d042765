#!/usr/bin/env bash
# A create opened write-only as a direct handle (git c178871) against the
# build before it: the tree's two untars into one fresh mount, alternated
# (untar2.sh), small files through the mount (mdtest-hard, fsmark,
# postmark) on two fresh mounts side by side, and a 2 GiB file written by dd
# into a new file. BASE= and NEW= name the two builds.
#   BASE=/var/tmp/shoal-base NEW=/var/tmp/shoal-dio bash bench-results/direct-create-2026-11-27/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=$(dirname "$0")
B=${BASE:?}; N=${NEW:?}
: > $OUT/untar2.txt
for r in 1 2; do
  for b in base:$B new:$N; do
    echo "== ${b%%:*} run $r" >> $OUT/untar2.txt
    SHOAL=${b#*:} BETWEEN=none bash bench-results/tree-2026-11-26/untar2.sh >> $OUT/untar2.txt 2>&1
  done
done
T=
for b in base:$B new:$N; do
  n=${b%%:*}; S=${b#*:}; M=/mnt/dc-$n; ST=/var/tmp/dc-$n.store
  mountpoint -q $M && $S umount $M; rm -rf $ST; mkdir -p $M
  $S mkfs $ST >/dev/null; $S mount -d $ST $M >/dev/null
  T=${T:+$T,}$n=$M
done
J="--json $OUT/path.jsonl"; : > $OUT/path.jsonl
{
  $N bench mdtest-hard --mode path --target "$T" --workers 1,2 --files 5000 $J
  $N bench fsmark --mode path --target "$T" --workers 1,2 --files 20000 $J
  $N bench postmark --mode path --target "$T" --workers 1,2 --files 20000 --transactions 50000 $J
  for r in 1 2; do
    for n in base new; do
      echo -n "dd 2 GiB into a new file, $n, run $r: "
      dd if=/dev/zero of=/mnt/dc-$n/big bs=1M count=2048 conv=fsync 2>&1 | tail -1
      rm /mnt/dc-$n/big
    done
  done
} > $OUT/path.txt 2>&1
$B umount /mnt/dc-base; $N umount /mnt/dc-new; rm -rf /var/tmp/dc-*.store
