#!/usr/bin/env bash
# The loom models (crates/core/src/loom_models.rs): the name lock, the commit
# gate and reclaim against fills, on the engine's own code with loom's locks
# and atomics under every interleaving (up to each model's preemption bound).
# Built apart (target/loom): --cfg loom changes the seam in sync.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
RUSTFLAGS="--cfg loom" cargo test --release -q -p shoal-core --lib --target-dir target/loom loom_models -- --test-threads=1 "$@"
