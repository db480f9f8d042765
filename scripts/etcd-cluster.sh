#!/usr/bin/env bash
# A three-member etcd cluster on 127.0.0.1 for benchmarks and manual tries
# (the tests start their own, crates/testkit/src/etcd.rs).
#   scripts/etcd-cluster.sh start DIR [BASE]   clients on BASE+1..3 (default 24000)
#   scripts/etcd-cluster.sh stop DIR
#   scripts/etcd-cluster.sh cut DIR N|none    cut member N off from its peers
# Prints the endpoints (H:P,H:P,H:P) on start. `cut` (root, nftables) drops
# every byte between member N and the other two, both ways, its client port
# left open: a partition inside the cluster. Member N runs with group id
# 4300+N so that nftables can tell the connections it makes (`meta skgid`;
# crates/testkit/src/etcd.rs does the same for the tests).
# With TLS=1, clients reach the members over TLS with client certificates
# (etcd's security guide: --cert-file, --key-file, --trusted-ca-file,
# --client-cert-auth): a CA, a server certificate for 127.0.0.1 and
# localhost and a client certificate are made in DIR/tls (ca.pem, cert.pem,
# key.pem; client.pem, client-key.pem). Peers stay plaintext on loopback.
set -euo pipefail
cmd=$1; dir=$2; base=${3:-24000}
nocut() { nft delete table inet "shoal_etcd_$1" 2>/dev/null || true; }
case $cmd in
start)
  # Members a killed run left on this directory go first (they hold the
  # ports, and their pid files are about to be removed).
  pkill -KILL -f -- "--data-dir $dir/m" 2>/dev/null && sleep 0.5 || true
  rm -rf "$dir"; mkdir -p "$dir"; echo "$base" > "$dir/base"
  asgid=(); [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && asgid=(setpriv --clear-groups --regid)
  command -v nft >/dev/null && nocut "$base"
  cl=""; for i in 0 1 2; do cl+="${cl:+,}m$i=http://127.0.0.1:$((base+11+i))"; done
  scheme=http; tlsflags=(); ctl=()
  if [ "${TLS:-0}" = 1 ]; then
    t=$dir/tls; mkdir -p "$t"
    ( cd "$t"
      openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=shoal-test-ca -keyout ca-key.pem -out ca.pem 2>/dev/null
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' > san.ext
      # rustls takes only X.509 v3 certificates: the client's has extensions too.
      printf 'extendedKeyUsage=clientAuth\n' > client.ext
      openssl req -newkey rsa:2048 -nodes -subj /CN=etcd -keyout key.pem -out cert.csr 2>/dev/null
      openssl x509 -req -in cert.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 -extfile san.ext -out cert.pem 2>/dev/null
      openssl req -newkey rsa:2048 -nodes -subj /CN=shoal-client -keyout client-key.pem -out client.csr 2>/dev/null
      openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 -extfile client.ext -out client.pem 2>/dev/null )
    scheme=https
    tlsflags=(--cert-file "$t/cert.pem" --key-file "$t/key.pem" --trusted-ca-file "$t/ca.pem" --client-cert-auth)
    ctl=(--cacert "$t/ca.pem" --cert "$t/client.pem" --key "$t/client-key.pem")
  fi
  for i in 0 1 2; do
    c=$scheme://127.0.0.1:$((base+1+i)); p=http://127.0.0.1:$((base+11+i))
    setsid ${asgid[@]+"${asgid[@]}" $((4300+i))} etcd --name m$i --data-dir "$dir/m$i" --listen-client-urls $c --advertise-client-urls $c ${tlsflags[@]+"${tlsflags[@]}"} \
      --listen-peer-urls $p --initial-advertise-peer-urls $p --initial-cluster "$cl" \
      --initial-cluster-token shoal-bench --initial-cluster-state new \
      --auto-compaction-mode revision --auto-compaction-retention 100000 \
      > "$dir/m$i.log" 2>&1 < /dev/null &
    echo $! > "$dir/m$i.pid"
  done
  eps=127.0.0.1:$((base+1)),127.0.0.1:$((base+2)),127.0.0.1:$((base+3))
  for _ in $(seq 100); do
    ETCDCTL_API=3 etcdctl ${ctl[@]+"${ctl[@]}"} --endpoints=$eps endpoint health >/dev/null 2>&1 && { echo "$eps"; exit 0; }
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
  [ -f "$dir/base" ] && command -v nft >/dev/null && nocut "$(cat "$dir/base")"
  rm -rf "$dir" ;;
cut)
  n=$3; base=$(cat "$dir/base"); nocut "$base"
  [ "$n" = none ] && exit 0
  p=$((base+11+n)); others=""
  for j in 0 1 2; do [ "$j" = "$n" ] || others+="${others:+, }$((base+11+j))"; done
  # Connections the member made: marked by its group id, dropped both ways
  # (conntrack follows the replies); connections made to it: by its port.
  nft -f - <<EOF
table inet shoal_etcd_$base {
  chain out {
    type filter hook output priority 0; policy accept;
    meta skgid $((4300+n)) tcp dport { $others } ct mark set $((4300+n))
    ct mark $((4300+n)) drop
    tcp dport $p drop
    tcp sport $p drop
  }
}
EOF
  ;;
*) echo "usage: $0 start|stop|cut DIR [BASE|N]" >&2; exit 2 ;;
esac
