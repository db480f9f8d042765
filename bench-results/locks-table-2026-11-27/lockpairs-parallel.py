# fcntl lock+unlock pairs per second, N processes at once, each on a file
# of its own in DIR: python3 lockpairs-parallel.py DIR N SECONDS
import fcntl, multiprocessing, os, sys, time

def run(path, secs, q):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    n, t = 0, time.time()
    while time.time() - t < secs:
        fcntl.lockf(fd, fcntl.LOCK_EX); fcntl.lockf(fd, fcntl.LOCK_UN); n += 1
    os.close(fd)
    q.put(n)

d, n, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
q = multiprocessing.Queue()
ps = [multiprocessing.Process(target=run, args=(os.path.join(d, f"lp{i}"), secs, q)) for i in range(n)]
for p in ps: p.start()
total = sum(q.get() for _ in ps)
for p in ps: p.join()
print(f"{d}: {n} processes, a file each: {total / secs:.0f} lock+unlock pairs/s")
