#!/usr/bin/env bash
# The client without FUSE (docs/client.md) beside the mount, in one run:
# crunl (create+unlink pairs in one directory) with one and two threads
# through the client (create and unlink calls; and open(O_CREAT), close,
# unlink, which hands out and pins a data object), through the same
# mount's kernel path, on tmpfs and on ext4 (a directory of the root
# filesystem); and round trips: the client's ping (the protocol through the
# daemon, no engine call), the futex ping-pong alone between two processes
# (any CPUs, and both pinned to one), and one FUSE request (a getxattr).
# Then unmodified C programs under the shim (`shoal run`) and on the mount,
# alternated: crunl (tests/c/crunl.c), fs_mark's creates and seed 000's
# rndrename in one directory (tests/c/meta.c), one and two processes, with
# the CPUs the whole machine kept busy meanwhile (/proc/stat); a warm stat
# walk; the start-up cost of an intercepted `true`; and, when the Python
# package is installed
# in $VENV (tests/scripts/client-python.sh makes one), small-file reads
# through it beside open().read() on the mount.
#   scripts/bench-client.sh [PAIRS]      (10000 per thread by default)
#   DIR=/mnt/ext4/x scripts/bench-client.sh   (the store on that filesystem)
# Output: JSON lines, then a table (crates/client/examples/crunl.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-10000}
SHOAL=${SHOAL:-$PWD/target/release/shoal}
cargo build --release -q -p shoal -p shoal-client -p shoal-shim --example crunl
DIR=${DIR:-/tmp/client-bench-$$}
mkdir -p "$DIR/mnt" "$DIR/ext4" /dev/shm/client-bench-$$
"$SHOAL" mkfs "$DIR/store" >/dev/null
"$SHOAL" mount -d "$DIR/store" "$DIR/mnt" >/dev/null
trap '"$SHOAL" umount "$DIR/mnt" || true; rm -rf "$DIR" /dev/shm/client-bench-$$' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), CPU pressure: $(head -1 /proc/pressure/cpu)"
target/release/examples/crunl "$DIR/mnt" "$PAIRS" /dev/shm/client-bench-$$ "$DIR/ext4"
# An unmodified C program (tests/c/crunl.c: open O_CREAT|O_EXCL, fstat,
# close, unlink) in 1 and 2 processes in one directory, under the shim and
# on the mount, alternated.
cc -O2 -o "$DIR/crunl-c" tests/c/crunl.c
mkdir -p "$DIR/mnt/c"
echo
printf '%-28s %12s %12s %8s\n' "C crunl, pairs/s" "1 process" "2 processes" "2/1"
for way in shim mount shim mount; do
  run=(); [ $way = shim ] && run=("$SHOAL" run "$DIR/mnt" --)
  a=$("${run[@]}" "$DIR/crunl-c" "$DIR/mnt/c" "$PAIRS" 1)
  b=$("${run[@]}" "$DIR/crunl-c" "$DIR/mnt/c" "$PAIRS" 2)
  echo "{\"bench\":\"c-crunl\",\"way\":\"$way\",\"procs1\":$a,\"procs2\":$b}" >&2
  printf '%-28s %12s %12s %7.2fx\n' "$way" "$a" "$b" "$(echo "$b / $a" | bc -l)"
done

# CPUs busy over a command (all of the machine's, from /proc/stat).
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; }
cpus_during() {
  local a b out
  a=$(busy); out=$("$@"); b=$(busy)
  echo "$out $(echo "$a $b" | awk '{w=$3-$1; i=$4-$2; printf "%.2f", '"$(nproc)"'*w/(w+i)}')"
}
cc -O2 -o "$DIR/meta" tests/c/meta.c
echo
printf '%-28s %-10s %18s %18s %8s\n' "C, ops/s (CPUs busy)" workload "1 process" "2 processes" "2/1"
for wl in creates rndrename; do
  for way in shim mount shim mount; do
    run=(); [ $way = shim ] && run=("$SHOAL" run "$DIR/mnt" --)
    rm -rf "$DIR/mnt/m"; mkdir "$DIR/mnt/m"
    read -r a ca < <(cpus_during "${run[@]}" "$DIR/meta" $wl "$DIR/mnt/m" "$PAIRS" 1)
    rm -rf "$DIR/mnt/m"; mkdir "$DIR/mnt/m"
    read -r b cb < <(cpus_during "${run[@]}" "$DIR/meta" $wl "$DIR/mnt/m" "$PAIRS" 2)
    echo "{\"bench\":\"c-$wl\",\"way\":\"$way\",\"procs1\":$a,\"procs2\":$b,\"cpus1\":$ca,\"cpus2\":$cb}" >&2
    printf '%-28s %-10s %10s (%4s) %10s (%4s) %7.2fx\n' "$way" $wl "$a" "$ca" "$b" "$cb" "$(echo "$b / $a" | bc -l)"
  done
done
rm -rf "$DIR/mnt/m"
# A warm stat walk (this repository's crates/ copied onto the mount: the
# walk's os.walk and os.stat in one Python process, ten passes), under the
# shim and not, alternated: the stat family by path falls through to the
# mount, whose kernel caches answer it.
cp -r crates "$DIR/mnt/walk"
walk() {
  "$@" python3 - "$DIR/mnt/walk" <<'PY'
import os, sys, time
w = sys.argv[1]
n = sum(1 for r, d, fs in os.walk(w) for f in fs)
t = time.perf_counter()
for _ in range(10):
    for r, d, fs in os.walk(w):
        for f in fs:
            os.stat(os.path.join(r, f))
print(round(10 * n / (time.perf_counter() - t)))
PY
}
for way in shim mount shim mount; do
  run=(); [ $way = shim ] && run=("$SHOAL" run "$DIR/mnt" --)
  v=$(walk "${run[@]}")
  echo "{\"bench\":\"stat-walk\",\"way\":\"$way\",\"stats_per_s\":$v}" >&2
  echo "warm stat walk, $way: $v stats/s"
done
rm -rf "$DIR/mnt/walk"
# Start-up: an intercepted `true` against a plain one, 500 runs each.
SO=$PWD/target/release/libshoal_shim.so
SOCK=$("$SHOAL" run "$DIR/mnt" -- env 2>/dev/null | sed -n 's/^SHOAL_CLIENT_SOCK=//p')
t_plain=$( { /usr/bin/time -f %e bash -c 'for i in $(seq 500); do /bin/true; done' ; } 2>&1 )
t_shim=$( { LD_PRELOAD=$SO SHOAL_SHIM_MNT=$DIR/mnt SHOAL_CLIENT_SOCK=$SOCK /usr/bin/time -f %e bash -c 'for i in $(seq 500); do /bin/true; done' ; } 2>&1 )
echo "{\"bench\":\"startup\",\"plain_s_per_500\":$t_plain,\"shim_s_per_500\":$t_shim}" >&2
printf '\nstart-up of /bin/true: %.0f us plain, %.0f us with the shim preloaded (%+.0f us)\n' \
  "$(echo "$t_plain * 2000" | bc -l)" "$(echo "$t_shim * 2000" | bc -l)" "$(echo "($t_shim - $t_plain) * 2000" | bc -l)"
# Small-file reads through the Python package (read_bytes: one call, no
# descriptor; and open().read() through it) beside open().read() on the
# mount: the files written through the mount, every pass warm, as a
# program rereading its inputs.
VENV=${VENV:-/tmp/shoal-tests/client-venv}
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import shoal' 2>/dev/null; then
  "$VENV/bin/python" - "$DIR/mnt" "$PAIRS" <<'PY'
import json, os, sys, time, shoal
m, n = sys.argv[1], int(sys.argv[2])
c = shoal.Client(m)
for size in (4096, 65536):
    d = "%s/py%d" % (m, size)
    os.mkdir(d)
    data = os.urandom(size)
    for i in range(n):
        with open("%s/%d" % (d, i), "wb") as f:
            f.write(data)
    res = {}
    for way in ("read_bytes", "package", "mount") * 2:
        t = time.perf_counter()
        for i in range(n):
            if way == "read_bytes":
                b = c.read_bytes("py%d/%d" % (size, i))
            elif way == "package":
                with c.open("py%d/%d" % (size, i), "rb") as f:
                    b = f.read()
            else:
                with open("%s/%d" % (d, i), "rb") as f:
                    b = f.read()
            assert len(b) == size
        res.setdefault(way, []).append(round(n / (time.perf_counter() - t)))
    print(json.dumps({"bench": "python-reads", "size": size, "files": n, **res}), file=sys.stderr)
    print("python reads of %d-byte files, files/s: package read_bytes %s, package open().read() %s, open().read() on the mount %s" % (size, res["read_bytes"], res["package"], res["mount"]))
PY
fi
