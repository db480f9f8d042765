#!/usr/bin/env bash
# File locks and rm -rf on etcd mounts, two builds side by side in one run
# (issue 46: lock leases, unlinks under a directory lease):
#   bash scripts/bench-etcd-leases.sh BASE_SHOAL NEW_SHOAL [ROUNDS] [PORT_BASE] [DIR]
# One 3-member etcd cluster (scripts/etcd-cluster.sh, clients on
# PORT_BASE+1..3, default 24500), file data in a local directory (file://).
# Each build gets its own namespace and two mounts of it; the rounds
# alternate between the builds. Per round and build:
#   - one process locking and unlocking one file (lockf), pairs/s;
#   - one SQLite writer, 300 single-row transactions (rollback journal), tx/s;
#   - two SQLite writers of one database, one through each mount, 200 rows
#     each (tests/scripts/sqlite-two-writers.py), tx/s in all;
#   - rm -rf of the kernel's Documentation/ (untarred first, not timed, from
#     Debian's linux-source as scripts/bench-etcd.sh does), entries/s.
set -euo pipefail
BASE=$(realpath "$1"); NEW=$(realpath "$2"); ROUNDS=${3:-2}; PB=${4:-24500}
B=${5:-/tmp/shoal-bench-leases}
cd "$(dirname "$0")/.."
R=$PWD
TAR=/var/tmp/shoal-bench-linux.tar
if [ ! -s "$TAR" ]; then xz -dc "$(ls /usr/src/linux-source-*.tar.xz | head -1)" > "$TAR"; fi
SUB=$( (tar tf "$TAR" 2>/dev/null || true) | awk -F/ 'NR == 1 { print $1; exit }')/Documentation
N=$(tar tf "$TAR" "$SUB" | wc -l)
down() {
  for m in "$B"/base1 "$B"/base2 "$B"/new1 "$B"/new2; do grep -qs " $m " /proc/mounts && umount -l "$m"; done
  bash scripts/etcd-cluster.sh stop "$B/etcd" 2>/dev/null || true
}
down; rm -rf "$B"; mkdir -p "$B"/{base1,base2,new1,new2,database,datanew}
EPS=$(bash scripts/etcd-cluster.sh start "$B/etcd" "$PB")
trap down EXIT
for b in base new; do
  S=$BASE; [ $b = new ] && S=$NEW
  "$S" mkfs "etcd://$EPS/$b" --data "file://$B/data$b" >/dev/null
  "$S" mount -d "etcd://$EPS/$b" "$B/${b}1" >/dev/null
  "$S" mount -d "etcd://$EPS/$b" "$B/${b}2" >/dev/null
done
echo "# $(date -u +%FT%TZ) git $(git rev-parse --short HEAD); etcd 3 members on loopback ($EPS), file data in a local directory; base=$BASE new=$NEW; $(nproc) cores"
lockpairs() {  # MNT: pairs/s
  python3 - "$1/lp" <<'EOF'
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
n = 2000; t = time.time()
for i in range(n):
    fcntl.lockf(fd, fcntl.LOCK_EX); fcntl.lockf(fd, fcntl.LOCK_UN)
dt = time.time() - t
print(f"{n/dt:.0f} {dt/n*1e3:.3f}")
EOF
}
sqlite_one() {  # MNT: tx/s
  python3 - "$1/one.db" 300 <<'EOF'
import os, sqlite3, sys, time
path, n = sys.argv[1], int(sys.argv[2])
for f in (path, path + "-journal"):
    if os.path.exists(f): os.remove(f)
db = sqlite3.connect(path); db.execute("create table t (i int)"); db.commit()
t = time.time()
for i in range(n):
    with db: db.execute("insert into t values (?)", (i,))
print(f"{n/(time.time()-t):.1f}")
EOF
}
sqlite_two() {  # MNT1 MNT2: tx/s in all
  rm -f "$1/two.db" "$1/two.db-journal"
  local t0 t1
  t0=$(date +%s.%N)
  python3 tests/scripts/sqlite-two-writers.py "$1/two.db" "$2/two.db" 200 >/dev/null
  t1=$(date +%s.%N)
  echo "400 / ($t1 - $t0)" | bc -l | xargs printf '%.1f'
}
rmrf() {  # MNT: entries/s, seconds
  rm -rf "$1/doc"; mkdir -p "$1/doc"
  tar xf "$TAR" -C "$1/doc" "$SUB"; sync
  local t0 t1
  t0=$(date +%s.%N); rm -rf "$1/doc"; t1=$(date +%s.%N)
  printf '%.0f %.2f' "$(echo "$N / ($t1 - $t0)" | bc -l)" "$(echo "$t1 - $t0" | bc -l)"
}
printf '%-5s %-4s %18s %12s %12s %22s\n' round fs "lock pairs/s (ms)" "sqlite 1 tx/s" "sqlite 2 tx/s" "rm -rf $N entries/s (s)"
for r in $(seq "$ROUNDS"); do
  for b in base new; do
    read -r lp ms <<<"$(lockpairs "$B/${b}1")"
    one=$(sqlite_one "$B/${b}1")
    two=$(sqlite_two "$B/${b}1" "$B/${b}2")
    read -r rps secs <<<"$(rmrf "$B/${b}1")"
    printf '%-5s %-4s %11s (%5s) %12s %12s %14s (%5s)\n' "$r" $b "$lp" "$ms" "$one" "$two" "$rps" "$secs"
  done
done
"$NEW" fsck "etcd://$EPS/new" | tail -2
