#!/usr/bin/env bash
# Real programs under the preload shim (`shoal run`) give the same results
# as on the mount without it (docs/client.md, "The preload shim"): relative
# paths after a chdir into the mount and `*at` calls from directory
# descriptors served by the daemon (the shim's log, SHOAL_SHIM_LOG, says
# which calls it served and which fell through); cp -a, find, tar and
# untar, mv, rm -r, git init/add/commit/status/clone, a Python venv and
# pip install, sqlite3 in both journal
# modes, make, fsx; a static binary and a Go program (raw system calls)
# under `shoal run` still working through the mount. fsck clean after.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "client-shim-programs: $*"; exit 1; }
[ -e "$ROOT/target/release/libshoal_shim.so" ] || cargo build --release -q -p shoal-shim
M=$(mount_fresh client-shim-programs)
LOG=$WORK/client-shim-programs.log
rm -f "$LOG"
run() { SHOAL_SHIM_LOG=$LOG "$SHOAL" run "$M" -- "$@"; }
# A source tree: this repository's core crate (a few hundred files).
SRC=$ROOT/crates/core
# 1. Relative paths after chdir, served by the daemon.
(cd "$M" && run sh -c 'mkdir rel && cd rel && echo hi > a && mv a b && mkdir d && rmdir d && cat b') > "$WORK/csp.out" \
  || fail "relative paths under the shim"
[ "$(cat "$WORK/csp.out")" = hi ] && [ "$(ls "$M/rel")" = b ] || fail "relative: $(ls "$M/rel")"
grep -q "mkdir /rel: to the daemon" "$LOG" || fail "mkdir of a relative path not served: $(head -5 "$LOG")"
grep -q "rename /rel/a: to the daemon" "$LOG" || fail "mv of relative paths not served"
# 2. cp -a, find, tar, untar, mv, rm -r: with and without the shim.
cp -a "$SRC" "$M/plain"
run cp -a "$SRC" "$M/shim" || fail "cp -a under the shim"
diff -r "$M/plain" "$M/shim" >/dev/null || fail "cp -a under the shim differs"
[ "$(cd "$M/plain" && find . | sort)" = "$(cd "$M/shim" && run find . | sort)" ] || fail "find under the shim differs"
(cd "$M/shim" && run tar cf "$M/shim.tar" .) || fail "tar under the shim"
tar cf "$WORK/plain.tar" -C "$M/plain" .
[ "$(tar tf "$M/shim.tar" | sort)" = "$(tar tf "$WORK/plain.tar" | sort)" ] || fail "tar's listing under the shim differs"
mkdir "$M/untar"
(cd "$M/untar" && run tar xf "$M/shim.tar") || fail "untar under the shim"
diff -r "$M/plain" "$M/untar" >/dev/null || fail "untar under the shim differs"
run mv "$M/untar" "$M/moved" || fail "mv of a tree"
[ ! -e "$M/untar" ] && diff -r "$M/plain" "$M/moved" >/dev/null || fail "mv under the shim"
run rm -r "$M/moved" "$M/shim" || fail "rm -r under the shim"
[ ! -e "$M/moved" ] && [ ! -e "$M/shim" ] || fail "rm -r left $(ls "$M")"
grep -q "unlinkat .*: to the daemon" "$LOG" || fail "rm -r's unlinkat not served"
# 4. SQLite, both journal modes.
for mode in delete wal; do
  db=$M/t-$mode.db
  run sqlite3 "$db" "pragma journal_mode=$mode; create table t(a); with recursive c(x) as (select 1 union all select x+1 from c where x<5000) insert into t select x from c; delete from t where a % 2 = 0;" >/dev/null \
    || fail "sqlite3 $mode under the shim"
  [ "$(sqlite3 "$db" 'pragma integrity_check; select count(*), sum(a) from t;')" = "ok
2500|6250000" ] || fail "sqlite3 $mode: $(sqlite3 "$db" 'select count(*) from t')"
done
# 5. make.
mkdir "$M/mk"
printf 'all: b\nb: a\n\tcp a b\n\techo built >> b\n' > "$M/mk/Makefile"
echo src > "$M/mk/a"
(cd "$M/mk" && run make -s) || fail "make under the shim"
[ "$(cat "$M/mk/b")" = "src
built" ] || fail "make's output"
(cd "$M/mk" && run make -q) || fail "make thinks b is out of date"
# 6. fsx through the shim.
(cd "$M" && run fsx -N "${FSX_OPS:-20000}" -S 7 -P "$WORK" "$M/fsx.dat" > "$WORK/csp-fsx.log" 2>&1) \
  || { tail -20 "$WORK/csp-fsx.log"; fail "fsx under the shim"; }
# 7. A static binary and a Go program (raw system calls): the mount.
if command -v go >/dev/null; then
  mkdir -p "$WORK/csp-go"
  cat > "$WORK/csp-go/main.go" <<'GO'
package main

import (
	"fmt"
	"os"
)

func main() {
	d := os.Args[1]
	if err := os.MkdirAll(d+"/x", 0o755); err != nil {
		panic(err)
	}
	if err := os.WriteFile(d+"/x/f", []byte("go"), 0o644); err != nil {
		panic(err)
	}
	if err := os.Rename(d+"/x/f", d+"/x/g"); err != nil {
		panic(err)
	}
	b, err := os.ReadFile(d + "/x/g")
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
}
GO
  (cd "$WORK/csp-go" && [ -e go.mod ] || go mod init csp >/dev/null 2>&1; CGO_ENABLED=0 go build -o csp-go . ) || fail "go build"
  [ "$(run "$WORK/csp-go/csp-go" "$M/go")" = go ] || fail "a Go program under the shim"
  [ "$(cat "$M/go/x/g")" = go ] || fail "the Go program's file through the mount"
  # Go's binary is static (CGO_ENABLED=0): a static binary too.
  file "$WORK/csp-go/csp-go" 2>/dev/null | grep -q "statically linked" || echo "client-shim-programs: note: the Go binary is not static"
fi
# 3. git.
mkdir "$M/g"
(cd "$M/g" && run sh -c 'git init -q . && cp -a "$0"/src . && git add . && git -c user.name=t -c user.email=t@t commit -qm one && git status --porcelain' "$SRC") > "$WORK/csp.git" \
  || fail "git under the shim: $(cat "$WORK/csp.git")"
[ ! -s "$WORK/csp.git" ] || fail "git status after commit: $(head -3 "$WORK/csp.git")"
[ "$(cd "$M/g" && git ls-files | wc -l)" = "$(cd "$SRC" && find src -type f | wc -l)" ] || fail "git's index through the mount"
(cd "$M/g" && git fsck --no-progress >/dev/null 2>&1) || fail "git fsck through the mount"
# git clone of that repository, under the shim: the same files, a clean
# status, a sound object store.
run git clone -q "$M/g" "$M/g2" || fail "git clone under the shim"
[ -z "$(cd "$M/g2" && run git status --porcelain)" ] || fail "git status in the clone"
diff -r -x .git "$M/g" "$M/g2" >/dev/null || fail "the clone's files differ"
(cd "$M/g2" && git fsck --no-progress >/dev/null 2>&1) || fail "git fsck of the clone"
# 8. A Python virtual environment made under the shim (ensurepip unpacks
# pip: hundreds of files), and a package installed into it by its pip
# (a wheel made here: no network).
run python3 -m venv "$M/venv" || fail "python3 -m venv under the shim"
python3 - "$WORK/cspdemo-0.1-py3-none-any.whl" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("cspdemo/__init__.py", "VALUE = 42\n")
    z.writestr("cspdemo-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: cspdemo\nVersion: 0.1\n")
    z.writestr("cspdemo-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("cspdemo-0.1.dist-info/RECORD", "")
PY
run "$M/venv/bin/pip" install -q --no-index --disable-pip-version-check "$WORK/cspdemo-0.1-py3-none-any.whl" \
  || fail "pip install under the shim"
[ "$("$M/venv/bin/python" -c 'import cspdemo; print(cspdemo.VALUE)')" = 42 ] || fail "the package pip installed"
[ "$(run "$M/venv/bin/python" -c 'import cspdemo; print(cspdemo.VALUE)')" = 42 ] || fail "the package under the shim"
"$SHOAL" stats "$M" --json | python3 -c 'import json,sys; c=json.load(sys.stdin)["client"]; print("client calls:", c["calls"])'
echo "log: $(grep -c 'to the daemon' "$LOG") calls to the daemon, $(grep -c 'falls through' "$LOG") fell through"
unmount_check client-shim-programs >/dev/null || fail "fsck after the programs"
echo "client-shim-programs: ok"
