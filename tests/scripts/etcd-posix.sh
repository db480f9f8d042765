#!/usr/bin/env bash
# What an etcd mount answers as an embedded mount does (issue 45, point 3),
# on two FUSE mounts of one namespace on a three-member etcd cluster
# (started here, clients on ports ETCD_POSIX_PORT+1..3, default 25201-25203),
# file data in a local directory: chattr flags (immutable, append-only, on
# files and directories) set on one mount and enforced on the other, and
# read there by lsattr and xfs_io; O_TMPFILE named by linkat and seen on the
# other mount, and one never named gone at its close; renameat2's
# RENAME_EXCHANGE seen across mounts; overlayfs with its upper layer on an
# etcd mount (whiteouts, copy-up, renames of lower files); fallocate,
# SEEK_HOLE and statx's birth time; statfs figures
# from the object store's filesystem and etcd's size; fsck clean after it.
source "$(dirname "$0")/lib.sh"
fail() { echo "etcd-posix: $*"; exit 1; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PORT=${ETCD_POSIX_PORT:-25200}
D=$WORK/etcd-posix-cluster; A=$WORK/epa.mnt; B=$WORK/epb.mnt
O=$WORK/etcd-posix-objects; L=$WORK/etcd-posix-lower; OV=$WORK/etcd-posix-ovl
cleanup() {
  grep -qs " $OV " /proc/mounts && umount "$OV"
  for m in "$A" "$B"; do grep -qs " $m " /proc/mounts && { "$SHOAL" umount "$m" || umount -l "$m"; }; done
  bash "$ROOT/scripts/etcd-cluster.sh" stop "$D"
}
unmount_stale "$OV" "$A" "$B"
trap cleanup EXIT
[ -n "${ETCD_POSIX_DEBUG:-}" ] && trap - EXIT
EPS=$(bash "$ROOT/scripts/etcd-cluster.sh" start "$D" "$PORT")
U=etcd://$EPS/posix
rm -rf "$O" "$L"; mkdir -p "$O" "$A" "$B" "$L" "$OV"
"$SHOAL" mkfs "$U" --data "file://$O" >/dev/null
"$SHOAL" mount -d "$U" "$A" -o allow_other >/dev/null
"$SHOAL" mount -d "$U" "$B" -o allow_other >/dev/null
# A clean fsck while the mounts run (lib.sh).
check() { fsck_clean "$U" "$1"; }
within() { local t=$1; shift; for _ in $(seq $((t * 20))); do "$@" 2>/dev/null && return 0; sleep 0.05; done; return 1; }
# refused WHAT CMD...: CMD fails with "Operation not permitted".
refused() { local what=$1; shift; local out; out=$("$@" 2>&1) && fail "$what: allowed"; grep -q "Operation not permitted" <<<"$out" || fail "$what: $out"; }

# chattr flags: set on A, enforced on B (chattr +i failed with ENOTTY).
mkdir "$A/fl"; echo data > "$A/fl/f"; mkdir "$A/fl/d"
c0=$(stat -c %Z.%z "$A/fl/f"); sleep 1.1
chattr +i "$A/fl/f" || fail "chattr +i on an etcd mount"
# The new ctime at once, not after the kernel's attribute time (generic/277).
[ "$(stat -c %Z.%z "$A/fl/f")" != "$c0" ] || fail "ctime not updated after chattr: $c0"
within 2 test -e "$B/fl/f" || fail "B does not see the file"
lsattr "$B/fl/f" | grep -q '^----i' || fail "lsattr on B: $(lsattr "$B/fl/f")"
xfs_io -r -c 'lsattr -v' "$B/fl/f" | grep -q immutable || fail "xfs_io lsattr on B: $(xfs_io -r -c 'lsattr -v' "$B/fl/f" 2>&1)"
refused "write to an immutable file" sh -c "echo x > '$B/fl/f'"
refused "append to an immutable file" sh -c "echo x >> '$B/fl/f'"
refused "rm of an immutable file" rm -f "$B/fl/f"
refused "mv of an immutable file" mv "$B/fl/f" "$B/fl/g"
refused "ln of an immutable file" ln "$B/fl/f" "$B/fl/g"
refused "chmod of an immutable file" chmod 600 "$B/fl/f"
refused "setfattr of an immutable file" setfattr -n user.x -v 1 "$B/fl/f"
refused "truncate of an immutable file" truncate -s 0 "$B/fl/f"
grep -qx data "$B/fl/f" || fail "an immutable file reads back"
chattr -i "$B/fl/f"; echo more >> "$A/fl/f"
chattr +a "$A/fl/f"
echo appended >> "$B/fl/f" || fail "append to an append-only file"
refused "overwrite of an append-only file" sh -c "echo x > '$B/fl/f'"
refused "rm of an append-only file" rm -f "$B/fl/f"
chattr -a "$A/fl/f"
[ "$(cat "$B/fl/f")" = "$(printf 'data\nmore\nappended')" ] || fail "the file after appends: $(cat "$B/fl/f")"
chattr +i "$A/fl/d"
refused "create in an immutable directory" touch "$B/fl/d/x"
chattr -i "$A/fl/d"; chattr +a "$A/fl/d"
touch "$B/fl/d/x" || fail "create in an append-only directory"
refused "rm in an append-only directory" rm -f "$B/fl/d/x"
chattr -a "$B/fl/d"; rm -r "$A/fl"
check "chattr"

# O_TMPFILE (EOPNOTSUPP before): named by linkat, seen on B; one never
# named leaves nothing.
python3 - "$A" <<'PY' || fail "O_TMPFILE on an etcd mount"
import ctypes, os, sys
d = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(d, os.O_TMPFILE | os.O_WRONLY, 0o640)
assert os.fstat(fd).st_nlink == 0
os.write(fd, b"made unnamed\n")
# linkat(2) with AT_SYMLINK_FOLLOW on /proc/self/fd/N, as open(2) suggests
# (Python's os.link calls link(2), which links the /proc link itself).
AT_FDCWD, AT_SYMLINK_FOLLOW = -100, 0x400
if libc.linkat(AT_FDCWD, b"/proc/self/fd/%d" % fd, AT_FDCWD, os.path.join(d, "tmpnamed").encode(), AT_SYMLINK_FOLLOW) != 0:
    sys.exit("linkat: " + os.strerror(ctypes.get_errno()))
assert os.fstat(fd).st_nlink == 1
os.close(fd)
fd = os.open(d, os.O_TMPFILE | os.O_RDWR, 0o600)
os.write(fd, b"x" * 100000)
os.close(fd)
PY
within 2 grep -qx "made unnamed" "$B/tmpnamed" || fail "B does not see the named tmpfile"
rm "$A/tmpnamed"
check "O_TMPFILE"

# renameat2 RENAME_EXCHANGE (EINVAL before), seen on B.
mkdir "$A/ex"; echo one > "$A/ex/a"; mkdir "$A/ex/b"
python3 - "$A/ex" <<'PY' || fail "RENAME_EXCHANGE on an etcd mount"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
d = sys.argv[1].encode()
AT_FDCWD, RENAME_EXCHANGE = -100, 2
r = libc.renameat2(AT_FDCWD, d + b"/a", AT_FDCWD, d + b"/b", RENAME_EXCHANGE)
if r != 0:
    sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
PY
within 2 test -d "$B/ex/a" || fail "B: ex/a is not the directory after the exchange"
grep -qx one "$B/ex/b" || fail "B: ex/b is not the file after the exchange"
rm -r "$A/ex"
check "RENAME_EXCHANGE"

# overlayfs with its upper layer on an etcd mount (refused before: no
# RENAME_WHITEOUT, no O_TMPFILE).
echo lower > "$L/keep"; echo gone > "$L/del"; echo moved > "$L/mv"; mkdir "$L/dir"; echo in > "$L/dir/f"
mkdir -p "$A/ovl/upper" "$A/ovl/work"
mount -t overlay overlay -o "lowerdir=$L,upperdir=$A/ovl/upper,workdir=$A/ovl/work" "$OV" \
  || fail "overlayfs refuses an etcd mount as its upper layer: $(dmesg | grep -i overlay | tail -3)"
rm "$OV/del"; mv "$OV/mv" "$OV/mv2"; echo changed >> "$OV/keep"; rm -r "$OV/dir"; echo new > "$OV/new"
[ -e "$OV/del" ] && fail "overlay: a deleted lower file is still there"
[ "$(cat "$OV/mv2")" = moved ] || fail "overlay: the renamed lower file"
[ "$(cat "$OV/keep")" = "$(printf 'lower\nchanged')" ] || fail "overlay: the copied-up file"
[ ! -e "$OV/dir" ] && [ ! -e "$OV/mv" ] || fail "overlay: removed names still seen"
# The whiteouts are character devices 0:0 in the upper layer, seen on B.
within 2 test -c "$B/ovl/upper/del" || fail "B: no whiteout for the deleted lower file"
[ "$(stat -c %t:%T "$B/ovl/upper/del")" = 0:0 ] || fail "the whiteout's device: $(stat -c %t:%T "$B/ovl/upper/del")"
umount "$OV"
mount -t overlay overlay -o "lowerdir=$L,upperdir=$A/ovl/upper,workdir=$A/ovl/work" "$OV" || fail "overlay mounted again"
[ "$(ls "$OV" | tr '\n' ' ')" = "keep mv2 new " ] || fail "overlay after a remount: $(ls "$OV" | tr '\n' ' ')"
umount "$OV"
rm -r "$A/ovl"
check "overlayfs"

# fallocate (EOPNOTSUPP before): a punched hole reads as zeros, a growth
# sets the size, seen on B; SEEK_HOLE finds the end; statx's birth time.
xfs_io -f -c 'pwrite -S 0x61 0 12k' -c 'fpunch 4k 4k' -c 'falloc 0 20k' -c 'fzero 16k 1k' "$A/fa" >/dev/null || fail "fallocate on an etcd mount"
within 2 test "$(stat -c %s "$B/fa")" = 20480 || fail "B: the size after falloc: $(stat -c %s "$B/fa")"
[ "$(dd if="$B/fa" bs=4096 skip=1 count=1 2>/dev/null | tr -d '\0' | wc -c)" = 0 ] || fail "B: the punched hole is not zeros"
[ "$(od -An -c -j8192 -N1 "$B/fa" | tr -d ' ')" = a ] || fail "B: the bytes after the hole"
xfs_io -c 'seek -h 0' "$A/fa" | grep -q 'HOLE.*20480' || fail "SEEK_HOLE: $(xfs_io -c 'seek -h 0' "$A/fa")"
[ "$(stat -c %W "$A/fa")" -gt 0 ] || fail "statx: no birth time"
rm "$A/fa"
check "fallocate"

# setuid and setgid cleared by a write and a truncate of another user, as
# on ext4 and the embedded mount: setgid without group exec too, for a
# caller outside the file's group (the kernel's FUSE code kept it: the
# daemon takes it under KILLPRIV_V2, rules::privs::write_kills).
for how in write truncate; do
  echo x > "$A/sg-$how"; chmod 6666 "$A/sg-$how"
  if [ $how = write ]; then
    setpriv --reuid=1000 --regid=1000 --clear-groups sh -c "echo y >> '$A/sg-$how'" || fail "$how by uid 1000"
  else
    setpriv --reuid=1000 --regid=1000 --clear-groups truncate -s 1 "$A/sg-$how" || fail "$how by uid 1000"
  fi
  [ "$(stat -c %a "$A/sg-$how")" = 666 ] || fail "a $how by uid 1000 left mode $(stat -c %a "$A/sg-$how") (ext4: 666)"
  within 2 test "$(stat -c %a "$B/sg-$how")" = 666 || fail "B: mode $(stat -c %a "$B/sg-$how") after the $how"
  rm "$A/sg-$how"
done
# And by a chgrp of the owner outside the file's group (setgid without
# group exec goes too: chown_common, setattr_should_drop_sgid).
echo x > "$A/sg-chown"; chown 1000:0 "$A/sg-chown"; chmod 6644 "$A/sg-chown"
setpriv --reuid=1000 --regid=1000 --clear-groups chgrp 1000 "$A/sg-chown" || fail "chgrp by its owner"
[ "$(stat -c %a "$A/sg-chown")" = 644 ] || fail "a chgrp by the owner outside the group left mode $(stat -c %a "$A/sg-chown") (ext4: 644)"
rm "$A/sg-chown"
check "setuid and setgid cleared"

# statfs: blocks from the object store's filesystem, inodes from etcd.
read -r blocks bfree files ffree <<<"$(stat -f -c '%b %f %c %d' "$A")"
read -r oblocks obs <<<"$(stat -f -c '%b %S' "$O")"
[ "$((blocks * 4096))" = "$((oblocks * obs))" ] || fail "statfs blocks $blocks x 4096, the objects' filesystem $oblocks x $obs"
[ "$files" != 16777216 ] && [ "$ffree" -lt "$files" ] && [ "$bfree" -le "$blocks" ] || fail "statfs: $blocks $bfree $files $ffree"
echo "etcd-posix: chattr across mounts, O_TMPFILE, RENAME_EXCHANGE, overlayfs upper layer, fallocate, SEEK_HOLE, statx, setuid/setgid on write and truncate, statfs: ok"
