#!/usr/bin/env bash
# build.sh: installs missing dependencies and builds PEAT (Release) into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE="${PEAT_BUILD_TYPE:-Release}" ${PEAT_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)"
