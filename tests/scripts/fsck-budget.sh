#!/usr/bin/env bash
# fsck holds its memory budget on a store of 1M files: a store of 1,000,000
# empty files (made in engine mode, as scripts/bench-mount.sh makes them),
# closed by a clean unmount, then `shoal fsck --memory-mb 64` and
# `--repair --memory-mb 64` under /usr/bin/time: clean, peak RSS at most
# 64 MiB, the walk's sorts spilled to runs under --scratch (so the bound is
# what held it), and the scratch directory left empty. The walk that held
# every inode in memory took about 700 bytes an inode (690 MB here).
source "$(dirname "$0")/lib.sh"
fail() { echo "fsck-budget: $*"; exit 1; }
N=${FSCK_FILES:-1000000} MB=${FSCK_MB:-64}
D=$WORK/fsck-budget M=$WORK/fsck-budget.mnt
unmount_stale "$M"
rm -rf "$D"; mkdir -p "$D/store" "$D/scratch" "$M"
"$SHOAL" bench create --commit group --store-dir "$D/store" --keep-store \
  --files $((N / 2)) --workers 2 --own-dirs >/dev/null
S=$(ls -d "$D"/store/bench-*)
# A clean close: the journal is flushed, as after `shoal umount`.
"$SHOAL" mount -d "$S" "$M" >/dev/null
"$SHOAL" umount "$M"
for repair in "" --repair; do
  out=$(/usr/bin/time -f 'peak_kb %M' "$SHOAL" fsck $repair --memory-mb "$MB" --scratch "$D/scratch" "$S" 2>&1) ||
    fail "fsck $repair: $out"
  echo "$out" | grep -q " $((N + 4)) inodes, $((N + 3)) entries, .* 0 problems" || fail "fsck $repair: $out"
  echo "$out" | grep -q "in runs on disk" || fail "fsck $repair did not spill (the bound was not what held it): $out"
  kb=$(echo "$out" | awk '/^peak_kb/ {print $2}')
  [ "$kb" -le $((MB * 1024)) ] || fail "fsck $repair: peak RSS $((kb / 1024)) MiB over --memory-mb $MB: $out"
  [ -z "$(ls -A "$D/scratch")" ] || fail "fsck $repair left scratch files: $(ls "$D/scratch")"
  echo "fsck-budget: fsck $repair of $N files: peak RSS $((kb / 1024)) MiB within --memory-mb $MB"
done
rm -rf "$D"
