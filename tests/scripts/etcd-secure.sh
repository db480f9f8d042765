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
#   cluster and insecure-skip-verify are refused with one line each;
# - file data on SeaweedFS's S3 over HTTPS (its certificate signed by a CA
#   made here) taking signed requests only (ports 24951-24958): the
#   namespace records the object store's URL without the CA or any
#   credentials, and each mount gives its own: one from the AWS shared
#   credentials file and AWS_CA_BUNDLE, one from AWS_ACCESS_KEY_ID; the two
#   see each other's files, and pjdfstest passes on the secured mount; a wrong secret, no CA, no credentials are
#   refused fast with one line each, and no S3 secret shows anywhere;
# - `shoal config --data` changes the recorded object store, refusing one
#   that does not answer or does not hold the namespace's objects;
# - the control socket, pid file, log and run directory are the mounting
#   user's only: another user cannot connect;
# - root_squash and all_squash, on an etcd and an embedded mount, checked
#   with a second user.
source "$(dirname "$0")/lib.sh"
fail() { echo "etcd-secure: $*"; exit 1; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$WORK/secure-cluster; M=$WORK/secure.mnt; M2=$WORK/secure2.mnt; ME=$WORK/secure-emb.mnt
W=$WORK/secure-weed; ST=$WORK/secure-s3tls; SEC=$WORK/secure-pjd-sec
unmount_stale "$M" "$M2" "$ME"
cleanup() {
  umount "$SEC" 2>/dev/null || true
  for m in "$M" "$M2" "$ME"; do
    grep -qs " $m " /proc/mounts && { "$SHOAL" umount "$m" || umount -l "$m"; }
  done
  bash "$ROOT/scripts/etcd-cluster.sh" stop "$D"
  bash "$ROOT/scripts/seaweed.sh" stop "$W"
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

# The object store: HTTPS with a CA of its own, signed requests only.
S3KEY=shoal-a S3SECRET=s3-secret-3
rm -rf "$ST"
S3=$(SEAWEED_KEYS=$S3KEY:$S3SECRET SEAWEED_TLS=$ST bash "$ROOT/scripts/seaweed.sh" start "$W" 24950)
[[ $S3 == https://* ]] || fail "SeaweedFS not on HTTPS: $S3"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$ST/ca.pem" "$S3/shoal")
[ "$code" = 403 ] || fail "SeaweedFS took an unsigned request ($code)"
# This machine's S3 credentials, in AWS's shared credentials file.
printf '[shoal]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$S3KEY" "$S3SECRET" > "$WORK/secure-aws"
chmod 600 "$WORK/secure-aws"
s3env=(AWS_CA_BUNDLE="$ST/ca.pem" AWS_SHARED_CREDENTIALS_FILE="$WORK/secure-aws" AWS_PROFILE=shoal)
DATA="s3://shoal/a?endpoint=$S3"

META_PASSWORD=alice-secret-1 env "${s3env[@]}" "$SHOAL" mkfs "$A" --data "$DATA" >/dev/null || fail "mkfs over TLS as alice"
# The password in the URL, as scripts give it: seen nowhere once mounted.
mkdir -p "$M"
out=$(env "${s3env[@]}" "$SHOAL" mount -d "etcd://alice:alice-secret-1@$EPS/a?$Q" "$M" -o allow_other) || fail "mount over TLS"
echo hello > "$M/f"; [ "$(cat "$M/f")" = hello ] || fail "read back over TLS"
# A second mount, its S3 key from the environment: each sees the other's
# files, data past 4 KiB (in the object store) included.
mkdir -p "$M2"
out2=$(META_PASSWORD=alice-secret-1 AWS_CA_BUNDLE="$ST/ca.pem" AWS_ACCESS_KEY_ID=$S3KEY AWS_SECRET_ACCESS_KEY=$S3SECRET \
  "$SHOAL" mount -d "$A" "$M2" -o allow_other) || fail "second mount"
head -c 300000 /dev/urandom > "$WORK/secure-blob"
cp "$WORK/secure-blob" "$M/big1"; cp "$WORK/secure-blob" "$M2/big2"
mkdir "$M2/d2"; echo two > "$M2/d2/x"
for _ in $(seq 50); do [ -e "$M/d2/x" ] && [ -e "$M2/big1" ] && break; sleep 0.1; done
cmp -s "$M2/big1" "$WORK/secure-blob" || fail "mount 2 does not read mount 1's file"
cmp -s "$M/big2" "$WORK/secure-blob" || fail "mount 1 does not read mount 2's file"
[ "$(cat "$M/d2/x")" = two ] || fail "mount 1 does not see mount 2's directory"
[ -n "$(curl -s --cacert "$ST/ca.pem" --aws-sigv4 aws:amz:us-east-1:s3 --user "$S3KEY:$S3SECRET" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$S3/shoal?list-type=2&prefix=a%2F" | grep -o '<Key>a/[^<]*</Key>' | head -1)" ] \
  || fail "no object in the S3 bucket: file data did not go there"
log2=$(sed -n 's/.*, log \(.*\))$/\1/p' <<<"$out2")
grep -q "s3-secret" /proc/mounts "$log2" && fail "an S3 secret is in /proc/mounts or the log"
for p in /proc/[0-9]*; do
  { tr '\0' ' ' < "$p/cmdline"; } 2>/dev/null | grep -q "s3-secret" && fail "a command line holds the S3 secret: $(tr '\0' ' ' < "$p/cmdline")"
done
# pjdfstest on the secured mount (TLS and auth to etcd, HTTPS and signed
# requests to S3), in a directory of its own; failures as on any etcd mount.
mkdir -p "$M/pjd" "$SEC"; mountpoint -q "$SEC" || mount -t tmpfs -o size=64m tmpfs "$SEC"
( cd "$M/pjd" && pjdfstest -c "$ROOT/tests/pjdfstest/pjdfstest.toml" -p "$M/pjd" -s "$SEC" ) > "$WORK/pjdfstest-secure.log" 2>&1 || true
echo "pjdfstest on the secured etcd mount: $(grep '^Summary:' "$WORK/pjdfstest-secure.log")"
grep -q '^Summary:' "$WORK/pjdfstest-secure.log" || fail "pjdfstest did not run: $(tail -3 "$WORK/pjdfstest-secure.log")"
excluded=$(awk '!/^#/ && NF {print $1}' "$ROOT/tests/pjdfstest/exclude-etcd.txt")
for t in $(awk '$NF == "FAILED" {print $1}' "$WORK/pjdfstest-secure.log"); do
  grep -qx "$t" <<<"$excluded" || fail "pjdfstest on the secured mount: unexpected failure: $t"
done
umount "$SEC"

# The local side: the daemon's run directory, socket, pid file and log are
# the mounting user's (root's) only; another user cannot connect.
id shoalsq >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin shoalsq
SQ=$(id -u shoalsq); SQG=$(id -g shoalsq)
run=$(dirname "$log2")
[ "$(stat -c %a "$run")" = 700 ] || fail "run directory $run is $(stat -c %a "$run")"
[ "$(stat -c %a "$run/control.sock")" = 600 ] || fail "control socket is $(stat -c %a "$run/control.sock")"
[ "$(stat -c %a "$log2")" = 600 ] || fail "daemon log is $(stat -c %a "$log2")"
"$SHOAL" stats "$M2" --json >/dev/null || fail "root cannot read stats"
if runuser -u shoalsq -- "$SHOAL" stats "$M2" --json > "$WORK/secure-out" 2>&1; then fail "another user read the mount's stats"; fi
if runuser -u shoalsq -- "$SHOAL" sync "$M2" > "$WORK/secure-out" 2>&1; then fail "another user synced the mount"; fi
runuser -u shoalsq -- python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])" "$run/control.sock" 2>/dev/null \
  && fail "another user connected to the control socket"
"$SHOAL" umount "$M2" || fail "umount 2"
grep -q "alice-secret" /proc/mounts && fail "the password is in /proc/mounts: $(grep secure.mnt /proc/mounts)"
grep -q "etcd://alice@" /proc/mounts || fail "the mount's source is not shown: $(grep secure.mnt /proc/mounts)"
for p in /proc/[0-9]*; do
  { tr '\0' ' ' < "$p/cmdline"; } 2>/dev/null | grep -q "alice-secret" && fail "a command line holds the password: $(tr '\0' ' ' < "$p/cmdline")"
done
log=$(sed -n 's/.*, log \(.*\))$/\1/p' <<<"$out")
[ -f "$log" ] || fail "no daemon log named: $out"
grep -q "alice-secret" "$log" && fail "the daemon's log holds the password"
META_PASSWORD=alice-secret-1 env "${s3env[@]}" "$SHOAL" status "$A" > "$WORK/secure-status" 2>&1 || { cat "$WORK/secure-status"; fail "status"; }
grep -q "alice-secret\|s3-secret" "$WORK/secure-status" && fail "status shows a password"
grep -q "https://127.0.0.1:24954" "$WORK/secure-status" || fail "status does not show the object store"
"$SHOAL" umount "$M" || fail "umount"
# The password from a file.
printf 'alice-secret-1\n' > "$WORK/secure-pw"; chmod 600 "$WORK/secure-pw"
env "${s3env[@]}" "$SHOAL" fsck "etcd://alice@$EPS/a?$Q&password-file=$WORK/secure-pw" | grep -q " 0 problems" || fail "fsck with a password file"

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

# The object store refused, fast, with one line each: a wrong secret, no
# CA for its certificate, no credentials at all.
refused_fast() { # as refused, within 15 s
  local t0=$SECONDS
  refused "$@"
  [ $((SECONDS - t0)) -le 15 ] || fail "$1: took $((SECONDS - t0)) s"
}
export META_PASSWORD=alice-secret-1
refused_fast "a wrong S3 secret" "credentials were refused" \
  env AWS_CA_BUNDLE="$ST/ca.pem" AWS_ACCESS_KEY_ID=$S3KEY AWS_SECRET_ACCESS_KEY=wrong-secret "$SHOAL" mount -d "$A" "$M"
refused_fast "no CA for the S3 server" "cacert" \
  env AWS_SHARED_CREDENTIALS_FILE="$WORK/secure-aws" AWS_PROFILE=shoal "$SHOAL" mount -d "$A" "$M"
refused_fast "no S3 credentials" "AWS_ACCESS_KEY_ID.*anonymous=1" \
  env HOME=/nonexistent AWS_CA_BUNDLE="$ST/ca.pem" "$SHOAL" mount -d "$A" "$M"
refused "a secret in the data URL" "credentials do not go in the URL" \
  "$SHOAL" mkfs "etcd://alice@$EPS/a-x?$Q" --data "s3://$S3KEY:$S3SECRET@shoal/x?endpoint=$S3"
grep -qs " $M " /proc/mounts && fail "a refused mount is mounted"

# shoal config: the object store's endpoint changed (localhost, in the
# server's certificate too); one that does not answer, or holds none of
# the namespace's objects, is refused.
refused "config to a dead endpoint" "object store" env "${s3env[@]}" "$SHOAL" config "$A" --data "s3://shoal/a?endpoint=https://127.0.0.1:24999"
refused "config to an empty prefix" "does not hold" env "${s3env[@]}" "$SHOAL" config "$A" --data "s3://shoal/elsewhere?endpoint=$S3"
S3L=${S3/127.0.0.1/localhost}
env "${s3env[@]}" "$SHOAL" config "$A" --data "s3://shoal/a?endpoint=$S3L" > "$WORK/secure-out" 2>&1 || fail "config: $(cat "$WORK/secure-out")"
[ "$("$SHOAL" config "$A")" = "data s3://shoal/a?endpoint=$S3L" ] || fail "config shows $("$SHOAL" config "$A")"
env "${s3env[@]}" "$SHOAL" mount -d "$A" "$M" -o allow_other,root_squash >/dev/null || fail "mount after config"
cmp -s "$M/big2" "$WORK/secure-blob" || fail "file data lost across config"

# root_squash on the etcd mount: root acts as nobody (65534:65534).
# A root-owned 0755 directory: mkdir at the root fails under squash; make
# it writable for the check first through a second, unsquashed mount.
env "${s3env[@]}" "$SHOAL" mount -d "$A" "$M2" -o allow_other >/dev/null || fail "unsquashed mount"
chmod 755 "$M2"; mkdir -p "$M2/sq"; chmod 1777 "$M2/sq"
chk_squash_at() { # chk_squash_at MNT SUB: MNT with root_squash, SUB a 1777 directory of root's
  local m=$1 sub=$2
  mkdir "$m/$sub/open" || fail "$m: squashed root cannot mkdir in a 1777 directory"
  [ "$(stat -c %u:%g "$m/$sub/open")" = 65534:65534 ] || fail "$m: root's new directory is $(stat -c %u:%g "$m/$sub/open"), not nobody's"
  if touch "$m/rootfile" 2>/dev/null; then fail "$m: squashed root wrote in a 0755 root-owned directory"; fi
  chmod 700 "$m/$sub/open" || fail "$m: squashed root cannot chmod its own directory"
  runuser -u shoalsq -- sh -c "echo private > '$m/$sub/mine' && chmod 600 '$m/$sub/mine'" || fail "$m: shoalsq cannot write"
  [ "$(stat -c %u "$m/$sub/mine")" = "$SQ" ] || fail "$m: shoalsq's file not its own"
  if cat "$m/$sub/mine" >/dev/null 2>&1; then fail "$m: squashed root read another user's 0600 file"; fi
  if chown root "$m/$sub/mine" 2>/dev/null; then fail "$m: squashed root chowned another's file"; fi
  if chmod 666 "$m/$sub/mine" 2>/dev/null; then fail "$m: squashed root chmodded another's file"; fi
  rm -f "$m/$sub/mine" 2>/dev/null || true
  [ "$(runuser -u shoalsq -- cat "$m/$sub/mine")" = private ] || fail "$m: squashed root removed another's file in a sticky directory"
  # A walk through names the kernel kept for another caller: shoalsq's
  # 0700 directory stays closed to squashed root after shoalsq read in it
  # (the daemon gives such names no kernel lifetime; docs/design.md "Who
  # checks").
  # Ten times: the names lived 1 s, and root got through 7 times in 10
  # on an etcd mount before its chmod made the kernel forget them.
  for i in 1 2 3 4 5 6 7 8 9 10; do
    runuser -u shoalsq -- sh -c "mkdir '$m/$sub/closed$i' && echo s > '$m/$sub/closed$i/f' && chmod 644 '$m/$sub/closed$i/f' && chmod 700 '$m/$sub/closed$i' && cat '$m/$sub/closed$i/f' >/dev/null" \
      || fail "$m: shoalsq's closed directory"
    if cat "$m/$sub/closed$i/f" >/dev/null 2>&1; then fail "$m: squashed root read in another's 0700 directory after its owner had ($i of 10)"; fi
  done
  runuser -u shoalsq -- rm -r "$m/$sub"/closed*
}
chk_squash_at "$M" sq
"$SHOAL" umount "$M" || fail "umount squashed"
# all_squash: every caller, root and shoalsq, acts as 4242:4343.
env "${s3env[@]}" "$SHOAL" mount -d "$A" "$M" -o allow_other,all_squash=4242:4343 >/dev/null || fail "all_squash mount"
touch "$M/sq/byroot"; runuser -u shoalsq -- touch "$M/sq/byuser" || fail "shoalsq cannot create under all_squash"
[ "$(stat -c %u:%g "$M/sq/byroot") $(stat -c %u:%g "$M/sq/byuser")" = "4242:4343 4242:4343" ] \
  || fail "all_squash owners: $(stat -c %u:%g "$M/sq/byroot" "$M/sq/byuser")"
"$SHOAL" umount "$M"; "$SHOAL" umount "$M2"
unset META_PASSWORD

# The same on an embedded mount (the daemon checks permissions there).
E=$WORK/secure-emb.store; rm -rf "$E"; mkdir -p "$ME"
"$SHOAL" mkfs "$E" >/dev/null
"$SHOAL" mount -d "$E" "$ME" -o allow_other >/dev/null; mkdir "$ME/sq"; chmod 1777 "$ME/sq"; "$SHOAL" umount "$ME"
[ "$(stat -c %a "$E/daemon.log")" = 600 ] || fail "embedded daemon log is $(stat -c %a "$E/daemon.log")"
"$SHOAL" mount -d "$E" "$ME" -o allow_other,root_squash >/dev/null || fail "embedded root_squash mount"
[ "$(stat -c %a "$E/control.sock")" = 600 ] || fail "embedded control socket is $(stat -c %a "$E/control.sock")"
if runuser -u shoalsq -- "$SHOAL" stats "$ME" --json >/dev/null 2>&1; then fail "another user read an embedded mount's stats"; fi
chk_squash_at "$ME" sq
"$SHOAL" umount "$ME"
"$SHOAL" mount -d "$E" "$ME" -o allow_other,all_squash=4242:4343 >/dev/null || fail "embedded all_squash mount"
touch "$ME/sq/byroot"; runuser -u shoalsq -- touch "$ME/sq/byuser" || fail "embedded: shoalsq cannot create under all_squash"
[ "$(stat -c %u:%g "$ME/sq/byroot") $(stat -c %u:%g "$ME/sq/byuser")" = "4242:4343 4242:4343" ] \
  || fail "embedded all_squash owners: $(stat -c %u:%g "$ME/sq/byroot" "$ME/sq/byuser")"
"$SHOAL" umount "$ME"
echo "etcd-secure: ok"
