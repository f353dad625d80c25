#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine, then runs it all.
# Extra arguments go to pytest (e.g. `bash tests/run.sh -m "not browser"`).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's Chromium and its matching driver, for the browser tests.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -e '.[test]'
exec .venv/bin/python -m pytest "$@"
