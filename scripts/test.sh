#!/usr/bin/env bash
# test.sh: installs missing dependencies, builds, and runs the whole test suite (ctest, label cpu;
# gpu tests skip themselves where no device is present).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --hip
scripts/build.sh
# CUDA sources must keep compiling where nvcc exists, even without a GPU
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if [ -d core/gpu ] && ls core/gpu/*.cu >/dev/null 2>&1; then
    PATH="$PATH:/usr/local/cuda/bin" cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DPEAT_CUDA=ON \
      -DPEAT_TESTS=OFF -DPEAT_BENCH=OFF >/dev/null
    cmake --build build-cuda -j"$(nproc)" >/dev/null
    echo "test: CUDA build compiles and links"
  fi
fi
# the same GPU source through hipcc (AMD), where Debian's hipcc is installed
if command -v hipcc >/dev/null 2>&1 && ls core/gpu/*.cu >/dev/null 2>&1; then
  cmake -S . -B build-hip -DCMAKE_BUILD_TYPE=Release -DPEAT_HIP=ON -DPEAT_TESTS=OFF -DPEAT_BENCH=OFF >/dev/null
  cmake --build build-hip -j"$(nproc)" >/dev/null
  echo "test: HIP build compiles and links"
fi
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
