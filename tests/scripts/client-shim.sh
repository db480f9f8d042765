#!/usr/bin/env bash
# The preload shim (`shoal run MNT -- CMD`, crates/shim): an unmodified
# program's open, fstat, write, close, rename, mkdir, unlink and fork under
# the shim, served by the client (its descriptor is the data object's) and
# seen through the mount; a C crunl in one and two processes; fsck clean.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "client-shim: $*"; exit 1; }
[ -e "$ROOT/target/release/libshoal_shim.so" ] || cargo build --release -q -p shoal-shim
cc -O2 -Wall -Werror -o "$WORK/crunl" "$ROOT/tests/c/crunl.c"
M=$(mount_fresh client-shim)
S=$WORK/client-shim.store
mkdir "$M/d"
out=$("$SHOAL" run "$M" -- python3 - "$M" <<'PY'
import os, sys
m = sys.argv[1]
fd = os.open(m + "/x", os.O_CREAT | os.O_WRONLY, 0o644)
print(os.readlink("/proc/self/fd/%d" % fd))      # the data object: served by the client
os.write(fd, b"abc")
st = os.fstat(fd)
print(st.st_size, st.st_ino, oct(st.st_mode))
os.close(fd)
os.mkdir(m + "/dd")
os.rename(m + "/x", m + "/dd/y")
pid = os.fork()
if pid == 0:                                     # the child connects as its own peer
    fd = os.open(m + "/dd/z", os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(fd, b"child")
    os.close(fd)
    os._exit(0)
os.waitpid(pid, 0)
print(open(m + "/dd/z").read())
os.unlink(m + "/dd/z")
PY
) || fail "python under the shim: $out"
mapfile -t L <<<"$out"
[[ ${L[0]} == "$S/data/"* ]] || fail "the open was not served by the client: ${L[0]}"
[ "${L[1]}" = "3 $(stat -c %i "$M/dd/y") 0o100644" ] || fail "fstat under the shim: ${L[1]}, the mount: $(stat -c '%s %i %f' "$M/dd/y")"
[ "$(cat "$M/dd/y")" = abc ] || fail "bytes through the mount: $(cat "$M/dd/y")"
[ "${L[2]}" = child ] && [ ! -e "$M/dd/z" ] || fail "fork under the shim: ${L[2]}"
# A shell's redirections: open, dup2 onto 1, close, exec. The descriptor
# outlives the shim's close of its first number and the exec: the bytes
# land in the file (they went to an unpinned object, lost, before dups
# shared the handle and the connection outlived exec).
"$SHOAL" run "$M" -- sh -c "ls / > $M/out; echo small > $M/out2; ls / | cat > $M/out3"
[ "$(cat "$M/out")" = "$(ls /)" ] || fail "ls > file under the shim: $(wc -c < "$M/out") bytes"
[ "$(cat "$M/out2")" = small ] || fail "echo > file under the shim: $(cat "$M/out2")"
[ "$(cat "$M/out3")" = "$(ls /)" ] || fail "a pipe into a file under the shim"
# A process that exits without closing: the daemon sees the hang-up at
# once (epoll), not at its next poll (500 ms), and takes the size.
"$SHOAL" run "$M" -- python3 -c "import os; fd = os.open('$M/noclose', os.O_CREAT | os.O_WRONLY); os.write(fd, b'x' * 100); os._exit(0)"
for i in $(seq 20); do [ "$(stat -c %s "$M/noclose")" = 100 ] && break; sleep 0.005; done
[ "$(stat -c %s "$M/noclose")" = 100 ] || fail "size after an exit without close: $(stat -c %s "$M/noclose") after 100 ms"
rm "$M"/out "$M"/out2 "$M"/out3 "$M/noclose"
# Threads: four threads of one process open, write, fstat, close, rename
# and unlink in one directory at once (each thread its own connection);
# every file's bytes as written, seen through the mount.
mkdir "$M/thr"
"$SHOAL" run "$M" -- python3 - "$M/thr" <<'PY' || fail "threads under the shim"
import os, sys, threading
d = sys.argv[1]
errors = []
def work(t):
    try:
        for i in range(300):
            p = "%s/t%d-%d" % (d, t, i)
            fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            os.write(fd, b"%d:%d" % (t, i))
            if os.fstat(fd).st_size != len(b"%d:%d" % (t, i)):
                errors.append("fstat size of " + p)
            os.close(fd)
            os.rename(p, p + ".k")
            if i % 2:
                os.unlink(p + ".k")
    except Exception as e:
        errors.append(repr(e))
ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
for t in ts: t.start()
for t in ts: t.join()
if errors:
    sys.exit("; ".join(errors[:5]))
PY
[ "$(ls "$M/thr" | wc -l)" = 600 ] || fail "threads: $(ls "$M/thr" | wc -l) files left, expected 600"
for f in "$M"/thr/t3-298.k "$M"/thr/t0-0.k; do
  n=$(basename "$f" .k); n=${n#t}; [ "$(cat "$f")" = "${n%%-*}:${n#*-}" ] || fail "threads: $f holds $(cat "$f")"
done
rm -r "$M/thr"
# A descriptor passed to another process over a Unix socket (SCM_RIGHTS),
# then closed by the sender: the receiver reads what was written and its
# writes land in the file. The shim hands on a descriptor opened on the
# mount in its place (before, the sender's close unpinned the object: the
# receiver read nothing and its bytes were lost).
out=$("$SHOAL" run "$M" -- python3 - "$M/passed" <<'PY'
import os, socket, sys
p = sys.argv[1]
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"abc")
pid = os.fork()
if pid == 0:
    os.close(fd)
    a.close()
    _, fds, _, _ = socket.recv_fds(b, 1, 1)
    b.sendall(b"k")                              # the sender closes after this
    b.recv(1)
    os.write(fds[0], b"def")                     # at the shared offset, 3
    print(os.pread(fds[0], 10, 0).decode(), flush=True)
    os.close(fds[0])
    os._exit(0)
socket.send_fds(a, [b"x"], [fd])
a.recv(1)
os.close(fd)
a.sendall(b"g")
os.waitpid(pid, 0)
PY
) || fail "passing a descriptor under the shim: $out"
[ "$out" = abcdef ] || fail "the receiver of a passed descriptor read: $out"
[ "$(cat "$M/passed")" = abcdef ] || fail "a passed descriptor's writes through the mount: $(cat "$M/passed")"
rm "$M/passed"
# A process out of descriptors gets EMFILE from an open through the
# shim, as from the kernel (the daemon's descriptor cannot be given to
# it): it was "Protocol error", and the daemon's handle stayed open.
"$SHOAL" run "$M" -- python3 - "$M" <<'PY' || fail "an open through the shim past RLIMIT_NOFILE"
import errno, os, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))
fds = []
try:
    for i in range(100):
        fds.append(os.open("%s/many%d" % (sys.argv[1], i), os.O_CREAT | os.O_WRONLY, 0o644))
    sys.exit("no error after 100 opens")
except OSError as e:
    if e.errno != errno.EMFILE:
        sys.exit("open past the limit: %s" % e)
for fd in fds:
    os.write(fd, b"m")
    os.close(fd)
PY
[ "$(cat "$M"/many* | wc -c)" -ge 30 ] || fail "the files opened below the limit"
rm -f "$M"/many*
# A write through a shim descriptor shows in the mount's stat before the
# close (size and time), though the kernel had the file's attributes
# cached for an hour: while a client holds a file for writing, the mount's
# GETATTR takes what it wrote from the object and the kernel keeps none.
# Before, the size and time came at close or fsync.
echo old > "$M/held"; stat "$M/held" >/dev/null
"$SHOAL" run "$M" -- python3 - "$M/held" <<'PY' || fail "a write seen through the mount before close"
import os, sys, time
p = sys.argv[1]
before = os.stat(p)
fd = os.open(p, os.O_WRONLY | os.O_APPEND)
time.sleep(0.02)
os.write(fd, b"x" * 5000)
st = os.stat(p)                                  # by path: through the mount
if st.st_size != 5004:
    sys.exit("size through the mount before close: %d" % st.st_size)
if st.st_mtime_ns <= before.st_mtime_ns:
    sys.exit("mtime through the mount before close unchanged")
os.write(fd, b"y")
if os.stat(p).st_size != 5005:
    sys.exit("size after a second write: %d" % os.stat(p).st_size)
os.close(fd)
PY
[ "$(stat -c %s "$M/held")" = 5005 ] || fail "size after close: $(stat -c %s "$M/held")"
rm "$M/held"
# A size changed through a shim descriptor (ftruncate up and down,
# fallocate) shows through the mount at once, though the kernel had the file's attributes
# cached for an hour (its stat just before).
: > "$M/grow"; stat -c %s "$M/grow" >/dev/null
"$SHOAL" run "$M" -- python3 - "$M/grow" <<'PY' || fail "ftruncate under the shim"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.ftruncate(fd, 12345)
if os.stat(sys.argv[1]).st_size != 12345:
    sys.exit("ftruncate: %d through the mount" % os.stat(sys.argv[1]).st_size)
os.posix_fallocate(fd, 0, 20000)
if os.stat(sys.argv[1]).st_size != 20000:
    sys.exit("fallocate: %d through the mount" % os.stat(sys.argv[1]).st_size)
os.ftruncate(fd, 100)
if os.stat(sys.argv[1]).st_size != 100:
    sys.exit("ftruncate down: %d through the mount" % os.stat(sys.argv[1]).st_size)
os.close(fd)
PY
rm "$M/grow"
# A process that drops root (seteuid) gets nobody's rights through the
# shim at once, and root's again after seteuid(0): the daemon reads a
# connection's credentials at connect, so the shim connects anew after
# each set*id call (it kept root's rights before).
mkdir -m 755 "$M/rootonly"
out=$("$SHOAL" run "$M" -- python3 - "$M/rootonly" <<'PY'
import os, sys
d = sys.argv[1]
os.close(os.open(d + "/as-root", os.O_CREAT | os.O_WRONLY, 0o644))
os.setegid(65534); os.seteuid(65534)
try:
    os.open(d + "/as-nobody", os.O_CREAT | os.O_WRONLY, 0o644)
    print("created as nobody")
except PermissionError:
    print("EACCES as nobody")
os.seteuid(0); os.setegid(0)
os.close(os.open(d + "/again-root", os.O_CREAT | os.O_WRONLY, 0o644))
print("root again")
PY
) || fail "seteuid under the shim: $out"
[ "$out" = "EACCES as nobody
root again" ] || fail "seteuid under the shim: $out"
[ ! -e "$M/rootonly/as-nobody" ] && [ -e "$M/rootonly/again-root" ] || fail "seteuid under the shim: $(ls "$M/rootonly")"
rm -r "$M/rootonly"
# close_range (and closefrom) of every descriptor past 2, then the
# program's own file and the shim again: the shim's socket stays open, the
# file it had made closes with its handle (closerange.c says why).
cc -O2 -Wall -Werror -o "$WORK/closerange" "$ROOT/tests/c/closerange.c"
rm -f "$WORK/closerange-own"
SHOAL_SHIM_LOG=$WORK/closerange.log timeout 20 "$SHOAL" run "$M" -- "$WORK/closerange" "$M" "$WORK/closerange-own" \
  || fail "close_range under the shim: exit $?"
[ "$(cat "$M/cr1")/$(cat "$M/cr2")/$(cat "$WORK/closerange-own")" = "x/after/own" ] \
  || fail "close_range under the shim: cr1 '$(cat "$M/cr1")', cr2 '$(cat "$M/cr2")', own '$(cat "$WORK/closerange-own")'"
grep -q "cr2.*to the daemon\|to the daemon.*cr2" "$WORK/closerange.log" || { cat "$WORK/closerange.log"; fail "the open after close_range did not reach the daemon"; }
rm "$M/cr1" "$M/cr2"
# An unmodified C program: creates, fstats, closes and unlinks, 1 and 2 processes.
"$SHOAL" run "$M" -- "$WORK/crunl" "$M/d" 2000 1 >/dev/null || fail "crunl, 1 process"
"$SHOAL" run "$M" -- "$WORK/crunl" "$M/d" 2000 2 >/dev/null || fail "crunl, 2 processes"
[ -z "$(ls -A "$M/d")" ] || fail "crunl left $(ls -A "$M/d" | head -3)"
unmount_check client-shim >/dev/null || fail "fsck after the shim"
echo "client-shim: ok"
