# Shared helpers for the shell-level tests. Source it; needs SHOAL (the binary).
set -euo pipefail
SHOAL=${SHOAL:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/release/shoal}
WORK=${WORK:-/tmp/shoal-tests}
mkdir -p "$WORK"

# mount_fresh NAME [OPTS]: a new store $WORK/NAME.store mounted at $WORK/NAME.mnt
mount_fresh() {
  local name=$1 opts=${2:-allow_other}
  local store=$WORK/$name.store mnt=$WORK/$name.mnt
  # /proc/mounts, not mountpoint(1): a mount whose daemon died fails stat.
  # Never the store of a mount still serving (a busy unmount) removed.
  if grep -qs " $mnt " /proc/mounts; then
    "$SHOAL" umount "$mnt" || { echo "mount_fresh: $mnt is busy: not removing its store" >&2; return 1; }
  fi
  rm -rf "$store"; mkdir -p "$mnt"
  "$SHOAL" mkfs "$store" >/dev/null
  "$SHOAL" mount -d "$store" "$mnt" -o "$opts" >/dev/null
  echo "$mnt"
}

# unmount_check NAME: unmount and require a clean fsck.
unmount_check() {
  local name=$1
  "$SHOAL" umount "$WORK/$name.mnt"
  "$SHOAL" fsck "$WORK/$name.store"
}

# unmount_stale MNT...: lazily unmount each MNT still mounted from an earlier
# run (/proc/mounts, not mountpoint(1): a dead mount fails stat).
unmount_stale() {
  local m
  for m in "$@"; do
    if grep -qs " $m " /proc/mounts; then umount -l "$m"; fi
  done
}

# kill_daemon STORE MNT: SIGKILL the daemon serving MNT (mounted with -d) and
# wait until its mount is dead; the dead mount stays for the caller.
kill_daemon() {
  pkill -KILL -f "shoal mount $1 $2 --background-child" || return 1
  local i
  for i in $(seq 100); do stat "$2" >/dev/null 2>&1 || break; sleep 0.05; done
}

# unmount_leftovers: unmount every mount under $WORK that an interrupted run
# left behind (a killed test leaves a mount whose daemon is gone).
unmount_leftovers() {
  local m
  for m in $(awk -v w="$WORK/" 'index($2, w) == 1 {print $2}' /proc/mounts); do
    "$SHOAL" umount "$m" || umount -l "$m" || true
  done
}

# uring_wakeups PID: the daemon's io_uring queue threads and how often they
# were woken ("QUEUES WAKEUPS"): a mount serving requests over io_uring
# wakes them about once a request; one on /dev/fuse has none.
uring_wakeups() {
  local q=0 w=0 t
  for t in /proc/$1/task/*; do
    if grep -q '^fuser-uring-' "$t/comm"; then
      q=$((q + 1)); w=$((w + $(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status")))
    fi
  done
  echo "$q $w"
}
now() { date +%s.%N; }
elapsed() { echo "$(now) - $1" | bc -l | xargs printf '%.2f'; }

# xfstests, built once from ../shared/xfstests into target/xfstests.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
XFSTESTS=${XFSTESTS:-$ROOT/target/xfstests}
xfstests_build() {
  local tarball=${XFSTESTS_TARBALL:-$ROOT/../shared/xfstests/xfstests-v2026.01.27.tar.gz}
  if ! { [ -x "$XFSTESTS/check" ] && [ -x "$XFSTESTS/ltp/fsstress" ] && [ -x "$XFSTESTS/src/open_by_handle" ]; }; then
    rm -rf "$XFSTESTS"; mkdir -p "$XFSTESTS"
    tar xzf "$tarball" -C "$XFSTESTS" --strip-components=1
    make -C "$XFSTESTS" -j"$(nproc)" >"$WORK/xfstests-build.log" 2>&1 || { tail -20 "$WORK/xfstests-build.log"; return 1; }
  fi
  # xfstests' _fs_type maps fuse.glusterfs and fuse.ceph-fuse to their
  # FSTYP but not other FUSE subtypes: a shoal mount is fuse.shoal (its
  # subtype, since 2026-11-28), which FSTYP=fuse must accept, or every
  # test stops at "mounted but not a type fuse filesystem".
  python3 - "$XFSTESTS/common/rc" <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
old = "-e 's/fuse.ceph-fuse/ceph-fuse/'"
new = old + " -e 's/^fuse[.]shoal$/fuse/'"
if new not in s:
    assert old in s, "xfstests' _fs_type changed: see tests/scripts/lib.sh"
    open(p, "w").write(s.replace(old, new, 1))
PY
}

# default_acl_replaces_umask SET MAKE: a default ACL u:nobody:rwx set on
# directory SET/dacl is inherited by a file and a directory made through
# MAKE/dacl (the same directory, maybe through another mount) under umask
# 077, in place of the umask; without a default ACL (MAKE/plain) the umask
# applies. The caller's fail() names the failure.
default_acl_replaces_umask() {
  local set=$1 make=$2
  mkdir "$set/dacl"; setfacl -d -m u:nobody:rwx "$set/dacl"
  (umask 077; touch "$make/dacl/x"; mkdir "$make/dacl/sub")
  getfacl -p "$set/dacl/x" 2>/dev/null | grep -q '^user:nobody:rwx' || fail "default ACL not inherited by a file"
  getfacl -p "$set/dacl/sub" 2>/dev/null | grep -q '^default:user:nobody:rwx' || fail "default ACL not inherited by a directory"
  [ "$(stat -c %a "$set/dacl/x")" = 664 ] || fail "the default ACL must replace the umask: mode $(stat -c %a "$set/dacl/x")"
  (umask 022; touch "$make/plain")
  # (On etcd, $set sees it once $make's create commits: $make may answer
  # it from memory under the directory's lease.)
  local i; for i in $(seq 40); do [ -e "$set/plain" ] && break; sleep 0.05; done
  [ "$(stat -c %a "$set/plain")" = 644 ] || fail "umask without a default ACL: $(stat -c %a "$set/plain")"
}

# fsck_clean URL WHAT: a clean fsck of the namespace at URL while mounts
# use it (read at one revision: a problem is one, however busy the mounts;
# until 2026-11-28 it read page by page and this tried twice). Needs a
# `fail` function.
fsck_clean() {
  local out
  out=$("$SHOAL" fsck "$1" 2>&1) || true
  grep -q " 0 problems" <<<"$out" || { echo "$out"; fail "fsck after $2"; }
}
