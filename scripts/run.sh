#!/usr/bin/env bash
# Builds the project and runs what works today: the fake Telegram Bot API server, with Threaded
# Mode on, printing its URL. (The hub and the demo replace this once they exist.)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p tg-fake
echo "tg-fake: the fake Telegram Bot API; control API under /__control/ (see crates/tg-fake/README.md)" >&2
exec target/release/tg-fake --port "${PORT:-8081}" --topics "$@"
