# POSIX record locks and flock across two mounts A and B of one namespace:
# python3 locks.py A_FILE B_FILE. Exits non-zero, naming the first wrong answer.
import fcntl, os, signal, struct, subprocess, sys, time
a, b = sys.argv[1], sys.argv[2]
def fail(m): print("locks:", m); sys.exit(1)
open(a, "w").close()
def holder(path, code):
    # A child that runs `code` with fd on path, says "held", then sleeps.
    return subprocess.Popen([sys.executable, "-c", f"""
import fcntl, os, sys, time
fd = os.open({path!r}, os.O_RDWR)
{code}
print("held", flush=True); time.sleep(30)"""], stdout=subprocess.PIPE, text=True)
def wait_held(p):
    if p.stdout.readline().strip() != "held": fail("holder did not start")
def try_lock(path, how, start=0, length=0):
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.lockf(fd, how | fcntl.LOCK_NB, length, start); return True
    except OSError: return False
    finally: os.close(fd)
# 1. A write lock on bytes 0-99 through A: B cannot lock them, can lock past them.
p = holder(a, "fcntl.lockf(fd, fcntl.LOCK_EX, 100, 0)"); wait_held(p)
if try_lock(b, fcntl.LOCK_EX, 50, 10): fail("B write-locked bytes A holds")
if try_lock(b, fcntl.LOCK_SH, 0, 1): fail("B read-locked a byte A write-locks")
if not try_lock(b, fcntl.LOCK_EX, 100, 100): fail("B could not lock bytes past A's range")
# F_GETLK through B names A's lock.
fd = os.open(b, os.O_RDWR)
got = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 10, 5, 0))
typ, _, start, length, pid = struct.unpack("hhqqi", got)
if (typ, start, length) != (fcntl.F_WRLCK, 0, 100): fail(f"F_GETLK on B: {(typ, start, length, pid)}")
if pid != p.pid: fail(f"F_GETLK pid {pid}, the holder is {p.pid}")
os.close(fd)
# 2. A waiter on B blocks until the holder dies (its close releases), then gets it.
t0 = time.time()
w = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, os
fd = os.open({b!r}, os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX, 10, 20); print("got", flush=True)"""], stdout=subprocess.PIPE, text=True)
time.sleep(1)
if w.poll() is not None: fail("the waiter on B did not wait")
p.kill(); p.wait()
if w.stdout.readline().strip() != "got": fail("the waiter on B did not get the lock after A's holder died")
w.wait()
print(f"locks: a waiter on B got the lock {time.time() - t0 - 1:.2f} s after A's holder was killed")
# 3. A waiter interrupted by a signal returns (EINTR), and one killed goes.
p = holder(a, "fcntl.lockf(fd, fcntl.LOCK_EX)"); wait_held(p)
w = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, os, signal, sys
def on(s, f): raise TimeoutError
signal.signal(signal.SIGALRM, on); signal.alarm(1)
fd = os.open({b!r}, os.O_RDWR)
try: fcntl.lockf(fd, fcntl.LOCK_EX)
except TimeoutError: print("interrupted", flush=True); sys.exit(0)
print("locked"); sys.exit(1)"""], stdout=subprocess.PIPE, text=True)
try: out = w.communicate(timeout=10)[0].strip()
except subprocess.TimeoutExpired: fail("a waiter on B was not interrupted by its alarm")
if out != "interrupted": fail(f"interrupted waiter: {out}")
w = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, os
fd = os.open({b!r}, os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX)"""])
time.sleep(0.5); w.kill()
try: w.wait(timeout=5)
except subprocess.TimeoutExpired: fail("a waiter on B killed with SIGKILL did not go")
p.kill(); p.wait()
# 4. flock: exclusive across mounts, shared with shared, apart from POSIX locks.
p = holder(a, "fcntl.flock(fd, fcntl.LOCK_SH)"); wait_held(p)
def try_flock(path, how):
    fd = os.open(path, os.O_RDWR)
    try: fcntl.flock(fd, how | fcntl.LOCK_NB); return True
    except OSError: return False
    finally: os.close(fd)
if not try_flock(b, fcntl.LOCK_SH): fail("B could not share A's shared flock")
if try_flock(b, fcntl.LOCK_EX): fail("B took an exclusive flock over A's shared one")
if not try_lock(b, fcntl.LOCK_EX): fail("a POSIX lock on B met A's flock (they are apart on Linux)")
p.kill(); p.wait()
# The dead holder's flock goes with its file's release, which the kernel
# sends A's daemon after the process is gone (FUSE releases are
# asynchronous): B may meet it for a moment (CI saw it once, 2026-11-28).
t0 = time.time()
while not try_flock(b, fcntl.LOCK_EX):
    if time.time() - t0 > 5: fail("B could not flock 5 s after A's holder died")
    time.sleep(0.02)
# 5. Open-file-description locks (F_OFD_SETLK): owned by the open file, so
# they conflict within one process, stay through a dup's close, and go at
# the open file's last close (the kernel does not say so; the daemon finds
# them at the release, which may come just after close returns).
def ofd(fd, typ, start=0, length=10):
    try: fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi", typ, 0, start, length, 0)); return True
    except OSError: return False
fa, fb = os.open(a, os.O_RDWR), os.open(b, os.O_RDWR)
if not ofd(fa, fcntl.F_WRLCK): fail("no OFD lock on A")
if ofd(fb, fcntl.F_WRLCK): fail("an OFD lock on B over the same process's OFD lock on A")
os.close(os.dup(fa))
if ofd(fb, fcntl.F_RDLCK): fail("an OFD lock went when a dup of its file closed")
if try_lock(b, fcntl.LOCK_EX, 0, 1): fail("a POSIX lock on B over an OFD lock on A")
os.close(fa)
for _ in range(40):
    if ofd(fb, fcntl.F_WRLCK): break
    time.sleep(0.05)
else: fail("an OFD lock stayed after its file's last close")
os.close(fb)
print("locks: POSIX, OFD and flock locks hold across mounts")
