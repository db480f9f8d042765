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
python3 - $B/m1 <<'P'
import os, sys, time
d=sys.argv[1]
fd=os.open(d+"/f", os.O_RDWR|os.O_CREAT, 0o644)
os.write(fd, b"x"*20000); os.fsync(fd)
ts=[]
for i in range(200):
    os.pwrite(fd, b"y"*4096, 8192); t=time.perf_counter(); os.fsync(fd); ts.append(time.perf_counter()-t)
ts.sort(); print("fsync of a 4k write: p50 %.2f ms p90 %.2f ms" % (ts[100]*1e3, ts[180]*1e3))
ts=[]
for i in range(200):
    t=time.perf_counter(); os.chmod(d+"/f", 0o600 if i%2 else 0o644); ts.append(time.perf_counter()-t)
ts.sort(); print("chmod: p50 %.2f ms p90 %.2f ms" % (ts[100]*1e3, ts[180]*1e3))
P
umount -l $B/m1; bash scripts/etcd-cluster.sh stop $B/etcd
