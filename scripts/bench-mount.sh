#!/usr/bin/env bash
# Mount cost against store size: for each size, a store of N empty files
# (made in engine mode by `shoal bench create --keep-store`, 2 workers in
# their own directories), then the time `shoal mount -d` takes until the mount
# serves and the daemon's resident memory (VmRSS after `ls` of the root, and
# VmHWM, its peak), for the first mount (no daemon ever closed the store:
# what a mount after a crash costs) and a second one after a clean unmount;
# with VERIFY=1 also `-o verify` (the full walk) for comparison.
#   scripts/bench-mount.sh 100000 1000000 10000000
set -euo pipefail
cd "$(dirname "$0")/.."
SHOAL=${SHOAL:-$PWD/target/release/shoal}
DIR=${DIR:-/var/tmp/shoal-bench-mount}
MNT=$DIR/mnt
mkdir -p "$MNT"
printf '%-10s %-8s %8s %9s %9s %10s\n' files mount seconds rss_mb hwm_mb store_mb
one() { # one LABEL STORE [OPTS]
  local t0 t1 pid
  t0=$(date +%s.%N)
  "$SHOAL" mount -d "$2" "$MNT" ${3:+-o $3} >/dev/null
  t1=$(date +%s.%N)
  ls "$MNT" >/dev/null
  pid=$(cat "$2/daemon.pid")
  local rss hwm
  rss=$(awk '/VmRSS/ {print int($2/1024)}' /proc/$pid/status)
  hwm=$(awk '/VmHWM/ {print int($2/1024)}' /proc/$pid/status)
  "$SHOAL" umount "$MNT"
  printf '%-10s %-8s %8.2f %9s %9s %10s\n' "$N" "$1" "$(echo "$t1 - $t0" | bc -l)" "$rss" "$hwm" "$(du -sm "$2" | cut -f1)"
}
for N in "$@"; do
  rm -rf "$DIR/store"; mkdir -p "$DIR/store"
  "$SHOAL" bench create --commit group --store-dir "$DIR/store" --keep-store --files $((N / 2)) --workers 2 --own-dirs >/dev/null
  S=$(ls -d "$DIR"/store/bench-*)
  one first "$S"
  one clean "$S"
  if [ -n "${VERIFY:-}" ]; then one verify "$S" verify; fi
done
rm -rf "$DIR"
