#!/usr/bin/env bash
# Formatting and lints: rustfmt --check and clippy with warnings as errors,
# over every crate of the workspace (vendor/ excluded), every target and
# feature; and the vendored crates' diffs still match vendor/.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo fmt --check
# python/ is outside the workspace (PyO3's extension module cannot link into its tests).
(cd python && cargo fmt --check && cargo clippy -q -- -D warnings)
cargo clippy --workspace --all-targets --all-features -q -- -D warnings
bash scripts/vendor-diff.sh --check
# No unwrap() on a std lock outside tests and the loom seam (issue 45, point
# 6): a request that panics holding one would poison it and take the daemon
# down with it. parking_lot's locks (or shoal_core::sync's) do not poison.
if grep -rnE '\.(lock|read|write)\(\)\.unwrap\(\)' crates/*/src python/src 2>/dev/null | grep -v '^crates/core/src/sync.rs:'; then
  echo "lint: unwrap() on a lock (above): use parking_lot or shoal_core::sync" >&2
  exit 1
fi
