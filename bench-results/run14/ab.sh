#!/usr/bin/env bash
# Alternate builds on one workload: ab.sh OUTDIR ROUNDS -- ARGS...
# Builds: /tmp/shoal-X for each X in $BUILDS (default "A B": before, after);
# one JSON file each, $TAG-X.jsonl.
set -euo pipefail
out=$1 rounds=$2; shift 3
tag=${TAG:-ab}
for r in $(seq "$rounds"); do
  for b in ${BUILDS:-A B}; do
    /tmp/shoal-$b bench "$@" --json "$out/$tag-$b.jsonl" > /dev/null
  done
done
