#!/usr/bin/env bash
# The CLI as a user meets it: help on every command, one-line errors, the
# mount helper, fusermount3 -u, read-only mounts, a busy mountpoint.
source "$(dirname "$0")/lib.sh"
fail() { echo "cli: $*"; exit 1; }
for c in "" mkfs mount umount fsck bench stats; do
  "$SHOAL" $c --help >/dev/null || fail "shoal $c --help"
done
# --version: the version and the formats this shoal reads.
v=$("$SHOAL" --version) || fail "shoal --version"
[[ $v == "shoal "[0-9]* && $v == *"store directory formats"* && $v == *"shared namespace"* ]] || fail "--version: $v"
# The one-run seed workloads need at least one iteration per round.
err=$("$SHOAL" bench seed000 --iters 5 2>&1) && fail "seed000 with fewer iterations than rounds ran"
[[ $err == *"at least 10"* ]] || fail "seed000 rounds message: $err"
err=$("$SHOAL" bench seed002 --mode path --target t=/tmp 2>&1) && fail "seed002 in path mode ran"
[[ $err == *"engine mode only"* ]] || fail "seed002 path mode message: $err"
S=$WORK/cli.store; M=$WORK/cli.mnt
unmount_stale "$M" "$WORK/cli.mnt2" "$WORK/cli.mnt3"
rm -rf "$S"; mkdir -p "$M"
err=$("$SHOAL" mount -d "$S" "$M" 2>&1) && fail "mount of a missing store succeeded"
[[ $err == *"no shoal store"* ]] || fail "missing store message: $err"
[ $(wc -l <<<"$err") -eq 1 ] || fail "error is not one line: $err"
mkdir -p "$WORK/notastore"; touch "$WORK/notastore/x"
err=$("$SHOAL" mount -d "$WORK/notastore" "$M" 2>&1) && fail "mount of a non-store succeeded"
[[ $err == *"not a shoal store"* ]] || fail "non-store message: $err"
# mkfs of a directory with files in it says that, not the mount's words.
err=$("$SHOAL" mkfs "$WORK/notastore" 2>&1) && fail "mkfs of a non-empty directory succeeded"
[[ $err == *"is not empty"* && $err != *"not a shoal store"* ]] || fail "mkfs of a non-empty directory: $err"
[ "$(ls -A "$WORK/notastore")" = x ] || fail "a refused mkfs left $(ls -A "$WORK/notastore")"
# mkfs says what STORE/reserve is, where the user meets it.
out=$("$SHOAL" mkfs "$S") || fail "mkfs"
[[ $out == *"$S/reserve"*"MiB"*"reserve_mb"* ]] || fail "mkfs does not explain the reserve: $out"
err=$("$SHOAL" mkfs "$S" 2>&1) && fail "mkfs over a store succeeded"
[[ $err == *"already holds"* ]] || fail "mkfs twice message: $err"
# The mount helper, then fusermount3 -u.
# mount(8) finds /sbin/mount.fuse.shoal (installed by scripts/test.sh and setup.sh).
SHOAL=$SHOAL mount -t fuse.shoal "$S" "$M" >/dev/null || fail "mount -t fuse.shoal"
mountpoint -q "$M" || fail "helper mount"
# The mount's type is fuse.shoal, so tools that select by type find it.
findmnt -n -t fuse.shoal "$M" >/dev/null || fail "findmnt -t fuse.shoal: $(grep " $M " /proc/mounts)"
df -t fuse.shoal "$M" >/dev/null || fail "df -t fuse.shoal"
# A plain remount, as admins type it: mount(8) finds the helper by the type.
echo hi > "$M/rw"
mount -o remount,ro "$M" || fail "mount -o remount,ro MNT"
err=$(sh -c "echo x > '$M/ro'" 2>&1) && fail "a write after remount,ro succeeded"
[[ $err == *"Read-only file system"* ]] || fail "a write after remount,ro: $err (want EROFS)"
[ "$(cat "$M/rw")" = hi ] || fail "a read after remount,ro"
mount -o remount,rw "$M" || fail "mount -o remount,rw MNT"
echo x > "$M/ro" || fail "a write after remount,rw"
rm "$M/rw" "$M/ro"
# The reserve: at most 64 MiB by default (it was half the headroom, 512
# MiB on a large device).
r=$(stat -c %s "$S/reserve" 2>/dev/null || echo 0)
[ "$r" -le $((64 << 20)) ] || fail "reserve of $r bytes past 64 MiB"
err=$("$SHOAL" mount -d "$S" "$M" 2>&1) && fail "mounting a busy mountpoint succeeded"
[[ $err == *"busy"* ]] || fail "busy message: $err"
# shoal mount of a store already mounted binds the first mount (one store,
# one daemon), as the helper does, and says so.
mkdir -p "$WORK/cli.mnt3"
out=$("$SHOAL" mount -d "$S" "$WORK/cli.mnt3" 2>&1) || fail "shoal mount of a mounted store: $out"
[[ $out == *"already mounted at $M"* ]] || fail "shoal mount of a mounted store says: $out"
[ "$(stat -c %d "$M")" = "$(stat -c %d "$WORK/cli.mnt3")" ] || fail "shoal mount of a mounted store: another filesystem"
echo three > "$WORK/cli.mnt3/three"; [ "$(cat "$M/three")" = three ] || fail "the bound place shows another filesystem"
[ "$(pgrep -cf "shoal mount $S ")" -le 1 ] || fail "a second daemon on one store"
"$SHOAL" umount "$WORK/cli.mnt3" || fail "shoal umount of the bound place"
[ "$(cat "$M/three")" = three ] || fail "first place gone with the bound one"
rm "$M/three"
# The store mounted a second time elsewhere: one filesystem in two places, as
# mount(8) gives an ext4 device (xfstests generic/732); each unmounts alone.
M2=$WORK/cli.mnt2; mkdir -p "$M2"
SHOAL=$SHOAL mount -t fuse.shoal "$S" "$M2" || fail "second mount of a mounted store"
echo two > "$M2/two"; [ "$(cat "$M/two")" = two ] || fail "second mount shows another filesystem"
timeout 10 "$SHOAL" umount "$M2" || fail "shoal umount of the second place"
[ "$(cat "$M/two")" = two ] || fail "first place gone with the second"
rm "$M/two"
echo data > "$M/f"
fusermount3 -u "$M"
FjallWait=0; for i in $(seq 200); do "$SHOAL" fsck "$S" >/dev/null 2>&1 && break; sleep 0.05; done
"$SHOAL" fsck "$S" >/dev/null || fail "fsck after fusermount3 -u"
# A clean unmount marks the store, so the next mount need not walk it; the
# mark goes as soon as a writable mount starts.
[ -f "$S/clean" ] || fail "no clean mark after an unmount"
# Read-only mount.
"$SHOAL" mount -d "$S" "$M" -o ro >/dev/null
[ -f "$S/clean" ] || fail "a read-only mount removed the clean mark"
[ "$(cat "$M/f")" = data ] || fail "data after remount"
touch "$M/g" 2>/dev/null && fail "write on a read-only mount succeeded"
"$SHOAL" umount "$M"
# Names over 255 bytes.
"$SHOAL" mount -d "$S" "$M" >/dev/null
[ -f "$S/clean" ] && fail "a writable mount kept the clean mark"
long=$(printf 'x%.0s' $(seq 256))
touch "$M/$long" 2>"$WORK/long.err" && fail "a 256-byte name was accepted"
grep -q "too long" "$WORK/long.err" || fail "ENAMETOOLONG: $(cat "$WORK/long.err")"
"$SHOAL" stats "$M" --json | grep -q '"ops"' || fail "shoal stats --json"
# stats in a pipe: plain text, and a reader that stops early ends it quietly.
out=$("$SHOAL" stats "$M" --interval 0.1 --count 2) || fail "shoal stats --count 2"
[[ $out == *$'\e'* ]] && fail "stats wrote escape codes into a pipe"
[ "$(grep -c '^shoal stats' <<<"$out")" = 2 ] || fail "stats in a pipe: $out"
"$SHOAL" stats "$M" --interval 0.05 2>"$WORK/stats.err" | head -1 >/dev/null
[ "${PIPESTATUS[0]}" = 0 ] || fail "stats | head -1 exited ${PIPESTATUS[0]}: $(cat "$WORK/stats.err")"
"$SHOAL" umount "$M"
# Misuse ends in a clear message and leaves nothing behind.
mkdir -p "$WORK/inside"; rm -rf "$WORK/inside/store"
"$SHOAL" mkfs "$WORK/inside/store" >/dev/null
err=$("$SHOAL" mount -d "$WORK/inside/store" "$WORK/inside" 2>&1) && fail "a store was mounted over itself"
[[ $err == *"lies inside"* ]] || fail "store inside mountpoint message: $err"
for n in 0 1025 4294967295; do
  err=$("$SHOAL" mkfs --ags $n "$WORK/ags" 2>&1) && fail "mkfs --ags $n succeeded"
  [[ $err == *"ags"* ]] || fail "mkfs --ags $n message: $err"
  [ -e "$WORK/ags" ] && fail "mkfs --ags $n left $WORK/ags"
done
rm -rf "$WORK/half"; mkdir -p "$WORK/half/db"; : > "$WORK/half/LOCK"   # what an interrupted mkfs leaves
err=$("$SHOAL" mount -d "$WORK/half" "$M" 2>&1) && fail "mount of a half-made store succeeded"
[[ $err == *"run \`shoal mkfs $WORK/half\`"* ]] || fail "half-made store message: $err"
err=$("$SHOAL" fsck "$WORK/half" 2>&1) && fail "fsck of a half-made store succeeded"
[[ $err == *"shoal mkfs"* ]] || fail "fsck half-made store message: $err"
"$SHOAL" mkfs "$WORK/half" >/dev/null || fail "mkfs over a half-made store"
"$SHOAL" fsck "$WORK/half" >/dev/null || fail "fsck after mkfs over a half-made store"
rm -rf "$WORK/empty"; mkdir -p "$WORK/empty"
"$SHOAL" mount -d "$WORK/empty" "$M" >/dev/null 2>&1 && fail "mount of an empty directory succeeded"
[ -z "$(ls -A "$WORK/empty")" ] || fail "a failed mount left $(ls -A "$WORK/empty")"
"$SHOAL" mkfs "$WORK/empty" >/dev/null || fail "mkfs after a failed mount"
# A daemon killed with SIGKILL leaves a dead mount: mounting again names the
# way out, and `shoal umount` takes it.
"$SHOAL" mount -d "$S" "$M" >/dev/null
kill_daemon "$S" "$M" || fail "no daemon to kill"
err=$("$SHOAL" mount -d "$S" "$M" 2>&1) && fail "mount over a dead mount succeeded"
[[ $err == *"shoal umount"* ]] || fail "dead mount message: $err"
"$SHOAL" umount "$M" 2>/dev/null || fail "umount of a dead mount"
"$SHOAL" mount -d "$S" "$M" >/dev/null || fail "mount after a dead mount"
[ "$(cat "$M/f")" = data ] || fail "data after a kill"
"$SHOAL" umount "$M"
# sync(1) does not reach a FUSE daemon; `shoal sync` does. With commits a
# minute apart, a file written and then SIGKILLed away is gone, and one
# written, `shoal sync`ed and then SIGKILLed away is there.
kill_and_unmount() { kill_daemon "$S" "$M"; "$SHOAL" umount "$M" 2>/dev/null; }
"$SHOAL" mount -d "$S" "$M" -o commit_ms=60000 >/dev/null
echo lost > "$M/unsynced"; sync
kill_and_unmount
"$SHOAL" mount -d "$S" "$M" -o commit_ms=60000 >/dev/null
[ -e "$M/unsynced" ] && fail "an unsynced file survived a kill with commits a minute apart (the sync test below proves nothing)"
echo kept > "$M/synced"
"$SHOAL" sync "$M" || fail "shoal sync"
kill_and_unmount
"$SHOAL" mount -d "$S" "$M" >/dev/null
[ "$(cat "$M/synced" 2>/dev/null)" = kept ] || fail "a file written before shoal sync was lost in a kill"
"$SHOAL" umount "$M"
# -o reserve_mb=N sets the reserve's limit; 0: no reserve file.
"$SHOAL" mount -d "$S" "$M" -o reserve_mb=1 >/dev/null
[ "$(stat -c %s "$S/reserve" 2>/dev/null)" -le $((1 << 20)) ] || fail "reserve_mb=1: reserve of $(stat -c %s "$S/reserve") bytes"
"$SHOAL" umount "$M"
"$SHOAL" mount -d "$S" "$M" -o reserve_mb=0 >/dev/null
[ -e "$S/reserve" ] && fail "reserve_mb=0 kept a reserve file"
"$SHOAL" umount "$M"
# The store's lock held while nothing mounts it, as by a daemon still
# closing it after the kernel's umount returned (xfstests' cycle mounts on a
# loaded machine: generic/754): mount waits for it instead of refusing.
flock "$S/LOCK" sleep 5 & holder=$!
sleep 0.5
"$SHOAL" mount -d "$S" "$M" >/dev/null || fail "mount while an exiting daemon held the store"
wait $holder
"$SHOAL" umount "$M"
echo "cli: help, --version, errors, mkfs of a non-empty directory, mount helper, fuse.shoal type, plain remount,ro/rw, reserve, fusermount3 -u, ro, busy, shoal mount of a mounted store, a store still closing, ENAMETOOLONG, stats in pipes, misuse, dead mount, shoal sync: ok"
