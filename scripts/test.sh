#!/usr/bin/env bash
# test.sh: installs missing dependencies, builds, and runs the whole test suite (ctest, label cpu;
# gpu tests skip themselves where no device is present), then the suite again under ASan+UBSan
# and one campaign under valgrind.
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
t0=$(date +%s)
(cd build && ctest --output-on-failure -j"$(nproc)" "$@")
echo "test: suite (Release) in $(( $(date +%s) - t0 )) s"
# the whole suite again under ASan+UBSan (fuzz_smoke is left out here: its targets are built
# with ASan+UBSan already, in the pass above)
t0=$(date +%s)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPEAT_SANITIZE=ON -DPEAT_BENCH=OFF >/dev/null
cmake --build build-asan -j"$(nproc)" >/dev/null
(cd build-asan && ctest --output-on-failure -j"$(nproc)" -E '^fuzz_smoke$' "$@")
echo "test: suite under ASan+UBSan in $(( $(date +%s) - t0 )) s"
# one campaign under valgrind (memcheck errors fail CI)
t0=$(date +%s)
vg_out=$(mktemp -d)
valgrind -q --error-exitcode=1 build/peat run --kernel gemm_new --no-isolate --iters 20 --calls 8 \
  --out "$vg_out/run" --quiet >/dev/null
rm -rf "$vg_out"
echo "test: a campaign under valgrind is clean ($(( $(date +%s) - t0 )) s)"
