#!/usr/bin/env bash
set -euo pipefail
S=$1; N=${2:-200}; B=${W:-/tmp/shoal-count2}
cd "$(dirname "$0")/../.."
for m in $B/m1 $B/m2; do grep -qs " $m " /proc/mounts && umount -l $m; done
bash scripts/etcd-cluster.sh stop $B/etcd 2>/dev/null || true
rm -rf $B; mkdir -p $B/m1 $B/m2 $B/data
EPS=$(bash scripts/etcd-cluster.sh start $B/etcd 27700)
$S mkfs etcd://$EPS/x --data file://$B/data >/dev/null
$S mount -d etcd://$EPS/x $B/m1 >/dev/null
$S mount -d etcd://$EPS/x $B/m2 >/dev/null
$S stats $B/m1 --json > $B/a0.json; $S stats $B/m2 --json > $B/b0.json
t0=$(date +%s.%N)
python3 tests/scripts/sqlite-two-writers.py $B/m1/db $B/m2/db $N
t1=$(date +%s.%N); echo "tx/s in all: $(echo "2*$N/($t1-$t0)" | bc -l | cut -c1-6)"
$S stats $B/m1 --json > $B/a1.json; $S stats $B/m2 --json > $B/b1.json
python3 - $B $N <<'P'
import json, sys
B, n = sys.argv[1], int(sys.argv[2])
def flat(d, p=""):
    out={}
    for k,v in d.items():
        if isinstance(v, dict): out.update(flat(v, p+k+"."))
        elif isinstance(v,(int,float)): out[p+k]=v
    return out
for m in "ab":
    a=flat(json.load(open(f"{B}/{m}0.json"))); b=flat(json.load(open(f"{B}/{m}1.json")))
    ks=["shared.leases_taken","shared.leases_given","shared.lease_waits","shared.lease_batches","shared.lease_creates","shared.lease_removals","shared.ops","shared.commits","shared.reads","shared.guesses","shared.conflicts","shared.data_merges","shared.lock_leases_taken","shared.lock_leases_given","shared.lock_lease_answers","shared.lock_lease_waits","shared.object_puts","shared.object_gets","ops.getlk.count","ops.setlk.count","ops.setlkw.count"]
    print(m, "  ".join(f"{k.split('.')[-1] if not k.startswith('ops') else k.split('.')[1]}={(b.get(k,0)-a.get(k,0))/n:.2f}" for k in ks))
P
umount -l $B/m1; umount -l $B/m2; bash scripts/etcd-cluster.sh stop $B/etcd
