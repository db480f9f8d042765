S=/tmp/wt-rulesgaps/target/release/shoal
TG=floor=/tmp/lead-m/floor,floorkp=/tmp/lead-m/floorkp,shoal=/tmp/lead-m/shoal,dp=/tmp/lead-m/dp
for r in 1 2 3; do
  uptime
  $S bench crunl --mode path --target $TG --workers 1,2 --iters 20000 --json /tmp/lead-b1.jsonl
  $S bench rndrename --mode path --target $TG --workers 1,2 --iters 10000 --json /tmp/lead-b1.jsonl
  $S bench fsmark --mode path --target $TG --workers 1,2 --files 20000 --json /tmp/lead-b1.jsonl
done
uptime
