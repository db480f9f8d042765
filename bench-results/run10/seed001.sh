#!/usr/bin/env bash
# Seed 001 in engine mode, both sizes in one run (`shoal bench seed001`: a
# 1K-entry and a 1M-entry directory, lookups and create+unlink alternated in
# five rounds). Five runs at the default mix (half the lookups hit), one with
# only hits and one with only misses, and the linear switch at 20K entries.
# Usage (from the repo root): bash bench-results/run10/seed001.sh [SHOAL_BINARY] [OUT_DIR]
set -euo pipefail
BIN=${1:-target/release/shoal}
OUT=${2:-bench-results/run10}
J=$OUT/seed001.jsonl
: > "$J"
for r in 1 2 3 4 5; do
  "$BIN" bench seed001 --workers 1 --files 1000000 --iters 2000000 --json "$J" > /dev/null
done
for h in 1 0; do
  "$BIN" bench seed001 --workers 1 --files 1000000 --iters 2000000 --hits $h --json "$J" > /dev/null
done
"$BIN" bench seed001 --workers 1 --files 20000 --iters 20000 --dir-index linear --json "$J" > /dev/null
python3 - "$J" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
ph = lambda d, n: next(p["ops_per_s"] for p in d["phases"] if p["name"] == n)
print("run | hits | dir index | 1K lookups/s | big lookups/s | ratio | 1K create+unlink/s | big create+unlink/s | ratio")
rl, rc = [], []
for i, d in enumerate(runs):
    l = ph(d, "lookup 1K") / ph(d, "lookup"); c = ph(d, "create+unlink 1K") / ph(d, "create+unlink")
    h = d["params"]["hits"]; idx = d["switches"]["dir_index"]
    if h == 0.5 and idx == "indexed":
        rl.append(l); rc.append(c)
    print(f"{i+1} | {h} | {idx} ({d['params']['files']:,}) | {ph(d,'lookup 1K'):,.0f} | {ph(d,'lookup'):,.0f} | {l:.2f} | {ph(d,'create+unlink 1K'):,.0f} | {ph(d,'create+unlink'):,.0f} | {c:.2f}")
print(f"hits 0.5, indexed: median ratio lookup {statistics.median(rl):.2f} (range {min(rl):.2f}-{max(rl):.2f}), create+unlink {statistics.median(rc):.2f} (range {min(rc):.2f}-{max(rc):.2f})")
print("git", runs[0]["git"])
PY
