#!/usr/bin/env bash
# untar2 (a then b into one fresh mount) printing how much the guest reported to its host during each copy
set -euo pipefail
cd "$(dirname "$0")/../.."
P=/sys/module/page_reporting/parameters
S=${SHOAL:-target/release/shoal}; TAR=/var/tmp/shoal-bench-linux.tar; M=/mnt/untar2; ST=/var/tmp/untar2.store
mountpoint -q $M && $S umount $M || true; rm -rf $ST; mkdir -p $M
$S mkfs $ST >/dev/null; $S mount -d $ST $M >/dev/null
sync; echo 3 > /proc/sys/vm/drop_caches; cat $TAR > /dev/null
[ "${BACK:-0}" = 1 ] && python3 -c "b=bytearray(${BACK_GB:-16}*2**30)"
for ph in a b; do
  r0=$(cat $P/reported_kib); t0=$(date +%s.%N)
  tar -xf $TAR -C $M --one-top-level=$ph
  t1=$(date +%s.%N); r1=$(cat $P/reported_kib)
  echo "untar$ph $(echo "$t1 - $t0" | bc) s, reported to the host during it: $(( (r1 - r0) / 1024 )) MiB; free $(free -m | awk '/Mem/ {print $4}') MiB"
done
$S umount $M; rm -rf $ST
