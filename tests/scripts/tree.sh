#!/usr/bin/env bash
# Tree test: untar a real kernel tree into a shoal mount and into tmpfs, diff -r
# them, tar each to /dev/null, rm -rf both. Prints timings side by side.
# Uses Debian's linux-source tarball (decompressed once, outside the timing).
source "$(dirname "$0")/lib.sh"
TARXZ=${TARXZ:-$(ls /usr/src/linux-source-*.tar.xz | head -1)}
TAR=$WORK/linux.tar
[ -s "$TAR" ] || xz -dc "$TARXZ" > "$TAR"
SH=$(mount_fresh tree)
TM=$WORK/tree.tmpfs
trap 'umount "$TM" 2>/dev/null || true; "$SHOAL" umount "$SH" 2>/dev/null || true' EXIT
mkdir -p "$TM"; mountpoint -q "$TM" || mount -t tmpfs -o size=8g tmpfs "$TM"
declare -A T
for tgt in tmpfs shoal; do
  d=$TM; [ $tgt = shoal ] && d=$SH
  t=$(now); tar -xf "$TAR" -C "$d"; T[$tgt.untar]=$(elapsed $t)
  t=$(now); tar -cf /dev/null -C "$d" .; T[$tgt.tar]=$(elapsed $t)
done
entries=$(find "$SH" | wc -l)
t=$(now); diff -r "$TM" "$SH" >/dev/null || { echo "tree test: the trees differ"; diff -r "$TM" "$SH" | head; exit 1; }; T[diff]=$(elapsed $t)
# Metadata too: every path, type, size and mode must match.
# (Directory sizes are filesystem-specific, and the roots differ: both are left out.)
list() { (cd "$1" && find . -mindepth 1 \( -type d -printf '%p d %m\n' \) -o -printf '%p %y %s %m %l\n' | sort); }
list "$TM" > $WORK/tree.tmpfs.lst
list "$SH" > $WORK/tree.shoal.lst
cmp $WORK/tree.tmpfs.lst $WORK/tree.shoal.lst || { echo "tree test: metadata differs"; exit 1; }
for tgt in tmpfs shoal; do
  d=$TM; [ $tgt = shoal ] && d=$SH
  t=$(now); rm -rf "$d"/*; T[$tgt.rm]=$(elapsed $t)
done
[ -z "$(ls -A "$SH")" ] || { echo "tree test: rm -rf left entries"; exit 1; }
umount "$TM"
unmount_check tree >/dev/null
echo "tree test: $entries entries from $(basename "$TARXZ"), diff -r identical, fsck clean"
printf '%-8s %8s %8s %8s\n' target untar tar rm
printf '%-8s %8s %8s %8s\n' tmpfs "${T[tmpfs.untar]}" "${T[tmpfs.tar]}" "${T[tmpfs.rm]}"
printf '%-8s %8s %8s %8s\n' shoal "${T[shoal.untar]}" "${T[shoal.tar]}" "${T[shoal.rm]}"
echo "diff -r tmpfs shoal: ${T[diff]} s"
