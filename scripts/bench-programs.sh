#!/usr/bin/env bash
# Real programs on a shoal mount (default settings, allow_other) beside ext4
# on a loop device (its image a file on the same disk), and beside the floor
# (the minimal in-memory FUSE filesystem, no durability) where it applies,
# in one run, rounds alternated, each round on fresh filesystems:
#   untar of the Linux tree, `git add -f .` and `git commit` of it, warm
#   `git status` (RUNS each, GAP s idle before each), `make -j2 fs/ext4/`
#   after defconfig and again with nothing to do, PostgreSQL pgbench
#   (initdb, -i -s PG_SCALE, -c PG_CLIENTS -T PG_TIME), SQLite autocommit
#   inserts in rollback-journal and WAL mode.
# One JSON line per measurement in OUT/programs.jsonl, a table at the end
# (docs/BENCHMARKS.md, "Real programs"). Needs root, postgresql, sqlite3, git.
#   scripts/bench-programs.sh
# Environment:
#   PARTS      what to run (tree pgbench sqlite)
#   TARGETS    (ext4 shoal floor); the floor runs the tree part only
#   ROUNDS     rounds, the order of the targets reversed every other (2)
#   RUNS, GAP  warm `git status` runs per round (3), seconds idle before each (2)
#   BUILD      1: the tree part ends with `make defconfig` and `make -j2
#              fs/ext4/` in the tree, timed, then again with nothing to do (1)
#   PG_SCALE PG_CLIENTS PG_TIME   pgbench's -s (10), -c (4), -T (60)
#   SQLITE_N   autocommit inserts per SQLite mode (1500)
#   SHOAL_OPTS options added to the shoal mount's; SHOAL the binary
#   SHOAL_BEFORE another build, mounted as target shoal-before (add it to
#              TARGETS) with the same options: a change before and after
#   TREE_TAR   the tree (default the Debian linux-source tarball)
#   DIR        images, stores, mounts (/var/tmp/shoal-programs)
#   STORE_FS   dir: shoal's stores in DIR, on its filesystem (the default);
#              ext4: each on a fresh ext4 image of its own, as the ext4
#              target's (the host filesystem under a store matters: an ext4
#              without a journal that deleted many inodes lately scans
#              them at each new data object, `recently_deleted`)
#   PG_PORT    PostgreSQL's port (26310; its socket is in DIR)
#   OUT        bench-results/programs-DATE
set -euo pipefail
cd "$(dirname "$0")/.."
SHOAL=${SHOAL:-$PWD/target/release/shoal}
FLOOR=${FLOOR:-$PWD/target/release/shoal-floor}
PARTS=${PARTS:-tree pgbench sqlite}
TARGETS=${TARGETS:-ext4 shoal floor}
ROUNDS=${ROUNDS:-2}
RUNS=${RUNS:-3}
GAP=${GAP:-2}
BUILD=${BUILD:-1}
PG_SCALE=${PG_SCALE:-10}
PG_CLIENTS=${PG_CLIENTS:-4}
PG_TIME=${PG_TIME:-60}
SQLITE_N=${SQLITE_N:-1500}
PG_PORT=${PG_PORT:-26310}
DIR=${DIR:-/var/tmp/shoal-programs}
STORE_FS=${STORE_FS:-dir}
OUT=${OUT:-bench-results/programs-$(date -u +%F)}
TREE_TAR=${TREE_TAR:-$(ls /usr/src/linux-source-*.tar.xz 2>/dev/null | head -1)}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
mkdir -p "$DIR" "$OUT"
OUT=$(cd "$OUT" && pwd)
JSON=$OUT/programs.jsonl
GIT_REV=$(git rev-parse --short HEAD)
has() { [[ " $1 " == *" $2 "* ]]; }
if has "$TARGETS" floor && [ ! -x "$FLOOR" ]; then
  cargo build --release -q -p shoal-bench --features floor --bin shoal-floor
fi
if has "$PARTS" pgbench && [ -z "$PGBIN" ]; then
  apt-get install -y -qq postgresql >/dev/null; PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
fi
command -v sqlite3 >/dev/null || apt-get install -y -qq sqlite3 >/dev/null
git config --global --get user.email >/dev/null || git config --global user.email bench@localhost
git config --global --get user.name >/dev/null || git config --global user.name bench
git config --global --get-all safe.directory | grep -qx '\*' || git config --global --add safe.directory '*'

M() { echo "$DIR/$1.mnt"; }
bin_of() { if [ "$1" = shoal-before ]; then echo "$SHOAL_BEFORE"; else echo "$SHOAL"; fi; }
pg_stop() { # the server whose data directory is under $1, if any
  [ -f "$1/pg/data/postmaster.pid" ] || return 0
  su postgres -c "$PGBIN/pg_ctl -D '$1/pg/data' -m immediate -w stop" >/dev/null 2>&1 || true
}
down() { # down TARGET: its filesystem unmounted and gone
  local m; m=$(M "$1")
  pg_stop "$m"
  if mountpoint -q "$m"; then
    case $1 in
      ext4) umount "$m" ;;
      shoal*) for _ in $(seq 50); do "$(bin_of "$1")" umount "$m" 2>/dev/null && break; sleep 0.2; done ;;
      floor) fusermount3 -u "$m" 2>/dev/null || umount -l "$m" ;;
    esac
  fi
  case $1 in
    ext4) for l in $(losetup -j "$DIR/ext4.img" -O NAME --noheadings 2>/dev/null); do losetup -d "$l"; done
          rm -f "$DIR/ext4.img" ;;
    shoal*) rm -rf "$DIR/$1.store"
            if mountpoint -q "$DIR/$1.host"; then umount "$DIR/$1.host"; fi
            rm -f "$DIR/$1.img" ;;
  esac
}
up() { # up TARGET: a fresh, empty filesystem of that kind at $(M TARGET)
  local m; m=$(M "$1"); down "$1"; mkdir -p "$m"
  case $1 in
    ext4) truncate -s 16G "$DIR/ext4.img"; mkfs.ext4 -q -F "$DIR/ext4.img"; mount -o loop "$DIR/ext4.img" "$m" ;;
    shoal*) local st=$DIR/$1.store
            if [ "$STORE_FS" = ext4 ]; then
              truncate -s 16G "$DIR/$1.img"; mkfs.ext4 -q -F "$DIR/$1.img"
              mkdir -p "$DIR/$1.host"; mount -o loop "$DIR/$1.img" "$DIR/$1.host"
              st=$DIR/$1.host/store
            fi
            "$(bin_of "$1")" mkfs "$st" >/dev/null
            "$(bin_of "$1")" mount -d "$st" "$m" -o "allow_other${SHOAL_OPTS:+,$SHOAL_OPTS}" >/dev/null ;;
    floor) setsid "$FLOOR" "$m" >/dev/null 2>&1 </dev/null &
           for _ in $(seq 100); do mountpoint -q "$m" && break; sleep 0.05; done ;;
  esac
  chmod 777 "$m"
}
cleanup() { for t in $TARGETS; do down "$t" 2>/dev/null || true; done; }
trap cleanup EXIT

# emit WORKLOAD TARGET ROUND VALUE UNIT [EXTRA-JSON-FIELDS]
emit() {
  printf '{"bench":"programs","workload":"%s","target":"%s","round":%s,"value":%s,"unit":"%s","git":"%s","store_fs":"%s","date":"%s"%s}\n' \
    "$1" "$2" "$3" "$4" "$5" "$GIT_REV" "$STORE_FS" "$(date -u +%FT%TZ)" "${6:+,$6}" | tee -a "$JSON"
}
# FUSE requests the shoal daemon answered so far, as "name count" lines.
reqs() { case $1 in shoal*) ;; *) return 0 ;; esac; "$(bin_of "$1")" stats "$(M "$1")" --json | python3 -c '
import json, sys
for k, v in json.load(sys.stdin)["fuse_requests"].items(): print(k, v)'; }
# reqs_json BEFORE AFTER PER: the requests between, per PER (a JSON field).
reqs_json() {
  python3 - "$1" "$2" "$3" <<'EOF'
import sys
def rd(p):
    d = {}
    for l in open(p):
        k, v = l.split(); d[k] = int(v)
    return d
a, b, per = rd(sys.argv[1]), rd(sys.argv[2]), float(sys.argv[3])
d = {k: round((b[k] - a.get(k, 0)) / per, 2) for k in b if b[k] != a.get(k, 0)}
print('"fuse_requests_per_op":{' + ",".join(f'"{k}":{v}' for k, v in sorted(d.items())) + '}')
EOF
}
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$@"; }
timed() { # timed WORKLOAD TARGET ROUND CMD...: run CMD, emit its seconds
  local w=$1 t=$2 r=$3 t0 t1; shift 3
  t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N)
  emit "$w" "$t" "$r" "$(secs "$t0" "$t1")" s
}

TAR=$DIR/tree.tar
if has "$PARTS" tree && [ ! -s "$TAR" ]; then
  case $TREE_TAR in *.xz) xz -dc "$TREE_TAR" >"$TAR.tmp" ;; *) cp "$TREE_TAR" "$TAR.tmp" ;; esac
  mv "$TAR.tmp" "$TAR"
fi

make_ext4() { make -C "$1" -j2 fs/ext4/ >>"$2" 2>&1; } # TREE LOG
tree_part() { # TARGET ROUND
  local t=$1 r=$2 m top
  m=$(M "$t")
  sync; echo 3 >/proc/sys/vm/drop_caches
  timed untar "$t" "$r" tar -xf "$TAR" -C "$m"
  top=$(find "$m" -mindepth 1 -maxdepth 1 -type d ! -name lost+found | head -1)
  (cd "$top" && git init -q && git config gc.auto 0 && git config maintenance.auto false)
  timed git-add "$t" "$r" git -C "$top" add -f .
  timed git-commit "$t" "$r" git -C "$top" commit -qm tree
  git -C "$top" status --porcelain >/dev/null # warm
  local i t0 t1
  for i in $(seq "$RUNS"); do
    sleep "$GAP"
    t0=$(date +%s.%N); git -C "$top" status --porcelain >/dev/null; t1=$(date +%s.%N)
    emit git-status "$t" "$r" "$(secs "$t0" "$t1")" s "\"run\":$i"
  done
  # A build in the tree: `make defconfig` (not timed), `make -j2 fs/ext4/`
  # (the kernel's preparation and ext4's objects), then the same again
  # with nothing to do (make's walk of the tree's times).
  if [ "$BUILD" = 1 ]; then
    make -C "$top" defconfig >"$OUT/make-$t-$r.log" 2>&1
    timed make-ext4 "$t" "$r" make_ext4 "$top" "$OUT/make-$t-$r.log"
    timed make-nothing "$t" "$r" make_ext4 "$top" "$OUT/make-$t-$r.log"
  fi
}

pg_part() { # TARGET ROUND
  local t=$1 r=$2 m d sock log tps a b
  m=$(M "$t"); d=$m/pg/data; sock=$DIR/pgsock; log=$OUT/pg-$t-$r.log
  mkdir -p "$m/pg" "$sock"; chown postgres: "$m/pg" "$sock"
  touch "$log"; chown postgres: "$log" # the server's log, written as postgres
  timed pg-initdb "$t" "$r" su postgres -c "$PGBIN/initdb -A trust -U postgres -D '$d' >/dev/null"
  su postgres -c "$PGBIN/pg_ctl -D '$d' -l '$log' -w -o \"-p $PG_PORT -k $sock -c listen_addresses=''\" start" >/dev/null
  timed pgbench-init "$t" "$r" su postgres -c "$PGBIN/pgbench -q -i -s $PG_SCALE -h $sock -p $PG_PORT postgres >>'$log' 2>&1"
  a=$(mktemp); b=$(mktemp); reqs "$t" >"$a"
  su postgres -c "$PGBIN/pgbench -n -c $PG_CLIENTS -j 2 -T $PG_TIME -h $sock -p $PG_PORT postgres" >"$OUT/pgbench-$t-$r.txt" 2>&1
  reqs "$t" >"$b"
  tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$OUT/pgbench-$t-$r.txt" | head -1)
  local tx; tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$OUT/pgbench-$t-$r.txt")
  emit pgbench "$t" "$r" "$tps" tps "\"transactions\":$tx$([ "$t" = shoal ] && echo ",$(reqs_json "$a" "$b" "$tx")")"
  rm -f "$a" "$b"
  su postgres -c "$PGBIN/pg_ctl -D '$d' -w stop" >/dev/null
}

sqlite_part() { # TARGET ROUND
  local t=$1 r=$2 m mode t0 t1 a b
  m=$(M "$t")
  for mode in delete wal; do
    rm -f "$m/t.db"*
    sqlite3 "$m/t.db" "PRAGMA journal_mode=$mode; CREATE TABLE t(x);" >/dev/null
    a=$(mktemp); b=$(mktemp); reqs "$t" >"$a"
    t0=$(date +%s.%N)
    for i in $(seq "$SQLITE_N"); do echo "INSERT INTO t VALUES($i);"; done | sqlite3 "$m/t.db" >/dev/null
    t1=$(date +%s.%N)
    reqs "$t" >"$b"
    emit "sqlite-$mode" "$t" "$r" "$(python3 -c "print(round($SQLITE_N / ($t1 - $t0), 1))")" tx/s \
      "$(case $t in shoal*) reqs_json "$a" "$b" "$SQLITE_N" ;; esac)"
    rm -f "$a" "$b"
  done
}

echo "bench-programs: git $GIT_REV, $(date -u +%F), parts: $PARTS, targets: $TARGETS, rounds: $ROUNDS" >&2
for r in $(seq "$ROUNDS"); do
  order=$TARGETS
  [ $((r % 2)) = 0 ] && order=$(echo "$TARGETS" | tr ' ' '\n' | tac | tr '\n' ' ')
  for part in $PARTS; do
    for t in $order; do
      [ "$t" = floor ] && [ "$part" != tree ] && continue
      up "$t"
      case $part in tree) tree_part "$t" "$r" ;; pgbench) pg_part "$t" "$r" ;; sqlite) sqlite_part "$t" "$r" ;; esac
      down "$t"
    done
  done
done

# The table: each workload's range per target (medians of a round's
# runs), and each shoal target's ratio to ext4 and to the floor per round,
# as rates (above 1: shoal faster).
python3 - "$JSON" "$GIT_REV" "$TARGETS" <<'EOF' | tee "$OUT/table.md"
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r["git"] == sys.argv[2]]
targets = sys.argv[3].split()
shoals = [t for t in targets if t.startswith("shoal")]
v = collections.defaultdict(list)
for r in rows:
    v[(r["workload"], r["target"], r["round"])].append(r["value"])
order = ["untar", "git-add", "git-commit", "git-status", "make-ext4", "make-nothing", "pg-initdb", "pgbench-init", "pgbench",
         "sqlite-delete", "sqlite-wal"]
med = lambda xs: sorted(xs)[len(xs) // 2]
def rng(xs):
    lo, hi = min(xs), max(xs)
    f = (lambda x: f"{x:,.0f}") if hi >= 100 else (lambda x: f"{x:.2f}")
    return f(lo) if lo == hi else f"{f(lo)}-{f(hi)}"
refs = [o for o in ("ext4", "floor") if o in targets]
head = ["workload", "unit"] + targets + [f"{s} / {o}" for s in shoals for o in refs]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for w in order:
    unit = next((r["unit"] for r in rows if r["workload"] == w), None)
    if unit is None:
        continue
    per = {t: {k[2]: med(x) for k, x in v.items() if k[0] == w and k[1] == t} for t in targets}
    def ratio(s, o):
        rs = [(per[s][k] / per[o][k]) if unit != "s" else (per[o][k] / per[s][k])
              for k in per[s] if k in per[o] and per[o][k] and per[s][k]]
        return rng(rs) if rs else ""
    cells = [rng(list(per[t].values())) if per[t] else "" for t in targets]
    cells += [ratio(s, o) for s in shoals for o in refs]
    print(f"| {w} | {unit} | " + " | ".join(cells) + " |")
EOF
