#!/usr/bin/env bash
# Configures and builds strata (Release, -O3) into build/. Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B "${BUILD_DIR:-build}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "${BUILD_DIR:-build}" -j"${JOBS:-2}"
