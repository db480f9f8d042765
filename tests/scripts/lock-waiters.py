# Lock waiters on one io_uring queue of a mount: python3 lock-waiters.py FILE.
# A holder takes FILE; two waiters pinned to CPU 0 ask for it: one waits
# (it holds one of the queue's two daemon threads), the other is refused
# with ENOLCK at once, and a stat from CPU 0 is still answered (the queue
# keeps a thread). When the holder goes, the waiter gets the lock.
import errno, fcntl, os, subprocess, sys, time
path = sys.argv[1]
def fail(m): print("lock-waiters:", m); sys.exit(1)
open(path, "w").close()
on0 = ["taskset", "-c", "0", sys.executable, "-c"]
holder = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, os, time
fd = os.open({path!r}, os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX); print("held", flush=True); time.sleep(30)"""],
    stdout=subprocess.PIPE, text=True)
if holder.stdout.readline().strip() != "held": fail("no holder")
waiter = f"""
import errno, fcntl, os, sys
fd = os.open({path!r}, os.O_RDWR)
try: fcntl.lockf(fd, fcntl.LOCK_EX); print("locked", flush=True)
except OSError as e: print(errno.errorcode[e.errno], flush=True)
"""
w1 = subprocess.Popen(on0 + [waiter], stdout=subprocess.PIPE, text=True)
time.sleep(0.5)
w2 = subprocess.Popen(on0 + [waiter], stdout=subprocess.PIPE, text=True)
try: out2 = w2.communicate(timeout=10)[0].strip()
except subprocess.TimeoutExpired: fail("a second waiter on the queue was neither refused nor served")
if out2 != "ENOLCK": fail(f"second waiter on one queue: {out2}, not ENOLCK")
# A lookup of a name never asked for goes to the daemon.
st = subprocess.run(on0 + [f"import os; os.path.exists({path + '.%d' % time.time_ns()!r}); print('ok')"],
                    capture_output=True, text=True, timeout=10)
if st.stdout.strip() != "ok": fail("a stat from CPU 0 was not answered while a waiter held a thread")
if w1.poll() is not None: fail("the first waiter did not wait")
holder.kill(); holder.wait()
try: out1 = w1.communicate(timeout=10)[0].strip()
except subprocess.TimeoutExpired: fail("the waiter did not get the lock after the holder went")
if out1 != "locked": fail(f"first waiter: {out1}")
print("lock-waiters: one waiter per io_uring queue, the next refused with ENOLCK, the queue still serving")
