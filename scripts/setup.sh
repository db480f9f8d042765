#!/usr/bin/env bash
# One command to a working mount on Debian 12 (as root, with Rust installed):
# install what is missing, build, install the binary and the mount helper,
# create the default store, mount it. Says each change it makes to the system.
#   store:      /var/lib/shoal/default
#   mountpoint: /mnt/shoal          (unmount: shoal umount /mnt/shoal, or fusermount3 -u /mnt/shoal)
set -euo pipefail
cd "$(dirname "$0")/.."
STORE=${SHOAL_STORE:-/var/lib/shoal/default}
MNT=${SHOAL_MNT:-/mnt/shoal}
export PATH="$HOME/.cargo/bin:$PATH"
said() { echo "setup: $*"; }
if ! command -v cargo >/dev/null; then
  echo "setup: cargo not found: install Rust first (https://rustup.rs), then run this again" >&2; exit 1
fi
bash scripts/install-deps.sh
said "building shoal (cargo build --release -p shoal -p shoal-shim)"
cargo build --release -q -p shoal -p shoal-shim
install -D -m 755 "${CARGO_TARGET_DIR:-target}/release/shoal" /usr/local/bin/shoal
said "installed /usr/local/bin/shoal ($(/usr/local/bin/shoal --version | head -1))"
# `shoal run` puts it under a program (docs/client.md).
install -D -m 644 "${CARGO_TARGET_DIR:-target}/release/libshoal_shim.so" /usr/local/lib/shoal/libshoal_shim.so
said "installed /usr/local/lib/shoal/libshoal_shim.so (the preload shim of shoal run)"
# mount(8) finds a helper by the mount's type: /sbin/mount.fuse.shoal serves
# `mount -t fuse.shoal`, fstab lines and `mount -o remount,ro MNT`.
install -D -m 755 scripts/mount.fuse.shoal /sbin/mount.fuse.shoal
said "installed /sbin/mount.fuse.shoal (the helper of mount -t fuse.shoal)"
# FUSE over io_uring, shoal's default transport, is behind a kernel switch
# (Linux 6.14+): turn it on now and at every boot. Without it mounts serve
# /dev/fuse (slower with several processes; docs/BENCHMARKS.md, "Through FUSE").
# The directories come with kmod and systemd, which a minimal system may lack.
P=/sys/module/fuse/parameters/enable_uring
[ -e $P ] || modprobe fuse 2>/dev/null || true
BOOT=(/etc/modprobe.d/shoal-fuse-uring.conf /etc/tmpfiles.d/shoal-fuse-uring.conf)
if [ -e $P ] && { [ "$(cat $P)" != Y ] || [ ! -e "${BOOT[0]}" ] || [ ! -e "${BOOT[1]}" ]; }; then
  echo Y > $P || said "could not set $P (a container?): mounts serve /dev/fuse"
  mkdir -p "$(dirname "${BOOT[0]}")" "$(dirname "${BOOT[1]}")"
  echo "options fuse enable_uring=1" > "${BOOT[0]}"
  echo "w $P - - - - Y" > "${BOOT[1]}"
  said "enabled FUSE over io_uring (fuse.enable_uring=Y), now and at boot:" \
    "${BOOT[*]} (delete both to undo)"
fi
if [ ! -e "$STORE/SHOAL" ]; then
  shoal mkfs "$STORE" | sed 's/^/setup: /'
fi
if [ ! -d "$MNT" ]; then mkdir -p "$MNT"; said "created mountpoint $MNT"; fi
if mountpoint -q "$MNT"; then
  said "$MNT is already mounted"
else
  mount -t fuse.shoal "$STORE" "$MNT" -o allow_other
  said "mounted $STORE at $MNT (type fuse.shoal; mount options allow_other)"
fi
echo "shoal is mounted at $MNT (store $STORE). Unmount with: shoal umount $MNT;" \
  "mount again with: mount -t fuse.shoal $STORE $MNT"
