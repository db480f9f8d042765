#!/usr/bin/env bash
# What TLS and authentication to etcd cost per create (issue 44): the same
# `shoal bench shared-create` (creates in one directory through the
# engine, each daemon its own etcd connection and session, no FUSE) on a
# plaintext three-member cluster (ports 24961-24973) and on one with TLS,
# client certificates and authentication on (24981-24993, user root with a
# password), one after the other, in one run.
#   scripts/bench-tls.sh [SECONDS] [WORKERS]   (default 10 s a phase; workers 1,4)
# Each: with directory leases (the default) and without (--nodirlease).
set -euo pipefail
cd "$(dirname "$0")/.."
S=${SHOAL:-$PWD/target/release/shoal}
SECS=${1:-10}; WORKERS=${2:-1,4}
B=${BENCH_ROOT:-/var/tmp/shoal-bench-tls}
down() { bash scripts/etcd-cluster.sh stop "$B/plain" 2>/dev/null || true; bash scripts/etcd-cluster.sh stop "$B/tls" 2>/dev/null || true; }
trap down EXIT
down; rm -rf "$B"; mkdir -p "$B"
P=$(bash scripts/etcd-cluster.sh start "$B/plain" 24960)
T=$(TLS=1 bash scripts/etcd-cluster.sh start "$B/tls" 24980)
t=$B/tls/tls
ETCDCTL_API=3 etcdctl --endpoints="$T" --cacert "$t/ca.pem" --cert "$t/client.pem" --key "$t/client-key.pem" user add root --new-user-password=bench-root >/dev/null
ETCDCTL_API=3 etcdctl --endpoints="$T" --cacert "$t/ca.pem" --cert "$t/client.pem" --key "$t/client-key.pem" user grant-role root root >/dev/null
ETCDCTL_API=3 etcdctl --endpoints="$T" --cacert "$t/ca.pem" --cert "$t/client.pem" --key "$t/client-key.pem" auth enable >/dev/null
# With directory leases (the default: creates answered from memory and
# committed in batches) and without (each create one etcd transaction
# before it returns: what TLS costs a round trip).
for lease in "" --nodirlease; do
  echo "== plaintext, no authentication ${lease:-(directory leases)}"
  "$S" bench shared-create --etcd "etcd://$P/bench" --daemons 1 --workers "$WORKERS" --seconds "$SECS" $lease
  echo "== TLS with client certificates, authentication on (user root) ${lease:-(directory leases)}"
  META_PASSWORD=bench-root "$S" bench shared-create --etcd "etcd://root@$T/bench?cacert=$t/ca.pem&cert=$t/client.pem&key=$t/client-key.pem" \
    --daemons 1 --workers "$WORKERS" --seconds "$SECS" $lease
done
