#!/usr/bin/env bash
# Compiles the pi extension (extension/index.ts, extension/lib/) into extension/dist/, the plain
# JavaScript pi loads (`pi.extensions` in extension/package.json), with the TypeScript that
# scripts/install-test-deps.sh pins. dist/ is committed: the Rust build embeds it, and cargo needs
# no Node. Run this after changing the extension; scripts/test.sh fails when dist/ is stale.
# Why plain JavaScript: pi transpiles a TypeScript extension with Babel, which costs pi about 40 MB
# more (extension/README.md, "Memory").
#   scripts/build-extension.sh           rebuilds extension/dist/
#   scripts/build-extension.sh --check   only checks that extension/dist/ is current
set -euo pipefail
cd "$(dirname "$0")/.."

TSC=.cache/test-deps/bin/tsc
[ -x "$TSC" ] || bash scripts/install-test-deps.sh

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$TSC" -p extension/tsconfig.build.json --outDir "$out/dist"
if [ "${1:-}" = "--check" ]; then
  if ! diff -r "$out/dist" extension/dist >/dev/null 2>&1; then
    diff -r "$out/dist" extension/dist | head -20 >&2 || true
    echo "extension/dist/ is not what extension/*.ts compile to: run scripts/build-extension.sh" >&2
    exit 1
  fi
  echo "extension/dist/ is current"
else
  rm -rf extension/dist
  cp -r "$out/dist" extension/dist
  echo "built extension/dist/"
fi
