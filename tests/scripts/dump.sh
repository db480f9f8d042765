#!/usr/bin/env bash
# shoal dump / shoal load, judged by tools nobody here wrote:
# - the round trip: a tree with every record kind (hard links across
#   directories, symlinks, a fifo, a device node, a sparse and a 10 MiB
#   file, xattrs, ACLs, chattr flags, times to the nanosecond, a name that
#   is not UTF-8, owners) dumped from a mounted embedded store, loaded into
#   a namespace on a three-member etcd cluster (started here, ports
#   24601-24613) with file data on SeaweedFS (ports 24651-24658), dumped
#   again from there and loaded into a fresh embedded store: each tree
#   identical to the first as `rsync -aHAXn --itemize-changes` judges it
#   (nothing printed) and as getfattr's listing shows it, lsattr's
#   listing identical too (both modes keep chattr flags), fsck
#   clean each time;
# - a dump taken while writers run is a state the filesystem was in: each
#   writer logs the files it made and was answered for, one after another,
#   and the loaded tree holds a prefix of each writer's log;
# - misuse: a load into a non-empty destination is refused and changes
#   nothing, a cut dump is refused.
source "$(dirname "$0")/lib.sh"
fail() { echo "dump: $*"; exit 1; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$WORK/dump-cluster; W=$WORK/dump-weed
A=$WORK/dumpa; B=$WORK/dumpb; C=$WORK/dumpc
unmount_stale "$A.mnt" "$B.mnt" "$C.mnt"
cleanup() {
  for m in "$A.mnt" "$B.mnt" "$C.mnt"; do grep -qs " $m " /proc/mounts && { "$SHOAL" umount "$m" || umount -l "$m"; }; done
  bash "$ROOT/scripts/etcd-cluster.sh" stop "$D"
  bash "$ROOT/scripts/seaweed.sh" stop "$W"
}
trap cleanup EXIT
EPS=$(bash "$ROOT/scripts/etcd-cluster.sh" start "$D" 24600)
# Signed requests only: shoal signs with this key (from the environment).
export AWS_ACCESS_KEY_ID=shoal-dump AWS_SECRET_ACCESS_KEY=shoal-dump-secret
S3=$(SEAWEED_KEYS=$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY bash "$ROOT/scripts/seaweed.sh" start "$W" 24650)
U=etcd://$EPS/dumped
clean() { "$SHOAL" fsck "$1" >"$WORK/dump-fsck.out" 2>&1 && grep -q " 0 problems" "$WORK/dump-fsck.out" || { cat "$WORK/dump-fsck.out"; fail "fsck of $1 after $2"; }; }

# --- the tree, on a mounted embedded store
a=$(mount_fresh dumpa)
cd "$a"
mkdir -p d1/sub d2 empty acl/inherit
echo hello > d1/f
ln d1/f d2/f-link                       # a hard link across directories
ln d1/f d1/sub/f-link2
ln -s ../d1/f d2/sym
ln -s "$(printf 'x%.0s' $(seq 1000))" d2/longsym
mkfifo d1/fifo
mknod d1/null c 1 3
mknod d1/blk b 7 0
head -c 10485760 /dev/urandom > d1/big   # 10 MiB
truncate -s 100M d1/sparse
printf 'middle' | dd of=d1/sparse bs=1 seek=52428800 conv=notrunc status=none
printf 'small' > d1/small
touch "$(printf 'd1/bad\xffname')"
setfattr -n user.color -v blue d1/f
setfattr -n user.bin -v 0sAAECAwQ= d1/small
setfacl -m u:1234:rwx,g:55:r-x d1/small
setfacl -d -m u:1234:rwx acl/inherit
setfacl -m u:99:r acl
echo kept > acl/inherit/child
chown 1234:5678 d1/small; chmod 4755 d1/small
chown -h 42:43 d2/sym
chmod 1777 d2; chmod 0500 empty
echo im > d1/immutable; chattr +i d1/immutable
echo ap > d1/append; chattr +a d1/append
chattr +A d1/big
touch -h -d "2020-01-02 03:04:05.123456789" d2/sym d1/small d1/fifo
touch -d "2001-02-03 04:05:06.987654321" d1/sub empty
cd /

# A dump of a mounted store is its daemon's snapshot.
"$SHOAL" dump "$A.store" -o "$WORK/dump1.json.gz" 2>"$WORK/dump.err" || { cat "$WORK/dump.err"; fail "dump of the mounted store"; }
grep -q "dumped" "$WORK/dump.err" || fail "no summary: $(cat "$WORK/dump.err")"
h=$(zcat "$WORK/dump1.json.gz" | head -1 || true)
grep -q '"point":"snapshot"' <<<"$h" || fail "a mounted store's dump is not a snapshot: $h"
same() { # same TREE1 TREE2 WHAT [flags]: rsync, getfattr (and lsattr) agree
  local out
  # Times to the nanosecond (rsync compares seconds). Of a directory,
  # not the access time (listing it for this comparison moves it), nor
  # its size and link count, which each kind of store answers its own
  # way (ext4: 4096 and 2 + subdirectories; shoal on etcd: 0 and 1).
  lst() { (cd "$1" && { find . ! -type d -printf '%p %T@ %A@ %m %U %G %s %n\n'; find . -type d -printf '%p %T@ %m %U %G\n'; } | sort); }
  lst "$1" > "$WORK/dump-l1"; lst "$2" > "$WORK/dump-l2"
  diff "$WORK/dump-l1" "$WORK/dump-l2" || fail "times, modes, owners, sizes or links differ: $3"
  out=$(rsync -aHAXn --itemize-changes --delete "$1/" "$2/") || fail "rsync $3"
  [ -z "$out" ] || { echo "$out"; fail "rsync sees differences: $3"; }
  # In name order (each store lists a directory in its own order).
  xat() { (cd "$1" && find . -print0 | sort -z | xargs -0 getfattr -h -d -m - 2>/dev/null); }
  xat "$1" > "$WORK/dump-x1"; xat "$2" > "$WORK/dump-x2"
  grep -q "posix_acl_default" "$WORK/dump-x1" || fail "getfattr's listing lacks the default ACL"
  diff "$WORK/dump-x1" "$WORK/dump-x2" || fail "xattrs differ: $3"
  cmp "$1/d1/big" "$2/d1/big" || fail "the 10 MiB file differs: $3"
  if [ "${4:-}" = flags ]; then
    (cd "$1" && lsattr -R . 2>/dev/null | grep -av '^$' | sort) > "$WORK/dump-f1"
    (cd "$2" && lsattr -R . 2>/dev/null | grep -av '^$' | sort) > "$WORK/dump-f2"
    diff "$WORK/dump-f1" "$WORK/dump-f2" || fail "chattr flags differ: $3"
  fi
}

# --- embedded to embedded (chattr flags kept)
rm -rf "$C.store"
"$SHOAL" load "$WORK/dump1.json.gz" "$C.store" 2>"$WORK/load.err" || { cat "$WORK/load.err"; fail "load into a new store"; }
clean "$C.store" "load into an embedded store"
mkdir -p "$C.mnt"; "$SHOAL" mount -d "$C.store" "$C.mnt" -o allow_other >/dev/null
same "$a" "$C.mnt" "embedded to embedded" flags
"$SHOAL" umount "$C.mnt"

# --- embedded to etcd (data to SeaweedFS)
"$SHOAL" load "$WORK/dump1.json.gz" "$U" --data "s3://shoal/dumped?endpoint=$S3" 2>"$WORK/load.err" || { cat "$WORK/load.err"; fail "load into etcd"; }
grep -q "chattr flags" "$WORK/load.err" && fail "etcd keeps chattr flags, yet the load says it lost some: $(cat "$WORK/load.err")"
clean "$U" "load into etcd"
mkdir -p "$B.mnt"; "$SHOAL" mount -d "$U" "$B.mnt" -o allow_other >/dev/null
same "$a" "$B.mnt" "embedded to etcd" flags
"$SHOAL" umount "$B.mnt"

# --- etcd back to a fresh embedded store
"$SHOAL" dump "$U" -o "$WORK/dump2.json" 2>"$WORK/dump.err" || { cat "$WORK/dump.err"; fail "dump of etcd"; }
rm -rf "$C.store"
"$SHOAL" load "$WORK/dump2.json" "$C.store" 2>"$WORK/load.err" || { cat "$WORK/load.err"; fail "load of etcd's dump"; }
clean "$C.store" "load of etcd's dump"
"$SHOAL" mount -d "$C.store" "$C.mnt" -o allow_other >/dev/null
same "$a" "$C.mnt" "embedded to etcd to embedded" flags

# --- misuse: a non-empty destination, a cut dump, a subtree
"$SHOAL" umount "$C.mnt"
before=$(find "$C.store" -type f -newer "$WORK/dump2.json" | wc -l)
if "$SHOAL" load "$WORK/dump2.json" "$C.store" 2>"$WORK/load.err"; then fail "a load into a non-empty store succeeded"; fi
grep -q "is not empty" "$WORK/load.err" || fail "non-empty: $(cat "$WORK/load.err")"
if "$SHOAL" load "$WORK/dump2.json" "$U" 2>"$WORK/load.err"; then fail "a load into a non-empty namespace succeeded"; fi
grep -q "is not empty" "$WORK/load.err" || fail "non-empty namespace: $(cat "$WORK/load.err")"
head -c $(( $(stat -c %s "$WORK/dump2.json") / 2 )) "$WORK/dump2.json" > "$WORK/dump-cut.json"
rm -rf "$WORK/dump-cut.store"
if "$SHOAL" load "$WORK/dump-cut.json" "$WORK/dump-cut.store" 2>"$WORK/load.err"; then fail "a cut dump loaded"; fi
grep -q "cut short\|line" "$WORK/load.err" || fail "cut dump: $(cat "$WORK/load.err")"
echo '{"t":"something"}' > "$WORK/dump-bad.json"
if "$SHOAL" load "$WORK/dump-bad.json" "$WORK/dump-bad.store" 2>"$WORK/load.err"; then fail "not a dump, loaded"; fi
grep -q "not a shoal dump" "$WORK/load.err" || fail "not a dump: $(cat "$WORK/load.err")"
[ ! -e "$WORK/dump-bad.store" ] || fail "a bad dump made a store"
"$SHOAL" dump "$A.store" --subtree d1/sub -o "$WORK/dump-sub.json" 2>/dev/null || fail "subtree dump"
rm -rf "$WORK/dump-sub.store"; "$SHOAL" load "$WORK/dump-sub.json" "$WORK/dump-sub.store" 2>/dev/null || fail "subtree load"
"$SHOAL" mount -d "$WORK/dump-sub.store" "$C.mnt" -o allow_other >/dev/null
[ -f "$C.mnt/f-link2" ] && [ "$(cat "$C.mnt/f-link2")" = hello ] || fail "the subtree's root is not the loaded root: $(ls -la "$C.mnt")"
"$SHOAL" umount "$C.mnt"

# --- a dump while writers run is a prefix of what they were answered
# prefix MNT SOURCE POINT: writers on MNT, a dump of SOURCE meanwhile
# (its head saying POINT), loaded: each writer's files in it are the first
# ones of its log.
prefix() {
  local m=$1 src=$2 point=$3 w p1 p2 n total f
  for w in 1 2; do mkdir -p "$m/w$w"; done
  writer() { # writer N: make files one by one, log each once answered
    local i=0; : > "$WORK/dump-w$1.log"
    while [ ! -e "$WORK/dump-stop" ]; do
      echo "$i" > "$m/w$1/f$i" && echo "f$i" >> "$WORK/dump-w$1.log"; i=$((i+1))
    done
  }
  rm -f "$WORK/dump-stop"
  writer 1 & p1=$!; writer 2 & p2=$!
  sleep 1
  "$SHOAL" dump "$src" -o "$WORK/dump-live.json" 2>/dev/null || fail "dump of $src while writers run"
  sleep 0.5; touch "$WORK/dump-stop"; wait $p1 $p2
  head -1 "$WORK/dump-live.json" | grep -q "\"point\":\"$point" || fail "$src: the dump's point is not $point: $(head -1 "$WORK/dump-live.json")"
  rm -rf "$WORK/dump-live.store"
  "$SHOAL" load "$WORK/dump-live.json" "$WORK/dump-live.store" 2>/dev/null || fail "load of the live dump"
  clean "$WORK/dump-live.store" "load of the live dump"
  "$SHOAL" mount -d "$WORK/dump-live.store" "$C.mnt" -o allow_other,ro >/dev/null
  for w in 1 2; do
    n=$(ls "$C.mnt/w$w" | wc -l)
    total=$(wc -l < "$WORK/dump-w$w.log")
    [ "$n" -gt 0 ] && [ "$n" -lt "$total" ] || fail "$src, writer $w: $n of $total files in the dump (the dump was not taken while it wrote)"
    # The files in the dump are exactly the first n the writer was answered for.
    head -n "$n" "$WORK/dump-w$w.log" | sort > "$WORK/dump-want"
    ls "$C.mnt/w$w" | sort > "$WORK/dump-got"
    diff "$WORK/dump-want" "$WORK/dump-got" >/dev/null || fail "$src, writer $w: the dump is not a prefix of its log"
    # Each whole, but the last: its create may be in and its write not yet.
    for f in $(head -n "$((n-1))" "$WORK/dump-w$w.log"); do [ "$(cat "$C.mnt/w$w/$f")" = "${f#f}" ] || fail "$src, writer $w: $f's content"; done
    echo "$src, writer $w: the dump holds the first $n of its $total files"
  done
  "$SHOAL" umount "$C.mnt"
}
prefix "$a" "$A.store" snapshot
"$SHOAL" mount -d "$U" "$B.mnt" -o allow_other >/dev/null
prefix "$B.mnt" "$U" revision
"$SHOAL" umount "$B.mnt"
"$SHOAL" umount "$a"
clean "$A.store" "the writers"
echo "dump: ok"
