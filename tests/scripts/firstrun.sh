#!/usr/bin/env bash
# The README's first command on a bare Debian 12: scripts/setup.sh run in a
# minimal Debian 12 root (debootstrap --variant=minbase bookworm: no fuse3,
# no kmod, no compiler) given only Rust (the host's ~/.cargo and ~/.rustup)
# and this checkout. setup.sh must install what it needs, say what it
# changed, and leave a mount of type fuse.shoal that a plain
# `mount -o remount,ro MNT` (mount(8) finding /sbin/mount.fuse.shoal by the
# type) makes read-only (a write fails with EROFS) and `remount,rw` writable
# again; a second run changes nothing.
#
# Everything runs in a private mount namespace (unshare -m), so no mount of
# the test is seen outside it, and none outlives it even if cleanup fails.
# The root is made once and kept as a tarball in $CACHE (reruns unpack it
# fresh: nothing installed survives a run), with the downloaded packages
# (apt's archives, bound into the root). The build shares this checkout's
# target directory at the same path, so it is as fresh as the host's;
# FIRSTRUN_FRESH_BUILD=1 builds in the root's own target instead (slow:
# every dependency, to prove the installed compilers build them).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${SHOAL_CI_CACHE:-/var/cache/shoal-ci}
BASE=$CACHE/bookworm-minbase-root.tar
R=$CACHE/firstrun.root
fail() { echo "firstrun: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot, mount)"
[ -e /dev/fuse ] || fail "no /dev/fuse"
[ -d "$HOME/.cargo" ] && [ -d "$HOME/.rustup" ] || fail "needs Rust in $HOME/.cargo and $HOME/.rustup (rustup)"
command -v debootstrap >/dev/null || fail "debootstrap missing: run scripts/install-deps.sh --tests"
mkdir -p "$CACHE/apt-archives/partial"

# The mirror this machine's apt uses (deb822 or one-line sources).
mirror() {
  local m
  m=$(awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$m" ] || m=$(awk '/^deb / && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  echo "${m:-http://deb.debian.org/debian}"
}

# Mounts under DIR in this namespace (deepest first).
mounts_under() { awk -v d="$1" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r; }

if [ ! -s "$BASE" ]; then
  M=$(mirror); t0=$SECONDS
  echo "firstrun: debootstrap --variant=minbase bookworm from $M (once; kept in $BASE)"
  rm -rf "$CACHE/build"
  debootstrap --variant=minbase bookworm "$CACHE/build" "$M" >"$CACHE/debootstrap.log" 2>&1 ||
    { tail -5 "$CACHE/debootstrap.log"; fail "debootstrap failed (log: $CACHE/debootstrap.log)"; }
  tar -C "$CACHE/build" -cf "$BASE.tmp" . && mv "$BASE.tmp" "$BASE"
  rm -rf "$CACHE/build"
  echo "firstrun: root made in $((SECONDS - t0)) s"
fi

# The rest in a private mount namespace: the binds, /proc, the shoal mount.
if [ -z "${FIRSTRUN_INSIDE:-}" ]; then
  exec unshare -m --propagation private env FIRSTRUN_INSIDE=1 bash "$0" "$@"
fi

cleanup() {
  local rc=$? p m
  # The daemon first (it keeps the namespace alive), then every mount.
  if [ -x "$R/usr/local/bin/shoal" ] && grep -qs " $R/mnt/shoal " /proc/self/mounts; then
    chroot "$R" /usr/local/bin/shoal umount /mnt/shoal >/dev/null 2>&1 || true
  fi
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$R" ] && kill -9 "${p#/proc/}" 2>/dev/null || true
  done
  for m in $(mounts_under "$R"); do umount -l "$m" 2>/dev/null || true; done
  # Never remove through a bind (the checkout, ~/.cargo): only a root
  # with nothing mounted under it.
  if [ -z "$(mounts_under "$R")" ]; then rm -rf "$R"; else echo "firstrun: mounts left under $R, not removed" >&2; fi
  exit $rc
}
trap cleanup EXIT

[ -z "$(mounts_under "$R")" ] || fail "mounts under $R: $(mounts_under "$R" | tr '\n' ' ')"
t0=$SECONDS
rm -rf "$R"; mkdir -p "$R"
tar -C "$R" -xf "$BASE"
for c in gcc cc protoc modprobe fusermount3; do
  chroot "$R" /bin/sh -c "command -v $c" >/dev/null && fail "the bare root already has $c"
done
cp /etc/resolv.conf "$R/etc/resolv.conf"
mount -t proc proc "$R/proc"
mount --bind /sys "$R/sys"
mount --rbind /dev "$R/dev"
mkdir -p "$R$REPO" "$R$HOME/.cargo" "$R$HOME/.rustup"
mount --bind "$REPO" "$R$REPO"
mount --bind "$HOME/.cargo" "$R$HOME/.cargo"
mount --bind "$HOME/.rustup" "$R$HOME/.rustup"
mount --bind "$CACHE/apt-archives" "$R/var/cache/apt/archives"
# apt in a minimal root removes what it downloaded after installing it;
# keep the packages for the next run.
echo 'APT::Keep-Downloaded-Packages "true";' >"$R/etc/apt/apt.conf.d/99keep"

# in_root CMD: run CMD in the root as a login there would (PATH without Rust:
# setup.sh must find cargo by itself, in ~/.cargo/bin).
in_root() {
  local fresh=()
  [ -n "${FIRSTRUN_FRESH_BUILD:-}" ] && fresh=(CARGO_TARGET_DIR=/root/shoal-target)
  chroot "$R" /usr/bin/env -i HOME="$HOME" TERM=dumb LANG=C.UTF-8 "${fresh[@]}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c "$1"
}

out=$(in_root "cd '$REPO' && ./scripts/setup.sh" 2>&1) || { echo "$out" | tail -20; fail "setup.sh failed"; }
echo "$out" | sed 's/^/  | /'
t_setup=$((SECONDS - t0))
for said in "install-deps: installing .*fuse3.*kmod" "installed /usr/local/bin/shoal" "installed /sbin/mount.fuse.shoal" \
  "created shoal store at /var/lib/shoal/default" "STORE/reserve\|/reserve, [0-9]* MiB" "mounted /var/lib/shoal/default at /mnt/shoal"; do
  echo "$out" | grep -q "$said" || fail "setup.sh did not say: $said"
done
for c in gcc protoc modprobe fusermount3; do
  in_root "command -v $c" >/dev/null || fail "setup.sh did not install $c"
done

# The mount, by its type, and plain remounts.
in_root "findmnt -n -t fuse.shoal /mnt/shoal" >/dev/null || fail "no fuse.shoal mount at /mnt/shoal: $(grep " $R/mnt/shoal " /proc/self/mounts)"
in_root "echo hello > /mnt/shoal/f && [ \"\$(cat /mnt/shoal/f)\" = hello ]" || fail "write or read on the mount"
in_root "mount -o remount,ro /mnt/shoal" || fail "mount -o remount,ro /mnt/shoal"
err=$(in_root "echo x > /mnt/shoal/g" 2>&1) && fail "a write succeeded on the read-only remount"
[[ $err == *"Read-only file system"* ]] || fail "a write on the read-only remount: $err (want EROFS)"
in_root "cat /mnt/shoal/f" >/dev/null || fail "a read on the read-only remount"
in_root "mount -o remount,rw /mnt/shoal && echo x > /mnt/shoal/g" || fail "mount -o remount,rw, then a write"

# setup.sh again: nothing to install, nothing to make, the mount kept.
again=$(in_root "cd '$REPO' && ./scripts/setup.sh" 2>&1) || { echo "$again" | tail -20; fail "setup.sh failed the second time"; }
echo "$again" | grep -q "installing\|created shoal store\|enabled FUSE" && fail "setup.sh changed something the second time: $again"
echo "$again" | grep -q "/mnt/shoal is already mounted" || fail "second setup.sh: $again"
in_root "[ \"\$(cat /mnt/shoal/f)\" = hello ]" || fail "the file is gone after a second setup.sh"
in_root "shoal umount /mnt/shoal && shoal fsck /var/lib/shoal/default" >/dev/null || fail "umount or fsck after setup"

echo "firstrun: setup.sh on a bare Debian 12 minbase installed, built and mounted in ${t_setup} s (fuse.shoal);" \
  "plain remount,ro gave EROFS, remount,rw writable; a second run changed nothing; fsck clean; $((SECONDS - t0)) s in all"
