#!/usr/bin/env bash
# Seed 004's tree workload on two shoal builds and the fuser floor, side by
# side in one bench invocation (all on /dev/fuse, default options). Usage,
# from the repo root, as root:
#   OLD=/path/to/old/shoal NEW=target/release/shoal bash bench-results/run10/tree-read.sh [OUT_DIR]
set -euo pipefail
OUT=${1:-bench-results/run10}
OLD=${OLD:?} NEW=${NEW:-target/release/shoal}
F=${F:-target/release/shoal-floor}
B=$(mktemp -d /tmp/shoal-tree.XXXXXX)
mkdir -p "$B"/{floor,old,new}
down() { for m in floor old new; do umount "$B/$m" 2>/dev/null || umount -l "$B/$m" 2>/dev/null || true; done; }
trap down EXIT
rm -rf /var/tmp/shoal-t1.store /var/tmp/shoal-t2.store
"$NEW" mkfs /var/tmp/shoal-t1.store >/dev/null
"$NEW" mkfs /var/tmp/shoal-t2.store >/dev/null
"$OLD" mount -d /var/tmp/shoal-t1.store "$B/old" -o allow_other >/dev/null
"$NEW" mount -d /var/tmp/shoal-t2.store "$B/new" -o allow_other >/dev/null
setsid "$F" "$B/floor" >/dev/null 2>&1 < /dev/null &
for i in $(seq 100); do mountpoint -q "$B/floor" && break; sleep 0.05; done
"$NEW" bench tree --mode path --target "floor=$B/floor,old=$B/old,new=$B/new" --json "$OUT/tree-read.jsonl"
