#!/usr/bin/env bash
# test-slow.sh [CTEST ARGS]: the slow lanes CI runs after scripts/test.sh (times on 2 cores):
#   the README's two commands in order on a fresh machine (scripts/check-fresh-configure.sh:
#   OpenCL hidden at the first configure, built after the second; under a minute);
#   CUDA and HIP builds, where nvcc or hipcc is installed (compile and link only);
#   the whole suite again under ASan+UBSan (Debug; ~20 min);
#   a campaign under valgrind, in-process and isolated (~1 min);
#   the libFuzzer targets, built with clang into build/fuzz and run from their seed corpora
#   (tests/fuzz/smoke.sh; ~4 min; skipped where clang's libFuzzer is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test --hip
# a build directory configured before the test tooling was installed picks it up (issue 46)
t0=$(date +%s)
scripts/check-fresh-configure.sh build-fresh
echo "test-slow: fresh-machine configure check in $(($(date +%s) - t0)) s"
# CUDA sources must keep compiling where nvcc exists, even without a GPU
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if [ -d core/gpu ] && ls core/gpu/*.cu >/dev/null 2>&1; then
    t0=$(date +%s)
    PATH="$PATH:/usr/local/cuda/bin" cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DPEAT_CUDA=ON \
      -DPEAT_TESTS=OFF -DPEAT_BENCH=OFF >/dev/null
    cmake --build build-cuda -j"$(nproc)" >/dev/null
    echo "test-slow: CUDA build compiles and links ($(($(date +%s) - t0)) s)"
  fi
fi
# the same GPU source through hipcc (AMD), where Debian's hipcc is installed
if command -v hipcc >/dev/null 2>&1 && ls core/gpu/*.cu >/dev/null 2>&1; then
  t0=$(date +%s)
  cmake -S . -B build-hip -DCMAKE_BUILD_TYPE=Release -DPEAT_HIP=ON -DPEAT_TESTS=OFF -DPEAT_BENCH=OFF >/dev/null
  cmake --build build-hip -j"$(nproc)" >/dev/null
  echo "test-slow: HIP build compiles and links ($(($(date +%s) - t0)) s)"
fi
# the whole suite again under ASan+UBSan
t0=$(date +%s)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPEAT_SANITIZE=ON -DPEAT_BENCH=OFF >/dev/null
cmake --build build-asan -j"$(nproc)" >/dev/null
(cd build-asan && ctest --output-on-failure -j"$(nproc)" "$@")
echo "test-slow: suite under ASan+UBSan in $(($(date +%s) - t0)) s"
# a campaign under valgrind (memcheck errors fail CI)
t0=$(date +%s)
vg_out=$(mktemp -d)
valgrind -q --error-exitcode=1 build/peat run --kernel gemm_new --no-isolate --iters 20 --calls 8 \
  --out "$vg_out/run" --quiet >/dev/null
# and isolated: the worker's children are forks of the same process, checked too; peat ends them
# with SIGKILL, so their errors fail the lane by what valgrind wrote, not by an exit code
valgrind -q --error-exitcode=1 build/peat run --kernel gemm_new --iters 20 --calls 8 \
  --out "$vg_out/run-isolated" --quiet >/dev/null 2>"$vg_out/isolated.err"
if grep -q '^==[0-9]*==' "$vg_out/isolated.err"; then
  cat "$vg_out/isolated.err" >&2
  echo "test-slow: valgrind found errors in an isolated campaign" >&2
  exit 1
fi
rm -rf "$vg_out"
echo "test-slow: a campaign under valgrind is clean ($(($(date +%s) - t0)) s)"
# the libFuzzer targets from their seed corpora (exit 77: no libFuzzer here, said and skipped)
t0=$(date +%s)
rc=0
tests/fuzz/smoke.sh "$PWD" "$PWD/build/fuzz" || rc=$?
if [ "$rc" = 77 ]; then
  echo "test-slow: fuzz smoke skipped (no clang libFuzzer)"
elif [ "$rc" != 0 ]; then
  exit "$rc"
else
  echo "test-slow: fuzz smoke in $(($(date +%s) - t0)) s"
fi
