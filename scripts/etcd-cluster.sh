#!/usr/bin/env bash
# A three-member etcd cluster on 127.0.0.1 for benchmarks and manual tries
# (the tests start their own, crates/testkit/src/etcd.rs).
#   scripts/etcd-cluster.sh start DIR [BASE]   clients on BASE+1..3 (default 24000)
#   scripts/etcd-cluster.sh stop DIR
# Prints the endpoints (H:P,H:P,H:P) on start.
set -euo pipefail
cmd=$1; dir=$2; base=${3:-24000}
case $cmd in
start)
  # Members a killed run left on this directory go first (they hold the
  # ports, and their pid files are about to be removed).
  pkill -KILL -f -- "--data-dir $dir/m" 2>/dev/null && sleep 0.5 || true
  rm -rf "$dir"; mkdir -p "$dir"
  cl=""; for i in 0 1 2; do cl+="${cl:+,}m$i=http://127.0.0.1:$((base+11+i))"; done
  for i in 0 1 2; do
    c=http://127.0.0.1:$((base+1+i)); p=http://127.0.0.1:$((base+11+i))
    setsid etcd --name m$i --data-dir "$dir/m$i" --listen-client-urls $c --advertise-client-urls $c \
      --listen-peer-urls $p --initial-advertise-peer-urls $p --initial-cluster "$cl" \
      --initial-cluster-token shoal-bench --initial-cluster-state new \
      --auto-compaction-mode revision --auto-compaction-retention 100000 \
      > "$dir/m$i.log" 2>&1 < /dev/null &
    echo $! > "$dir/m$i.pid"
  done
  eps=127.0.0.1:$((base+1)),127.0.0.1:$((base+2)),127.0.0.1:$((base+3))
  for _ in $(seq 100); do
    ETCDCTL_API=3 etcdctl --endpoints=$eps endpoint health >/dev/null 2>&1 && { echo "$eps"; exit 0; }
    sleep 0.2
  done
  echo "etcd did not become healthy: see $dir/m*.log" >&2; exit 1 ;;
stop)
  pids=$(cat "$dir"/m*.pid 2>/dev/null || true)
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  # Gone before the ports are wanted again: up to 5 s, then KILL.
  for _ in $(seq 50); do
    alive=0; for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break; sleep 0.1
  done
  for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$dir" ;;
*) echo "usage: $0 start|stop DIR [BASE]" >&2; exit 2 ;;
esac
