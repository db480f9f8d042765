#!/usr/bin/env bash
# Untar the tree twice into a fresh mount (SHOAL= picks the build, TAG= names the output) with perf recording the
# whole machine during each copy: TAG-a.data, TAG-b.data. The tracepoint counts in block-issue.txt came from the
# same script with "-e ext4:ext4_discard_blocks,ext4:ext4_free_blocks,block:block_rq_issue,ext4:ext4_sync_file_enter,block:block_rq_complete" in place of "-g -F 499".
set -euo pipefail
S=${SHOAL:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/shoal}; TAR=/var/tmp/shoal-bench-linux.tar; M=/mnt/untar2; ST=/var/tmp/untar2.store
TAG=${TAG:-cur}
mountpoint -q $M && $S umount $M || true; rm -rf $ST; mkdir -p $M
$S mkfs $ST >/dev/null; $S mount -d ${MOUNT_OPTS:+-o $MOUNT_OPTS} $ST $M >/dev/null
D=$(pgrep -f "mount $ST $M" | head -1)
sync; echo 3 > /proc/sys/vm/drop_caches; cat $TAR > /dev/null
for ph in a b; do
  perf record -q -a -g -F 499 -o ${OUT:-/var/tmp/prof}/$TAG-$ph.data 2>/dev/null & SP=$!
  t0=$(date +%s.%N)
  tar -xf $TAR -C $M --one-top-level=$ph
  t1=$(date +%s.%N); kill -INT $SP; wait $SP || true
  echo "$TAG untar$ph $(echo "$t1 - $t0" | bc) s"
done
$S umount $M; rm -rf $ST
