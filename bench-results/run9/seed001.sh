#!/usr/bin/env bash
# Seed 001 in engine mode: lookups and create+unlink in a 1K vs a 1M entry
# directory (indexed), five alternated rounds, each round's 1K/1M ratio, and
# the linear switch at 1K and 20K entries once. Usage (from the repo root):
#   bash bench-results/run9/seed001.sh [SHOAL_BINARY] [OUT_DIR]
set -euo pipefail
BIN=${1:-target/release/shoal}
OUT=${2:-bench-results/run9}
J=$OUT/seed001.jsonl
: > "$J"
for r in 1 2 3 4 5; do
  for f in 1000 1000000; do
    "$BIN" bench lookup --workers 1 --files $f --iters 2000000 --json "$J" > /dev/null
  done
done
"$BIN" bench lookup --workers 1 --files 1000 --iters 20000 --dir-index linear --json "$J" > /dev/null
"$BIN" bench lookup --workers 1 --files 20000 --iters 2000 --dir-index linear --json "$J" > /dev/null
python3 - "$J" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def ph(d, name):
    return next(p["ops_per_s"] for p in d["phases"] if p["name"] == name)
idx = [d for d in runs if d["switches"]["dir_index"] == "indexed"]
print("round | 1K lookups/s | 1M lookups/s | ratio | 1K create+unlink/s | 1M create+unlink/s | ratio")
rl, rc = [], []
for i in range(0, len(idx), 2):
    a, b = idx[i], idx[i + 1]
    l = ph(a, "lookup") / ph(b, "lookup"); c = ph(a, "create+unlink") / ph(b, "create+unlink")
    rl.append(l); rc.append(c)
    print(f"{i//2+1} | {ph(a,'lookup'):,.0f} | {ph(b,'lookup'):,.0f} | {l:.2f} | {ph(a,'create+unlink'):,.0f} | {ph(b,'create+unlink'):,.0f} | {c:.2f}")
print(f"median ratio: lookup {statistics.median(rl):.2f} (range {min(rl):.2f}-{max(rl):.2f}), create+unlink {statistics.median(rc):.2f} (range {min(rc):.2f}-{max(rc):.2f})")
for d in runs:
    if d["switches"]["dir_index"] == "linear":
        print(f"linear, {d['params']['files']} entries: lookups/s {ph(d,'lookup'):,.0f}, create+unlink/s {ph(d,'create+unlink'):,.0f}")
print("git", runs[0]["git"])
PY
