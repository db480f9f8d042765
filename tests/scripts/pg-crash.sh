#!/usr/bin/env bash
# kill -9 of the daemon mid-pgbench (issue 46): PostgreSQL with its data
# directory on a shoal mount with default settings (group commit),
# pgbench writing, and beside it a client inserting numbered rows, one
# autocommit transaction each, that notes each number once the server
# acknowledged its commit. The daemon is killed -9 (the store is left as a
# crash leaves it), PostgreSQL killed, the store mounted again: PostgreSQL
# must recover, every acknowledged row must be there, pgbench's balances
# must agree (each transaction whole or absent), and fsck must be clean.
# Needs root and postgresql (installed if missing). About 40 s.
source "$(dirname "$0")/lib.sh"
PORT=${PG_PORT:-26320}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$PGBIN" ]; then
  apt-get install -y -qq postgresql >/dev/null
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
fi
fail() { echo "FAIL: $*"; [ -f "$LOG" ] && tail -20 "$LOG"; exit 1; }
NAME=pgcrash
STORE=$WORK/$NAME.store
SOCK=$WORK/$NAME.sock
LOG=$WORK/$NAME.pg.log
ACKED=$WORK/$NAME.acked
PM=
# pg_kill: PostgreSQL's server and its children killed, by their ids.
pg_kill() {
  [ -n "$PM" ] || return 0
  pkill -KILL -P "$PM" 2>/dev/null || true
  kill -KILL "$PM" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$PM" 2>/dev/null || break; sleep 0.05; done
  PM=
}
finish() {
  if [ -n "${WITNESS:-}" ]; then kill "$WITNESS" 2>/dev/null || true; fi
  if [ -n "${BENCH:-}" ]; then kill "$BENCH" 2>/dev/null || true; fi
  pg_kill
  unmount_leftovers
}
trap finish EXIT
unmount_leftovers
MNT=$(mount_fresh $NAME allow_other)
daemon_pid() { pgrep -f "mount $STORE $MNT --background-child"; }
mkdir -p "$MNT/pg" "$SOCK"; chown postgres: "$MNT/pg" "$SOCK"
rm -f "$LOG" "$ACKED"; touch "$LOG"; chown postgres: "$LOG"
as_pg() { su postgres -c "$*"; }
pg_start() {
  as_pg "$PGBIN/pg_ctl -D '$MNT/pg/data' -l '$LOG' -w -t 120 -o \"-p $PORT -k $SOCK -c listen_addresses=''\" start" >/dev/null ||
    fail "PostgreSQL did not start"
  PM=$(head -1 "$MNT/pg/data/postmaster.pid")
}
sql() { as_pg "$PGBIN/psql -qAtX -v ON_ERROR_STOP=1 -h $SOCK -p $PORT -d postgres -c \"$1\""; }

as_pg "$PGBIN/initdb -A trust -U postgres -D '$MNT/pg/data'" >/dev/null || fail "initdb"
pg_start
as_pg "$PGBIN/pgbench -q -i -s 2 -h $SOCK -p $PORT postgres" >/dev/null 2>&1 || fail "pgbench -i"
sql "CREATE TABLE witness(i int PRIMARY KEY)"

# pgbench's TPC-B-like transactions, four clients, until the crash.
as_pg "$PGBIN/pgbench -n -c 4 -j 2 -T 120 -h $SOCK -p $PORT postgres" >/dev/null 2>&1 &
BENCH=$!
# The witness: row i is noted only after psql returned success for it.
(
  i=0
  while :; do
    i=$((i + 1))
    sql "INSERT INTO witness VALUES ($i)" >/dev/null 2>&1 || exit 0
    echo "$i" >>"$ACKED"
  done
) &
WITNESS=$!
sleep 6
n_before=$(wc -l <"$ACKED")
[ "$n_before" -gt 10 ] || fail "only $n_before witness rows acknowledged before the kill"
kill -KILL "$(daemon_pid)" || fail "no daemon to kill"
for _ in $(seq 100); do stat "$MNT" >/dev/null 2>&1 || break; sleep 0.05; done
wait "$WITNESS" || true; WITNESS=
wait "$BENCH" || true; BENCH=
# The server cannot reach its files any more: kill it and its children.
pg_kill
acked=$(tail -1 "$ACKED")
echo "killed the daemon with $acked witness rows acknowledged, pgbench running"
umount -l "$MNT"
"$SHOAL" mount -d "$STORE" "$MNT" -o allow_other >/dev/null || fail "the store did not mount again"
rm -f "$MNT/pg/data/postmaster.pid"
pg_start
grep -q 'database system was interrupted\|redo starts\|redo done' "$LOG" || fail "no crash recovery in PostgreSQL's log"
present=$(sql "SELECT count(*) FROM witness WHERE i <= $acked")
[ "$present" = "$acked" ] || fail "acknowledged witness rows lost: $present of $acked present"
# Each pgbench transaction updates an account, a teller and a branch by the
# same delta and logs it: all four sums agree when every transaction is
# whole or absent.
sums=$(sql "SELECT (SELECT sum(abalance) FROM pgbench_accounts) || ' ' || (SELECT sum(tbalance) FROM pgbench_tellers) || ' ' || (SELECT sum(bbalance) FROM pgbench_branches) || ' ' || (SELECT coalesce(sum(delta), 0) FROM pgbench_history)")
read -r a t b h <<<"$sums"
[ "$a" = "$t" ] && [ "$t" = "$b" ] && [ "$b" = "$h" ] || fail "pgbench's balances disagree after recovery: $sums"
history=$(sql "SELECT count(*) FROM pgbench_history")
[ "$history" -gt 0 ] || fail "no pgbench transaction survived"
as_pg "$PGBIN/pg_ctl -D '$MNT/pg/data' -w stop" >/dev/null || fail "PostgreSQL did not stop"
PM=
unmount_check $NAME >/dev/null || fail "fsck after recovery"
echo "ok: PostgreSQL recovered; $acked of $acked acknowledged witness rows present, $history pgbench transactions, balances agree ($a), fsck clean"
