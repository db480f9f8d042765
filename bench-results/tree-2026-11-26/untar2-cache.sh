#!/usr/bin/env bash
# Does the cache budget make the second untar slower? Two untars into one
# fresh mount, with the default cache budget (256 MiB) and with cache_mb=2048,
# and what `shoal stats` says after each: bash bench-results/tree-2026-11-26/untar2-cache.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
S=$PWD/target/release/shoal; TAR=/var/tmp/shoal-bench-linux.tar; M=/mnt/untar2; ST=/var/tmp/untar2.store
mkdir -p $M
for opts in "" cache_mb=2048; do
  mountpoint -q $M && $S umount $M; rm -rf $ST
  $S mkfs $ST >/dev/null; $S mount -d $ST $M ${opts:+-o $opts} >/dev/null
  D=$(pgrep -f "mount $ST $M" | head -1)
  sync; echo 3 > /proc/sys/vm/drop_caches; cat $TAR > /dev/null
  for ph in a b; do
    t0=$(date +%s.%N); tar -xf $TAR -C $M --one-top-level=$ph; t1=$(date +%s.%N)
    $S stats --json $M > /tmp/untar2-stats.json
    python3 - "$opts" "$ph" "$(echo "$t1 - $t0" | bc)" "$(awk '{print $24*4}' /proc/$D/stat)" <<'PY'
import json, sys
j = json.load(open('/tmp/untar2-stats.json'))
c = j['cache']
f = dict(budget_mib=c['budget'] >> 20, cache_mib=c['bytes'] >> 20, inodes=c['inodes'], evicted_inodes=c['evicted_inodes'],
         evicted_dents=c['evicted_dents'], reclaim_batches=c['reclaim_batches'], fuse_invalidations=j['fuse_invalidations'],
         store_gets=j['store']['gets'], store_scans=j['store']['scans'], commits=j['commit']['commits'])
print(f"opts={sys.argv[1] or 'default':<14} untar{sys.argv[2]} {float(sys.argv[3]):6.2f} s  rss {int(sys.argv[4])//1024} MiB  " + ' '.join(f'{k}={v}' for k, v in f.items()))
PY
  done
done
$S umount $M; rm -rf $ST
