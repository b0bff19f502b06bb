#!/usr/bin/env bash
# build.sh: installs missing build dependencies and builds PEAT (Release) into build/. The tests
# are built where Criterion is installed (scripts/test.sh installs it); PEAT_CMAKE_ARGS adds
# CMake options.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
tests=OFF
pkg-config --exists criterion 2>/dev/null && tests=ON
cmake -S . -B build -DCMAKE_BUILD_TYPE="${PEAT_BUILD_TYPE:-Release}" -DPEAT_TESTS=$tests \
  ${PEAT_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)"
