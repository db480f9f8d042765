#!/usr/bin/env bash
# What the tree's tar walk asks of the store: untar the kernel tarball into a
# fresh shoal mount (default options), then time `tar -cf /dev/null` over it
# and print the daemon's operation and store-read counts for the walk alone
# (from `shoal stats --json` before and after). Usage, as root:
#   [OPTS=mount,options] bash bench-results/run10/reclaim/tar-reads.sh SHOAL_BINARY [TARBALL]
set -euo pipefail
B=$1; T=${2:-/var/tmp/shoal-bench-linux.tar}
S=/var/tmp/shoal-tar-reads.store; M=/tmp/shoal-tar-reads.mnt
umount $M 2>/dev/null || true; rm -rf $S; mkdir -p $M
$B mkfs $S >/dev/null; $B mount -d $S $M -o allow_other${OPTS:+,$OPTS} >/dev/null
trap '$B umount $M >/dev/null 2>&1 || umount -l $M; rm -rf $S' EXIT
mkdir $M/a; tar -xf $T -C $M/a
$B stats $M --json > $S.0.json
t0=$(date +%s.%N); tar -cf /dev/null -C $M/a .; t1=$(date +%s.%N)
$B stats $M --json > $S.1.json
python3 - $S.0.json $S.1.json "$(python3 -c "print(round($t1-$t0,2))")" "$B" <<'PY'
import json, sys
def flat(d, p=''):
    out = {}
    if isinstance(d, dict):
        for k, v in d.items(): out.update(flat(v, p + k + '.'))
    elif isinstance(d, (int, float)): out[p[:-1]] = d
    return out
a, b = (flat(json.load(open(f))) for f in sys.argv[1:3])
d = lambda k: b.get(k, 0) - a.get(k, 0)
print(f"{sys.argv[4]}: tar {sys.argv[3]} s; getattr {d('ops.getattr.count')}, lookup {d('ops.lookup.count')}, readdir {d('ops.readdir.count')}; "
      f"store gets {d('store.gets')}, scans {d('store.scans')}; evicted entries {d('cache.evicted_dents')}, inodes {d('cache.evicted_inodes')}")
PY
rm -f $S.0.json $S.1.json
