#!/usr/bin/env bash
# Formatting and lints: rustfmt --check and clippy with warnings as errors,
# over every crate of the workspace (vendor/ excluded), every target and
# feature; and the vendored crates' diffs still match vendor/.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo fmt --check
cargo clippy --workspace --all-targets --all-features -q -- -D warnings
bash scripts/vendor-diff.sh --check
