#!/usr/bin/env bash
# Sets up and runs what works today: `pi-telegram demo` (a fake Telegram, the hub and one real
# pi instance against a local fake model), in this terminal. Installs Node 22 and pi into .cache/
# on first use (npm registry only); falls back to a clearly labelled echo agent if that fails.
set -euo pipefail
cd "$(dirname "$0")/.."
if bash scripts/install-test-deps.sh >&2; then
  export PI_TELEGRAM_PI_BIN="${PI_TELEGRAM_PI_BIN:-$PWD/.cache/test-deps/bin/pi}"
else
  echo "run.sh: could not install pi; the demo will use the built-in echo agent" >&2
fi
cargo build --release --locked -p pi-telegram
exec target/release/pi-telegram demo "$@"
