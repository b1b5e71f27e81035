#!/usr/bin/env bash
# Runs every check and test of the project. This is the README's test command and what CI runs
# (.ci/run). Needs a Rust toolchain; later issues make it also fetch Node 22 and pi into .cache/.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --workspace --locked
