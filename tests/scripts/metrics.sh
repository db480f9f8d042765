#!/usr/bin/env bash
# The metrics endpoint (`-o metrics=IP:PORT`) and `shoal status`, on an
# embedded mount and on two mounts of an etcd namespace (a three-member
# cluster started here, ports 24701-24713; file data in a file:// object
# store). Each endpoint is scraped before and after some work and parsed
# by the Prometheus project's own Python parser
# (prometheus_client.parser.text_string_to_metric_families, Debian's
# python3-prometheus-client), and the counters must have moved with the
# work done; `shoal status --json` must show the mounts (host, pid, since,
# version), a file held open past its unlink, a flock lock and, on etcd,
# a directory lease.
source "$(dirname "$0")/lib.sh"
fail() { echo "metrics: $*"; exit 1; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# Debian's python3 has the parser (a python3 earlier in PATH may not).
PY=/usr/bin/python3
$PY -c 'import prometheus_client.parser' 2>/dev/null || PY=python3
$PY -c 'import prometheus_client.parser' || fail "no prometheus_client: scripts/install-deps.sh --tests installs it"
PE=24791 PA=24792
D=$WORK/metrics-cluster; A=$WORK/ma.mnt; B=$WORK/mb.mnt
unmount_stale "$A" "$B" "$WORK/metrics.mnt" "$WORK/metrics2.mnt"
cleanup() {
  exec 7<&- 8<&- 9>&-
  for m in "$A" "$B" "$WORK/metrics.mnt" "$WORK/metrics2.mnt"; do
    grep -qs " $m " /proc/mounts && { "$SHOAL" umount "$m" || umount -l "$m"; }
  done
  [ -d "$D" ] && bash "$ROOT/scripts/etcd-cluster.sh" stop "$D"
  return 0
}
trap cleanup EXIT

# scrape PORT FILE: the endpoint's text into FILE.
scrape() {
  $PY -c 'import sys, urllib.request
r = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10)
assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers["Content-Type"]
sys.stdout.write(r.read().decode())' "$1" >"$2" || fail "scrape of port $1"
}

# compare BEFORE AFTER CHECKS...: parse both scrapes with the Prometheus
# parser and check each "SAMPLE{LABELS} OP N": the sample's growth from
# BEFORE to AFTER (OP is >= or ==), or with OP "now>=" its value in AFTER.
compare() {
  $PY - "$@" <<'EOF'
import sys
from prometheus_client.parser import text_string_to_metric_families as parse
def load(path):
    out, fams = {}, {}
    for f in parse(open(path).read()):
        fams[f.name] = f.type
        for s in f.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out, fams
(before, _), (after, fams) = load(sys.argv[1]), load(sys.argv[2])
bad = []
# Every histogram's buckets are cumulative and end at +Inf == _count.
for (name, labels), v in after.items():
    if name.endswith("_count") and fams.get(name[:-6]) == "histogram":
        inf = after[(name[:-6] + "_bucket", tuple(sorted(dict(labels, le="+Inf").items())))]
        if inf != v:
            bad.append(f"{name}{dict(labels)}: +Inf bucket {inf} != count {v}")
for check in sys.argv[3:]:
    key, op, want = check.rsplit(" ", 2)
    name, _, lab = key.partition("{")
    labels = tuple(sorted(dict(kv.split("=", 1) for kv in lab.rstrip("}").split(",") if kv).items()))
    if (name, labels) not in after:
        bad.append(f"{key}: not in the scrape")
        continue
    a, b = after[(name, labels)], before.get((name, labels), 0.0)
    got = a if op == "now>=" else a - b
    ok = got >= float(want) if op in (">=", "now>=") else got == float(want)
    print(f"  {key}: {b:g} -> {a:g} ({op} {want}: {'ok' if ok else 'NO'})")
    if not ok:
        bad.append(f"{key}: {b} -> {a}, wanted {op} {want}")
print(f"  parsed {len(fams)} metric families, {len(after)} samples")
if bad:
    sys.exit("\n".join(bad))
EOF
}

# --- An embedded mount ----------------------------------------------------
err=$("$SHOAL" mount "$WORK" "$WORK" -o metrics=nowhere 2>&1) && fail "metrics=nowhere was taken"
[[ $err == *"use metrics=ADDR:PORT"* ]] || fail "bad address message: $err"
M=$(mount_fresh metrics "allow_other,metrics=127.0.0.1:$PE")
S=$WORK/metrics.store
scrape $PE "$WORK/m0.txt"
mkdir "$M/d"
for i in $(seq 200); do echo "file $i" >"$M/d/f$i"; done
head -c 100000 /dev/urandom >"$M/big"
for i in $(seq 50); do mv "$M/d/f$i" "$M/d/g$i"; done
rm "$M"/d/g*
ls -l "$M/d" >/dev/null
"$SHOAL" sync "$M"
scrape $PE "$WORK/m1.txt"
echo "embedded mount:"
compare "$WORK/m0.txt" "$WORK/m1.txt" \
  'shoal_ops_total{op=create} >= 200' 'shoal_ops_total{op=unlink} >= 50' \
  'shoal_ops_total{op=rename} >= 50' 'shoal_ops_total{op=mkdir} >= 1' \
  'shoal_ops_total{op=write} >= 200' \
  'shoal_fuse_requests_total{request=create} >= 200' \
  'shoal_commits_total >= 1' 'shoal_commit_keys_total >= 200' 'shoal_commit_size_keys_count >= 1' \
  'shoal_store_writes_total >= 1' 'shoal_lock_acquired_total{class=name} >= 200' \
  'shoal_op_latency_seconds_count{op=create} >= 1' \
  'shoal_process_resident_memory_bytes now>= 1000000' 'shoal_cache_inodes now>= 150' \
  'shoal_build_info{kind=embedded,version='"$("$SHOAL" --version | head -1 | cut -d' ' -f2)"'} now>= 1' \
  || fail "the embedded mount's counters"
# One source of truth: `shoal stats --json` read after the scrape shows at
# least what the scrape did.
creates=$("$SHOAL" stats "$M" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["ops"]["create"]["count"])')
scraped=$(awk '/^shoal_ops_total\{op="create"\}/ {print $2}' "$WORK/m1.txt")
[ "$creates" -ge "${scraped%.*}" ] || fail "stats shows $creates creates, the scrape $scraped"
code=$($PY -c 'import urllib.request, urllib.error
try: urllib.request.urlopen("http://127.0.0.1:'$PE'/nothing")
except urllib.error.HTTPError as e: print(e.code)')
[ "$code" = 404 ] || fail "a path other than /metrics answered $code"
rm -rf "$WORK/metrics2.store"; mkdir -p "$WORK/metrics2.mnt"; "$SHOAL" mkfs "$WORK/metrics2.store" >/dev/null
err=$("$SHOAL" mount -d "$WORK/metrics2.store" "$WORK/metrics2.mnt" -o metrics=127.0.0.1:$PE 2>&1) \
  && fail "a second daemon took the metrics port"
[[ $err == *"metrics=127.0.0.1:$PE: cannot listen there"* ]] || fail "port in use message: $err"

# shoal status of the mounted store: the daemon, a file open past its
# unlink, a flock lock.
echo held >"$M/held"; held=$(stat -c %i "$M/held")
exec 7<"$M/held"; rm "$M/held"
touch "$M/lockme"; locked=$(stat -c %i "$M/lockme")
# The lock is this shell's (fd 9), so that closing fd 9 drops it.
exec 9>"$M/lockme"; flock -x 9
"$SHOAL" status "$S" --json >"$WORK/status-e.json" || fail "status of a mounted store"
"$SHOAL" status "$M" | grep -q "^store $S: format 3" || fail "status (text) of a mounted store, by its mountpoint"
$PY - "$WORK/status-e.json" "$(cat "$S/daemon.pid")" "$held" "$locked" "$M" <<'EOF' || fail "status of the embedded mount"
import json, sys
v = json.load(open(sys.argv[1])); pid, held, locked, mnt = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
assert v["kind"] == "embedded" and v["store"]["format"] >= 3, v
[m] = v["mounts"]
assert m["mountpoint"] == mnt and m["pid"] == pid and m["since"] > 1.7e9 and m["version"] and m["host"], m
assert held in v["store"]["open_unlinked"], (held, v["store"])
assert any(l["inode"] == locked and l["kind"] == "flock" and l["mode"] == "write" for l in m["locks"]), m["locks"]
assert v["store"]["inodes_used"] >= 150, v["store"]
print("  status: pid %d since %d, open past unlink %s, locks %s" % (m["pid"], m["since"], v["store"]["open_unlinked"], m["locks"]))
EOF
exec 7<&- 9>&-
unmount_check metrics >/dev/null || fail "fsck after the metrics mount"
"$SHOAL" status "$S" --json | $PY -c 'import json,sys; v=json.load(sys.stdin); assert v["mounts"]==[] and v["store"]["format"]>=3, v' \
  || fail "status of an unmounted store"

# --- Two mounts of an etcd namespace --------------------------------------
EPS=$(bash "$ROOT/scripts/etcd-cluster.sh" start "$D" 24700)
U=etcd://$EPS/metrics
rm -rf "$WORK/metrics-objects"; mkdir -p "$WORK/metrics-objects" "$A" "$B"
"$SHOAL" mkfs "$U" --data "file://$WORK/metrics-objects" >/dev/null
"$SHOAL" mount -d "$U" "$A" -o metrics=127.0.0.1:$PA >/dev/null
"$SHOAL" mount -d "$U" "$B" >/dev/null
scrape $PA "$WORK/e0.txt"
mkdir "$A/many"
for i in $(seq 100); do : >"$A/many/f$i"; done
head -c 300000 /dev/urandom >"$A/big"
cat "$B/big" >/dev/null
mkdir "$A/other"; for i in $(seq 20); do echo $i >"$A/other/x$i"; done; rm "$A"/other/x*
stat "$A"/many/f1 "$A"/many/f2 >/dev/null
"$SHOAL" sync "$A"
scrape $PA "$WORK/e1.txt"
echo "etcd mount:"
compare "$WORK/e0.txt" "$WORK/e1.txt" \
  'shoal_ops_total{op=create} >= 120' 'shoal_ops_total{op=unlink} >= 20' 'shoal_ops_total{op=mkdir} >= 2' \
  'shoal_op_latency_seconds_count{op=create} >= 1' \
  'shoal_shared_ops_total >= 20' 'shoal_shared_commits_total >= 1' \
  'shoal_dirlease_creates_total >= 1' 'shoal_dirlease_taken_total >= 1' \
  'shoal_dirlease_removals_total >= 1' \
  'shoal_object_requests_total{op=put,result=ok} >= 1' 'shoal_object_requests_total{op=put,result=error} == 0' \
  'shoal_shared_conflicts_total >= 0' 'shoal_shared_retries_total{reason=unknown} >= 0' \
  'shoal_dirlease_held_ranges now>= 1' \
  'shoal_process_resident_memory_bytes now>= 1000000' \
  || fail "the etcd mount's counters"

# shoal stats of the etcd mount reads the same counters, per operation too.
# The creates run until stats has its samples: on a busy machine a fixed
# batch of 200 could end before, or start after, stats' window (CI met
# a window with no creates: "ops/s 0").
(i=0; while [ $i -lt 20000 ]; do i=$((i+1)); : >"$A/many/s$i"; done) &
CREATOR=$!
"$SHOAL" stats "$A" --count 3 --interval 0.3 >"$WORK/stats-e.txt"
kill $CREATOR 2>/dev/null; wait $CREATOR 2>/dev/null || true
grep -q "by operation: .*create [0-9]*/s p50" "$WORK/stats-e.txt" || { cat "$WORK/stats-e.txt"; fail "shoal stats by operation on an etcd mount"; }

# shoal status of the namespace: both sessions, A's lease on many/, a
# file open on A past its unlink, a flock lock taken through B.
echo held >"$A/held"; held=$(stat -c %i "$A/held")
exec 8<"$A/held"; rm "$A/held"
touch "$A/lockme"; locked=$(stat -c %i "$A/lockme")
exec 9>"$B/lockme"; flock -x 9
for _ in $(seq 50); do
  "$SHOAL" status "$U" --json >"$WORK/status-n.json" && grep -q '"locks":\[{' "$WORK/status-n.json" && break
  sleep 0.1
done
"$SHOAL" status "$U" || fail "status (text) of the namespace"
"$SHOAL" status "$B" | grep -q "^mounts: 2" || fail "status (text) of the namespace, by a mountpoint"
pa=$(pgrep -f "shoal mount $U $A --background-child"); pb=$(pgrep -f "shoal mount $U $B --background-child")
$PY - "$WORK/status-n.json" "$pa" "$pb" "$held" "$locked" "$A" "$B" <<'EOF' || fail "status of the etcd namespace"
import json, sys
v = json.load(open(sys.argv[1])); pa, pb, held, locked = map(int, sys.argv[2:6]); a, b = sys.argv[6:8]
assert v["kind"] == "etcd" and v["format"] == 1 and v["data"].startswith("file://"), v
by = {m["mountpoint"]: m for m in v["mounts"]}
assert set(by) == {a, b}, by
assert by[a]["pid"] == pa and by[b]["pid"] == pb, by
for m in by.values():
    assert m["since"] > 1.7e9 and m["version"] and m["host"], m
assert held in by[a]["open_unlinked"], by[a]
assert any(o["inode"] == held and o["session"] == by[a]["session"] for o in v["open_unlinked"]), v["open_unlinked"]
assert any(l["inode"] == locked and l["kind"] == "flock" and l["session"] == by[b]["session"] for l in v["locks"]), v["locks"]
assert any(l["session"] == by[a]["session"] for l in v["directory_leases"]), v["directory_leases"]
assert v["inodes"]["total"] >= 100 and v["space"]["file_bytes"] >= 300000, (v["inodes"], v["space"])
print("  status: %d mounts, %d unlinked kept, locks %s, %d directory leases"
      % (len(by), len(v["open_unlinked"]), v["locks"], len(v["directory_leases"])))
EOF
exec 8<&- 9>&-
"$SHOAL" umount "$B"; "$SHOAL" umount "$A"
"$SHOAL" status "$U" --json | $PY -c 'import json,sys; v=json.load(sys.stdin); assert v["mounts"]==[] and v["locks"]==[], v' \
  || fail "status once both mounts ended their sessions"
echo "metrics: ok"
