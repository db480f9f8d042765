#!/usr/bin/env bash
# The daemon holds -o memory_mb: 1M empty files created in one directory
# through the mount, `ls -f` of it, `rm -rf` of it (scripts/bench-memory.sh,
# issue 43's run), with the daemon's peak RSS (VmHWM) at most the bound after
# each step. Before mimalloc purged freed pages at once under a bound, the
# peak was 246-284 MiB under 200 (docs/perf-log/30-memory-bound.md).
source "$(dirname "$0")/lib.sh"
fail() { echo "memory-bound: $*"; exit 1; }
N=${MEMORY_FILES:-1000000} MB=${MEMORY_MB:-200}
out=$(WORK=$WORK/memory-bound SHOAL=$SHOAL bash scripts/bench-memory.sh "$MB" "$N" 2>&1) || fail "$out"
echo "$out"
[ "$(echo "$out" | grep -c "peak RSS")" -eq 3 ] || fail "expected three peaks: $out"
for mb in $(echo "$out" | grep -o "peak RSS [0-9]* MB" | awk '{print $3}'); do
  [ "$mb" -le "$MB" ] || fail "peak RSS $mb MiB over memory_mb=$MB"
done
