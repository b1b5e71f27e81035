#!/usr/bin/env bash
# Runs every check and test of the project. This is the README's test command and what CI runs
# (.ci/run). Needs a Rust toolchain and npm: the tests run the real pi, which
# scripts/install-test-deps.sh fetches (with its Node 22) into .cache/test-deps/ when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== test deps (node 22, pi, typescript)"
bash scripts/install-test-deps.sh
PI_TELEGRAM_TEST_PI="$(pwd)/.cache/test-deps/bin/pi"
export PI_TELEGRAM_TEST_PI

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== tsc"
# Type check of the pi extension against pi's own types (extension/tsconfig.json); no output.
.cache/test-deps/bin/tsc -p extension/tsconfig.json
echo "== extension/dist is current"
# The JavaScript pi loads (and the Rust build embeds) is what the TypeScript compiles to.
bash scripts/build-extension.sh --check
echo "== cargo test"
cargo test --workspace --locked
echo "== no hub left running"
# A hub a test caused (a pi's extension starts one, detached) must not outlive the tests.
bash scripts/check-no-hubs-left.sh
echo "== extension smoke (real pi against a mock hub)"
# The extension's own end-to-end scenarios (reload, /new, remembered projects, refusals, child
# tools mode...) with the real pi and a mock hub; Python standard library only.
PI_BIN="$PI_TELEGRAM_TEST_PI" python3 extension/dev/smoke.py
