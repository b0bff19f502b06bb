#!/usr/bin/env bash
# test.sh [--slow] [CTEST ARGS]: installs missing dependencies (the test tooling too), builds, and
# runs the whole Release suite (ctest; gpu tests skip themselves where no device is present):
# about 5 minutes on 2 cores, a failing test shows its assertion's message. --slow then runs the
# slow lanes (scripts/test-slow.sh: ASan+UBSan suite, valgrind, fuzz, CUDA/HIP builds), as CI does.
set -euo pipefail
cd "$(dirname "$0")/.."
slow=0
if [ "${1:-}" = --slow ]; then
  slow=1
  shift
fi
t0=$(date +%s)
scripts/install-deps.sh --test
scripts/build.sh
echo "test: dependencies and build in $(($(date +%s) - t0)) s"
t1=$(date +%s)
(cd build && ctest --output-on-failure -j"$(nproc)" "$@")
echo "test: suite (Release) in $(($(date +%s) - t1)) s; $(($(date +%s) - t0)) s in all"
if [ "$slow" = 1 ]; then
  scripts/test-slow.sh "$@"
fi
