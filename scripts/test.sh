#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
# the inspector's browser tests use the system Chromium (Debian package; Playwright downloads no browser)
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "[test] installing chromium for the inspector's browser tests"
  { apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; }; } \
    || echo "[test] chromium could not be installed: the browser tests will skip" >&2
fi
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST HF_HUB_OFFLINE=1
cd "$ROOT"
exec "${VENV:-$ROOT/.venv}/bin/python" -m pytest "$@"
