#!/usr/bin/env bash
# smoke.sh SRC BUILD: builds the libFuzzer targets of SRC/tests/fuzz with clang into BUILD and runs
# each from its seed corpus (SRC/tests/fuzz/corpus/<target>) for a bounded number of inputs.
# Exit 77 (ctest: skipped) where clang or its libFuzzer runtime is missing. Longer runs:
# docs/fuzzing.md.
set -euo pipefail
src=$1 build=$2
runs=${PEAT_FUZZ_RUNS:-1000}
if ! command -v clang >/dev/null 2>&1; then
  echo "SKIP: no clang (scripts/install-deps.sh installs clang and libclang-rt-dev)"
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' >"$probe/p.c"
if ! clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
  echo "SKIP: clang has no libFuzzer runtime (install libclang-rt-dev)"
  exit 77
fi
cmake -S "$src" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPEAT_FUZZ=ON -DPEAT_TESTS=OFF -DPEAT_BENCH=OFF -DPEAT_OPENCL=OFF >/dev/null
cmake --build "$build" --target fuzz -j2 >/dev/null
status=0
for t in "$build"/fuzz_*; do
  name=$(basename "$t")
  work="$probe/$name"
  mkdir -p "$work"
  # HDF5 1.10 leaks some of its own allocations on damaged files (docs/fuzzing.md): leaks are
  # checked everywhere but in the campaign reader
  leaks=1 n=$runs
  [ "$name" = fuzz_campaign ] && leaks=0
  # new inputs go to the scratch folder: the seed corpus in the source tree stays as committed
  if (cd "$work" && ASAN_OPTIONS=detect_leaks=$leaks "$t" -runs="$n" -timeout=10 \
    "$work" "$src/tests/fuzz/corpus/$name" >"$work/log" 2>&1); then
    echo "$name: $(grep -E '^#[0-9]+.*DONE' "$work/log" | tail -1)"
  else
    echo "$name: FAILED"
    tail -40 "$work/log"
    status=1
  fi
done
exit $status
