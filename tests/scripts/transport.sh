#!/usr/bin/env bash
# The FUSE transports. By default a mount serves FUSE over io_uring where the
# kernel offers it (the fuse module's enable_uring=Y, which scripts/setup.sh
# and scripts/test.sh set): the default mount must actually serve requests
# from its per-CPU queue threads, with passthrough still on. Every other
# suite runs on that default; here pjdfstest, a shorter fsx run and the
# SIGKILL test run on the fallback, /dev/fuse (`-o nouring`), as a kernel
# without io_uring for FUSE would serve them.
source "$(dirname "$0")/lib.sh"
P=/sys/module/fuse/parameters/enable_uring
if [ ! -e $P ]; then echo "skipped: this kernel's fuse has no enable_uring (Linux 6.14+)"; exit 0; fi
echo Y > $P
MNT=$(mount_fresh uring allow_other)
pid=$(pgrep -f -- "$WORK/uring.store" | head -1)
for i in $(seq 200); do mkdir "$MNT/d$i"; echo "$i" > "$MNT/d$i/f"; done
[ "$(cat "$MNT/d77/f")" = 77 ]
read -r queues woke < <(uring_wakeups "$pid")
echo "io_uring queue threads: $queues, woken $woke times for about 800 requests"
[ "$queues" -ge 1 ] && [ "$woke" -ge 400 ] || { echo "requests did not come over io_uring on a default mount"; exit 1; }
# Passthrough beside io_uring: a file past the inline size, read back after
# drop_caches through a new open without a READ request reaching the daemon.
reads() { "$SHOAL" stats --json "$MNT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["fuse_requests"].get("read",0))'; }
head -c 1M /dev/urandom > "$WORK/uring.src"
cp "$WORK/uring.src" "$MNT/big"
sync; echo 3 > /proc/sys/vm/drop_caches
before=$(reads)
cmp "$WORK/uring.src" "$MNT/big"
after=$(reads)
echo "READ requests for 1 MiB read back: $((after-before))"
[ "$after" -eq "$before" ] || { echo "passthrough is not in effect beside io_uring"; exit 1; }
unmount_check uring >/dev/null
MOUNT_OPTS=allow_other,nouring bash "$(dirname "$0")/pjdfstest.sh"
MOUNT_OPTS=allow_other,nouring FSX_OPS=30000 bash "$(dirname "$0")/fsx.sh"
# SIGKILL of the daemon mid-workload on /dev/fuse: recovery is a prefix with
# every fsync'ed file (the same test as on the default transport).
SHOAL_TEST_MOUNT_OPTS=nouring cargo test --release -q -p shoal --test kill 2>&1 | grep -E "test result|panicked|FAILED"
