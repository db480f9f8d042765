#!/usr/bin/env bash
# Alternate two builds on one workload: ab.sh OUTDIR ROUNDS -- ARGS...
# Builds: /tmp/shoal-A (before) and /tmp/shoal-B (after); one JSON file each.
set -euo pipefail
out=$1 rounds=$2; shift 3
tag=${TAG:-ab}
for r in $(seq "$rounds"); do
  for b in A B; do
    /tmp/shoal-$b bench "$@" --json "$out/$tag-$b.jsonl" > /dev/null
  done
done
