#!/usr/bin/env bash
# The through-the-mount figures of docs/BENCHMARKS.md: the same workloads on
# tmpfs, ext4, xfs (RAM-backed loop devices), the floor FUSE filesystem,
# shoal (default durability: group commit) and JuiceFS, side by side in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
S=${SHOAL:-./target/release/shoal}
OUT=${OUT:-bench-results}
mkdir -p "$OUT"
T=$(bash scripts/bench-targets.sh up)
NOJFS=$(echo "$T" | tr ',' '\n' | grep -v '^juicefs=' | paste -sd,)
# JUICEFS=0 leaves JuiceFS out (it is 10-20x slower than the others).
if [ "${JUICEFS:-1}" = 0 ]; then T=$NOJFS; fi
J="--json $OUT/path.jsonl"
$S bench crunl --mode path --target "$T" --workers 1,2 --iters 20000 $J --plot $OUT/crunl-path.svg
$S bench rndrename --mode path --target "$T" --workers 1,2 --iters 10000 $J
$S bench fsmark --mode path --target "$T" --workers 1,2 --files 20000 $J
$S bench fsmark --mode path --target "$T" --workers 2 --files 20000 --own-dirs $J
$S bench mdtest-hard --mode path --target "$T" --workers 1,2 --files 5000 $J
$S bench postmark --mode path --target "$NOJFS" --workers 1,2 --files 20000 --transactions 50000 $J
bash scripts/bench-targets.sh down
