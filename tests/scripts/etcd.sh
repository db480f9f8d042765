#!/usr/bin/env bash
# shoal on etcd as a user meets it today: mkfs and fsck of a filesystem on a
# three-member cluster (started here, ports 24101-24113), one-line errors
# for a second mkfs, a mount option etcd mounts do not serve and a cluster
# that is not there, and the shared-directory benchmark run short (it checks the
# namespace after each row).
source "$(dirname "$0")/lib.sh"
fail() { echo "etcd: $*"; exit 1; }
D=$WORK/etcd-cluster
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
EPS=$(bash "$ROOT/scripts/etcd-cluster.sh" start "$D" 24100)
trap 'bash "$ROOT/scripts/etcd-cluster.sh" stop "$D"' EXIT
U=etcd://$EPS/cli
"$SHOAL" mkfs "$U" | grep -q "created shoal filesystem" || fail "mkfs"
err=$("$SHOAL" mkfs "$U" 2>&1) && fail "a second mkfs succeeded"
[[ $err == *"already holds a shoal filesystem"* ]] || fail "second mkfs message: $err"
"$SHOAL" fsck "$U" | grep -q "1 inodes, 0 entries, 0 problems" || fail "fsck of a new filesystem"
err=$("$SHOAL" mount "$U" "$WORK" -o writeback_cache 2>&1) && fail "an etcd mount took an option it does not serve"
[[ $err == *"not supported on an etcd or TiKV mount"* ]] || fail "mount option message: $err"
err=$("$SHOAL" mkfs etcd://127.0.0.1:1/x 2>&1) && fail "mkfs on no cluster succeeded"
[[ $err == *"is etcd running there"* ]] || fail "no-cluster message: $err"
[ $(wc -l <<<"$err") -eq 1 ] || fail "error is not one line: $err"
err=$("$SHOAL" mkfs etcd://h:1 2>&1) && fail "a URL without NAME was taken"
[[ $err == *"expected etcd://"* ]] || fail "bad URL message: $err"
# TiKV is a build feature (docs/design.md, "TiKV"): without it, one line
# that says how to get it.
err=$("$SHOAL" mkfs tikv://127.0.0.1:1/x 2>&1) && fail "mkfs on TiKV in a shoal built without it succeeded"
[[ $err == *"--features tikv"* ]] || fail "no-TiKV message: $err"
[ $(wc -l <<<"$err") -eq 1 ] || fail "error is not one line: $err"
# A bad or unreachable object store is refused at mkfs, in one line, and
# nothing is made.
err=$("$SHOAL" mkfs "$U-d" --data "s3://b/p?endpoint=" 2>&1) && fail "mkfs took an empty endpoint"
[[ $err == *"endpoint= takes http://"* ]] || fail "bad endpoint message: $err"
err=$("$SHOAL" mkfs "$U-d" --data "s3://b/p?endpoint=http://127.0.0.1:1&anonymous=1" 2>&1) && fail "mkfs took an object store that does not answer"
[[ $err == *"is an S3 server answering"* ]] || fail "unreachable object store message: $err"
[ $(wc -l <<<"$err") -eq 1 ] || fail "object store error is not one line: $err"
# No credentials anywhere: refused, never unsigned unless the URL says so.
err=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY HOME=/nonexistent "$SHOAL" mkfs "$U-d" --data "s3://b/p?endpoint=http://127.0.0.1:1" 2>&1) && fail "mkfs took an object store without credentials"
[[ $err == *"no credentials"*"anonymous=1"* ]] || fail "no-credentials message: $err"
[ $(wc -l <<<"$err") -eq 1 ] || fail "object store error is not one line: $err"
err=$("$SHOAL" mkfs "$WORK/etcd-local.store" --data file:///tmp/x 2>&1) && fail "--data was taken for a store directory"
[[ $err == *"--data is for a filesystem on etcd"* ]] || fail "--data on a directory message: $err"
err=$("$SHOAL" fsck "$U-d" 2>&1) && fail "fsck of a NAME with no filesystem succeeded"
[[ $err == *"no shoal filesystem here"* ]] || fail "a refused mkfs made something: $err"
"$SHOAL" bench shared-create --etcd "etcd://$EPS/bench" --daemons 1,2 --workers 2 --seconds 1 \
  || fail "shared-create bench"
echo "etcd: ok"
