#!/usr/bin/env bash
# FUSE over io_uring (-o uring): the mount must actually serve requests from
# its per-CPU queue threads (not fall back to /dev/fuse), then pass
# pjdfstest, a shorter fsx run and the SIGKILL test like the default
# transport. Sets the fuse module's enable_uring parameter (off by default
# in Linux); mounts that do not ask for io_uring are unaffected by it.
source "$(dirname "$0")/lib.sh"
P=/sys/module/fuse/parameters/enable_uring
if [ ! -e $P ]; then echo "skipped: this kernel's fuse has no enable_uring (Linux 6.14+)"; exit 0; fi
echo Y > $P
MNT=$(mount_fresh uring allow_other,uring)
pid=$(pgrep -f -- "$WORK/uring.store" | head -1)
for i in $(seq 200); do mkdir "$MNT/d$i"; echo "$i" > "$MNT/d$i/f"; done
[ "$(cat "$MNT/d77/f")" = 77 ]
woke=0; queues=0
for t in /proc/$pid/task/*; do
  if grep -q '^fuser-uring-' "$t/comm"; then
    queues=$((queues+1)); woke=$((woke + $(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status")))
  fi
done
echo "io_uring queue threads: $queues, woken $woke times for about 800 requests"
[ "$queues" -ge 1 ] && [ "$woke" -ge 400 ] || { echo "requests did not come over io_uring"; exit 1; }
unmount_check uring >/dev/null
MOUNT_OPTS=allow_other,uring bash "$(dirname "$0")/pjdfstest.sh"
MOUNT_OPTS=allow_other,uring FSX_OPS=30000 bash "$(dirname "$0")/fsx.sh"
# SIGKILL of the daemon mid-workload on an io_uring mount: recovery is a
# prefix with every fsync'ed file (the same test as on /dev/fuse).
SHOAL_TEST_MOUNT_OPTS=uring cargo test --release -q -p shoal --test kill 2>&1 | grep -E "test result|panicked|FAILED"
