#!/usr/bin/env bash
# Read-only is read-only: `-o ro` and `shoal fsck` without --repair change no
# byte of the store (every file's size, time and digest compared), after a
# clean unmount and after a SIGKILL (a journal to replay), and both work on
# read-only media (a read-only bind mount of the store).
source "$(dirname "$0")/lib.sh"
fail() { echo "readonly: $*"; exit 1; }
S=$WORK/ro.store; M=$WORK/ro.mnt; RO=$WORK/ro.media
unmount_stale "$M" "$RO"
rm -rf "$S"; mkdir -p "$M" "$RO"
"$SHOAL" mkfs "$S" >/dev/null
"$SHOAL" mount -d "$S" "$M" >/dev/null
mkdir -p "$M/d/e"
head -c 300000 /dev/urandom > "$M/d/big"
echo small > "$M/d/e/small"
ln -s e/small "$M/d/link"
setfattr -n user.k -v v "$M/d/big"
sum_mnt() { (cd "$M" && find . -printf '%p %y %s %m\n' | sort && sha256sum d/big d/e/small && getfattr -n user.k --only-values d/big); }
want=$(sum_mnt)
"$SHOAL" umount "$M"
# Every file of the store: path, size, mtime, digest.
sum_store() { (cd "$1" && find . -type f ! -name daemon.log -printf '%p %s %T@\n' | sort && find . -type f ! -name daemon.log -exec sha256sum {} + | sort); }
check_ro() { # check_ro STORE-PATH-TO-USE WHAT
  local before; before=$(sum_store "$S")
  "$SHOAL" fsck "$1" >/dev/null || fail "fsck of $2"
  "$SHOAL" mount -d "$1" "$M" -o ro >/dev/null || fail "mount -o ro of $2"
  [ "$(sum_mnt)" = "$want" ] || fail "$2: the read-only mount shows other contents"
  touch "$M/new" 2>/dev/null && fail "$2: a write on a read-only mount succeeded"
  "$SHOAL" stats "$M" --json | grep -q '"ops"' || fail "$2: stats of a read-only mount"
  "$SHOAL" umount "$M" || fail "$2: umount of a read-only mount"
  [ "$(sum_store "$S")" = "$before" ] || { diff <(echo "$before") <(sum_store "$S") | head; fail "$2: the store changed"; }
}
check_ro "$S" "a cleanly unmounted store"
# Read-only media: the store through a read-only bind mount.
mount --bind "$S" "$RO"; mount -o remount,bind,ro "$RO"
touch "$RO/x" 2>/dev/null && fail "the bind mount is writable"
check_ro "$RO" "a store on read-only media"
umount "$RO"
# After a SIGKILL: the journal holds what the store's tables do not yet.
"$SHOAL" mount -d "$S" "$M" >/dev/null
echo more > "$M/d/more"; "$SHOAL" sync "$M"
kill_daemon "$S" "$M"; "$SHOAL" umount "$M" 2>/dev/null
want=$(mkdir -p "$M" && "$SHOAL" mount -d "$S" "$M" >/dev/null && sum_mnt; "$SHOAL" umount "$M")
"$SHOAL" mount -d "$S" "$M" >/dev/null
kill_daemon "$S" "$M"; "$SHOAL" umount "$M" 2>/dev/null
mount --bind "$S" "$RO"; mount -o remount,bind,ro "$RO"
check_ro "$RO" "a killed store on read-only media"
umount "$RO"
echo "readonly: fsck and -o ro change nothing, clean or killed, on a writable directory and on read-only media"
