#!/usr/bin/env bash
# Builds the npm packages of one platform into an output folder, ready for `npm publish`:
#
#   <out>/pi-telegram-<version>.tgz                 the pi package: the extension (extension/),
#                                                   its skills, README, CHANGELOG, LICENSE
#   <out>/pi-telegram-<platform>-<version>.tgz      the hub binary for <platform> (npm/<platform>/)
#
# The pi package lists every platform package in optionalDependencies; npm installs the one whose
# os/cpu/libc match the machine, and the extension starts the binary from it. No install script
# runs and nothing is downloaded at run time.
#
# Usage: scripts/package.sh [--binary PATH] [--platform NAME] [--version V] [--out DIR]
#   --binary    the hub binary to ship (default: build it, `cargo build --release --locked`)
#   --platform  one of the folders under npm/ (default: this machine's)
#   --version   the version written into both packages (default: the workspace's); the binary's
#               own `--version` must say the same
#   --out       where the packages go (default: target/npm)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
die() { echo "package: error: $*" >&2; exit 1; }

binary="" platform="" version="" out="$ROOT/target/npm"
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="${2:?}"; shift 2 ;;
    --platform) platform="${2:?}"; shift 2 ;;
    --version) version="${2:?}"; shift 2 ;;
    --out) out="${2:?}"; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

command -v npm >/dev/null 2>&1 || die "npm is needed to pack the packages"
command -v node >/dev/null 2>&1 || die "node is needed to write the package manifests"

if [ -z "$version" ]; then
  version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$ROOT/Cargo.toml")"
  [ -n "$version" ] || die "no version in $ROOT/Cargo.toml [workspace.package]"
fi

if [ -z "$platform" ]; then
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) arch=x64 ;;
    Linux-aarch64) arch=arm64 ;;
    Darwin-arm64) platform=darwin-arm64 ;;
    Darwin-x86_64) platform=darwin-x64 ;;
    *) die "no npm package for $(uname -s) $(uname -m); pass --platform" ;;
  esac
  if [ -z "$platform" ]; then
    if ldd --version 2>&1 | grep -qi musl; then platform="linux-$arch-musl"; else platform="linux-$arch-gnu"; fi
  fi
fi
[ -f "$ROOT/npm/$platform/package.json" ] || die "unknown platform $platform (the folders under npm/ are the platforms)"

if [ -z "$binary" ]; then
  echo "package: building the hub (release)"
  (cd "$ROOT" && cargo build --release --locked -p pi-telegram)
  binary="$ROOT/target/release/pi-telegram"
fi
[ -f "$binary" ] && [ -x "$binary" ] || die "$binary is not an executable file"
said="$("$binary" --version 2>/dev/null || true)"
[ "$said" = "pi-telegram $version" ] || die "$binary says \"$said\", the packages would say $version"

mkdir -p "$out"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

# The platform package: its manifest with the version, and the binary (debug information
# stripped: it is most of a debug build's size and no use to a person).
plat="$stage/platform"
mkdir -p "$plat/bin"
cp "$binary" "$plat/bin/pi-telegram"
if command -v strip >/dev/null 2>&1 && [ "$(uname -s)" = Linux ]; then strip --strip-debug "$plat/bin/pi-telegram"; fi
chmod 755 "$plat/bin/pi-telegram"
node -e '
  const fs = require("fs");
  const [src, dst, version] = process.argv.slice(1);
  const m = JSON.parse(fs.readFileSync(src, "utf8"));
  m.version = version;
  delete m.rustTarget;
  fs.writeFileSync(dst, JSON.stringify(m, null, 2) + "\n");
' "$ROOT/npm/$platform/package.json" "$plat/package.json" "$version"

# The pi package: the extension as pi loads it, with every platform package at this version.
main="$stage/main"
mkdir -p "$main"
cp -R "$ROOT/extension/dist" "$main/dist"
[ -d "$ROOT/extension/skills" ] && cp -R "$ROOT/extension/skills" "$main/skills"
cp "$ROOT/README.md" "$main/README.md"
for f in CHANGELOG.md LICENSE; do [ -f "$ROOT/$f" ] && cp "$ROOT/$f" "$main/$f"; done
node -e '
  const fs = require("fs");
  const path = require("path");
  const [src, dst, version, npmDir] = process.argv.slice(1);
  const m = JSON.parse(fs.readFileSync(src, "utf8"));
  m.version = version;
  const names = fs.readdirSync(npmDir)
    .filter((d) => fs.existsSync(path.join(npmDir, d, "package.json")))
    .map((d) => JSON.parse(fs.readFileSync(path.join(npmDir, d, "package.json"), "utf8")).name)
    .sort();
  m.optionalDependencies = Object.fromEntries(names.map((n) => [n, version]));
  fs.writeFileSync(dst, JSON.stringify(m, null, 2) + "\n");
' "$ROOT/extension/package.json" "$main/package.json" "$version" "$ROOT/npm"

(cd "$plat" && npm pack --silent --pack-destination "$out" >/dev/null)
(cd "$main" && npm pack --silent --pack-destination "$out" >/dev/null)
echo "package: $out/pi-telegram-$version.tgz"
echo "package: $out/pi-telegram-$platform-$version.tgz"
