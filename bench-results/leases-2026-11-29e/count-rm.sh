#!/usr/bin/env bash
set -euo pipefail
S=$1; B=${W:-/tmp/shoal-count}
cd "$(dirname "$0")/../.."
grep -qs " $B/m1 " /proc/mounts && umount -l $B/m1
bash scripts/etcd-cluster.sh stop $B/etcd 2>/dev/null || true
rm -rf $B; mkdir -p $B/m1 $B/data
EPS=$(bash scripts/etcd-cluster.sh start $B/etcd 27800)
$S mkfs etcd://$EPS/x --data file://$B/data >/dev/null
$S mount -d etcd://$EPS/x $B/m1 >/dev/null
TAR=/var/tmp/shoal-bench-linux.tar; SUB=linux-source-6.1/Documentation
tar xf $TAR -C $B/m1 $SUB; sync
$S stats $B/m1 --json > $B/s0.json
t0=$(date +%s.%N); rm -rf $B/m1/*; t1=$(date +%s.%N)
$S stats $B/m1 --json > $B/s1.json
echo "rm -rf: $(echo "$t1 - $t0" | bc) s"
python3 - $B/s0.json $B/s1.json 9500 <<'P'
import json, sys
a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); n=int(sys.argv[3])
def flat(d, p=""):
    out={}
    for k,v in d.items():
        if isinstance(v, dict): out.update(flat(v, p+k+"."))
        elif isinstance(v,(int,float)): out[p+k]=v
    return out
fa, fb = flat(a), flat(b)
for k in sorted(fb):
    d = fb[k]-fa.get(k,0)
    if d and ("shared" in k or ".count" in k) and "ns" not in k:
        print(f"{k:50s} {d:8.0f}")
P
echo "left: $(find $B/m1 -mindepth 1 | wc -l)"; umount $B/m1; sleep 1; $S fsck etcd://$EPS/x 2>&1 | tail -2; bash scripts/etcd-cluster.sh stop $B/etcd
