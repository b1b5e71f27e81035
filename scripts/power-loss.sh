#!/usr/bin/env bash
# The long power-loss run: POWERLOSS_CYCLES (default 200) cycles of the hub killed with SIGKILL
# together with a power cut of the file system under its profile (crates/powerloss: every
# write not yet synced is lost), then the switched-off-sync check. Prints the figures and fails
# on any confirmed update lost, duplicate answer or database that does not open. Needs
# /dev/fuse and root (mount(2)); without them the tests say why and pass as skipped.
# The same tests run short (20 cycles, 6 with a pi) in the workspace's `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
PI_TELEGRAM_TEST_PI="$(pwd)/.cache/test-deps/bin/pi"
export PI_TELEGRAM_TEST_PI
export POWERLOSS_CYCLES="${POWERLOSS_CYCLES:-200}"
# The run with a real pi: each cycle starts pi too (about 3 s a cycle).
export POWERLOSS_PI_CYCLES="${POWERLOSS_PI_CYCLES:-50}"
cargo test --locked -p pi-telegram --test power_loss -- --nocapture --test-threads 1
