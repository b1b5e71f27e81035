#!/usr/bin/env bash
# The long soak: three real pi in Threaded Mode (two with the extension, one headless), a
# scripted conversation of SOAK_TURNS prompts (plain, streamed, queued, aborted, reacted, edited,
# files), the hub SIGKILLed every SOAK_KILL_MIN_MS..SOAK_KILL_MAX_MS and every
# SOAK_PI_KILL_EVERY-th time a pi with the extension too. Prints the table and fails on any lost
# update, double delivery, missing answer, duplicate topic or threads invariant.
# The same test runs short in scripts/test.sh (40 prompts).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
PI_TELEGRAM_TEST_PI="$(pwd)/.cache/test-deps/bin/pi"
export PI_TELEGRAM_TEST_PI
export SOAK_TURNS="${SOAK_TURNS:-1200}"
export SOAK_KILL_MIN_MS="${SOAK_KILL_MIN_MS:-500}"
export SOAK_KILL_MAX_MS="${SOAK_KILL_MAX_MS:-1500}"
export SOAK_PI_KILL_EVERY="${SOAK_PI_KILL_EVERY:-25}"
cargo test --locked -p pi-telegram --test soak -- --nocapture
