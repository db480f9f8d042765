import os, sys, time
d, secs, procs = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
os.makedirs(d, exist_ok=True)
pids = []
for p in range(procs):
    pid = os.fork()
    if pid == 0:
        t = time.time(); n = 0
        while time.time() - t < secs:
            fd = os.open(f"{d}/p{p}-{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644); os.close(fd); n += 1
        with open(f"/tmp/cr-{p}", "w") as f: f.write(str(n))
        os._exit(0)
    pids.append(pid)
for pid in pids: os.waitpid(pid, 0)
print(sum(int(open(f"/tmp/cr-{p}").read()) for p in range(procs)) / secs)
