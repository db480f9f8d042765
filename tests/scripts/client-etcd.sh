#!/usr/bin/env bash
# The client on an etcd mount (docs/client.md, "etcd mounts"): the daemon
# of an etcd mount serves client.sock as an embedded one's does, over the
# same namespace surface. On a 3-member etcd cluster (ports BASE+1..3 and
# BASE+11..13, BASE=${CLIENT_ETCD_BASE:-26100}), two mounts of one
# namespace: a change through the client (under `shoal run`, the shim) is
# seen at once through its own mount despite hour-long kernel caches and
# through the other mount; a change through the other mount is seen by the
# client at once; a uid 1000 child is refused where the mode bits say so
# and served where they allow; a file's data goes through the mount (its
# open falls through, the bytes are the object store's).
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "client-etcd: $*"; exit 1; }
[ -e "$ROOT/target/release/libshoal_shim.so" ] || cargo build --release -q -p shoal-shim
BASE=${CLIENT_ETCD_BASE:-26100}
D=$WORK/client-etcd.cluster
M=$WORK/client-etcd.mnt
M2=$WORK/client-etcd2.mnt
done_() {
  for m in "$M" "$M2"; do grep -qs " $m " /proc/mounts && "$SHOAL" umount "$m"; done
  bash "$ROOT/scripts/etcd-cluster.sh" stop "$D"
}
unmount_stale "$M" "$M2"
EPS=$(bash "$ROOT/scripts/etcd-cluster.sh" start "$D" "$BASE")
trap done_ EXIT
U="etcd://$EPS/client-etcd"
"$SHOAL" mkfs "$U" >/dev/null
mkdir -p "$M" "$M2"
# Hour-long kernel caches: only the daemon's invalidations make the
# mount see the client's changes.
"$SHOAL" mount -d "$U" "$M" -o allow_other,daemon_permissions,ttl_ms=3600000 >/dev/null
"$SHOAL" mount -d "$U" "$M2" -o allow_other,daemon_permissions >/dev/null
mkdir "$M/pub" "$M/priv"
chmod 0777 "$M/pub"; chmod 0700 "$M/priv"
echo secret > "$M/priv/f"
stat "$M/pub" "$M/priv" >/dev/null   # the kernel caches both for an hour
ls "$M/pub" >/dev/null
out=$("$SHOAL" run "$M" -- python3 - "$M" <<'PY'
import os, sys
m = sys.argv[1]
os.mkdir(m + "/pub/d")                       # served by the daemon's client server
fd = os.open(m + "/pub/d/x", os.O_CREAT | os.O_WRONLY, 0o644)
print(os.readlink("/proc/self/fd/%d" % fd))  # the mount: file data is the object store's
os.write(fd, b"abc")
os.close(fd)
os.rename(m + "/pub/d/x", m + "/pub/d/y")
os.mkdir(m + "/pub/gone")
os.rmdir(m + "/pub/gone")
print(sorted(os.listdir(m + "/pub/d")))
PY
) || fail "python under the shim: $out"
mapfile -t L <<<"$out"
[ "${L[0]}" = "$M/pub/d/x" ] || fail "the open did not continue on the mount: ${L[0]}"
[ "${L[1]}" = "['y']" ] || fail "listdir under the shim: ${L[1]}"
[ "$(cat "$M/pub/d/y")" = abc ] || fail "bytes through the mount: $(cat "$M/pub/d/y" 2>&1)"
# The other mount: within the watch's delay.
for i in $(seq 30); do [ "$(cat "$M2/pub/d/y" 2>/dev/null)" = abc ] && break; sleep 0.1; done
[ "$(cat "$M2/pub/d/y")" = abc ] || fail "bytes through the other mount after 3 s"
[ ! -e "$M/pub/d/x" ] && [ ! -e "$M/pub/gone" ] || fail "the mount still sees a removed name"
# The client's calls went to the daemon (its stats), not only the mount.
calls=$("$SHOAL" stats "$M" --json 2>/dev/null | python3 -c 'import json,sys; c=json.load(sys.stdin)["client"]["calls"]; print(c.get("mkdir",0), c.get("rename",0), c.get("rmdir",0))') \
  || fail "shoal stats --json has no client calls"
[ "$calls" = "2 1 1" ] || fail "client calls mkdir rename rmdir: $calls"
# A change through the other mount is seen by the client at once: it asks
# the daemon each time (etcd's watch reaches this daemon; the engine's
# record cache follows it).
mkdir "$M2/pub/other"
seen=no
for i in $(seq 50); do
  if "$SHOAL" run "$M" -- python3 -c "import os,sys; sys.exit(0 if os.path.isdir('$M/pub/other') and 'other' in os.listdir('$M/pub') else 1)"; then seen=yes; break; fi
  sleep 0.1
done
[ $seen = yes ] || fail "the client does not see the other mount's mkdir"
# Who may: a uid 1000 child through the client. The daemon checks with the
# rules module: no search of root's 0700 directory (an open walks it
# before it would continue on the mount), no mkdir, unlink or rename in
# it; the 0777 one is its to use.
out=$(setpriv --reuid 1000 --regid 1000 --clear-groups "$SHOAL" run "$M" -- python3 - "$M" <<'PY'
import os, sys
m = sys.argv[1]
for what, f in [("open", lambda: os.open(m + "/priv/f", os.O_RDONLY)),
                ("mkdir", lambda: os.mkdir(m + "/priv/n")),
                ("unlink", lambda: os.unlink(m + "/priv/f")),
                ("rename", lambda: os.rename(m + "/priv/f", m + "/pub/f"))]:
    try:
        f(); print(what, "ok")
    except OSError as e:
        print(what, e.errno)
os.mkdir(m + "/pub/mine")
print(os.stat(m + "/pub/mine").st_uid)
PY
) || fail "uid 1000 under the shim: $out"
want="open 13
mkdir 13
unlink 13
rename 13
1000"
[ "$out" = "$want" ] || fail "uid 1000 through the client: $out"
for i in $(seq 30); do [ -e "$M2/pub/mine" ] && break; sleep 0.1; done
[ "$(stat -c %u "$M2/pub/mine")" = 1000 ] || fail "uid 1000's mkdir seen through the other mount"
[ "$(cat "$M/priv/f")" = secret ] || fail "root's file after uid 1000's tries"
conns=$("$SHOAL" stats "$M" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["client"]["connections"])')
# Root's program and uid 1000's connected (the other calls fell through).
[ "$conns" -ge 2 ] || fail "the client's connections in stats: $conns"
echo "client-etcd: ok"
