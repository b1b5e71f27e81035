#!/usr/bin/env bash
# Runs every check and test of the project. This is the README's test command and what CI runs
# (.ci/run). Needs a Rust toolchain and npm: the tests run the real pi, which
# scripts/install-test-deps.sh fetches (with its Node 22) into .cache/test-deps/ when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# A step that fails for want of disk or memory (a link that fails on CI with its reason cut
# from the log) says so last, where a shortened log still shows it.
trap 'echo "== failed; disk and memory at the end:"; df -h . "${TMPDIR:-/tmp}" || true; free -m || true' ERR

echo "== test deps (node 22, pi, typescript, verdaccio, the network tests' proxies)"
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
echo "== extension unit tests (node --test)"
# wire.ts and turns.ts (extension/test/*.test.ts), run from the TypeScript: Node strips the types.
# They and crates/wire's tests read the same sample lines (crates/wire/tests/samples/).
.cache/test-deps/bin/node --test --test-reporter=spec 'extension/test/*.test.ts'
echo "== extension/dist is current"
# The JavaScript pi loads (and the Rust build embeds) is what the TypeScript compiles to.
bash scripts/build-extension.sh --check
echo "== cargo package (the crates cargo install pi-telegram builds)"
# Every crate not marked `publish = false`, together: cargo packages each against the others'
# packaged copies, so the manifests, the path dependencies' versions and what each .crate holds
# are checked here. --no-verify: building the packaged crates is a second cold build of the whole
# tree (about 9.5 minutes on CI's 2 cores); the release does it (README, "cargo install").
# --allow-dirty: what is checked is the working tree, committed or not.
published=$(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
print(" ".join("-p " + p["name"] for p in json.load(sys.stdin)["packages"] if p["publish"] != []))')
# shellcheck disable=SC2086 # one word per argument
cargo package --locked --allow-dirty --no-verify $published
version=$(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "pi-telegram"))')
# The binary embeds the extension from inside its crate (build.rs): the .crate must carry it.
crate_files=$(tar -tzf "target/package/pi-telegram-$version.crate")
for f in extension/package.json extension/dist/index.js extension/skills/telegram-bridge/SKILL.md; do
  if ! grep -qx "pi-telegram-$version/$f" <<<"$crate_files"; then
    echo "target/package/pi-telegram-$version.crate has no $f" >&2
    exit 1
  fi
done
echo "== the next release's hub (for the install test's pi update)"
# The same tree, reporting the next patch release: npm_install.rs publishes it as the update.
next="$(python3 -c 'import sys; a, b, c = sys.argv[1].split("."); print(f"{a}.{b}.{int(c) + 1}")' "$version")"
PI_TELEGRAM_BUILD_VERSION="$next" cargo build --locked -p pi-telegram --bin pi-telegram
mkdir -p target/next-hub
cp target/debug/pi-telegram target/next-hub/pi-telegram
PI_TELEGRAM_NEXT_HUB="$(pwd)/target/next-hub/pi-telegram"
export PI_TELEGRAM_NEXT_HUB
[ "$("$PI_TELEGRAM_NEXT_HUB" --version)" = "pi-telegram $next" ] ||
  { echo "the next hub reports $("$PI_TELEGRAM_NEXT_HUB" --version), not $next" >&2; exit 1; }
echo "== cargo test"
cargo test --workspace --locked
echo "== no hub left running"
# A hub a test caused (a pi's extension starts one, detached) must not outlive the tests.
bash scripts/check-no-hubs-left.sh
echo "== extension smoke (real pi against a mock hub)"
# The extension's own end-to-end scenarios (reload, /new, remembered projects, refusals, child
# tools mode...) with the real pi and a mock hub; Python standard library only.
PI_BIN="$PI_TELEGRAM_TEST_PI" python3 extension/dev/smoke.py
