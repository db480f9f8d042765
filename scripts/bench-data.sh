#!/usr/bin/env bash
# The data-path figures of docs/BENCHMARKS.md (issue 23): fio through a shoal
# mount (default settings) beside ext4 on a loop device backed by a file on
# the same disk, in one run, and SQLite autocommit on both.
#   scripts/bench-data.sh [SIZE]      SIZE: fio's file (default 4g)
# The levers, one by one: LEVERS is a space-separated list of mount option
# sets, each a shoal mount of its own beside ext4 in the same run ("default"
# is no options), e.g.
#   LEVERS="default nopassthrough writeback_cache uring" JOBS="randwrite sqlite" \
#     scripts/bench-data.sh 1g
# JOBS picks jobs by name (default: all). SHOAL_OPTS applies to every mount.
# Needs root, fio and sqlite3 (installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
S=${SHOAL:-$PWD/target/release/shoal}
SIZE=${1:-4g}
B=${BENCH_ROOT:-/var/tmp/shoal-bench-data}
OUT=${OUT:-bench-results/data-$(date -u +%F)}
mkdir -p "$OUT"
command -v fio >/dev/null || apt-get install -y -qq fio >/dev/null
command -v sqlite3 >/dev/null || apt-get install -y -qq sqlite3 >/dev/null
LEVERS=${LEVERS:-default}
JOBS=${JOBS:-}
targets=(ext4)
for l in $LEVERS; do targets+=("shoal-$l"); done
opts_of() { local l=${1#shoal-}; [ "$l" = default ] && l=; l=$l${SHOAL_OPTS:+${l:+,}$SHOAL_OPTS}; echo "$l"; }
down() {
  for t in "${targets[@]}"; do
    [ "$t" = ext4 ] && continue
    mountpoint -q "$B/$t" && "$S" umount "$B/$t" || true
  done
  mountpoint -q "$B/ext4" && umount "$B/ext4" || true
  for l in $(losetup -j "$B/ext4.img" -O NAME --noheadings 2>/dev/null); do losetup -d "$l"; done
  rm -rf "$B"
}
down; mkdir -p "$B/ext4"
truncate -s 12G "$B/ext4.img"; mkfs.ext4 -q -F "$B/ext4.img"
mount -o loop "$B/ext4.img" "$B/ext4"
trap down EXIT
for t in "${targets[@]}"; do
  [ "$t" = ext4 ] && continue
  mkdir -p "$B/$t"; "$S" mkfs "$B/store-$t" >/dev/null
  o=$(opts_of "$t")
  "$S" mount -d "$B/store-$t" "$B/$t" ${o:+-o "$o"} >/dev/null
done
want() { [ -z "$JOBS" ] || [[ " $JOBS " == *" $1 "* ]]; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# job NAME FIO-ARGS...: run on both, print one line each (MiB/s and IOPS).
job() {
  local name=$1; shift
  want "$name" || return 0
  for t in "${targets[@]}"; do
    [ "$name" = seqwrite ] && rm -f "$B/$t/fio.dat"
    drop
    fio --name="$name" --filename="$B/$t/fio.dat" --size="$SIZE" "$@" \
      --output-format=json --output="$OUT/$name-$t.json" >/dev/null
    python3 - "$OUT/$name-$t.json" "$name" "$t" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
rw = j["write"] if j["write"]["io_bytes"] else j["read"]
print(f'{sys.argv[2]:<22} {sys.argv[3]:<28} {rw["bw"]/1024:10.1f} MiB/s {rw["iops"]:12.0f} IOPS')
EOF
  done
}
echo "fio, $SIZE file, psync unless said ($(date -u +%F), git $(git rev-parse --short HEAD))"
job seqwrite --rw=write --bs=1M --ioengine=psync --end_fsync=1
job seqread --rw=read --bs=1M --ioengine=psync
job randwrite --rw=randwrite --bs=4k --ioengine=psync --end_fsync=1 --runtime=30 --time_based
job randread --rw=randread --bs=4k --ioengine=psync --runtime=30 --time_based
job randwrite-aio16 --rw=randwrite --bs=4k --ioengine=libaio --iodepth=16 --end_fsync=1 --runtime=30 --time_based
job randread-aio16 --rw=randread --bs=4k --ioengine=libaio --iodepth=16 --runtime=30 --time_based
job randwrite-fsync1 --rw=randwrite --bs=4k --ioengine=psync --fsync=1 --runtime=30 --time_based
for t in "${targets[@]}"; do
  want seqwrite || break
  echo "$t store: $(du -sB1M --exclude=reserve "$B/$t" 2>/dev/null | cut -f1) MiB for the $SIZE file" 
done
# SQLite: 1000 autocommit inserts, rollback journal and WAL, on every
# target, then on the same ext4 remounted `sync` (each write O_SYNC, each
# directory change synchronous: the like-for-like reference for a shoal
# mount with durability=sync, e.g. LEVERS="default durability=sync").
sqlite_one() {
  local mode=$1 t=$2 dir=$3 t0 t1
  rm -f "$dir/t.db"*
  t0=$(date +%s.%N)
  { echo "PRAGMA journal_mode=$mode; CREATE TABLE t(x);"; for i in $(seq 1000); do echo "INSERT INTO t VALUES($i);"; done; } | sqlite3 "$dir/t.db" >/dev/null
  t1=$(date +%s.%N)
  echo "sqlite $mode $t: $(echo "1000 / ($t1 - $t0)" | bc -l | xargs printf '%.0f') tx/s"
}
want sqlite && for mode in delete wal; do
  for t in "${targets[@]}"; do sqlite_one "$mode" "$t" "$B/$t"; done
  mount -o remount,sync "$B/ext4"
  sqlite_one "$mode" ext4-mounted-sync "$B/ext4"
  mount -o remount,async "$B/ext4"
done
:
