# One SQLite writer: N single-row transactions into PATH (rollback journal,
# the default), then the time; python3 sqlite-one.py PATH N.
import os, sqlite3, sys, time
path, n = sys.argv[1], int(sys.argv[2])
for f in (path, path + "-journal"):
    if os.path.exists(f): os.remove(f)
db = sqlite3.connect(path); db.execute("create table t (i int)"); db.commit()
t = time.time()
for i in range(n):
    with db: db.execute("insert into t values (?)", (i,))
dt = time.time() - t
print(f"{path}: {n} transactions in {dt:.2f} s, {n/dt:.0f}/s")
