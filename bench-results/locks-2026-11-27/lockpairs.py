# fcntl lock+unlock pairs per second by one process on one file: PATH...
import fcntl, os, sys, time
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    n = 1000; t = time.time()
    for i in range(n):
        fcntl.lockf(fd, fcntl.LOCK_EX); fcntl.lockf(fd, fcntl.LOCK_UN)
    dt = time.time() - t
    print(f"{path}: {n/dt:.0f} lock+unlock pairs/s ({dt/n*1e3:.2f} ms a pair)")
    os.close(fd)
