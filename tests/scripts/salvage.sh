#!/usr/bin/env bash
# A damaged store has a way out. A store of files with known digests is
# damaged (a byte flipped in its table at several places, a byte flipped in
# its journal, a table cut short); then `shoal fsck` names the damage and the
# next step, `shoal fsck --repair` saves what can be read into a new store
# (the damaged one kept beside it), the result passes fsck and mounts, and
# every file is either identical or listed by path as lost. A table cut short
# cannot be read around: the message says so and the store is left as it was.
source "$(dirname "$0")/lib.sh"
fail() { echo "salvage: $*"; exit 1; }
S=$WORK/salvage.store; M=$WORK/salvage.mnt; ORIG=$WORK/salvage.orig
unmount_stale "$M"
rm -rf "$S" "$S".* "$ORIG"; mkdir -p "$M"
"$SHOAL" mkfs "$S" >/dev/null
"$SHOAL" mount -d "$S" "$M" >/dev/null
mkdir "$M/d"
for i in $(seq 60); do head -c $((i * 997)) /dev/urandom > "$M/f$i"; echo "small $i" > "$M/d/s$i"; done
(cd "$M" && find . -type f -exec sha256sum {} + | sort) > "$WORK/salvage.sums"
"$SHOAL" umount "$M"
cp -a "$S" "$ORIG"
table=$(ls "$S"/db/keyspaces/1/tables/* | head -1)
[ -n "$table" ] || fail "no table in the store"
flip() { python3 -c "
import sys
p, off = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, 'rb').read()); b[off % len(b)] ^= 0x5a; open(p, 'wb').write(b)" "$1" "$2"; }
# check_salvaged WHAT: repair, then fsck, mount, and compare with the digests.
check_salvaged() {
  local out; out=$("$SHOAL" fsck --repair "$S" 2>&1) || fail "$1: fsck --repair: $out"
  ls -d "$S".damaged-* >/dev/null 2>&1 || fail "$1: the damaged store was not kept"
  "$SHOAL" fsck "$S" >/dev/null || fail "$1: fsck after the salvage: $("$SHOAL" fsck "$S" 2>&1 | tail -3)"
  "$SHOAL" mount -d "$S" "$M" >/dev/null || fail "$1: mount after the salvage"
  local bad=0 p
  # Files and directories whose names were lost are linked into the root
  # as lost+found.N when their inodes are intact; a file under a directory
  # listed as having lost names is accounted for (found intact there, or
  # gone with its inode, which left nothing to name it by).
  local found; found=$(find "$M" -path "$M/lost+found.*" -type f -exec sha256sum {} + | cut -d' ' -f1)
  while read -r sum p; do
    p=${p#./}
    if [ "$(sha256sum "$M/$p" 2>/dev/null | cut -d' ' -f1)" != "$sum" ]; then
      if grep -qF "lost: /$p:" <<<"$out"; then continue; fi
      local dir=/$p listed=0
      while [ "$dir" != / ]; do
        dir=$(dirname "$dir")
        grep -qF "lost: $dir: some names lost" <<<"$out" && listed=1
      done
      if [ $listed = 1 ]; then continue; fi
      echo "salvage: $1: /$p differs and is not listed as lost"; bad=1
    fi
  done < "$WORK/salvage.sums"
  "$SHOAL" umount "$M"
  [ $bad = 0 ] || { echo "$out"; exit 1; }
  echo "$1: $(grep -c '^lost:' <<<"$out") lost item(s) listed"
}
restore() { rm -rf "$S" "$S".*; cp -a "$ORIG" "$S"; }
size=$(stat -c %s "$table")
for at in 25 50 75; do
  restore; flip "$table" $((size * at / 100))
  err=$("$SHOAL" fsck "$S" 2>&1) && fail "fsck of a table flipped at $at% passed"
  [[ $err == *"fsck --repair"* ]] || fail "fsck's message does not name the repair: $err"
  check_salvaged "table flipped at $at%"
done
# A byte of the journal flipped (within what it holds: the file is
# preallocated past it). Where the journal holds only what the tables hold
# already, the store reads on without it: then fsck must pass and every
# file must be as it was; where fsck sees the damage, the salvage is
# checked as for a table. The first offset of four that fsck sees is used.
salvaged=0
for part in 2 3 4 5; do
  restore
  jnl=$(ls "$S"/db/*.jnl | head -1)
  used=$(python3 -c "import sys; b=open(sys.argv[1],'rb').read(); print(len(b.rstrip(b'\0')))" "$jnl")
  flip "$jnl" $((used / part))
  if "$SHOAL" fsck "$S" >/dev/null 2>&1; then
    "$SHOAL" mount -d "$S" "$M" >/dev/null || fail "mount after a journal flip fsck passed"
    (cd "$M" && find . -type f -exec sha256sum {} + | sort) | cmp -s - "$WORK/salvage.sums" ||
      fail "a journal flip changed files and fsck did not see it"
    "$SHOAL" umount "$M"
    continue
  fi
  check_salvaged "journal flipped at 1/$part"
  salvaged=1; break
done
[ $salvaged = 1 ] || echo "journal flipped: at 4 offsets the store read on without it (files as they were)"
restore; truncate -s $((size / 2)) "$table"
before=$(cd "$S" && find . -type f -exec sha256sum {} + | sort)
err=$("$SHOAL" fsck --repair "$S" 2>&1) && fail "a table cut short was salvaged?"
[[ $err == *"restore it from a copy"* ]] || fail "table cut short: $err"
[ "$(cd "$S" && find . -type f ! -name daemon.log -exec sha256sum {} + | sort)" = "$(grep -v daemon.log <<<"$before")" ] || fail "a failed salvage changed the store"
rm -rf "$S" "$S".* "$ORIG"
echo "salvage: table flips, a journal flip: repaired, fsck clean, every file identical or listed as lost; a table cut short: refused with the way out"
