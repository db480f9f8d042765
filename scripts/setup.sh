#!/usr/bin/env bash
# One command to a working mount: install what is missing, build, install the
# binary and the mount helper, create the default store, mount it.
#   store:      /var/lib/shoal/default
#   mountpoint: /mnt/shoal          (unmount: shoal umount /mnt/shoal, or fusermount3 -u /mnt/shoal)
set -euo pipefail
cd "$(dirname "$0")/.."
STORE=${SHOAL_STORE:-/var/lib/shoal/default}
MNT=${SHOAL_MNT:-/mnt/shoal}
bash scripts/install-deps.sh
cargo build --release -q -p shoal
install -m 755 target/release/shoal /usr/local/bin/shoal
install -m 755 scripts/mount.fuse.shoal /sbin/mount.fuse.shoal
# FUSE over io_uring, shoal's default transport, is behind a kernel switch
# (Linux 6.14+): turn it on now and at every boot. Without it mounts serve
# /dev/fuse (slower with several processes; docs/BENCHMARKS.md, "Through FUSE").
P=/sys/module/fuse/parameters/enable_uring
BOOT=(/etc/modprobe.d/shoal-fuse-uring.conf /etc/tmpfiles.d/shoal-fuse-uring.conf)
if [ -e $P ] && { [ "$(cat $P)" != Y ] || [ ! -e "${BOOT[0]}" ] || [ ! -e "${BOOT[1]}" ]; }; then
  echo Y > $P
  echo "options fuse enable_uring=1" > "${BOOT[0]}"
  echo "w $P - - - - Y" > "${BOOT[1]}"
  echo "enabled FUSE over io_uring (fuse.enable_uring=Y), now and at boot:" \
    "${BOOT[*]} (delete both to undo)"
fi
[ -e "$STORE/SHOAL" ] || shoal mkfs "$STORE"
mkdir -p "$MNT"
if mountpoint -q "$MNT"; then
  echo "$MNT is already mounted"
else
  mount -t fuse.shoal "$STORE" "$MNT" -o allow_other
fi
echo "shoal is mounted at $MNT (store $STORE). Unmount with: shoal umount $MNT"
