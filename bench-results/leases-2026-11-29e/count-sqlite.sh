#!/usr/bin/env bash
# usage: count-sqlite.sh SHOAL [N]   one SQLite writer on an etcd mount; per-tx counters
set -euo pipefail
S=$1; N=${2:-200}; B=${W:-/tmp/shoal-count}
cd "$(dirname "$0")/../.."
for m in $B/m1; do grep -qs " $m " /proc/mounts && umount -l $m; done
bash scripts/etcd-cluster.sh stop $B/etcd 2>/dev/null || true
rm -rf $B; mkdir -p $B/m1 $B/data
EPS=$(bash scripts/etcd-cluster.sh start $B/etcd 27800)
$S mkfs etcd://$EPS/x --data file://$B/data >/dev/null
$S mount -d etcd://$EPS/x $B/m1 >/dev/null
python3 - $B/m1/one.db 20 <<'P'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1]); db.execute("create table t (i int)"); db.commit()
for i in range(int(sys.argv[2])):
    with db: db.execute("insert into t values (?)", (i,))
P
$S stats $B/m1 --json > $B/s0.json
python3 - $B/m1/one.db $N <<'P'
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1]); n=int(sys.argv[2]); t=time.time()
for i in range(n):
    with db: db.execute("insert into t values (?)", (i,))
print(f"tx/s {n/(time.time()-t):.1f}")
P
$S stats $B/m1 --json > $B/s1.json
python3 - $B/s0.json $B/s1.json $N <<'P'
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
    if d and any(s in k for s in ("cluster","etcd","store","blob","commit","read","lease","conflict","cache","guess","merge","object")):
        print(f"{k:50s} {d/n:8.2f}")
P
python3 -c "import sqlite3; print(sqlite3.connect('$B/m1/one.db').execute('pragma integrity_check').fetchone())"
umount -l $B/m1; bash scripts/etcd-cluster.sh stop $B/etcd
