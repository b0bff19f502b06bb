#!/usr/bin/env bash
# build.sh: installs missing build dependencies and builds PEAT (Release) into build/. The
# automatic options follow what is installed at every configure (docs/devices.md): the tests are
# built where Criterion is (scripts/test.sh installs it), OpenCL where its loader is. PEAT_CMAKE_ARGS
# adds CMake options; PEAT_BUILD_DIR builds elsewhere and PEAT_BUILD_TARGET builds one target
# (scripts/check-fresh-configure.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
dir="${PEAT_BUILD_DIR:-build}"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="${PEAT_BUILD_TYPE:-Release}" ${PEAT_CMAKE_ARGS:-} >/dev/null
cmake --build "$dir" -j"$(nproc)" ${PEAT_BUILD_TARGET:+--target "$PEAT_BUILD_TARGET"}
