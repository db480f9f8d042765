#!/usr/bin/env bash
# Peak resident memory of a daemon under -o memory_mb=N (issue 43's run):
# N files (1M by default) made empty in one directory through the mount,
# then `ls -f` of it, then `rm -rf`; prints the daemon's peak RSS (VmHWM)
# after each step and the create rate.
# Usage: scripts/bench-memory.sh [MEMORY_MB (200)] [FILES (1000000)]
set -euo pipefail
cd "$(dirname "$0")/.."
MB=${1:-200}; N=${2:-1000000}
SHOAL=${SHOAL:-$PWD/target/release/shoal}
W=${WORK:-/tmp/shoal-bench-memory}; S=$W/store; M=$W/mnt
grep -qs " $M " /proc/mounts && "$SHOAL" umount "$M"
rm -rf "$S"; mkdir -p "$M"
"$SHOAL" mkfs "$S" >/dev/null
"$SHOAL" mount -d "$S" "$M" -o "allow_other,memory_mb=$MB" >/dev/null
pid=$(cat "$S/daemon.pid")
hwm() { awk '/VmHWM/ {printf "%.0f MB", $2/1024}' "/proc/$pid/status"; }
mkdir "$M/d"
t0=$(date +%s.%N)
python3 -c '
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    os.close(os.open(f"{d}/f{i:08d}", os.O_CREAT | os.O_WRONLY, 0o644))' "$M/d" "$N"
t1=$(date +%s.%N)
echo "memory_mb=$MB: $N creates in one directory, $(echo "$N / ($t1 - $t0)" | bc) creates/s, peak RSS $(hwm)"
ls -f "$M/d" | wc -l >/dev/null
echo "after ls -f: peak RSS $(hwm)"
rm -rf "$M/d"
echo "after rm -rf: peak RSS $(hwm)"
"$SHOAL" umount "$M"
rm -rf "$S"
