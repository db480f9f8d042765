#!/bin/bash
# The run-7 A/B: alternate shoal builds on 8 x 1M files, page cache dropped
# before each run. usage: ab.sh fsmark|create REPS OUTPREFIX BUILD...
# (each BUILD is /tmp/shoal-BUILD). Run 7 used: ab.sh fsmark 2 ... new base,
# and ab.sh create 3 ... new base.
wl=$1; reps=$2; out=$3; shift 3
for rep in $(seq "$reps"); do
 for b in "$@"; do
  rm -rf /var/tmp/s8; sync; echo 3 > /proc/sys/vm/drop_caches
  echo "== $b rep $rep $(date +%T)"
  /usr/bin/time -f "rss_kb=%M user=%U sys=%S wall=%e" /tmp/shoal-$b bench "$wl" --own-dirs --workers 8 --files 1000000 \
    --commit group --cache-mb 2048 --memory-mb 2048 --store-dir /var/tmp/s8 --json "$out-$b.jsonl" 2>&1 | grep -vE "^\s*$" | tail -8
 done
done
rm -rf /var/tmp/s8
