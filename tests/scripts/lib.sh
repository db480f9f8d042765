# Shared helpers for the shell-level tests. Source it; needs SHOAL (the binary).
set -euo pipefail
SHOAL=${SHOAL:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/release/shoal}
WORK=${WORK:-/tmp/shoal-tests}
mkdir -p "$WORK"

# mount_fresh NAME [OPTS]: a new store $WORK/NAME.store mounted at $WORK/NAME.mnt
mount_fresh() {
  local name=$1 opts=${2:-allow_other}
  local store=$WORK/$name.store mnt=$WORK/$name.mnt
  mountpoint -q "$mnt" 2>/dev/null && "$SHOAL" umount "$mnt" || true
  rm -rf "$store"; mkdir -p "$mnt"
  "$SHOAL" mkfs "$store" >/dev/null
  "$SHOAL" mount -d "$store" "$mnt" -o "$opts" >/dev/null
  echo "$mnt"
}

# unmount_check NAME: unmount and require a clean fsck.
unmount_check() {
  local name=$1
  "$SHOAL" umount "$WORK/$name.mnt"
  "$SHOAL" fsck "$WORK/$name.store"
}

now() { date +%s.%N; }
elapsed() { echo "$(now) - $1" | bc -l | xargs printf '%.2f'; }
