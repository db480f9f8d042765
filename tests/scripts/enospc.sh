#!/usr/bin/env bash
# ENOSPC: a store on a small loop-mounted ext4 is filled through the mount
# (fsync after every file). The writer must get ENOSPC (not EIO, not a hang),
# everything fsync'ed before must survive, and the store must unmount, pass
# fsck and mount again.
source "$(dirname "$0")/lib.sh"
IMG=/dev/shm/shoal-enospc.img
FS=$WORK/enospc.fs; MNT=$WORK/enospc.mnt
cleanup() { "$SHOAL" umount "$MNT" 2>/dev/null || true; cp "$FS/store/daemon.log" "$WORK/enospc.daemon.log" 2>/dev/null || true; umount "$FS" 2>/dev/null || true; rm -f "$IMG"; }
trap cleanup EXIT
cleanup
truncate -s 48M "$IMG"; mkfs.ext4 -q -F "$IMG"
mkdir -p "$FS" "$MNT"; mount -o loop "$IMG" "$FS"
"$SHOAL" mkfs "$FS/store" >/dev/null
"$SHOAL" mount -d "$FS/store" "$MNT" >/dev/null
written=$(python3 - "$MNT" <<'PY'
import os, sys, errno
mnt = sys.argv[1]
n = 0
try:
    for i in range(100000):
        with open(f"{mnt}/f{i}", "wb") as f:
            f.write(os.urandom(64 * 1024))
            os.fsync(f.fileno())
        n += 1
except OSError as e:
    if e.errno != errno.ENOSPC:
        print(f"expected ENOSPC, got {e}", file=sys.stderr)
        sys.exit(1)
print(n)
PY
)
[ "$written" -gt 0 ] || { echo "enospc: nothing was written"; exit 1; }
"$SHOAL" umount "$MNT"
"$SHOAL" fsck "$FS/store" >/dev/null || { echo "enospc: fsck after a full disk"; "$SHOAL" fsck "$FS/store"; exit 1; }
"$SHOAL" mount -d "$FS/store" "$MNT" >/dev/null
have=$(ls "$MNT" | wc -l)
[ "$have" -ge "$written" ] || { echo "enospc: $written files fsync'ed, $have after remount"; exit 1; }
for i in 0 $((written - 1)); do
  [ "$(stat -c %s "$MNT/f$i")" = 65536 ] || { echo "enospc: f$i has the wrong size"; exit 1; }
done
echo "enospc: $written fsync'ed 64 KiB files then ENOSPC; fsck clean; all $written present after remount"
