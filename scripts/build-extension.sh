#!/usr/bin/env bash
# Compiles the pi extension (extension/index.ts, extension/lib/) into extension/dist/, the plain
# JavaScript pi loads (`pi.extensions` in extension/package.json), with the TypeScript that
# scripts/install-test-deps.sh pins. dist/ is committed: the Rust build embeds it, and cargo needs
# no Node. Run this after changing the extension (its package.json too); scripts/test.sh fails
# when dist/ or the crate's copy is stale.
# The Rust build embeds crates/pi-telegram/extension/, which this script makes: package.json,
# dist/ and skills/ (package.json's `pi.skills` names it), what `pi-telegram install-extension`
# installs. The copy is inside the crate because
# crates.io gets only the crate's own folder; the repository and the package embed the same bytes.
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
crate_copy=crates/pi-telegram/extension
mkdir "$out/crate"
cp extension/package.json "$out/crate/"
cp -r "$out/dist" "$out/crate/dist"
cp -r extension/skills "$out/crate/skills"
if [ "${1:-}" = "--check" ]; then
  if ! diff -r "$out/dist" extension/dist >/dev/null 2>&1; then
    diff -r "$out/dist" extension/dist | head -20 >&2 || true
    echo "extension/dist/ is not what extension/*.ts compile to: run scripts/build-extension.sh" >&2
    exit 1
  fi
  if ! diff -r "$out/crate" "$crate_copy" >/dev/null 2>&1; then
    diff -r "$out/crate" "$crate_copy" | head -20 >&2 || true
    echo "$crate_copy/ is not extension/package.json, dist/ and skills/: run scripts/build-extension.sh" >&2
    exit 1
  fi
  echo "extension/dist/ and $crate_copy/ are current"
else
  rm -rf extension/dist "$crate_copy"
  cp -r "$out/dist" extension/dist
  cp -r "$out/crate" "$crate_copy"
  echo "built extension/dist/ and $crate_copy/"
fi
