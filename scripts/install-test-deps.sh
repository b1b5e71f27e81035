#!/usr/bin/env bash
# Installs what the tests that run the real pi need, when missing, into .cache/test-deps/:
#   node22/  Node.js 22 from the npm package "node" (pi needs Node >= 22.19; Debian 12 ships 20)
#   pi/      @earendil-works/pi-coding-agent
#   bin/pi   runs pi's CLI on that Node 22, whatever PATH says
#   bin/node that Node 22
#   typescript/  TypeScript, for `tsc --noEmit` over extension/ (scripts/test.sh)
#   bin/tsc  runs that tsc on Node 22
#   verdaccio/   the npm registry server the install test publishes the pi package to
#   bin/verdaccio  runs it on Node 22
#   proxy/   "proxy", a real HTTP proxy (CONNECT too), and simple-socks/, a SOCKS5 proxy, for the
#            network tests (crates/pi-telegram/tests/network.rs)
#   bin/http-proxy, bin/socks-proxy  run them on Node 22, on loopback (scripts/test-proxies/)
# Only the npm registry is needed. Idempotent: when the pinned versions are in place it only
# rewrites the two small wrappers, which takes well under a second.
# Usage: scripts/install-test-deps.sh   (TEST_DEPS_DIR overrides the install folder)
set -euo pipefail

NODE_VERSION="22.23.3"
PI_PACKAGE="@earendil-works/pi-coding-agent"
PI_VERSION="1.6.0"
TYPESCRIPT_VERSION="6.0.3"
VERDACCIO_VERSION="6.8.0"
PROXY_VERSION="4.1.0"
SOCKS_VERSION="3.6.0"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="${TEST_DEPS_DIR:-$ROOT/.cache/test-deps}"
NODE_DIR="$DEPS/node22"
PI_DIR="$DEPS/pi"
BIN_DIR="$DEPS/bin"
NODE="$NODE_DIR/node_modules/node/bin/node"
PI_PKG_JSON="$PI_DIR/node_modules/$PI_PACKAGE/package.json"
TS_DIR="$DEPS/typescript"
TS_PKG_JSON="$TS_DIR/node_modules/typescript/package.json"
VERDACCIO_DIR="$DEPS/verdaccio"
VERDACCIO_PKG_JSON="$VERDACCIO_DIR/node_modules/verdaccio/package.json"
PROXY_DIR="$DEPS/proxy"
PROXY_PKG_JSON="$PROXY_DIR/node_modules/proxy/package.json"
SOCKS_DIR="$DEPS/simple-socks"
SOCKS_PKG_JSON="$SOCKS_DIR/node_modules/simple-socks/package.json"

say() { echo "install-test-deps: $*"; }
die() { echo "install-test-deps: error: $*" >&2; exit 1; }

mkdir -p "$DEPS" "$BIN_DIR"

# Two test runs starting at once must not interleave two npm installs in one folder.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$DEPS/.lock"
  flock 9
fi

require_npm() {
  command -v npm >/dev/null 2>&1 ||
    die "npm is not installed, and it is needed once to fetch Node $NODE_VERSION, pi $PI_VERSION and TypeScript $TYPESCRIPT_VERSION from the npm registry. Install Node.js with npm (e.g. 'apt-get install nodejs npm'), then re-run $0."
}

# npm_install DIR SPEC [FIELDS]: a fresh install of SPEC into DIR/node_modules, output kept in
# DIR/npm.log. FIELDS: more members of the folder's package.json (`"overrides": {...}`).
npm_install() {
  local dir="$1" spec="$2" fields="${3:-}"
  require_npm
  rm -rf "$dir"
  mkdir -p "$dir"
  printf '{ "name": "pi-telegram-test-deps", "private": true%s }\n' "${fields:+, $fields}" >"$dir/package.json"
  # npm prints engine and allowScripts warnings here; they are expected and harmless, so they go
  # to the log, which is shown only when the install fails.
  if ! (cd "$dir" && npm install --no-audit --no-fund --no-update-notifier --save-exact "$spec") \
    >"$dir/npm.log" 2>&1; then
    cat "$dir/npm.log" >&2
    die "npm install $spec failed (log above, also in $dir/npm.log)"
  fi
}

node_version() { [ -x "$NODE" ] && "$NODE" --version 2>/dev/null || true; }

if [ "$(node_version)" = "v$NODE_VERSION" ]; then
  say "node $NODE_VERSION already installed"
else
  say "installing node@$NODE_VERSION into $NODE_DIR"
  npm_install "$NODE_DIR" "node@$NODE_VERSION"
  got="$(node_version)"
  [ "$got" = "v$NODE_VERSION" ] ||
    die "after npm install node@$NODE_VERSION, $NODE reports '${got:-nothing}' (see $NODE_DIR/npm.log)"
  say "installed node $got"
fi

pi_version() {
  [ -f "$PI_PKG_JSON" ] && "$NODE" -p 'require(process.argv[1]).version' "$PI_PKG_JSON" 2>/dev/null || true
}

if [ "$(pi_version)" = "$PI_VERSION" ]; then
  say "$PI_PACKAGE $PI_VERSION already installed"
else
  say "installing $PI_PACKAGE@$PI_VERSION into $PI_DIR"
  # Node 22 first on PATH, so npm and the packages' install scripts run on the Node pi targets
  # (and npm's engine check passes).
  PATH="$(dirname "$NODE"):$PATH" npm_install "$PI_DIR" "$PI_PACKAGE@$PI_VERSION"
  got="$(pi_version)"
  [ "$got" = "$PI_VERSION" ] ||
    die "after npm install $PI_PACKAGE@$PI_VERSION, found version '${got:-nothing}' (see $PI_DIR/npm.log)"
  say "installed $PI_PACKAGE $got"
fi

ts_version() {
  [ -f "$TS_PKG_JSON" ] && "$NODE" -p 'require(process.argv[1]).version' "$TS_PKG_JSON" 2>/dev/null || true
}

if [ "$(ts_version)" = "$TYPESCRIPT_VERSION" ]; then
  say "typescript $TYPESCRIPT_VERSION already installed"
else
  say "installing typescript@$TYPESCRIPT_VERSION into $TS_DIR"
  PATH="$(dirname "$NODE"):$PATH" npm_install "$TS_DIR" "typescript@$TYPESCRIPT_VERSION"
  got="$(ts_version)"
  [ "$got" = "$TYPESCRIPT_VERSION" ] ||
    die "after npm install typescript@$TYPESCRIPT_VERSION, found version '${got:-nothing}' (see $TS_DIR/npm.log)"
  say "installed typescript $got"
fi

verdaccio_version() {
  [ -f "$VERDACCIO_PKG_JSON" ] && "$NODE" -p 'require(process.argv[1]).version' "$VERDACCIO_PKG_JSON" 2>/dev/null || true
}

if [ "$(verdaccio_version)" = "$VERDACCIO_VERSION" ]; then
  say "verdaccio $VERDACCIO_VERSION already installed"
else
  say "installing verdaccio@$VERDACCIO_VERSION into $VERDACCIO_DIR"
  # node-fetch pinned to 2.7.0: the combination known to install and run on these machines.
  PATH="$(dirname "$NODE"):$PATH" npm_install "$VERDACCIO_DIR" "verdaccio@$VERDACCIO_VERSION" \
    '"overrides": { "node-fetch": "2.7.0" }'
  got="$(verdaccio_version)"
  [ "$got" = "$VERDACCIO_VERSION" ] ||
    die "after npm install verdaccio@$VERDACCIO_VERSION, found version '${got:-nothing}' (see $VERDACCIO_DIR/npm.log)"
  say "installed verdaccio $got"
fi

pkg_version() {
  [ -f "$1" ] && "$NODE" -p 'require(process.argv[1]).version' "$1" 2>/dev/null || true
}

# The network tests' proxies: real proxy servers from the npm registry, started by the tests on
# loopback ports of their own.
if [ "$(pkg_version "$PROXY_PKG_JSON")" = "$PROXY_VERSION" ]; then
  say "proxy $PROXY_VERSION already installed"
else
  say "installing proxy@$PROXY_VERSION into $PROXY_DIR"
  PATH="$(dirname "$NODE"):$PATH" npm_install "$PROXY_DIR" "proxy@$PROXY_VERSION"
  got="$(pkg_version "$PROXY_PKG_JSON")"
  [ "$got" = "$PROXY_VERSION" ] ||
    die "after npm install proxy@$PROXY_VERSION, found version '${got:-nothing}' (see $PROXY_DIR/npm.log)"
  say "installed proxy $got"
fi
if [ "$(pkg_version "$SOCKS_PKG_JSON")" = "$SOCKS_VERSION" ]; then
  say "simple-socks $SOCKS_VERSION already installed"
else
  say "installing simple-socks@$SOCKS_VERSION into $SOCKS_DIR"
  PATH="$(dirname "$NODE"):$PATH" npm_install "$SOCKS_DIR" "simple-socks@$SOCKS_VERSION"
  got="$(pkg_version "$SOCKS_PKG_JSON")"
  [ "$got" = "$SOCKS_VERSION" ] ||
    die "after npm install simple-socks@$SOCKS_VERSION, found version '${got:-nothing}' (see $SOCKS_DIR/npm.log)"
  say "installed simple-socks $got"
fi
# The launchers beside their packages (so `import "proxy"` finds them), copied on every run.
cp -f "$ROOT/scripts/test-proxies/http.mjs" "$PROXY_DIR/launch.mjs"
cp -f "$ROOT/scripts/test-proxies/socks.mjs" "$SOCKS_DIR/launch.mjs"

# The CLI's JS file, from the package's own "bin" entry, relative to the package folder.
PI_BIN_REL="$("$NODE" -p '
  const b = require(process.argv[1]).bin;
  typeof b === "string" ? b : (b && b.pi) || ""' "$PI_PKG_JSON")"
[ -n "$PI_BIN_REL" ] || die "$PI_PKG_JSON has no \"bin\" entry for pi"
[ -f "$PI_DIR/node_modules/$PI_PACKAGE/$PI_BIN_REL" ] ||
  die "pi's bin entry $PI_BIN_REL is missing from $PI_DIR/node_modules/$PI_PACKAGE"

# The wrappers locate everything relative to themselves, so the repo can be moved or cloned
# elsewhere with .cache/ in it. They are rewritten on every run: cheap, and never stale.
write_wrapper() {
  local path="$1" body="$2"
  printf '%s\n' "#!/bin/sh" \
    "# Written by scripts/install-test-deps.sh; re-run it rather than editing this file." \
    'DEPS="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"' \
    "$body" >"$path.tmp"
  chmod +x "$path.tmp"
  mv -f "$path.tmp" "$path"
}
# Node 22 also goes first on PATH so that whatever pi starts (extensions, npm for `pi install`)
# runs on it too.
write_wrapper "$BIN_DIR/pi" \
  'PATH="$DEPS/node22/node_modules/node/bin:$PATH" exec "$DEPS/node22/node_modules/node/bin/node" "$DEPS/pi/node_modules/'"$PI_PACKAGE/$PI_BIN_REL"'" "$@"'
write_wrapper "$BIN_DIR/node" 'exec "$DEPS/node22/node_modules/node/bin/node" "$@"'
write_wrapper "$BIN_DIR/verdaccio" 'exec "$DEPS/node22/node_modules/node/bin/node" "$DEPS/verdaccio/node_modules/verdaccio/bin/verdaccio" "$@"'
write_wrapper "$BIN_DIR/http-proxy" 'exec "$DEPS/node22/node_modules/node/bin/node" "$DEPS/proxy/launch.mjs" "$@"'
write_wrapper "$BIN_DIR/socks-proxy" 'exec "$DEPS/node22/node_modules/node/bin/node" "$DEPS/simple-socks/launch.mjs" "$@"'
write_wrapper "$BIN_DIR/tsc" 'exec "$DEPS/node22/node_modules/node/bin/node" "$DEPS/typescript/node_modules/typescript/bin/tsc" "$@"'

got="$("$BIN_DIR/pi" --version 2>/dev/null || true)"
[ "$got" = "$PI_VERSION" ] || die "$BIN_DIR/pi --version printed '${got:-nothing}', expected $PI_VERSION"
got="$("$BIN_DIR/tsc" --version 2>/dev/null || true)"
[ "$got" = "Version $TYPESCRIPT_VERSION" ] ||
  die "$BIN_DIR/tsc --version printed '${got:-nothing}', expected Version $TYPESCRIPT_VERSION"
got="$("$BIN_DIR/verdaccio" --version 2>/dev/null || true)"
[ "$got" = "v$VERDACCIO_VERSION" ] || [ "$got" = "$VERDACCIO_VERSION" ] ||
  die "$BIN_DIR/verdaccio --version printed '${got:-nothing}', expected $VERDACCIO_VERSION"
say "ready: $BIN_DIR/pi ($PI_VERSION on node $NODE_VERSION), $BIN_DIR/tsc ($TYPESCRIPT_VERSION), $BIN_DIR/verdaccio ($VERDACCIO_VERSION), $BIN_DIR/http-proxy (proxy $PROXY_VERSION), $BIN_DIR/socks-proxy (simple-socks $SOCKS_VERSION)"
