#!/usr/bin/env bash
# An I/O error from the store's own files shuts the filesystem down; it
# never hangs (issue 43). Faults on real files, as root:
#   1. the tables directory made immutable (chattr +i) while the mount
#      serves: the next LSM flush cannot create a table (EPERM);
#   2. the journal's directory and files made immutable: the next commit
#      cannot write its journal record;
#   2b. case 2 with -o errors=ro (EROFS for changes, EIO for fsync);
#   3. the store's directory removed while the daemon shuts down;
#   4. EIO from a fault-injecting layer under the daemon (tests/faults/eio.c,
#      LD_PRELOAD) on the journal (while serving, at unmount, from the
#      mount on), the tables (a flush), the manifest (a flush), a data
#      object's write and sync, and the reserve file (only a warning: it
#      holds nothing);
#   5. a small loop device filled by another program while the mount
#      serves (ENOSPC, not a hang; the final commit fits in the room kept).
# Each time: every operation returns within a bound (`timeout`), a change
# after the failure gets EIO, an fsync never reports success for what it
# could not make durable, reads go on, `shoal umount` ends within a bound
# with a non-zero status and the reason (what to do next), the daemon is
# gone; and after the fault is cleared (chattr -i) the store mounts again
# with every file fsync'ed before the fault, and fsck finds it clean.
source "$(dirname "$0")/lib.sh"
S=$WORK/faults.store; M=$WORK/faults.mnt
fail() { echo "faults: $*"; [ -f "$S/daemon.log" ] && tail -20 "$S/daemon.log"; exit 1; }
# Never leave an immutable directory behind: the next run must remove it.
unfreeze() { [ -d "$S" ] && chattr -R -i "$S" 2>/dev/null || true; }
cleanup() { unfreeze; unmount_stale "$M"; }
trap cleanup EXIT
cleanup
command -v chattr >/dev/null || fail "chattr (e2fsprogs) is needed"
[ "$(id -u)" = 0 ] || fail "needs root (chattr +i)"
BOUND=30   # seconds any one operation may take, unmount included

# start [OPTS]: a fresh store mounted at $M; DPID is its daemon.
start() {
  unfreeze; unmount_stale "$M"; rm -rf "$S"; mkdir -p "$M"
  "$SHOAL" mkfs "$S" >/dev/null
  timeout $BOUND "$SHOAL" mount -d "$S" "$M" -o "allow_other${1:+,$1}" >/dev/null || fail "mount"
  DPID=$(pgrep -f " mount $S $M --background-child" | head -1 || true)
  [ -n "$DPID" ] || fail "no daemon for $M"
}
# kept: files written and fsync'ed before the fault, with their digests.
write_kept() {
  timeout $BOUND python3 - "$M" <<'PY' || fail "writing the files kept before the fault"
import os, sys
m = sys.argv[1]
for i in range(50):
    with open(f"{m}/kept{i}", "wb") as f:
        f.write((f"kept {i} " * (1 + i * 40)).encode())
        os.fsync(f.fileno())
PY
  (cd "$M" && sha256sum kept*) > "$WORK/faults.sums"
}
# after_fault_writes: create and fsync files until one fails (at most
# 40,000 files of 4,000 bytes: past the 64 MiB memtable, so a flush must
# run); the failure must be EIO, and the files that got past fsync are
# listed in $WORK/faults.acked.
after_fault_writes() {
  timeout 120 python3 - "$M" "$WORK/faults.acked" <<'PY'
import os, sys, errno
m, acked = sys.argv[1], sys.argv[2]
with open(acked, "w") as log:
    for i in range(40000):
        p = f"{m}/w{i}"
        try:
            with open(p, "wb") as f:
                f.write(b"x" * 4000)
                if i % 100 == 99:
                    os.fsync(f.fileno())
                    log.write(f"w{i}\n"); log.flush()
        except OSError as e:
            print(errno.errorcode.get(e.errno, e.errno), i)
            sys.exit(0)
print("none", 40000)
PY
}
# umount_bounded: shoal umount returns within the bound, non-zero, saying
# what to do; the daemon is gone.
umount_bounded() {
  local out rc=0 t0=$SECONDS
  out=$(timeout $BOUND "$SHOAL" umount "$M" 2>&1) || rc=$?
  [ $rc -ne 124 ] || fail "$1: shoal umount still waiting after $BOUND s (a hang)"
  [ $rc -ne 0 ] || fail "$1: shoal umount exited 0 after a store failure: $out"
  [[ $out == *fsck* || $out == *journal* ]] || fail "$1: shoal umount does not say what to do: $out"
  echo "  umount: status $rc after $((SECONDS - t0)) s: $out"
  daemon_gone "$1"
}
daemon_gone() {
  local i
  for i in $(seq $((BOUND * 10))); do kill -0 "$DPID" 2>/dev/null || return 0; sleep 0.1; done
  fail "$1: the daemon (pid $DPID) is still running $BOUND s after unmount"
}
# remount_check WHAT: after the fault is cleared, the store mounts and
# every file fsync'ed before the fault (and after it, until the failure)
# reads back; unmount is clean and fsck finds nothing.
remount_check() {
  unfreeze
  timeout $BOUND "$SHOAL" mount -d "$S" "$M" -o allow_other >/dev/null || fail "$1: mount after the fault was cleared"
  (cd "$M" && timeout $BOUND sha256sum -c --quiet "$WORK/faults.sums") || fail "$1: a file fsync'ed before the fault is not as written"
  if [ -s "$WORK/faults.acked" ]; then
    local f
    while read -r f; do [ -f "$M/$f" ] || fail "$1: $f was fsync'ed and is gone"; done < "$WORK/faults.acked"
  fi
  timeout $BOUND "$SHOAL" umount "$M" || fail "$1: unmount after the fault was cleared"
  timeout 120 "$SHOAL" fsck "$S" >/dev/null || fail "$1: fsck: $("$SHOAL" fsck "$S" 2>&1 | tail -3)"
}

# first_change_fails WHAT: the first change after the fault (the create,
# the write or the fsync, whichever meets the failed commit first) fails
# with EIO, no fsync reports success after it, a create fails, reads go on.
first_change_fails() {
  local out
  out=$(timeout $BOUND python3 "$(dirname "$0")/steps.py" "$M/after" write:15 fsync fsync 2>&1) ||
    fail "$1: write and fsync after the fault: $out"
  echo "  $out" | tr '\n' ' '; echo
  [[ $out == *"Input/output error"* ]] || fail "$1: no EIO after the fault: $out"
  [[ $out != *"fsync ok"* ]] || fail "$1: an fsync reported success for what could not be made durable"
  out=$(timeout $BOUND touch "$M/more" 2>&1) && fail "$1: a create after the failure succeeded"
  [[ $out == *"Input/output error"* ]] || fail "$1: a create after the failure: $out"
  [ "$(timeout $BOUND cat "$M/kept3" | head -c 6)" = "kept 3" ] || fail "$1: kept3 reads back wrong"
}

echo "1. the tables directory made immutable while the mount serves"
start memory_mb=100
for i in $(seq 300); do echo "$i" > "$M/f$i"; done
write_kept
chattr +i "$S"/db/keyspaces/*/tables
r=$(after_fault_writes) || fail "tables: the writes did not end within 120 s"
echo "  writes after the fault: $r"
[[ $r == EIO* ]] || fail "tables: expected EIO once the flush failed, got: $r"
out=$(timeout $BOUND touch "$M/more" 2>&1) && fail "tables: a create after the failure succeeded"
[[ $out == *"Input/output error"* ]] || fail "tables: a create after the failure: $out"
# fsync of a file written before the failure: never success for what may
# not be durable (here: an earlier fsync covered it, so success is allowed;
# what must not happen is a hang).
timeout $BOUND cat "$M/f7" >/dev/null || fail "tables: a read after the failure"
[ "$(timeout $BOUND cat "$M/f7")" = 7 ] || fail "tables: f7 reads back wrong"
timeout $BOUND ls "$M" >/dev/null || fail "tables: readdir after the failure"
st=$(timeout $BOUND "$SHOAL" stats --json "$M" 2>&1) || fail "tables: shoal stats: $st"
[[ $st == *'"failure":{'*"flush"* ]] || fail "tables: shoal stats does not say the flush failed: $st"
umount_bounded tables
grep -q 'store failed' "$S/daemon.log" || fail "tables: the daemon log does not say the store failed"
remount_check tables

echo "2. the journal's directory and files made immutable"
start
for i in $(seq 300); do echo "$i" > "$M/f$i"; done
write_kept
rm -f "$WORK/faults.acked"
chattr +i "$S"/db/*.jnl "$S"/db
first_change_fails journal
[ "$(timeout $BOUND cat "$M/f7")" = 7 ] || fail "journal: f7 reads back wrong"
umount_bounded journal
remount_check journal

echo "2b. the same with -o errors=ro: changes get EROFS, fsync still EIO"
start errors=ro
write_kept
rm -f "$WORK/faults.acked"
chattr +i "$S"/db/*.jnl "$S"/db
timeout $BOUND python3 -c 'import os, sys; f = os.open(sys.argv[1] + "/kept0", os.O_WRONLY); os.write(f, b"x"); os.fsync(f)' "$M" 2>/dev/null \
  && fail "errors=ro: an fsync after the fault succeeded"
out=$(timeout $BOUND touch "$M/more" 2>&1) && fail "errors=ro: a create after the failure succeeded"
[[ $out == *"Read-only file system"* ]] || fail "errors=ro: a create after the failure: $out"
timeout $BOUND cat "$M/kept1" >/dev/null || fail "errors=ro: a read after the failure"
umount_bounded errors=ro
# kept0 was written after the fault: compare the others only.
sed -i '/ kept0$/d' "$WORK/faults.sums"
remount_check errors=ro

echo "3. the store's directory removed while the daemon shuts down"
start
for i in $(seq 300); do echo "$i" > "$M/f$i"; done
timeout $BOUND fusermount3 -u "$M" || fail "removed: fusermount3 -u"
rm -rf "$S"
daemon_gone removed
echo "  the daemon exited"

# 4. EIO from the disk, through a fault-injecting layer under the daemon
# (tests/faults/eio.c, LD_PRELOAD): write and sync calls on the files whose
# path holds the text in $EIOFLAG fail with EIO while that file exists.
EIO=$WORK/faults-eio.so EIOFLAG=$WORK/faults.eio
cc -shared -fPIC -O2 -o "$EIO" "$(dirname "$0")/../faults/eio.c" -ldl || fail "building the EIO layer"
rm -f "$EIOFLAG"
eio_start() { LD_PRELOAD=$EIO SHOAL_EIO_FLAG=$EIOFLAG start "$@"; }
eio_clear() { rm -f "$EIOFLAG"; }
# flush_fails WHAT TEXT: a mount with small memtables, EIO on the store's
# files whose path holds TEXT, writes until a flush meets it: EIO, no
# create after, `shoal stats` names the flush, umount bounded, and the
# store mounts again once the fault is cleared.
flush_fails() {
  local r out st
  eio_start memory_mb=100
  write_kept
  echo "$2" > "$EIOFLAG"
  r=$(after_fault_writes) || fail "$1: the writes did not end within 120 s"
  echo "  writes after the fault: $r"
  [[ $r == EIO* ]] || fail "$1: expected EIO once the flush failed, got: $r"
  out=$(timeout $BOUND touch "$M/more" 2>&1) && fail "$1: a create after the failure succeeded"
  st=$(timeout $BOUND "$SHOAL" stats --json "$M" 2>&1) || fail "$1: shoal stats: $st"
  [[ $st == *'"failure":{'*"flush"* ]] || fail "$1: shoal stats does not say the flush failed: $st"
  umount_bounded "$1"
  eio_clear
  remount_check "$1"
}

echo "4a. EIO on the journal's writes and syncs while the mount serves"
eio_start
write_kept
rm -f "$WORK/faults.acked"
echo ".jnl" > "$EIOFLAG"
first_change_fails eio-journal
umount_bounded eio-journal
eio_clear
remount_check eio-journal

echo "4b. EIO on the tables' writes: an LSM flush fails"
flush_fails eio-tables "/tables/"

echo "4c. EIO on a data object's sync: that fsync fails, and every later one"
eio_start
write_kept
rm -f "$WORK/faults.acked"
echo "$S/data/" > "$EIOFLAG"
out=$(timeout $BOUND python3 "$(dirname "$0")/steps.py" "$M/big" write:1048576 fsync fsync fsync 2>&1) ||
  fail "eio-data: write and fsync: $out"
echo "  $out" | tr '\n' ' '; echo
# The daemon writes the object itself (the file is new) or the kernel does
# (passthrough) and the daemon's sync meets the error: either way the error
# reaches the caller, and no fsync succeeds after it.
[[ $out == *"Input/output error"* ]] || fail "eio-data: no EIO from the write or the fsync: $out"
[[ $out != *"fsync ok"* ]] || fail "eio-data: an fsync reported success for data that could not be written or synced: $out"
out=$(timeout $BOUND touch "$M/more" 2>&1) && fail "eio-data: a create after the failed sync succeeded"
[[ $out == *"Input/output error"* ]] || fail "eio-data: a create after the failed sync: $out"
umount_bounded eio-data
eio_clear
remount_check eio-data

echo "4d. EIO on the journal at unmount: the final commit fails"
eio_start
write_kept
rm -f "$WORK/faults.acked"
for i in $(seq 300); do echo "$i" > "$M/late$i"; done
echo ".jnl" > "$EIOFLAG"
umount_bounded eio-unmount
eio_clear
remount_check eio-unmount

echo "4e. EIO on the LSM's table list (its manifest, keyspaces/1/vN) at a flush"
flush_fails eio-manifest "/keyspaces/1/v"

echo "4f. EIO on the reserve file at the mount: a warning, nothing lost, the mount serves"
unfreeze; unmount_stale "$M"; rm -rf "$S"; mkdir -p "$M"
"$SHOAL" mkfs "$S" >/dev/null
rm -f "$S/reserve"
echo "$S/reserve" > "$EIOFLAG"
LD_PRELOAD=$EIO SHOAL_EIO_FLAG=$EIOFLAG timeout $BOUND "$SHOAL" mount -d "$S" "$M" -o allow_other >/dev/null || fail "eio-reserve: mount"
DPID=$(pgrep -f " mount $S $M --background-child" | head -1 || true)
write_kept
timeout $BOUND "$SHOAL" umount "$M" || fail "eio-reserve: unmount"
grep -q "no reserve held" "$S/daemon.log" || fail "eio-reserve: the log does not say the reserve failed"
eio_clear
rm -f "$WORK/faults.acked"
remount_check eio-reserve

echo "4g. EIO on the journal from the start: the mount either refuses or shuts down at its first change"
unfreeze; unmount_stale "$M"; rm -rf "$S"; mkdir -p "$M"
"$SHOAL" mkfs "$S" >/dev/null
echo ".jnl" > "$EIOFLAG"
rc=0; out=$(LD_PRELOAD=$EIO SHOAL_EIO_FLAG=$EIOFLAG timeout $BOUND "$SHOAL" mount -d "$S" "$M" -o allow_other 2>&1) || rc=$?
[ $rc -ne 124 ] || fail "eio-mount: the mount still waiting after $BOUND s"
if [ $rc -eq 0 ]; then
  DPID=$(pgrep -f " mount $S $M --background-child" | head -1 || true)
  out=$(timeout $BOUND python3 -c 'import os, sys; f = os.open(sys.argv[1] + "/first", os.O_CREAT | os.O_WRONLY); os.fsync(f)' "$M" 2>&1) &&
    fail "eio-mount: a create and fsync on a journal that fails succeeded"
  [[ $out == *"Input/output error"* ]] || fail "eio-mount: the first change: $out"
  echo "  mounted; the first change got EIO"
  umount_bounded eio-mount
else
  [[ $out == *"$S"* ]] || fail "eio-mount: the refusal does not name the store: $out"
  echo "  refused: ${out:0:200}"
fi
eio_clear
timeout $BOUND "$SHOAL" mount -d "$S" "$M" -o allow_other >/dev/null || fail "eio-mount: mount after the fault was cleared"
timeout $BOUND "$SHOAL" umount "$M" || fail "eio-mount: unmount after the fault was cleared"

echo "5. the device filled by another program while the mount serves (ENOSPC)"
IMG=/dev/shm/shoal-faults.img; FS=$WORK/faults.fs
umount "$FS" 2>/dev/null || true
truncate -s 64M "$IMG"; mkfs.ext4 -q -F "$IMG"; mkdir -p "$FS"; mount -o loop "$IMG" "$FS"
trap 'cleanup; umount "$FS" 2>/dev/null || true; rm -f "$IMG"' EXIT
S=$FS/store
start
for i in $(seq 300); do echo "$i" > "$M/f$i"; done
write_kept
# Another program takes every free block; the reserve goes at the next write.
dd if=/dev/zero of="$FS/filler" bs=1M 2>/dev/null || true
r=$(after_fault_writes) || fail "enospc: the writes did not end within 120 s"
echo "  writes on the full device: $r"
[[ $r == ENOSPC* || $r == EIO* ]] || fail "enospc: expected ENOSPC (or EIO), got: $r"
[ "$(timeout $BOUND cat "$M/f7")" = 7 ] || fail "enospc: f7 reads back wrong"
rc=0; out=$(timeout $BOUND "$SHOAL" umount "$M" 2>&1) || rc=$?
[ $rc -ne 124 ] || fail "enospc: shoal umount still waiting after $BOUND s (a hang)"
echo "  umount: status $rc: ${out:0:200}"
daemon_gone enospc
rm -f "$FS/filler"
remount_check enospc

echo "faults: ok"
