#!/usr/bin/env bash
# Usage, as root: [B=SHOAL_BINARY] [PERF=1] bash bench-results/run11/tar-walk.sh [ROUNDS]  (run 11: git 91aa21a)
# tar walk: floor vs shoal, alternated N times, after one untar into each.
set -euo pipefail
B=${B:-/work/main/target/release/shoal}; F=/work/main/target/release/shoal-floor
T=/var/tmp/shoal-bench-linux.tar; N=${1:-3}
M=/tmp/tw/m; mkdir -p $M/floor $M/shoal
S=/var/tmp/tw.store; rm -rf $S; $B mkfs $S >/dev/null
$B mount -d $S $M/shoal -o allow_other${OPTS:+,$OPTS} >/dev/null
setsid $F $M/floor >/dev/null 2>&1 < /dev/null &
for i in $(seq 100); do mountpoint -q $M/floor && break; sleep 0.05; done
trap 'umount $M/floor 2>/dev/null || umount -l $M/floor; umount $M/shoal 2>/dev/null || umount -l $M/shoal; rm -rf $S' EXIT
for t in floor shoal; do tar -xf $T -C $M/$t; done
sleep 1.5
for r in $(seq $N); do
  for t in floor shoal; do
    sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1; t0=$(date +%s.%N); tar -cf /dev/null -C $M/$t .; t1=$(date +%s.%N)
    echo "$r $t $(python3 -c "print(round($t1-$t0,3))")"
    sleep 1.2
  done
done
if [ -n "${PERF:-}" ]; then
  pid=$(pgrep -f "tw.store" | head -1); echo "daemon pid $pid"; sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1
  perf record -F 2999 -g -p $pid -o /tmp/tw/perf.data -- sleep 2 >/dev/null 2>&1 &
  sleep 0.1; tar -cf /dev/null -C $M/shoal .; wait
fi
