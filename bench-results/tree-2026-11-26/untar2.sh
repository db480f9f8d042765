#!/usr/bin/env bash
# Where untar2's time goes: untar twice into a fresh shoal mount (default
# settings, store on /var/tmp), per phase the disk's MiB written and the
# CPU seconds of the daemon, of tar, of the whole machine busy and waiting
# for I/O (of 2 x the phase's seconds); then again with a sync (host dirty
# pages written back) between the two; BETWEEN="none sync drop" adds a
# run with the page cache dropped between them. SHOAL=path/to/shoal picks
# another build, MOUNT_OPTS=o1,o2 mounts with those options (-o).
#   bash bench-results/tree-2026-11-26/untar2.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
S=${SHOAL:-$PWD/target/release/shoal}; TAR=/var/tmp/shoal-bench-linux.tar; M=/mnt/untar2; ST=/var/tmp/untar2.store
DEV=$(lsblk -no pkname "$(findmnt -no source -T /var/tmp)" 2>/dev/null || true); DEV=${DEV:-$(basename "$(findmnt -no source -T /var/tmp)")}
wsec() { awk -v d="$DEV" '$3==d {print $10}' /proc/diskstats; }
cpu() { awk '/^cpu / {print $2+$3+$4+$7+$8, $6}' /proc/stat; }   # busy, iowait (jiffies)
pcpu() { awk '{print $14+$15+$16+$17}' /proc/$1/stat; }
for between in ${BETWEEN:-none sync}; do
  mountpoint -q $M && $S umount $M; rm -rf $ST; mkdir -p $M
  $S mkfs $ST >/dev/null; $S mount -d ${MOUNT_OPTS:+-o $MOUNT_OPTS} $ST $M >/dev/null
  D=$(pgrep -f "mount $ST $M" | head -1)
  sync; echo 3 > /proc/sys/vm/drop_caches; cat $TAR > /dev/null
  for ph in a b; do
    [ $ph = b ] && [ $between = sync ] && sync
    [ $ph = b ] && [ $between = drop ] && { sync; echo 3 > /proc/sys/vm/drop_caches; cat $TAR > /dev/null; }
    w0=$(wsec); read b0 i0 < <(cpu); d0=$(pcpu $D); t0=$(date +%s.%N)
    /usr/bin/time -f "%U %S" -o /tmp/untar2.tartime tar -xf $TAR -C $M --one-top-level=$ph
    t1=$(date +%s.%N); w1=$(wsec); read b1 i1 < <(cpu); d1=$(pcpu $D)
    read tu ts < /tmp/untar2.tartime
    printf 'between=%-4s untar%s %6.2f s  disk written %6d MiB  CPU s: daemon %5.1f tar %5.1f all busy %5.1f iowait %5.1f\n' \
      $between $ph "$(echo "$t1 - $t0" | bc)" $(( (w1 - w0) / 2048 )) "$(echo "($d1 - $d0)/100" | bc -l)" "$(echo "$tu + $ts" | bc)" \
      "$(echo "($b1 - $b0)/100" | bc -l)" "$(echo "($i1 - $i0)/100" | bc -l)"
  done
done
$S umount $M; rm -rf $ST
