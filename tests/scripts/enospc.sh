#!/usr/bin/env bash
# A full disk is a state you can leave. A store alone on a small loop-mounted
# ext4 is filled through the mount (fsync after every file) until ENOSPC (not
# EIO, not a hang). Then, on the still-full disk and again after a remount:
# deletes succeed and give real disk space back within seconds, new files
# can be written again, `shoal umount` exits 0, fsck is clean, and after a
# last remount exactly the files the model expects are there, each with its
# content (nothing acknowledged undone, nothing deleted back).
source "$(dirname "$0")/lib.sh"
IMG=/dev/shm/shoal-enospc.img
FS=$WORK/enospc.fs; MNT=$WORK/enospc.mnt
fail() { echo "enospc: $*"; [ -n "${ENOSPC_DEBUG:-}" ] && ls -ls "$FS/store" "$FS/store/db" "$FS/store/db/keyspaces/1/tables"; exit 1; }
cleanup() { "$SHOAL" umount "$MNT" 2>/dev/null || true; cp "$FS/store/daemon.log" "$WORK/enospc.daemon.log" 2>/dev/null || true; umount "$FS" 2>/dev/null || true; rm -f "$IMG"; }
trap cleanup EXIT
cleanup
truncate -s 64M "$IMG"; mkfs.ext4 -q -F "$IMG"
mkdir -p "$FS" "$MNT"; mount -o loop "$IMG" "$FS"
"$SHOAL" mkfs "$FS/store" >/dev/null
"$SHOAL" mount -d "$FS/store" "$MNT" >/dev/null
# fill PREFIX: write PREFIX0, PREFIX1, ... (64 KiB of random bytes each,
# fsync'ed) until ENOSPC; prints how many were written and keeps each file's
# digest in $WORK/enospc.sums. A file whose write failed is removed.
fill() {
  python3 - "$MNT" "$1" "$WORK/enospc.sums" <<'PY'
import os, sys, errno, hashlib
mnt, prefix, sums = sys.argv[1:4]
n = 0
with open(sums, "a") as out:
    for i in range(100000):
        p = f"{mnt}/{prefix}{i}"
        data = os.urandom(64 * 1024)
        try:
            with open(p, "wb") as f:
                f.write(data)
                os.fsync(f.fileno())
        except OSError as e:
            if e.errno != errno.ENOSPC:
                print(f"expected ENOSPC, got {e}", file=sys.stderr)
                sys.exit(1)
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
            break
        out.write(f"{prefix}{i} {hashlib.sha256(data).hexdigest()}\n")
        n += 1
print(n)
PY
}
avail() { df --output=avail -B1 "$FS" | tail -1; }
rm -f "$WORK/enospc.sums"
a=$(fill a) || fail "filling"
[ "$a" -gt 0 ] || fail "nothing was written"
# Creates on the full store end in ENOSPC. The file the fill gave up on is
# deleted, and its space may come back at the next commit, so a few creates
# may still fit (as on ext4): the store must refuse one within 200.
n=0; err=
while [ $n -lt 200 ]; do err=$(touch "$MNT/x$n" 2>&1) || break; n=$((n + 1)); done
[ $n -lt 200 ] || fail "200 creates succeeded on a full store"
[[ $err == *"No space"* ]] || fail "a create on a full store: $err"
rm -f "$MNT"/x*
# Deletes on the full store: every one succeeds and space comes back.
before=$(avail)
for i in $(seq 0 2 $((a - 1))); do rm "$MNT/a$i" || fail "rm a$i on a full store"; done
deleted=$(( (a + 1) / 2 * 65536 ))
for t in $(seq 100); do [ $(( $(avail) - before )) -ge $((deleted / 2)) ] && break; sleep 0.1; done
freed=$(( $(avail) - before ))
[ $freed -ge $((deleted / 2)) ] || fail "deleted $deleted bytes, $freed came back after 10 s"
b=$(fill b) || fail "filling again"
[ "$b" -gt 0 ] || fail "nothing could be written after deletes"
"$SHOAL" umount "$MNT" || fail "umount after a full disk exited $?"
"$SHOAL" fsck "$FS/store" >/dev/null || { "$SHOAL" fsck "$FS/store"; fail "fsck after a full disk"; }
# A remount on the still-full disk: deletes work there too and stay deleted.
"$SHOAL" mount -d "$FS/store" "$MNT" >/dev/null
for i in $(seq 1 2 $((a - 1))); do rm "$MNT/a$i" || fail "rm a$i after a remount on a full disk"; done
"$SHOAL" umount "$MNT" || fail "umount after deletes on a full disk"
"$SHOAL" fsck "$FS/store" >/dev/null || fail "fsck after deletes on a full disk"
"$SHOAL" mount -d "$FS/store" "$MNT" >/dev/null
# The model: no a*, b0..b(b-1), each with its content.
python3 - "$MNT" "$b" "$WORK/enospc.sums" <<'PY' || fail "contents differ from the model"
import os, sys, hashlib
mnt, b, sums = sys.argv[1], int(sys.argv[2]), sys.argv[3]
digest = dict(l.split() for l in open(sums))
want = {f"b{i}" for i in range(b)}
have = set(os.listdir(mnt))
assert have == want, f"extra {sorted(have - want)[:5]}, missing {sorted(want - have)[:5]}"
for n in want:
    with open(f"{mnt}/{n}", "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == digest[n], n
PY
"$SHOAL" umount "$MNT" || fail "last umount"
# A final commit that fails (its journal made immutable) is reported by
# `shoal umount`, with the way on, and not marked clean.
"$SHOAL" mount -d "$FS/store" "$MNT" >/dev/null
rm -f "$MNT"/b*
"$SHOAL" umount "$MNT"
"$SHOAL" mount -d "$FS/store" "$MNT" -o commit_ms=60000 >/dev/null
for t in $(seq 100); do echo late 2>/dev/null > "$MNT/late" && break; sleep 0.1; done
[ -f "$MNT/late" ] || fail "no room after deleting everything"
chattr +i "$FS"/store/db/*.jnl
err=$("$SHOAL" umount "$MNT" 2>&1) && { chattr -i "$FS"/store/db/*.jnl; fail "umount exited 0 after a failed final commit"; }
chattr -i "$FS"/store/db/*.jnl
[[ $err == *"did not close"*"shoal fsck"* ]] || fail "failed final commit message: $err"
"$SHOAL" fsck "$FS/store" >/dev/null || fail "fsck after a failed final commit"
echo "enospc: $a files to ENOSPC, $((a / 2 + a % 2)) deleted on the full store ($((freed >> 20)) MiB back), $b more written, the rest deleted after a remount; umount 0, fsck clean, contents as the model; a failed final commit fails umount"
