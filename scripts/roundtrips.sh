#!/usr/bin/env bash
# FUSE round trips per entry for `ls -lR` and `find -type f | xargs stat`
# over a tree of DIRS x PER empty files (default 100 x 1000 = 100k), read
# from the daemon's request counters (`shoal stats --json`). Each listing
# runs twice: cold (right after a remount: the kernel caches nothing) and
# warm (again, entries and attributes still in the kernel's cache).
# MOUNT_OPTS picks the mount options (e.g. allow_other,noreaddirplus).
set -euo pipefail
cd "$(dirname "$0")/.."
S=${SHOAL:-$PWD/target/release/shoal}
DIRS=${DIRS:-100}
PER=${PER:-1000}
OPTS=${MOUNT_OPTS:-allow_other}
W=${WORK:-/var/tmp/shoal-roundtrips}
store=$W/store mnt=$W/mnt
cleanup() { "$S" umount "$mnt" 2>/dev/null || true; }
trap cleanup EXIT
mkdir -p "$W"; cleanup; rm -rf "$store"; mkdir -p "$mnt"
"$S" mkfs "$store" >/dev/null
"$S" mount -d "$store" "$mnt" -o "$OPTS" >/dev/null
mkdir "$mnt/t"
for d in $(seq "$DIRS"); do
  mkdir "$mnt/t/d$d"
  (cd "$mnt/t/d$d" && seq -f "f%g" 1 "$PER" | xargs touch)
done
remount() { "$S" umount "$mnt"; "$S" mount -d "$store" "$mnt" -o "$OPTS" >/dev/null; }
snap() { "$S" stats --json "$mnt"; }
entries=$((DIRS * PER + DIRS))
report() { # NAME BEFORE AFTER SECONDS
  python3 - "$1" "$2" "$3" "$4" "$entries" <<'EOF'
import json, sys
name, a, b, secs, n = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
fa, fb = a.get("fuse_requests", {}), b.get("fuse_requests", {})
d = {k: fb[k] - fa.get(k, 0) for k in fb if fb[k] - fa.get(k, 0) > 0}
total = sum(v for k, v in d.items() if k != "forget")
parts = "  ".join(f"{k} {v / n:.3f}" for k, v in sorted(d.items(), key=lambda kv: -kv[1]))
print(f"{name:<24} {secs:>7.2f} s  {total / n:6.3f} requests/entry   ({parts})")
EOF
}
run() { # NAME CMD
  local s0 s1 t0 t1
  s0=$(snap); t0=$(date +%s.%N)
  bash -c "$2" >/dev/null
  t1=$(date +%s.%N); s1=$(snap)
  report "$1" "$s0" "$s1" "$(echo "$t1 - $t0" | bc -l)"
}
echo "tree: $DIRS directories x $PER files = $entries entries; mount options $OPTS"
remount
run "ls -lR (cold)" "ls -lR $mnt/t"
run "ls -lR (warm)" "ls -lR $mnt/t"
remount
run "find|xargs stat (cold)" "find $mnt/t -type f | xargs stat"
run "find|xargs stat (warm)" "find $mnt/t -type f | xargs stat"
