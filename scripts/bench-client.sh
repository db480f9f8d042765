#!/usr/bin/env bash
# The client without FUSE (docs/client.md) beside the mount, in one run:
# crunl (create+unlink pairs in one directory) with one and two threads
# through the client (create and unlink calls; and open(O_CREAT), close,
# unlink, which hands out and pins a data object), through the same
# mount's kernel path, on tmpfs and on ext4 (a directory of the root
# filesystem); and round trips: the client's ping (the protocol through the
# daemon, no engine call), the futex ping-pong alone between two processes
# (any CPUs, and both pinned to one), and one FUSE request (a getxattr).
# Then an unmodified C crunl under the shim (`shoal run`) and on the mount.
#   scripts/bench-client.sh [PAIRS]      (10000 per thread by default)
# Output: JSON lines, then a table (crates/client/examples/crunl.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-10000}
SHOAL=${SHOAL:-$PWD/target/release/shoal}
cargo build --release -q -p shoal -p shoal-client -p shoal-shim --example crunl
DIR=${DIR:-/tmp/client-bench-$$}
mkdir -p "$DIR/mnt" "$DIR/ext4" /dev/shm/client-bench-$$
"$SHOAL" mkfs "$DIR/store" >/dev/null
"$SHOAL" mount -d "$DIR/store" "$DIR/mnt" >/dev/null
trap '"$SHOAL" umount "$DIR/mnt" || true; rm -rf "$DIR" /dev/shm/client-bench-$$' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), CPU pressure: $(head -1 /proc/pressure/cpu)"
target/release/examples/crunl "$DIR/mnt" "$PAIRS" /dev/shm/client-bench-$$ "$DIR/ext4"
# An unmodified C program (tests/c/crunl.c: open O_CREAT|O_EXCL, fstat,
# close, unlink) in 1 and 2 processes in one directory, under the shim and
# on the mount, alternated.
cc -O2 -o "$DIR/crunl-c" tests/c/crunl.c
mkdir -p "$DIR/mnt/c"
echo
printf '%-28s %12s %12s %8s\n' "C crunl, pairs/s" "1 process" "2 processes" "2/1"
for way in shim mount shim mount; do
  run=(); [ $way = shim ] && run=("$SHOAL" run "$DIR/mnt" --)
  a=$("${run[@]}" "$DIR/crunl-c" "$DIR/mnt/c" "$PAIRS" 1)
  b=$("${run[@]}" "$DIR/crunl-c" "$DIR/mnt/c" "$PAIRS" 2)
  echo "{\"bench\":\"c-crunl\",\"way\":\"$way\",\"procs1\":$a,\"procs2\":$b}" >&2
  printf '%-28s %12s %12s %7.2fx\n' "$way" "$a" "$b" "$(echo "$b / $a" | bc -l)"
done
