#!/usr/bin/env bash
# fsx (crates.io) on a file inside a shoal mount: N operations (100000 by
# default) with a fixed seed; must finish clean, and fsck must be clean after.
source "$(dirname "$0")/lib.sh"
N=${FSX_OPS:-100000}
SEED=${FSX_SEED:-7}
MNT=$(mount_fresh fsx "${MOUNT_OPTS:-allow_other}")
cd "$MNT"
t=$(now)
fsx -N "$N" -S "$SEED" -P "$WORK" "$MNT/fsx.dat" > "$WORK/fsx.log" 2>&1 || { tail -40 "$WORK/fsx.log"; exit 1; }
cd /
unmount_check fsx >/dev/null
echo "fsx: $N operations, seed $SEED, clean ($(elapsed $t) s), fsck clean"
