#!/usr/bin/env bash
# Concurrent namespace changes through a real mount: three processes create,
# rename (within and across two directories) and unlink random names, each
# keeping half of what it renamed. After a remount every kept name must be
# there with its content and nothing else, and fsck must find no problem.
# Exercises the per-name locks (31 per directory shard, docs/locking.md) and
# the shards' two slot layouts from several clients at once.
source "$(dirname "$0")/lib.sh"
MNT=$(mount_fresh renames)
trap '"$SHOAL" umount "$MNT" 2>/dev/null || true' EXIT
mkdir "$MNT/d" "$MNT/e"
for k in 1 2 3; do
  python3 - "$MNT" "$k" "$WORK/renames.kept.$k" <<'PY' &
import os, random, sys
mnt, k, out = sys.argv[1], sys.argv[2], sys.argv[3]
r = random.Random(int(k))
kept = []
for i in range(3000):
    name = f"{k}-{r.getrandbits(32):x}-{i}"
    p = f"{mnt}/{r.choice('de')}/{name}"
    with open(p, "w") as f:
        f.write(name)
    q = f"{mnt}/{r.choice('de')}/{name}.r"
    os.rename(p, q)
    if r.random() < 0.5:
        os.unlink(q)
    else:
        kept.append(q[len(mnt):])
open(out, "w").write("\n".join(kept) + "\n")
PY
done
wait
unmount_check renames >/dev/null || { echo "renames: fsck"; "$SHOAL" fsck "$WORK/renames.store"; exit 1; }
"$SHOAL" mount -d "$WORK/renames.store" "$MNT" >/dev/null
python3 - "$MNT" "$WORK"/renames.kept.* <<'PY'
import os, sys
mnt = sys.argv[1]
want = set()
for f in sys.argv[2:]:
    want |= {l for l in open(f).read().split("\n") if l}
have = {f"/{d}/{n}" for d in "de" for n in os.listdir(f"{mnt}/{d}")}
bad = [p for p in have & want if open(mnt + p).read() + ".r" != os.path.basename(p)]
if want != have or bad:
    print(f"renames: {len(want - have)} missing, {len(have - want)} extra, {len(bad)} with wrong content")
    sys.exit(1)
print(f"renames: {len(have)} names kept by 3 processes, all there after a remount")
PY
