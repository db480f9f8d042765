#!/usr/bin/env bash
# Seed 004's tree workload through the mount: shoal and the floor, each on
# /dev/fuse and over io_uring (-o uring / --uring), one bench invocation.
# Needs root; sets fuse.enable_uring. Usage, from the repo root:
#   bash bench-results/run9/tree-uring.sh [OUT_DIR]
set -euo pipefail
OUT=${1:-bench-results/run9}
S=${S:-target/release/shoal}
F=${F:-target/release/shoal-floor}
echo Y > /sys/module/fuse/parameters/enable_uring
B=$(mktemp -d /tmp/shoal-uring.XXXXXX)
mkdir -p "$B"/{floor,flooru,shoal,shoalu}
down() { for m in floor flooru shoal shoalu; do umount "$B/$m" 2>/dev/null || umount -l "$B/$m" 2>/dev/null || true; done; }
trap down EXIT
rm -rf /var/tmp/shoal-u1.store /var/tmp/shoal-u2.store
"$S" mkfs /var/tmp/shoal-u1.store >/dev/null
"$S" mkfs /var/tmp/shoal-u2.store >/dev/null
"$S" mount -d /var/tmp/shoal-u1.store "$B/shoal" -o allow_other >/dev/null
"$S" mount -d /var/tmp/shoal-u2.store "$B/shoalu" -o allow_other,uring >/dev/null
setsid "$F" "$B/floor" >/dev/null 2>&1 < /dev/null &
setsid "$F" --uring "$B/flooru" >/dev/null 2>&1 < /dev/null &
for m in floor flooru; do for i in $(seq 100); do mountpoint -q "$B/$m" && break; sleep 0.05; done; done
$S bench tree --mode path --target "floor=$B/floor,floor-uring=$B/flooru,shoal=$B/shoal,shoal-uring=$B/shoalu" --json "$OUT/tree-uring.jsonl"
