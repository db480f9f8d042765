BEF=/tmp/before/target/release/shoal; AFT=/work/main/target/release/shoal; B=/mnt/ab
for s in before after; do b=$BEF; [ $s = after ] && b=$AFT; rm -rf /var/tmp/ab-$s.store; $b mkfs /var/tmp/ab-$s.store >/dev/null; $b mount -d /var/tmp/ab-$s.store $B/$s -o allow_other >/dev/null; done
J="--json /work/main/bench-results/ab-2026-11-24/path-2w-reversed.jsonl"
for r in 1 2; do
$AFT bench crunl --mode path --target "after=$B/after,before=$B/before" --workers 2 --iters 20000 $J
$AFT bench fsmark --mode path --target "after=$B/after,before=$B/before" --workers 2 --files 20000 $J
$AFT bench postmark --mode path --target "after=$B/after,before=$B/before" --workers 2 --files 20000 --transactions 50000 $J
done
$BEF umount $B/before; $AFT umount $B/after; rm -rf /var/tmp/ab-before.store /var/tmp/ab-after.store
echo AB2-DONE
