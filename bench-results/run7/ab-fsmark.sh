#!/bin/bash
# usage: ab.sh OUTPREFIX bin1 bin2 ... ; runs fsmark 8x1M per binary, alternating, twice
out=$1; shift
for rep in 1 2; do
 for b in "$@"; do
  rm -rf /var/tmp/s8; sync; echo 3 > /proc/sys/vm/drop_caches
  echo "== $b rep $rep $(date +%T)"
  /usr/bin/time -f "rss_kb=%M user=%U sys=%S wall=%e" /tmp/shoal-$b bench fsmark --own-dirs --workers 8 --files 1000000 --commit group --cache-mb 2048 --memory-mb 2048 --store-dir /var/tmp/s8 --json $out-$b.jsonl 2>&1 | grep -vE "^\s*$" | tail -8
 done
done
rm -rf /var/tmp/s8
