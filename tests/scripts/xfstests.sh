#!/usr/bin/env bash
# xfstests (the Linux filesystem test suite) against shoal mounts: builds the
# suite from ../shared/xfstests once (into target/xfstests), makes its users,
# a test and a scratch store, and runs a group (default: the generic `quick`
# group) with tests/xfstests/exclude.txt, in which every entry names the
# reason FUSE itself cannot pass it. Prints passed / failed / not run and
# fails on any failure not in tests/xfstests/known-failures.txt (open bugs).
#   XFSTESTS_GROUP=auto bash tests/scripts/xfstests.sh   # the long run
#   bash tests/scripts/xfstests.sh generic/091 generic/099  # some tests
#   XFSTESTS_TAG=-auto XFSTESTS=/var/tmp/xt-auto ...   # a second run beside
#     one (its own stores, mountpoints, daemon copy and build of the suite)
#   XFSTESTS_STORE=etcd bash tests/scripts/xfstests.sh   # on etcd mounts: a
#     three-member cluster started here (ports 24501-24513, or from
#     XFSTESTS_ETCD_PORT+1 on), file data in a
#     local directory (the object store's seam, without SeaweedFS's volume
#     limits), tests/xfstests/exclude-etcd.txt added to the exclusions
source "$(dirname "$0")/lib.sh"
xfstests_build
getent group fsgqa >/dev/null || groupadd fsgqa
# generic/597 and 598 need a group of this name too ("fsgqa2 group not defined").
getent group fsgqa2 >/dev/null || groupadd fsgqa2
for u in fsgqa fsgqa2 123456-fsgqa; do id "$u" >/dev/null 2>&1 || useradd -m -g fsgqa "$u"; done
# The daemon the suite mounts: a copy, so a rebuild during a run changes nothing.
T=${XFSTESTS_TAG:-}
BIN=/usr/local/bin/shoal-xfstests$T
install -m 755 "$SHOAL" "$BIN"
D=/var/tmp/shoal-xfstests$T
MT=/mnt/shoal-xt$T
unmount_stale $MT-test $MT-scratch; mkdir -p $MT-test $MT-scratch
if [ "${XFSTESTS_STORE:-}" = etcd ]; then
  EC=$WORK/xt-etcd$T
  trap 'bash "$ROOT/scripts/etcd-cluster.sh" stop "$EC"' EXIT
  EPS=$(bash "$ROOT/scripts/etcd-cluster.sh" start "$EC" "${XFSTESTS_ETCD_PORT:-24500}")
  # One endpoint in the device name: the suite's filters put TEST_DEV in
  # sed expressions delimited by commas.
  for fs in test scratch; do
    rm -rf "$D.$fs.objects"; mkdir -p "$D.$fs.objects"
    "$BIN" mkfs "etcd://${EPS%%,*}/xt-$fs" --data "file://$D.$fs.objects" >/dev/null
  done
  TEST_DEV=etcd://${EPS%%,*}/xt-test SCRATCH_DEV=etcd://${EPS%%,*}/xt-scratch
  EXCLUDE=(-E "$ROOT/tests/xfstests/exclude-etcd.txt")
  KNOWN=("$ROOT/tests/xfstests/known-failures-etcd.txt")
else
  # Each store on a filesystem of its own, 8 GiB on a loop device, as ext4
  # runs the suite on loop devices: a test that fills its filesystem
  # (generic/103 fallocates all the free space, and shoal's fallocate
  # reserves it) fills that one, not the disk the other store is on.
  for fs in test scratch; do
    if mountpoint -q "$D/$fs-fs"; then umount "$D/$fs-fs"; fi
  done
  for l in $(losetup -j "$D.test.img" -O NAME --noheadings 2>/dev/null) $(losetup -j "$D.scratch.img" -O NAME --noheadings 2>/dev/null); do losetup -d "$l" 2>/dev/null || true; done
  rm -rf "$D"; mkdir -p "$D"
  for fs in test scratch; do
    rm -f "$D.$fs.img"; truncate -s 8G "$D.$fs.img"; mkfs.ext4 -q -F "$D.$fs.img"
    mkdir -p "$D/$fs-fs"; mount -o loop "$D.$fs.img" "$D/$fs-fs"
    "$BIN" mkfs "$D/$fs-fs/store" >/dev/null
  done
  TEST_DEV=shoal:$D/test-fs/store SCRATCH_DEV=shoal:$D/scratch-fs/store
  EXCLUDE=() KNOWN=()
fi
cat >"$XFSTESTS/local.config" <<CFG
export FSTYP=fuse
export FUSE_SUBTYP=.shoal
export TEST_DEV=$TEST_DEV
export TEST_DIR=$MT-test
export SCRATCH_DEV=$SCRATCH_DEV
export SCRATCH_MNT=$MT-scratch
export MOUNT_OPTIONS="-o allow_other${XFSTESTS_OPTS:+,$XFSTESTS_OPTS}"
export TEST_FS_MOUNT_OPTS="-o allow_other${XFSTESTS_OPTS:+,$XFSTESTS_OPTS}"
export SHOAL=$BIN
CFG
cd "$XFSTESTS"
rm -rf results
if [ $# -gt 0 ]; then args=("$@"); else args=(-g "${XFSTESTS_GROUP:-quick}"); fi
./check -E "$ROOT/tests/xfstests/exclude.txt" ${EXCLUDE[@]+"${EXCLUDE[@]}"} "${args[@]}" >"$WORK/xfstests.log" 2>&1 || true
grep -E '^(generic|shared)/' "$WORK/xfstests.log" | grep -v '^\s*$' >"$WORK/xfstests.lines" || true
# check's "Ran:" lists every test it tried, those it then found it could not
# run included: passed = tried - not run - failed.
ran=$(sed -n 's/^Ran: //p' "$WORK/xfstests.log" | wc -w)
notrun=$(sed -n 's/^Not run: //p' "$WORK/xfstests.log" | wc -w)
failures=$(sed -n 's/^Failures: //p' "$WORK/xfstests.log")
nfail=$(wc -w <<<"$failures")
excluded=$(cat "$ROOT/tests/xfstests/exclude.txt" ${EXCLUDE[1]:+"${EXCLUDE[1]}"} | sed 's/#.*//' | grep -c '/' || true)
for t in $failures; do
  echo "--- $t"; head -c 3000 "results/$t.out.bad" 2>/dev/null | diff "tests/$t.out" - | head -15 || true
  tail -5 "results/$t.full" 2>/dev/null || true
done
# shoal's umount waits until the daemon has closed its store, which lives
# on the loop filesystems unmounted next.
for m in $MT-test $MT-scratch; do
  if grep -qs " $m " /proc/mounts; then "$BIN" umount "$m" || umount -l "$m"; fi
done
for fs in test scratch; do
  # A daemon of the suite's last mount may still be exiting: a few tries.
  for i in 1 2 3 4 5 6 7 8 9 10; do
    mountpoint -q "$D/$fs-fs" || break
    umount "$D/$fs-fs" 2>/dev/null || sleep 0.5
  done
  if mountpoint -q "$D/$fs-fs"; then umount -l "$D/$fs-fs"; fi
  rm -f "$D.$fs.img"
done
# Known failures: shoal bugs still open (tests/xfstests/known-failures.txt,
# each with its cause). They run and are reported; only a failure not listed
# fails this suite, and a listed test that passes is said, to be struck off.
known=$(cat "$ROOT/tests/xfstests/known-failures.txt" ${KNOWN[@]+"${KNOWN[@]}"} | sed 's/#.*//' | tr -s ' \n' ' ')
new=(); still=(); for t in $failures; do
  if [[ " $known " == *" $t "* ]]; then still+=("$t"); else new+=("$t"); fi
done
for t in $known; do
  if grep -qw "$t" <<<"$(sed -n 's/^Ran: //p' "$WORK/xfstests.log")" && [[ " $failures " != *" $t "* ]]; then
    where=$(grep -lxF "$t" "$ROOT/tests/xfstests/known-failures.txt" ${KNOWN[@]+"${KNOWN[@]}"} | sed "s|^$ROOT/||" | head -1)
    echo "xfstests: $t is listed as a known failure but passed: strike it off $where"
  fi
done
echo "xfstests ${args[*]}: $((ran - notrun - nfail)) passed, $nfail failed (${#still[@]} known shoal bugs: ${still[*]:-none}), $notrun not run, $excluded excluded (FUSE reasons)"
[ ${#new[@]} -gt 0 ] && echo "new failures: ${new[*]}"
[ "$ran" -gt 0 ] && [ ${#new[@]} -eq 0 ]
