#!/usr/bin/env bash
# Fails, naming them, when `pi-telegram serve` processes of this checkout's build run with their
# agent dir in the temporary folder: hubs a test caused (a pi's extension starts one, detached,
# when none runs) and did not stop. scripts/test.sh runs it after the tests; the tests' helpers
# stop such hubs when a test ends, passed or failed (crates/pi-telegram/tests/common: Env's Drop).
# Linux only (it reads /proc); elsewhere it says so and passes.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -d /proc/self ]; then
  echo "no /proc: hubs left running are not checked here"
  exit 0
fi
target="$(cd "${CARGO_TARGET_DIR:-target}" 2>/dev/null && pwd -P)" || exit 0
tmp="$(cd "${TMPDIR:-/tmp}" && pwd -P)"
left=()
for p in /proc/[0-9]*; do
  exe="$(readlink "$p/exe" 2>/dev/null)" || continue
  exe="${exe% (deleted)}"
  case "$exe" in "$target"/*/pi-telegram) ;; *) continue ;; esac
  args="$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" || continue
  case " $args" in *" serve "* | *" serve") ;; *) continue ;; esac
  agent="$(tr '\0' '\n' <"$p/environ" 2>/dev/null | sed -n 's/^PI_CODING_AGENT_DIR=//p')"
  case "$agent" in "$tmp"/* | /tmp/*) ;; *) continue ;; esac
  by="$(tr '\0' '\n' <"$p/environ" 2>/dev/null | sed -n 's/^PI_TELEGRAM_STARTED_BY=//p')"
  left+=("pid ${p#/proc/}: $args(agent dir $agent, started by ${by:-shell})")
done
if [ "${#left[@]}" -gt 0 ]; then
  echo "hubs left running by the tests:" >&2
  printf '  %s\n' "${left[@]}" >&2
  exit 1
fi
echo "no hub left running"
