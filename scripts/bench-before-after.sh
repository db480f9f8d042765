#!/usr/bin/env bash
# Two builds of shoal in one run, for "unchanged within noise" (issue 45):
# seed 000's figure and the 8 x 1M quick form on the engine, the through-FUSE
# rows beside the floor, and the etcd creates and stats beside JuiceFS on
# one cluster. Each phase runs BEFORE, AFTER, AFTER, BEFORE (the 8 x 1M form
# and the etcd table once each way), so a machine that slows down during
# the run moves both sides alike.
#   scripts/bench-before-after.sh BEFORE_SHOAL AFTER_SHOAL [OUT_DIR]
#   PHASES="seed000 scale path etcd" (the default; any of them)
# The driver of `--mode path` is AFTER's `shoal bench` (it only makes
# system calls); both builds serve their own mounts and stores.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,11p "$0"; exit 2; }
BEFORE=$(readlink -f "$1"); AFTER=$(readlink -f "$2")
OUT=${3:-bench-results/before-after-$(date -u +%F)}
PHASES=" ${PHASES:-seed000 scale path etcd} "
phase() { [[ $PHASES == *" $1 "* ]]; }
mkdir -p "$OUT"
for b in "$BEFORE" "$AFTER"; do [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }; done
echo "before: $BEFORE ($("$BEFORE" --version | head -1)); after: $AFTER; $(date -u +%FT%TZ); git $(git rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/README"
label() { [ "$1" = "$BEFORE" ] && echo before || echo after; }

if phase seed000; then
  echo "## seed 000: 1 vs 2 workers in one directory, per-name locks (engine)"
  for b in "$BEFORE" "$AFTER" "$AFTER" "$BEFORE"; do
    echo "# $(label "$b")"
    "$b" bench seed000 --workers 2 --iters 600000 --lock-scope name --json "$OUT/seed000-$(label "$b").jsonl"
  done 2>&1 | tee "$OUT/seed000.txt"
fi

if phase scale; then
  echo "## the quick form of seed 003: 8 x 1M files in 8 directories, group commit, fjall store on /var/tmp"
  for b in "$BEFORE" "$AFTER"; do
    rm -rf /var/tmp/ab-s8; mkdir -p /var/tmp/ab-s8
    echo "# $(label "$b")"
    /usr/bin/time -f "elapsed %e s, peak RSS %M KiB" "$b" bench fsmark --own-dirs --workers 8 --files 1000000 \
      --commit group --cache-mb 2048 --memory-mb 2048 --store-dir /var/tmp/ab-s8 \
      --json "$OUT/scale-$(label "$b").jsonl"
  done 2>&1 | tee "$OUT/scale.txt"
  rm -rf /var/tmp/ab-s8
fi

if phase path; then
  echo "## through FUSE: both builds' mounts beside the floor"
  M=/mnt/before-after
  FLOOR=$PWD/target/release/shoal-floor
  [ -x "$FLOOR" ] || cargo build --release -q -p shoal-bench --features floor --bin shoal-floor
  down() {
    for t in before after; do mountpoint -q "$M/$t" && { "$AFTER" umount "$M/$t" || umount -l "$M/$t"; }; done
    mountpoint -q "$M/floor" && { umount "$M/floor" || umount -l "$M/floor"; }
    rm -rf /var/tmp/ab-before.store /var/tmp/ab-after.store
  }
  down; trap down EXIT
  mkdir -p "$M"/{before,after,floor}
  for t in before after; do
    b=$BEFORE; [ $t = after ] && b=$AFTER
    "$b" mkfs /var/tmp/ab-$t.store >/dev/null
    "$b" mount -d /var/tmp/ab-$t.store "$M/$t" -o allow_other >/dev/null
  done
  setsid "$FLOOR" "$M/floor" >/dev/null 2>&1 </dev/null &
  for _ in $(seq 100); do mountpoint -q "$M/floor" && break; sleep 0.05; done
  T="floor=$M/floor,before=$M/before,after=$M/after"
  T2="floor=$M/floor,after=$M/after,before=$M/before"
  J="--json $OUT/path.jsonl"
  {
    for t in "$T" "$T2"; do
      "$AFTER" bench crunl --mode path --target "$t" --workers 1,2 --iters 20000 $J
      "$AFTER" bench rndrename --mode path --target "$t" --workers 1,2 --iters 10000 $J
      "$AFTER" bench fsmark --mode path --target "$t" --workers 1,2 --files 20000 $J
      "$AFTER" bench mdtest-hard --mode path --target "$t" --workers 1,2 --files 5000 $J
    done
  } 2>&1 | tee "$OUT/path.txt"
  down; trap - EXIT
fi

if phase etcd; then
  echo "## etcd: creates and stats in one directory, shoal beside JuiceFS on one cluster"
  for b in "$AFTER" "$BEFORE"; do
    p=shoal-meta; [ "$b" = "$AFTER" ] && p=meta
    echo "# $(label "$b")"
    SHOAL=$b PARTS=$p bash scripts/bench-etcd.sh 10
  done 2>&1 | tee "$OUT/etcd.txt"
fi
echo "results in $OUT"
