#!/usr/bin/env bash
# Head-of-line blocking: crunl pinned to CPU 0 while another process on CPU 0
# writes and fsyncs a small file in a loop, on shoal over /dev/fuse and with
# -o uring. Needs root and fuse.enable_uring=Y. From the repo root:
#   bash bench-results/run9/hol.sh
set -euo pipefail
S=${S:-target/release/shoal}
M=$(mktemp -d /tmp/shoal-hol.XXXXXX)
for opts in allow_other allow_other,uring; do
  rm -rf /var/tmp/shoal-hol.store; "$S" mkfs /var/tmp/shoal-hol.store >/dev/null
  "$S" mount -d /var/tmp/shoal-hol.store "$M" -o $opts >/dev/null
  taskset -c 0 python3 -c "
import os, time
t = time.time(); n = 0
while time.time() - t < 12:
    fd = os.open('$M/sync.dat', os.O_WRONLY | os.O_CREAT, 0o644); os.write(fd, b'x' * 100); os.fsync(fd); os.close(fd); n += 1
print(f'fsyncs/s {n / 12:.0f}')
" > "$M.fsync" &
  sleep 1
  r=$(taskset -c 0 "$S" bench crunl --mode path --target x="$M" --workers 1 --iters 20000 2>&1 | grep -E "^crunl " | awk '{printf "%s pairs/s, p50 %s us, p99 %s us", $6, $7, $8}')
  wait
  echo "-o $opts: crunl beside an fsync loop on its CPU: $r; the loop: $(cat "$M.fsync")"
  "$S" umount "$M"
done
