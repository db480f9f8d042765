#!/usr/bin/env bash
# Warm metadata walks on a real tree, side by side in one run: `git status`
# of a committed tree and `find DIRS -exec stat`, on ext4 on a loop device
# and on shoal mounts with each option set, rounds alternated, with the
# LOOKUP and GETATTR requests each run sent to the daemon (`shoal stats
# --json` before and after). Needs root. docs/perf-log/29-kernel-caches.md.
#   scripts/bench-walk.sh          # the Linux tree of /usr/src/linux-source-*.tar.xz
# Environment:
#   TREE_TAR   a tarball of the tree (.tar or .tar.xz; default the Debian linux-source)
#   RUNS       timed runs of each walk on each target (3)
#   GAP        seconds slept before each run (2): caches of 1 s expire, as
#              between a user's commands
#   OPTS_SETS  shoal option sets, ';'-separated, one mount each (default: the
#              old lifetimes of 1 s, then the defaults, "-"); BIN@OPTS mounts
#              with another build of shoal (e.g. an older one)
#   FIND_DIRS  what the find walk stats (fs include)
#   DIR        where the images, stores and mounts go (/var/tmp/shoal-walk)
#   REUSE=1    measure on the tree a previous run left in DIR (no untar, no commit)
set -euo pipefail
cd "$(dirname "$0")/.."
SHOAL=${SHOAL:-$PWD/target/release/shoal}
TREE_TAR=${TREE_TAR:-$(ls /usr/src/linux-source-*.tar.xz | head -1)}
RUNS=${RUNS:-3}
GAP=${GAP:-2}
OPTS_SETS=${OPTS_SETS:-entry_ttl_ms=1000,attr_ttl_ms=1000,negative_ttl_ms=1000;-}
FIND_DIRS=${FIND_DIRS:-fs include}
DIR=${DIR:-/var/tmp/shoal-walk}
mkdir -p "$DIR"

cleanup() {
  local m
  for m in $(awk -v d="$DIR/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r); do
    case $m in *.mnt) "$SHOAL" umount "$m" 2>/dev/null || umount -l "$m" ;; *) umount "$m" 2>/dev/null || umount -l "$m" ;; esac
  done
}
trap cleanup EXIT
cleanup

TAR=$DIR/tree.tar
if [ ! -s "$TAR" ]; then
  case $TREE_TAR in *.xz) xz -dc "$TREE_TAR" >"$TAR" ;; *) cp "$TREE_TAR" "$TAR" ;; esac
fi
git config --global --get user.email >/dev/null || git config --global user.email walk@localhost
git config --global --get user.name >/dev/null || git config --global user.name walk
git config --global --get-all safe.directory | grep -qx '\*' || git config --global --add safe.directory '*'

# populate DIR: the tree, committed (outside the timing).
populate() {
  tar -xf "$TAR" -C "$1"
  local top; top=$(find "$1" -mindepth 1 -maxdepth 1 -type d ! -name lost+found | head -1)
  # No gc in the background: it would hold the mount busy at its umount.
  (cd "$top" && git init -q && git config gc.auto 0 && git config maintenance.auto false &&
    git add -f . && git commit -qm tree)
  echo "$top"
}

declare -A ROOT MNT
mkdir -p "$DIR/ext4"
if [ "${REUSE:-0}" = 1 ] && [ -s "$DIR/populated" ] && [ -d "$DIR/s0.store" ]; then
  # REUSE=1: the image and store a previous run populated.
  mount -o loop "$DIR/ext4.img" "$DIR/ext4"
  read -r ext4_top top <"$DIR/populated"; ROOT[ext4]=$ext4_top
else
  echo "ext4 on a loop device, and the shoal store: untar and commit ($(basename "$TREE_TAR"))" >&2
  rm -f "$DIR/populated"
  truncate -s 8G "$DIR/ext4.img"; mkfs.ext4 -q -F "$DIR/ext4.img"
  mount -o loop "$DIR/ext4.img" "$DIR/ext4"
  ROOT[ext4]=$(populate "$DIR/ext4")
  rm -rf "$DIR/s0.store"; mkdir -p "$DIR/s0.mnt"
  "$SHOAL" mkfs "$DIR/s0.store" >/dev/null
  "$SHOAL" mount -d "$DIR/s0.store" "$DIR/s0.mnt" >/dev/null
  top=$(populate "$DIR/s0.mnt"); top=${top#"$DIR/s0.mnt"/}
  for _ in $(seq 50); do "$SHOAL" umount "$DIR/s0.mnt" 2>/dev/null && break; sleep 0.2; done
  echo "${ROOT[ext4]} $top" >"$DIR/populated"
fi
# One store per option set, copied while unmounted, all mounted at once.
targets=(ext4)
i=0
IFS=';' read -ra sets <<<"$OPTS_SETS"
for o in "${sets[@]}"; do
  i=$((i + 1)); t="shoal[$o]"
  rm -rf "$DIR/s$i.store"; cp -a "$DIR/s0.store" "$DIR/s$i.store"
  mkdir -p "$DIR/s$i.mnt"
  bin=$SHOAL; opts=$o
  case $o in *@*) bin=${o%%@*}; opts=${o#*@} ;; esac
  if [ "$opts" = - ]; then "$bin" mount -d "$DIR/s$i.store" "$DIR/s$i.mnt" >/dev/null
  else "$bin" mount -d "$DIR/s$i.store" "$DIR/s$i.mnt" -o "$opts" >/dev/null; fi
  MNT[$t]=$DIR/s$i.mnt; ROOT[$t]=$DIR/s$i.mnt/$top; targets+=("$t")
done

reqs() { # LOOKUPS GETATTRS so far, or "0 0" off shoal
  [ -n "${MNT[$1]:-}" ] || { echo "0 0"; return; }
  "$SHOAL" stats "${MNT[$1]}" --json | python3 -c '
import json, sys
r = json.load(sys.stdin)["fuse_requests"]
print(r.get("lookup", 0), r.get("getattr", 0))'
}
walk() { # walk TARGET WHAT
  local r=${ROOT[$1]}
  case $2 in
    git) git -C "$r" status --porcelain >/dev/null ;;
    find) (cd "$r" && find $FIND_DIRS -exec stat -c %s {} + >/dev/null) ;;
  esac
}
declare -A TIMES LOOK GET
# Warm every target first (one of each walk, not timed).
for t in "${targets[@]}"; do walk "$t" git; walk "$t" find; done
for r in $(seq "$RUNS"); do
  for w in git find; do
    for t in "${targets[@]}"; do
      sleep "$GAP"
      read -r l0 g0 < <(reqs "$t")
      t0=$(date +%s.%N); walk "$t" "$w"; t1=$(date +%s.%N)
      read -r l1 g1 < <(reqs "$t")
      TIMES[$t.$w]+="$(echo "$t1 - $t0" | bc -l | xargs printf '%.3f') "
      LOOK[$t.$w]+="$((l1 - l0)) "; GET[$t.$w]+="$((g1 - g0)) "
    done
  done
done
echo
printf '%-14s %-62s %-24s %-22s %-22s\n' walk target seconds LOOKUPs GETATTRs
for w in git find; do
  for t in "${targets[@]}"; do
    printf '%-14s %-62s %-24s %-22s %-22s\n' "$w" "$t" "${TIMES[$t.$w]}" "${LOOK[$t.$w]}" "${GET[$t.$w]}"
  done
done
