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
[ -e "$STORE/SHOAL" ] || shoal mkfs "$STORE"
mkdir -p "$MNT"
if mountpoint -q "$MNT"; then
  echo "$MNT is already mounted"
else
  mount -t fuse.shoal "$STORE" "$MNT" -o allow_other
fi
echo "shoal is mounted at $MNT (store $STORE). Unmount with: shoal umount $MNT"
