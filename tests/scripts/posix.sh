#!/usr/bin/env bash
# Wrong answers real programs and xfstests found, checked through a real
# mount with the tools users run (xfs_io, setfacl, a second user, mount(8)).
# Each check failed on the build before its fix.
source "$(dirname "$0")/lib.sh"
fail() { echo "posix: $*"; exit 1; }
as_nobody() { su nobody -s /bin/sh -c "$1"; }
M=$(mount_fresh posix)
S=$WORK/posix.store

# Truncate to zero, then growth: zeros, not the old bytes (generic/091).
xfs_io -f -c 'pwrite -S 0xa7 0 8k' -c 'truncate 0' -c 'truncate 64k' -c 'pread -v 0 16' "$M/t" >"$WORK/t.out"
grep -q '^00000000:  00 00 00 00' "$WORK/t.out" || fail "stale bytes after truncate 0: $(grep '^0000' "$WORK/t.out")"
printf 'old bytes here %.0s' {1..600} >"$M/t2"; : >"$M/t2"
xfs_io -c 'pwrite -S 0x01 65536 10' "$M/t2" >/dev/null
[ "$(head -c 16 "$M/t2" | od -An -tx1 | tr -d ' \n')" = 00000000000000000000000000000000 ] || fail "stale bytes after : > F"

# POSIX ACLs are enforced (the kernel checks; the daemon keeps mode and ACL in step).
echo secret >"$M/f"; chmod 666 "$M/f"; setfacl -m u:nobody:--- "$M/f"
as_nobody "cat $M/f" 2>/dev/null && fail "an ACL entry u:nobody:--- did not deny reading"
as_nobody "echo x >> $M/f" 2>/dev/null && fail "an ACL entry u:nobody:--- did not deny writing"
touch "$M/g"; chmod 644 "$M/g"; setfacl -m u:nobody:rw "$M/g"
as_nobody "echo x >> $M/g" || fail "an ACL entry u:nobody:rw did not allow writing"
[ "$(stat -c %a "$M/g")" = 664 ] || fail "mode not in step with the ACL mask: $(stat -c %a "$M/g")"
chmod 600 "$M/g"
getfacl -p "$M/g" 2>/dev/null | grep -q '^mask::---' || fail "chmod did not set the ACL mask: $(getfacl -p "$M/g")"
as_nobody "echo x >> $M/g" 2>/dev/null && fail "chmod 600 did not take the ACL's rights away"
default_acl_replaces_umask "$M" "$M"

# Non-owners: writing a world-writable setuid file clears the bit (ext4's answer).
touch "$M/su"; chmod 4777 "$M/su"
as_nobody "echo x >> $M/su" || fail "a non-owner could not write a mode 4777 file"
[ "$(stat -c %a "$M/su")" = 777 ] || fail "setuid not cleared by a non-owner's write: $(stat -c %a "$M/su")"
# Setgid without group exec goes too when the writer is not in the group (the
# kernel's FUSE code keeps it; the daemon clears it), also for fallocate.
touch "$M/sg"; chmod 2666 "$M/sg"
as_nobody "echo x >> $M/sg" || fail "a non-owner could not write a mode 2666 file"
[ "$(stat -c %a "$M/sg")" = 666 ] || fail "setgid kept after a non-group write: $(stat -c %a "$M/sg")"
chmod 6666 "$M/sg"
as_nobody "xfs_io -c 'falloc 0 64k' $M/sg" || fail "a non-owner could not fallocate a mode 6666 file"
[ "$(stat -c %a "$M/sg")" = 666 ] || fail "setuid/setgid kept after a non-owner's fallocate: $(stat -c %a "$M/sg")"

# Device nodes and setuid work by default (dev,suid, as mount(8) gives root).
mknod "$M/null" c 1 3; chmod 666 "$M/null"
echo fred >"$M/null" || fail "writing a device node on a default mount"
grep " $M fuse" /proc/mounts | grep -qE 'nosuid|nodev' && fail "default mount is nosuid or nodev: $(grep " $M " /proc/mounts)"

# xattr namespaces as ext4: unknown ones are EOPNOTSUPP.
err=$(setfattr -n bogus.x -v 1 "$M/g" 2>&1) && fail "an xattr in an unknown namespace was accepted"
[[ $err == *"not supported"* ]] || fail "unknown namespace: $err"
setfattr -n user.ok -v 1 "$M/g" || fail "user.* xattr"

# atime: relatime by default.
echo a >"$M/at"; before=$(stat -c %X "$M/at"); sleep 1.1; cat "$M/at" >/dev/null
[ "$(stat -c %X "$M/at")" != "$before" ] || fail "atime not updated by the first read after a write (relatime)"

# remount ro and back through mount(8) and the helper.
mount -t fuse.shoal -o remount,ro "$S" "$M" || fail "remount,ro"
touch "$M/ro" 2>/dev/null && fail "write after remount,ro"
mount -t fuse.shoal -o remount,rw "$S" "$M" || fail "remount,rw"
touch "$M/rw" || fail "write after remount,rw"

# open_by_handle after the kernel dropped its inode cache (FUSE export support).
xfstests_build
mkdir "$M/h"
"$XFSTESTS/src/open_by_handle" -c "$M/h" 10 || fail "open_by_handle -c"
echo 3 >/proc/sys/vm/drop_caches
"$XFSTESTS/src/open_by_handle" "$M/h" 10 || fail "open_by_handle after drop_caches"
unmount_check posix >/dev/null || fail "fsck after the ACL and truncate checks"

# -o nodev still refuses device nodes.
M=$(mount_fresh nodev allow_other,nodev)
mknod "$M/null" c 1 3; chmod 666 "$M/null"
(echo fred >"$M/null") 2>/dev/null && fail "a device node was usable on a nodev mount"
unmount_check nodev >/dev/null || fail "fsck after nodev"

# chattr: immutable and append-only hold for root too, and survive a remount;
# O_TMPFILE names through linkat; RENAME_WHITEOUT; statx's birth time.
M=$(mount_fresh flags)
echo data >"$M/imm"; chattr +i "$M/imm" || fail "chattr +i"
{ echo more >>"$M/imm"; } 2>/dev/null && fail "append to an immutable file"
rm -f "$M/imm" 2>/dev/null || true; [ -e "$M/imm" ] || fail "rm of an immutable file"
mkdir "$M/ad"; chattr +a "$M/ad"; touch "$M/ad/x" || fail "create in an append-only directory"
rm "$M/ad/x" 2>/dev/null && fail "rm in an append-only directory"
lsattr -d "$M/ad" | grep -q '^-----a' || fail "lsattr -d: $(lsattr -d "$M/ad")"
python3 - "$M" <<'EOF' || fail "O_TMPFILE"
import ctypes, os, sys
fd = os.open(sys.argv[1], os.O_TMPFILE | os.O_RDWR, 0o600)
os.write(fd, b"t" * 9000)
assert os.fstat(fd).st_nlink == 0
assert ctypes.CDLL(None).linkat(fd, b"", -100, (sys.argv[1] + "/tmpf").encode(), 0x1000) == 0
assert os.stat(sys.argv[1] + "/tmpf").st_size == 9000
EOF
touch "$M/wa" "$M/wb"
python3 -c "
import ctypes, sys
sys.exit(ctypes.CDLL(None).renameat2(-100, b'$M/wa', -100, b'$M/wb', 4))" || fail "renameat2 RENAME_WHITEOUT"
[ "$(stat -c '%F %t:%T' "$M/wa")" = "character special file 0:0" ] || fail "whiteout: $(stat -c '%F %t:%T' "$M/wa")"
[ "$(stat -c %W "$M/wb")" -gt 0 ] || fail "no birth time in statx"
unmount_check flags >/dev/null || fail "fsck after chattr, O_TMPFILE, whiteout"
"$SHOAL" mount -d "$WORK/flags.store" "$M" -o allow_other >/dev/null
rm -f "$M/imm" 2>/dev/null || true; [ -e "$M/imm" ] || fail "immutable lost at remount"
chattr -i "$M/imm"; chattr -a "$M/ad"; rm -r "$M/imm" "$M/ad" || fail "rm after chattr -i, -a"
unmount_check flags >/dev/null || fail "fsck after chattr -i, -a"

# The writeback cache: a deleted file is gone from the store too.
M=$(mount_fresh wb allow_other,writeback_cache)
for i in $(seq 20); do echo data >"$M/f$i"; rm "$M/f$i"; done
unmount_check wb >/dev/null || fail "writeback_cache leaked deleted files (fsck)"
echo "posix: truncate, ACLs, setuid, dev/suid, xattr namespaces, atime, remount, handles, chattr, O_TMPFILE, whiteout, btime, writeback cache: ok"
