# Two writers of one SQLite database, one through each of two mounts of one
# namespace: python3 sqlite-two-writers.py A_PATH B_PATH N. Each inserts N
# rows, a transaction each; the database must hold both writers' rows and
# check clean (SQLite serializes its writers with fcntl locks).
import os, sqlite3, sys, multiprocessing as mp
a, b, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def writer(path, who):
    db = sqlite3.connect(path, timeout=60)
    for i in range(n):
        with db:
            db.execute("insert into t values (?, ?)", (who, i))
    db.close()
db = sqlite3.connect(a); db.execute("create table t (who text, i int)"); db.commit(); db.close()
ps = [mp.Process(target=writer, args=(p, w)) for p, w in ((a, "a"), (b, "b"))]
[p.start() for p in ps]; [p.join() for p in ps]
db = sqlite3.connect(a)
rows = db.execute("select who, count(*) from t group by who").fetchall()
ok = db.execute("pragma integrity_check").fetchone()[0]
print(rows, ok)
sys.exit(0 if rows == [("a", n), ("b", n)] and ok == "ok" else 1)
