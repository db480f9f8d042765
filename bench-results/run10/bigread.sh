#!/usr/bin/env bash
# Sequential reads of files whose blocks are not cached: one store with four
# 128 MB files (written by the first binary), then for each round and each
# binary: mount with cache_mb=64, drop the page cache, cat all four, unmount.
# Prints MB/s and the daemon's CPU seconds. Binaries alternate; run as root.
# Usage: bash bench-results/run10/bigread.sh ROUNDS BIN...
set -u
R=$1; shift
S=/tmp/shoal-bigread-store; M=/tmp/shoal-bigread-mnt
umount $M 2>/dev/null; rm -rf $S; mkdir -p $M
"$1" mkfs $S >/dev/null; "$1" mount -d $S $M -o cache_mb=64 >/dev/null
for i in 1 2 3 4; do head -c 128M /dev/urandom > $M/big$i; done; "$1" umount $M
for r in $(seq $R); do for b in "$@"; do
  $b mount -d $S $M -o cache_mb=64 >/dev/null; echo 3 > /proc/sys/vm/drop_caches
  t0=$(date +%s.%N); cat $M/big* > /dev/null; t1=$(date +%s.%N)
  P=$(pgrep -f "shoal.*mount.*$S" | tail -1); cpu=$(awk '{print ($14+$15)/100}' /proc/$P/stat)
  $b umount $M
  python3 -c "print('$r $b', '%.0f MB/s' % (512/($t1-$t0)), 'daemon cpu s $cpu')"
done; done
rm -rf $S
