"""race_rename.py MNT START N: rename MNT/q/job{i} -> MNT/w/job{i} at
START + i*0.2 s, printing "ok" or the errno's name per i (issue 43's
reproduction of two etcd mounts both winning one rename)."""
import errno
import os
import sys
import time

mnt, start, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
res = []
for i in range(n):
    while time.time() < start + i * 0.2:
        pass
    try:
        os.rename(f"{mnt}/q/job{i}", f"{mnt}/w/job{i}")
        res.append("ok")
    except OSError as e:
        res.append(errno.errorcode[e.errno])
print(" ".join(res))
