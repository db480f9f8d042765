#!/usr/bin/env bash
# pjdfstest through the preload shim (`shoal run MNT -- pjdfstest ...`):
# its opens, creates, mkdirs, unlinks, renames... go to the daemon over the
# client, the rest through the mount, and every test must pass as on the
# mount (tests/pjdfstest/exclude.txt) but the shim's known limits
# (tests/pjdfstest/exclude-shim.txt, each with its reason). It found a
# SIGSEGV in the shim on a bad path pointer (efault tests), ENOENT for a
# path past PATH_MAX, root's
# rights kept after seteuid (the daemon read the credentials once, at
# connect), the umask of the shim's start kept, a fifo's open refused
# (EOPNOTSUPP), rmdir of a mount point served (no EBUSY), and a size
# changed by ftruncate or fallocate unseen through the mount. Prints the
# summary and how many calls the daemon served.
source "$(dirname "$0")/lib.sh"
fail() { echo "pjdfstest-shim: $*"; exit 1; }
here=$(cd "$(dirname "$0")/../pjdfstest" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ -e "$ROOT/target/release/libshoal_shim.so" ] || cargo build --release -q -p shoal-shim
MNT=$(mount_fresh pjdshim)
SEC=$WORK/pjdshim.secondary
mkdir -p "$SEC"; mountpoint -q "$SEC" || mount -t tmpfs -o size=64m tmpfs "$SEC"
trap 'umount "$SEC" 2>/dev/null || true' EXIT
rm -f "$WORK/pjdshim.shimlog"
cd "$MNT"
set +e
SHOAL_SHIM_LOG=$WORK/pjdshim.shimlog timeout 900 "$SHOAL" run "$MNT" -- \
  pjdfstest -c "$here/pjdfstest.toml" -p "$MNT" -s "$SEC" > "$WORK/pjdshim.log" 2>&1
rc=$?
set -e
cd /
# pjdfstest runs a copy of a program from the mount for ETXTBSY (it
# sleeps): the mount is busy until it exits.
for _ in $(seq 40); do "$SHOAL" umount "$MNT" 2>/dev/null && break; sleep 0.5; done
"$SHOAL" fsck "$WORK/pjdshim.store" >/dev/null || fail "fsck after pjdfstest through the shim"
summary=$(grep '^Summary:' "$WORK/pjdshim.log") || { tail -30 "$WORK/pjdshim.log"; fail "no summary (exit $rc)"; }
served=$(grep -c "to the daemon" "$WORK/pjdshim.shimlog" || true)
echo "pjdfstest through the shim: $summary; $served calls served by the daemon"
[ "$served" -ge 1000 ] || fail "only $served calls reached the daemon"
if grep -q "serves no client" "$WORK/pjdshim.shimlog"; then fail "the shim found no client socket"; fi
mapfile -t failed < <(awk '$1 ~ /::/ && ($NF == "FAILED" || $NF == "failed") {print $1}' "$WORK/pjdshim.log")
excluded=$(cat "$here/exclude.txt" "$here/exclude-shim.txt" | awk '!/^#/ && NF {print $1}')
bad=0
for t in "${failed[@]}"; do
  if ! grep -qx "$t" <<<"$excluded"; then echo "pjdfstest-shim: unexpected failure: $t"; bad=1; fi
done
if [ $bad -ne 0 ] || { [ $rc -ne 0 ] && [ ${#failed[@]} -eq 0 ]; }; then
  tail -30 "$WORK/pjdshim.log"; exit 1
fi
