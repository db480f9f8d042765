#!/usr/bin/env bash
# Search permission on a walk through cached entries when the daemon checks
# permissions (-o daemon_permissions, root_squash, all_squash). The kernel
# then checks nothing on a path walk (`fuse_permission` without
# default_permissions), so a name it cached for one caller would let another
# walk through a directory it may not search: on ext4, `cat a/f` by nobody
# in root's 0700 `a` is EACCES whatever root read before. The daemon gives
# the names in a directory not everyone may search no kernel lifetime, so
# each walk through one asks it (docs/design.md, "Who checks"), and tells the
# kernel to forget a directory's names when a chmod takes search away.
# Embedded mounts; etcd mounts: tests/scripts/etcd-secure.sh.
source "$(dirname "$0")/lib.sh"
fail() { echo "daemon-perms [$T]: $*"; exit 1; }
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups "$@"; }
refused() { # refused WHAT CMD...: CMD must fail with "Permission denied"
  local what=$1 out; shift
  if out=$("$@" 2>&1); then fail "$what: allowed (printed '$out'), ext4 answers EACCES"; fi
  case $out in *"Permission denied"*) ;; *) fail "$what: '$out', not EACCES" ;; esac
}

run() {
  T=$1
  M=$(mount_fresh "dp-$T" "allow_other,$2")
  # Made by the owner the test's caller is checked against.
  local owner=$3
  as "$owner" mkdir "$M/a" "$M/b"
  as "$owner" sh -c "echo hi > '$M/a/f'; echo hi > '$M/b/f'; chmod 644 '$M/a/f' '$M/b/f'; chmod 700 '$M/a'"
  # The owner walks first: the kernel caches a/f, and a/missing as a miss.
  as "$owner" cat "$M/a/f" >/dev/null
  as "$owner" stat "$M/a/missing" >/dev/null 2>&1 || true
  refused "cat a/f by uid 4242 after the owner" as 4242 cat "$M/a/f"
  refused "stat a/f by uid 4242" as 4242 stat "$M/a/f"
  refused "stat a/missing by uid 4242 (a cached miss)" as 4242 stat "$M/a/missing"
  refused "ls a by uid 4242" as 4242 ls "$M/a"
  # Search taken away after another user walked through: forgotten.
  as 4242 cat "$M/b/f" >/dev/null || fail "cat b/f by uid 4242 while b is 755"
  as "$owner" chmod 700 "$M/b"
  refused "cat b/f by uid 4242 after chmod 700 b" as 4242 cat "$M/b/f"
  # And given back.
  as "$owner" chmod 755 "$M/b"
  as 4242 cat "$M/b/f" >/dev/null || fail "cat b/f by uid 4242 after chmod 755 b"
  # A directory another user walked, moved into a closed one: the kernel
  # moves its entries with their lifetimes.
  as "$owner" mkdir "$M/c"; as "$owner" sh -c "echo hi > '$M/c/g'; chmod 644 '$M/c/g'"
  as 4242 cat "$M/c/g" >/dev/null || fail "cat c/g by uid 4242 while c is in the root"
  as "$owner" mv "$M/c" "$M/a/c"
  sleep 0.2 # the kernel is told after the rename's answer (design.md)
  refused "cat a/c/g by uid 4242 after c moved into a" as 4242 cat "$M/a/c/g"
  as "$owner" cat "$M/a/f" >/dev/null || fail "the owner's own walk"
  unmount_check "dp-$T" >/dev/null || fail "fsck"
  echo "daemon-perms [$T]: ok"
}

run daemon_permissions daemon_permissions 0
# root_squash: root acts as nobody; uid 1000's private directory is closed
# to it even after uid 1000 walked it.
T=root_squash
# Set up unsquashed: squashed root could not open the root directory to uid
# 1000.
M=$(mount_fresh "dp-rs" "allow_other")
chmod 1777 "$M"
"$SHOAL" umount "$M"
"$SHOAL" mount -d "$WORK/dp-rs.store" "$M" -o allow_other,root_squash >/dev/null
as 1000 mkdir "$M/p"
as 1000 sh -c "echo hi > '$M/p/f'; chmod 700 '$M/p'"
as 1000 cat "$M/p/f" >/dev/null
refused "cat p/f by root squashed" cat "$M/p/f"
unmount_check "dp-rs" >/dev/null || fail "fsck"
echo "daemon-perms [root_squash]: ok"
