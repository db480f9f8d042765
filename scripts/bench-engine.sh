#!/usr/bin/env bash
# The engine-mode figures of docs/BENCHMARKS.md, in one run (2-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."
S=${SHOAL:-./target/release/shoal}
OUT=${OUT:-bench-results}
mkdir -p "$OUT"
J="--json $OUT/engine.jsonl"
echo "## seed 000's figure in one run: 1 vs 2 workers alternated, beside the machine's own ceiling (private work), by lock scope"
$S bench seed000 --workers 2 --iters 600000 --lock-scope name,dir,global $J
echo "## seed 001's figure in one run: a 1K vs a 1M entry directory alternated (half the lookups hit)"
$S bench seed001 --workers 1 --files 1000000 --iters 2000000 $J
echo "## seed 002's figure in one run: two postmark instances, per-name engine vs big-lock engine alternated, workers pinned"
$S bench seed002 --workers 2 --pin $J
echo "## seed 000: crunl and rndrename, one directory, lock scope name vs dir vs global"
$S bench crunl --workers 1,2 --iters 500000 --lock-scope name,dir,global $J --plot $OUT/crunl-engine.svg
$S bench rndrename --workers 1,2 --iters 300000 --lock-scope name,dir,global $J --plot $OUT/rndrename-engine.svg
echo "## seed 002: postmark 20000/50000, 1 and 2 instances in their own directories, fine-grained vs global lock"
$S bench postmark --workers 1,2 --files 20000 --transactions 50000 --lock-scope name,global $J --plot $OUT/postmark-engine.svg
echo "## seed 001: lookups and create+unlink in a 1K vs 1M entry directory (indexed), as separate runs"
$S bench lookup --workers 1 --files 1000 --iters 1000000 $J
$S bench lookup --workers 1 --files 1000000 --iters 1000000 $J
echo "## seed 001: the linear switch (1K vs 20K entries; 1M would take hours)"
$S bench lookup --workers 1 --files 1000 --iters 20000 --dir-index linear $J
$S bench lookup --workers 1 --files 20000 --iters 20000 --dir-index linear $J
echo "## seed 001: name cache off / on / primed over the store (group commit), 20K-entry directory"
$S bench lookup --workers 1 --files 20000 --iters 200000 --commit group --name-cache off,on,primed $J
echo "## seed 003: commit none / group / sync (crunl, fjall store on /var/tmp)"
$S bench crunl --workers 1,2 --iters 100000 --commit none,group $J --store-dir /var/tmp
$S bench crunl --workers 1,2 --iters 2000 --commit sync $J --store-dir /var/tmp
echo "## fsmark and mdtest-hard, 2 workers in one shared directory"
$S bench fsmark --workers 1,2 --files 500000 $J
$S bench mdtest-hard --workers 1,2 --files 100000 $J
echo "## seed 004: placement spread vs near (engine, fjall store)"
$S bench fsmark --workers 2 --files 200000 --own-dirs --placement spread,near --commit group $J --store-dir /var/tmp
