#!/usr/bin/env bash
# The daemon's sync calls during each of two untars into one fresh mount
# (strace -c on the daemon, syncs only), and the wait time per phase.
#   SHOAL=path/to/shoal bash bench-results/tree-2026-11-26b/untar2-syncs.sh
set -euo pipefail
S=${SHOAL:-$PWD/target/release/shoal}; TAR=/var/tmp/shoal-bench-linux.tar; M=/mnt/untar2; ST=/var/tmp/untar2.store
mountpoint -q $M && $S umount $M; rm -rf $ST; mkdir -p $M
$S mkfs $ST >/dev/null; $S mount -d $ST $M >/dev/null
D=$(pgrep -f "mount $ST $M" | head -1)
sync; echo 3 > /proc/sys/vm/drop_caches; cat $TAR > /dev/null
for ph in a b; do
  strace -c -f -e trace=fsync,fdatasync,sync_file_range,syncfs -p $D -o /tmp/untar2-strace-$ph.txt &
  SP=$!; sleep 1
  t0=$(date +%s.%N); tar -xf $TAR -C $M --one-top-level=$ph; t1=$(date +%s.%N)
  kill -INT $SP; wait $SP 2>/dev/null || true
  echo "untar$ph $(echo "$t1 - $t0" | bc) s"; grep -E "fsync|fdatasync|sync_file|syncfs|total" /tmp/untar2-strace-$ph.txt
done
$S umount $M; rm -rf $ST
