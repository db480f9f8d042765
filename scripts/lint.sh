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
