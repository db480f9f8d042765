#!/usr/bin/env bash
# pjdfstest (crates.io) on a real shoal mount, as root, with the users nobody
# and tests. Every test must pass except those in tests/pjdfstest/exclude.txt
# (each with its reason). Prints passed/total.
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")/../pjdfstest" && pwd)
MNT=$(mount_fresh pjd "${MOUNT_OPTS:-allow_other}")
SEC=$WORK/pjd.secondary
mkdir -p "$SEC"; mountpoint -q "$SEC" || mount -t tmpfs -o size=64m tmpfs "$SEC"
trap 'umount "$SEC" 2>/dev/null || true' EXIT
cd "$MNT"
set +e
pjdfstest -c "$here/pjdfstest.toml" -p "$MNT" -s "$SEC" > "$WORK/pjdfstest.log" 2>&1
rc=$?
set -e
cd /
unmount_check pjd >/dev/null
summary=$(grep '^Summary:' "$WORK/pjdfstest.log")
echo "pjdfstest: $summary"
mapfile -t failed < <(awk '$NF == "FAILED" || $NF == "failed" {print $1}' "$WORK/pjdfstest.log")
excluded=$(awk '!/^#/ && NF {print $1}' "$here/exclude.txt")
bad=0
for t in "${failed[@]}"; do
  if ! grep -qx "$t" <<<"$excluded"; then echo "pjdfstest: unexpected failure: $t"; bad=1; fi
done
if [ $bad -ne 0 ] || { [ $rc -ne 0 ] && [ ${#failed[@]} -eq 0 ]; }; then
  tail -30 "$WORK/pjdfstest.log"; exit 1
fi
