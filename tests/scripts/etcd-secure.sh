#!/usr/bin/env bash
# A namespace on an etcd cluster set up as etcd's security guide sets one
# up (started here, ports 24901-24913): clients over TLS with client
# certificates, authentication on, and RBAC roles each limited to one
# namespace's prefix (/shoal/NAME/).
# - shoal makes, mounts, uses and checks a namespace over TLS as a user
#   whose role reads and writes /shoal/a/ only, the password from
#   META_PASSWORD, from a file, or in the URL;
# - the password is nowhere to be seen: not in /proc/mounts, not in any
#   process's command line (the daemon's included), not in the daemon's log
#   nor in `shoal status`;
# - a user whose role is limited to another prefix cannot read or change
#   this namespace; a wrong password, a missing one, no TLS against a TLS
#   cluster and insecure-skip-verify are refused with one line each.
source "$(dirname "$0")/lib.sh"
fail() { echo "etcd-secure: $*"; exit 1; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$WORK/secure-cluster; M=$WORK/secure.mnt
unmount_stale "$M"
cleanup() {
  grep -qs " $M " /proc/mounts && { "$SHOAL" umount "$M" || umount -l "$M"; }
  bash "$ROOT/scripts/etcd-cluster.sh" stop "$D"
}
trap cleanup EXIT
EPS=$(TLS=1 bash "$ROOT/scripts/etcd-cluster.sh" start "$D" 24900)
T=$D/tls
ctl() { ETCDCTL_API=3 etcdctl --endpoints="$EPS" --cacert "$T/ca.pem" --cert "$T/client.pem" --key "$T/client-key.pem" "$@" >/dev/null; }
ctl user add root --new-user-password=root-secret-0
ctl user grant-role root root
for u in a b; do
  ctl role add "shoal-$u"
  ctl role grant-permission "shoal-$u" --prefix=true readwrite "/shoal/$u/"
done
ctl user add alice --new-user-password=alice-secret-1; ctl user grant-role alice shoal-a
ctl user add bob --new-user-password=bob-secret-2; ctl user grant-role bob shoal-b
ctl auth enable
Q="cacert=$T/ca.pem&cert=$T/client.pem&key=$T/client-key.pem"
A="etcd://alice@$EPS/a?$Q"

META_PASSWORD=alice-secret-1 "$SHOAL" mkfs "$A" >/dev/null || fail "mkfs over TLS as alice"
# The password in the URL, as scripts give it: seen nowhere once mounted.
mkdir -p "$M"
out=$("$SHOAL" mount -d "etcd://alice:alice-secret-1@$EPS/a?$Q" "$M" -o allow_other) || fail "mount over TLS"
echo hello > "$M/f"; [ "$(cat "$M/f")" = hello ] || fail "read back over TLS"
grep -q "alice-secret" /proc/mounts && fail "the password is in /proc/mounts: $(grep secure.mnt /proc/mounts)"
grep -q "etcd://alice@" /proc/mounts || fail "the mount's source is not shown: $(grep secure.mnt /proc/mounts)"
for p in /proc/[0-9]*; do
  tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q "alice-secret" && fail "a command line holds the password: $(tr '\0' ' ' < "$p/cmdline")"
done
log=$(sed -n 's/.*, log \(.*\))$/\1/p' <<<"$out")
[ -f "$log" ] || fail "no daemon log named: $out"
grep -q "alice-secret" "$log" && fail "the daemon's log holds the password"
META_PASSWORD=alice-secret-1 "$SHOAL" status "$A" > "$WORK/secure-status" 2>&1 || { cat "$WORK/secure-status"; fail "status"; }
grep -q "alice-secret" "$WORK/secure-status" && fail "status shows the password"
"$SHOAL" umount "$M" || fail "umount"
# The password from a file.
printf 'alice-secret-1\n' > "$WORK/secure-pw"; chmod 600 "$WORK/secure-pw"
"$SHOAL" fsck "etcd://alice@$EPS/a?$Q&password-file=$WORK/secure-pw" | grep -q " 0 problems" || fail "fsck with a password file"

# bob's role is /shoal/b/ only: namespace a is out of his reach.
if META_PASSWORD=bob-secret-2 "$SHOAL" fsck "etcd://bob@$EPS/a?$Q" > "$WORK/secure-out" 2>&1; then fail "bob read namespace a"; fi
grep -qi "permission denied" "$WORK/secure-out" || fail "bob on a: $(cat "$WORK/secure-out")"
if META_PASSWORD=bob-secret-2 "$SHOAL" mount -d "etcd://bob@$EPS/a?$Q" "$M" > "$WORK/secure-out" 2>&1; then fail "bob mounted namespace a"; fi
META_PASSWORD=bob-secret-2 "$SHOAL" mkfs "etcd://bob@$EPS/b?$Q" >/dev/null || fail "bob's own namespace"
# Refusals, one line each.
refused() { # refused WHAT PATTERN CMD...: CMD fails and says PATTERN
  local what=$1 pat=$2; shift 2
  if "$@" > "$WORK/secure-out" 2>&1; then fail "$what: succeeded"; fi
  [ "$(wc -l < "$WORK/secure-out")" = 1 ] && grep -qi "$pat" "$WORK/secure-out" || fail "$what: $(cat "$WORK/secure-out")"
  if grep -q "secret" "$WORK/secure-out"; then fail "$what: the message shows a password"; fi
}
refused "a wrong password" "authentication failed\|invalid" env META_PASSWORD=wrong-secret "$SHOAL" fsck "$A"
refused "no password" "META_PASSWORD" env -u META_PASSWORD "$SHOAL" fsck "$A"
refused "plaintext to a TLS cluster" "transport\|unavailable\|tls" env META_PASSWORD=alice-secret-1 "$SHOAL" fsck "etcd://alice@$EPS/a"
refused "insecure-skip-verify" "cacert" env META_PASSWORD=alice-secret-1 "$SHOAL" fsck "etcd://alice@$EPS/a?insecure-skip-verify=true"
echo "etcd-secure: ok"
