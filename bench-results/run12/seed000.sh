#!/usr/bin/env bash
# Seed 000 in engine mode, one and two workers in one run (`shoal bench
# seed000`: crunl, rndrename and private work that shares nothing, each with
# worker 0 alone and with both workers, alternated in ten rounds), by lock
# scope. RUNS runs (default 5); prints each run's speedups and the medians.
# Usage (from the repo root): bash bench-results/run11/seed000.sh [SHOAL_BINARY] [OUT_DIR] [RUNS]
set -euo pipefail
BIN=${1:-target/release/shoal}
OUT=${2:-bench-results/run12}
RUNS=${3:-5}
J=$OUT/seed000.jsonl
: > "$J"
for r in $(seq "$RUNS"); do
  "$BIN" bench seed000 --workers 2 --iters 600000 --lock-scope name,dir,global --json "$J" > /dev/null
done
python3 - "$J" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
by = {}
print("lock scope | crunl 2w/1w | rndrename 2w/1w | private 2w/1w (the machine) | cs/op | top lock waits (count, ms)")
for d in runs:
    s = d["switches"]["lock_scope"]; x = d["extra"]
    w = sorted(((k, v) for k, v in d["locks"].items() if v["contended"]), key=lambda kv: -kv[1]["wait_ns"])[:2]
    wt = ", ".join(f"{k} {v['contended']:,} ({v['wait_ns']/1e6:.0f})" for k, v in w)
    print(f"{s} | {x['crunl speedup']:.2f} | {x['rndrename speedup']:.2f} | {x['private speedup']:.2f} | {d['cs_per_op']:.4f} | {wt}")
    by.setdefault(s, []).append((x['crunl speedup'], x['rndrename speedup'], x['private speedup'], d['cs_per_op']))
for s, v in by.items():
    med = [statistics.median(c) for c in zip(*v)]
    print(f"median {s}: crunl {med[0]:.2f} rndrename {med[1]:.2f} private {med[2]:.2f} cs/op {med[3]:.4f} ({len(v)} runs)")
print("git", runs[0]["git"], "host", runs[0]["host"])
PY
