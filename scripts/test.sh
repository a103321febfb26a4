#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST HF_HUB_OFFLINE=1
cd "$ROOT"
exec "${VENV:-$ROOT/.venv}/bin/python" -m pytest "$@"
