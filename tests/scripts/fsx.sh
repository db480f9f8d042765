#!/usr/bin/env bash
# fsx (crates.io) on a file inside a shoal mount: N operations (100000 by
# default) with a fixed seed; must finish clean, and fsck must be clean after.
source "$(dirname "$0")/lib.sh"
N=${FSX_OPS:-100000}
SEED=${FSX_SEED:-7}
MNT=$(mount_fresh fsx "${MOUNT_OPTS:-allow_other}")
cd "$MNT"
if [ "${FSX_PASSTHROUGH:-0}" = 1 ]; then
  # An existing file past the inline size: fsx's open (O_TRUNC) is then a
  # passthrough handle, and every read, write and mmap of the run goes to
  # the data object directly, through truncates to small sizes and back.
  head -c 8M /dev/urandom > "$MNT/fsx.dat"
fi
daemon_writes() { "$SHOAL" stats "$MNT" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['fuse_requests'].get('write', 0))"; }
w0=$(daemon_writes)
t=$(now)
fsx -N "$N" -S "$SEED" -P "$WORK" "$MNT/fsx.dat" > "$WORK/fsx.log" 2>&1 || { tail -40 "$WORK/fsx.log"; exit 1; }
cd /
if [ "${FSX_PASSTHROUGH:-0}" = 1 ]; then
  writes=$(( $(daemon_writes) - w0 ))
  [ "$writes" -lt $((N / 100)) ] || { echo "fsx: $writes WRITE requests of $N operations reached the daemon: passthrough not used"; exit 1; }
  echo "fsx: passthrough: $writes WRITE requests of $N operations reached the daemon"
fi
unmount_check fsx >/dev/null
echo "fsx: $N operations, seed $SEED, clean ($(elapsed $t) s), fsck clean"
