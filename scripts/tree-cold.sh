#!/usr/bin/env bash
# Seed 004 through the mount, cold: two shoal mounts, one placing new
# directories near their parent (the default) and one spreading them over the
# allocation groups; before every phase of the tree workload each mount is
# unmounted, the page cache dropped and the store mounted again, so every
# phase starts with an empty daemon cache and an empty page cache.
# Store reads and disk bytes per phase are the daemon's own counters
# (`shoal stats --json` store.gets/scans, /proc/PID/io read_bytes), logged
# before each unmount to $OUT/tree-cold-reads.log.
#   bash scripts/tree-cold.sh            (OUT=bench-results by default)
set -euo pipefail
cd "$(dirname "$0")/.."
S=${SHOAL:-$PWD/target/release/shoal}
OUT=${OUT:-bench-results}
B=${BENCH_ROOT:-/var/tmp/tree-cold}
mkdir -p "$OUT"
for t in near spread; do
  if mountpoint -q "$B/$t" 2>/dev/null; then "$S" umount "$B/$t"; fi
  rm -rf "$B/$t.store"
  mkdir -p "$B/$t"
  "$S" mkfs "$B/$t.store" >/dev/null
  "$S" mount -d -o "placement=$t" "$B/$t.store" "$B/$t" >/dev/null
done
LOG=$OUT/tree-cold-reads.log
: > "$LOG"
# Runs before each phase with SHOAL_BENCH_TARGET (near|spread) and SHOAL_BENCH_PATH.
cat > "$B/between.sh" <<EOF
#!/usr/bin/env bash
set -e
st=$B/\$SHOAL_BENCH_TARGET.store
pid=\$(cat \$st/daemon.pid)
reads=\$("$S" stats --json "\$SHOAL_BENCH_PATH" | python3 -c 'import json,sys; s=json.load(sys.stdin)["store"]; print(s["gets"], s["scans"])')
echo "\$SHOAL_BENCH_TARGET gets+scans \$reads disk_read_bytes \$(awk '/^read_bytes/ {print \$2}' /proc/\$pid/io)" >> "$LOG"
"$S" umount "\$SHOAL_BENCH_PATH"
sync
echo 3 > /proc/sys/vm/drop_caches
"$S" mount -d -o "placement=\$SHOAL_BENCH_TARGET" "\$st" "\$SHOAL_BENCH_PATH" >/dev/null
EOF
chmod +x "$B/between.sh"
"$S" bench tree --mode path --target "near=$B/near,spread=$B/spread" --cold --between "$B/between.sh" --json "$OUT/tree-cold.jsonl"
# The last phase's counters.
for t in near spread; do SHOAL_BENCH_TARGET=$t SHOAL_BENCH_PATH=$B/$t "$B/between.sh"; "$S" umount "$B/$t"; done
echo "per-phase daemon counters (the first line of each target is the empty mount): $LOG"
cat "$LOG"
