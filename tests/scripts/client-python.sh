#!/usr/bin/env bash
# The client's Python package (python/: maturin, PyO3): built into a wheel,
# installed in a virtual environment, and python/tests/test_client.py run
# on a real mount (each call against what the kernel shows).
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
V=$WORK/client-venv
[ -x "$V/bin/maturin" ] || { python3 -m venv "$V" && "$V/bin/pip" install -q maturin; }
rm -rf "$WORK/client-wheels"
"$V/bin/maturin" build --release -q -m "$ROOT/python/Cargo.toml" -o "$WORK/client-wheels" -i "$V/bin/python"
"$V/bin/pip" install -q --force-reinstall "$WORK"/client-wheels/shoal-*.whl
M=$(mount_fresh client-python)
"$V/bin/python" "$ROOT/python/tests/test_client.py" "$M"
unmount_check client-python >/dev/null
echo "client-python: ok"
