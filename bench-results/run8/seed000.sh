#!/bin/bash
# Seed 000 on the engine, five times: 2 workers / 1 worker in one engine, and the machine's
# ceiling for the same workload: two independent single-worker processes at once (no shared state).
B=${B:-/tmp/ctl/shoal-g}; IT=${IT:-600000}
rate() { python3 -c "import json,sys; l=[json.loads(x) for x in open(sys.argv[1])]; print(' '.join(str(int(j['ops_per_s'])) for j in l))" $1; }
for W in crunl rndrename; do for r in 1 2 3 4 5; do
  rm -f a.j b.j c.j
  $B bench $W --workers 1,2 --iters $IT --json a.j >/dev/null 2>&1
  $B bench $W --workers 1 --iters $IT --json b.j >/dev/null 2>&1 & $B bench $W --workers 1 --iters $IT --json c.j >/dev/null 2>&1; wait
  read s e <<<"$(rate a.j)"; p1=$(rate b.j); p2=$(rate c.j)
  python3 -c "s,e,p1,p2=$s,$e,$p1,$p2; print(f'$W run $r: engine 1w {s} 2w {e} = {e/s:.2f}x | two processes {p1}+{p2} = {(p1+p2)/s:.2f}x of the 1w run')"
done; done
