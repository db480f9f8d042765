#!/usr/bin/env bash
# The kernel's caches on an embedded mount (docs/design.md, "The kernel's
# caches"): entries, attributes and misses live an hour by default, so what
# the daemon changes on its own must be told to the kernel, and stat must
# show it at once. On each transport (FUSE over io_uring, the default, and
# /dev/fuse with -o nouring):
# - the long lifetimes are in effect (a stat repeated after 1.5 s sends no
#   LOOKUP nor GETATTR: `shoal stats --json`), else the rest proves nothing;
# - setuid and setgid cleared by another user's write, fallocate and
#   truncate, and by a chown; an access time under relatime and strictatime
#   (a file and a directory); a chattr flag's ctime; the mode set through a
#   POSIX ACL, and setgid cleared by one; a write through a passthrough
#   mapping;
# - a create, rename, link, unlink, rmdir and exchange storm in one process,
#   each step checked by a second process through a bind mount (no stale
#   entry, no stale miss, the inode numbers the first process made).
# SHOAL_KC_OPTS adds mount options (e.g. entry_ttl_ms=3600000,... against an
# older build whose defaults were 1 s).
source "$(dirname "$0")/lib.sh"
fail() { echo "kernel-cache [$T]: $*"; exit 1; }
as_nobody() { su nobody -s /bin/sh -c "$1"; }
reqs() { # reqs MNT: "LOOKUPS GETATTRS" the daemon received so far
  "$SHOAL" stats "$1" --json | python3 -c '
import json, sys
r = json.load(sys.stdin)["fuse_requests"]
print(r.get("lookup", 0), r.get("getattr", 0))'
}
mode() { stat -c %a "$1"; }

run() {
  T=$1
  local opts=allow_other${2:+,$2}${SHOAL_KC_OPTS:+,$SHOAL_KC_OPTS}
  unmount_stale "$WORK/kc-$T.bind"
  M=$(mount_fresh "kc-$T" "$opts")
  if [ "$T" = strictatime ]; then
    atime_checks; unmount_check "kc-$T" >/dev/null || fail fsck; echo "kernel-cache [$T]: ok"; return
  fi

  # The lifetimes are long: nothing is asked again after the old 1 s.
  mkdir -p "$M/d/e"; echo x >"$M/d/e/f"
  stat "$M/d/e/f" "$M/d/e/nothere" >/dev/null 2>&1 || true
  local before after
  before=$(reqs "$M"); sleep 1.5
  for _ in 1 2 3; do stat "$M/d/e/f" >/dev/null; stat "$M/d/e/nothere" >/dev/null 2>&1 || true; done
  after=$(reqs "$M")
  [ "$before" = "$after" ] || fail "a stat after 1.5 s went to the daemon (lookups getattrs: $before -> $after): the long lifetimes are not in effect"

  # setuid/setgid cleared by the daemon on another user's write (a file the
  # daemon serves: setuid files are not opened in passthrough), fallocate,
  # truncate; the kernel had the mode cached.
  touch "$M/su"; chmod 4777 "$M/su"; mode "$M/su" >/dev/null
  as_nobody "echo x >> $M/su" || fail "a non-owner could not write a mode 4777 file"
  [ "$(mode "$M/su")" = 777 ] || fail "setuid cleared by a non-owner's write not seen: $(mode "$M/su")"
  head -c 100000 /dev/zero >"$M/big"; chmod 6777 "$M/big"; mode "$M/big" >/dev/null
  as_nobody "dd if=/dev/zero of=$M/big bs=4k count=1 seek=3 conv=notrunc status=none" || fail "a non-owner's write of a big file"
  [ "$(mode "$M/big")" = 777 ] || fail "setuid/setgid of a 100 KB file kept after a non-owner's write: $(mode "$M/big")"
  chmod 6666 "$M/big"; mode "$M/big" >/dev/null
  as_nobody "xfs_io -c 'falloc 0 200k' $M/big" || fail "a non-owner's fallocate"
  [ "$(mode "$M/big")" = 666 ] || fail "setuid/setgid kept after a non-owner's fallocate: $(mode "$M/big")"
  chmod 6666 "$M/big"; mode "$M/big" >/dev/null
  as_nobody "truncate -s 50000 $M/big" || fail "a non-owner's truncate"
  [ "$(mode "$M/big")" = 666 ] || fail "setuid/setgid kept after a non-owner's truncate: $(mode "$M/big")"
  touch "$M/own"; chmod 4755 "$M/own"; mode "$M/own" >/dev/null
  chown nobody "$M/own"
  [ "$(mode "$M/own")" = 755 ] || fail "setuid kept after a chown: $(mode "$M/own")"

  atime_checks

  # A chattr flag: the kernel had the ctime cached.
  echo f >"$M/fl"; local c0; c0=$(stat -c %Z.%z "$M/fl"); sleep 1.1
  chattr +a "$M/fl" || fail "chattr +a"
  [ "$(stat -c %Z.%z "$M/fl")" != "$c0" ] || fail "chattr +a: ctime not seen to change"
  lsattr "$M/fl" | grep -q '^-----a' || fail "lsattr: $(lsattr "$M/fl")"
  chattr -a "$M/fl"

  # The mode set through an ACL (its mask is the group bits).
  touch "$M/acl"; chmod 644 "$M/acl"; mode "$M/acl" >/dev/null
  setfacl -m u:nobody:rw "$M/acl"
  [ "$(mode "$M/acl")" = 664 ] || fail "mode not in step with the ACL mask: $(mode "$M/acl")"
  setfacl -m m::r "$M/acl"
  [ "$(mode "$M/acl")" = 644 ] || fail "mode after setfacl -m m::r: $(mode "$M/acl")"
  # ... and setgid cleared by an ACL set by the owner outside the file's group.
  mkdir "$M/sgd"; chmod 777 "$M/sgd"
  as_nobody "touch $M/sgd/g; chmod 2770 $M/sgd/g" || fail "nobody's file"
  chgrp root "$M/sgd/g"; chmod 2770 "$M/sgd/g"; mode "$M/sgd/g" >/dev/null
  as_nobody "setfacl -m u:nobody:rwx $M/sgd/g" || fail "setfacl by the owner"
  [ "$(mode "$M/sgd/g")" = 770 ] || fail "setgid kept after an ACL set outside the group: $(mode "$M/sgd/g")"

  # A write through a passthrough mapping: the daemon takes the object's
  # time; stat after the close shows it.
  python3 - "$M/mm" <<'EOF' || fail "a write through a mapping not seen by stat"
import mmap, os, sys, time
p = sys.argv[1]
with open(p, "wb") as f:
    f.write(b"a" * 65536)
m0 = os.stat(p).st_mtime_ns
time.sleep(1.1)
fd = os.open(p, os.O_RDWR)
m = mmap.mmap(fd, 65536)
m[100:105] = b"zzzzz"
m.flush(); m.close(); os.close(fd)
time.sleep(0.2)
st = os.stat(p)
assert st.st_mtime_ns > m0, (st.st_mtime_ns, m0)
with open(p, "rb") as f:
    assert f.read()[100:105] == b"zzzzz"
EOF

  storm
  umount "$WORK/kc-$T.bind"
  unmount_check "kc-$T" >/dev/null || fail "fsck"
  echo "kernel-cache [$T]: ok"
}

# An access time: a read and a listing change it, and stat shows it though
# the kernel had the attributes cached (relatime: the first read after a
# change; strictatime: every read).
atime_checks() {
  echo a >"$M/at"; mkdir -p "$M/atd"; touch "$M/atd/x"
  local a0 d0; a0=$(stat -c %X.%x "$M/at"); d0=$(stat -c %X.%x "$M/atd"); sleep 1.1
  cat "$M/at" >/dev/null; ls "$M/atd" >/dev/null
  local a1; a1=$(stat -c %X.%x "$M/at")
  [ "$a1" != "$a0" ] || fail "atime not seen to change after a read"
  [ "$(stat -c %X.%x "$M/atd")" != "$d0" ] || fail "a directory's atime not seen to change after a listing"
  sleep 1.1; cat "$M/at" >/dev/null
  if [ "$T" = strictatime ]; then
    [ "$(stat -c %X.%x "$M/at")" != "$a1" ] || fail "strictatime: atime not seen to change after a second read"
  else
    [ "$(stat -c %X.%x "$M/at")" = "$a1" ] || fail "relatime: atime changed by a second read"
  fi
}

# One process changes names, another checks each step through a bind mount
# (the same superblock: the same kernel caches).
storm() {
  local B=$WORK/kc-$T.bind
  mkdir -p "$B"; mount --bind "$M" "$B"
  mkdir "$M/s"
  python3 - "$M/s" "$B/s" <<'EOF' || fail "storm"
import ctypes, os, sys
w_dir, c_dir = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
r1, w1 = os.pipe(); r2, w2 = os.pipe()
N = 150

def exchange(a, b):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")

def writer():
    # Each step: do it, tell the checker what to expect, wait for its ack.
    out, ack = os.fdopen(w1, "w", buffering=1), os.fdopen(r2)
    def step(*expect):
        out.write(repr(expect) + "\n"); assert ack.readline().strip() == "ok"
    P = lambda n: os.path.join(w_dir, n)
    ino = lambda n: os.lstat(P(n)).st_ino
    for i in range(N):
        a, b, c, d, e = (f"{x}{i}" for x in "abcde")
        step(("absent", a), ("absent", b), ("absent", c), ("absent", d), ("absent", e))
        with open(P(a), "w") as f: f.write(str(i))
        step(("is", a, ino(a), 1))
        first = ino(a); os.rename(P(a), P(b))
        step(("absent", a), ("is", b, first, 1))
        with open(P(a), "w") as f: f.write("new")
        second = ino(a); assert second != first
        step(("is", a, second, 1), ("is", b, first, 1))
        os.rename(P(a), P(b))
        step(("absent", a), ("is", b, second, 1))
        os.link(P(b), P(c))
        step(("is", b, second, 2), ("is", c, second, 2))
        os.unlink(P(c))
        step(("absent", c), ("is", b, second, 1))
        os.mkdir(P(d)); os.rename(P(b), P(d + "/x"))
        step(("absent", b), ("is", d + "/x", second, 1))
        os.rename(P(d), P(e))
        step(("absent", d), ("absent", d + "/x"), ("is", e + "/x", second, 1))
        with open(P(a), "w") as f: f.write("p")
        pa = ino(a); exchange(P(a), P(e))
        step(("is", e, pa, 1), ("is", a + "/x", second, 1), ("absent", e + "/x"))
        os.unlink(P(a + "/x")); os.rmdir(P(a)); os.unlink(P(e))
        step(("absent", a), ("absent", e), ("absent", a + "/x"))
    out.write("end\n")

def checker():
    inp, ack = os.fdopen(r1), os.fdopen(w2, "w", buffering=1)
    for line in inp:
        if line.strip() == "end":
            return
        for x in eval(line):
            p = os.path.join(c_dir, x[1])
            try:
                st = os.lstat(p)
            except (FileNotFoundError, NotADirectoryError):
                st = None
            if x[0] == "absent":
                assert st is None, f"stale entry: {x[1]} still there (inode {st.st_ino})"
            else:
                assert st is not None, f"stale miss: {x[1]} not seen"
                assert (st.st_ino, st.st_nlink) == (x[2], x[3]), f"{x[1]}: inode {st.st_ino} nlink {st.st_nlink}, expected {x[2:]}"
        ack.write("ok\n")

pid = os.fork()
if pid == 0:
    os.close(w1); os.close(r2)
    try:
        checker(); os._exit(0)
    except BaseException as e:
        print("checker:", e, file=sys.stderr); os._exit(1)
os.close(r1); os.close(w2)
try:
    writer()
except BaseException as e:
    print("writer:", e, file=sys.stderr)
    os.kill(pid, 9); os.waitpid(pid, 0); sys.exit(1)
_, status = os.waitpid(pid, 0)
sys.exit(0 if status == 0 else 1)
EOF
}

run uring
run nouring nouring
run strictatime strictatime
echo "kernel-cache: long lifetimes, daemon-made changes seen at once, name storms seen by a second process, on both transports: ok"
