#!/usr/bin/env bash
# check-fresh-configure.sh [DIR]: the README's two commands in order on a fresh machine, in DIR
# (default build-fresh; DIR-nocriterion too): the first configure cannot see OpenCL (as before
# scripts/test.sh installs PoCL), the second is scripts/build.sh's own and must build the OpenCL
# backend in (issue 46: option() had kept the first configure's OFF). Then an option given on a
# command line sticks until -DNAME=AUTO, and a configure without Criterion skips the tests with
# one line instead of failing. Needs the test tooling (scripts/install-deps.sh --test); ~1-3 min.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build-fresh}"
nocrit="$dir-nocriterion"
fail() {
  echo "check-fresh-configure: FAILED: $*" >&2
  exit 1
}
# the value of a cache entry of a build directory
cached() { sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt"; }
t0=$(date +%s)
rm -rf "$dir" "$nocrit"
mkdir -p "$dir"
# 1. README command 1 before the test tooling: configured as scripts/build.sh does, OpenCL hidden
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_OpenCL=TRUE \
  >"$dir/configure-1.log" 2>&1 || fail "the first configure failed (see $dir/configure-1.log)"
[ "$(cached "$dir" PEAT_OPENCL)" = OFF ] ||
  fail "the first configure saw OpenCL although it was hidden: this check proves nothing"
# 2. README command 2's build (scripts/test.sh runs scripts/build.sh), OpenCL now visible as after
# `scripts/install-deps.sh --test`; only peat is built, the least that shows the backend
PEAT_BUILD_DIR="$dir" PEAT_BUILD_TARGET=peat PEAT_CMAKE_ARGS=-DCMAKE_DISABLE_FIND_PACKAGE_OpenCL=FALSE \
  scripts/build.sh >"$dir/build.log" 2>&1 || fail "scripts/build.sh failed (see $dir/build.log)"
if [ "$(cached "$dir" PEAT_OPENCL)" != ON ]; then
  [ "$(cached "$dir" PEAT_OPENCL_AUTO)" = OFF ] &&
    fail "no OpenCL is installed here: run scripts/install-deps.sh --test first"
  fail "PEAT_OPENCL stayed $(cached "$dir" PEAT_OPENCL) after OpenCL appeared: the first" \
    "configure's automatic value stuck in the cache (cmake/auto_option.cmake)"
fi
backends=$("$dir/peat" list | sed -n 's/^backends: built \([^;]*\);.*/\1/p')
case ",$backends," in
  *,opencl,*) ;;
  *) fail "peat list shows backends '$backends' built: no opencl, though PEAT_OPENCL=ON" ;;
esac
echo "check-fresh-configure: OpenCL hidden at the first configure, built after the second" \
  "(peat list: built $backends)"
# 3. a value given on a command line sticks across configures until -DPEAT_OPENCL=AUTO
reconf() { cmake -S . -B "$dir" "$@" >"$dir/configure-3.log" 2>&1 || fail "cmake $* failed"; }
reconf -DPEAT_OPENCL=OFF
reconf
[ "$(cached "$dir" PEAT_OPENCL)" = OFF ] ||
  fail "-DPEAT_OPENCL=OFF, given once, did not stick through a plain configure"
reconf -DPEAT_OPENCL=AUTO
[ "$(cached "$dir" PEAT_OPENCL)" = ON ] || fail "-DPEAT_OPENCL=AUTO did not follow the machine again"
echo "check-fresh-configure: -DPEAT_OPENCL=OFF sticks until -DPEAT_OPENCL=AUTO"
# 4. a plain configure where Criterion is missing (pkg-config's own search path without
# criterion.pc) works and says once that the tests are skipped
mkdir -p "$nocrit/pc"
IFS=: read -r -a pcdirs <<<"$(pkg-config --variable pc_path pkg-config)"
for d in "${pcdirs[@]}"; do
  for pc in "$d"/*.pc; do
    [ -e "$pc" ] && [ "$(basename "$pc")" != criterion.pc ] && ln -sf "$pc" "$nocrit/pc/"
  done
done
PKG_CONFIG_LIBDIR="$nocrit/pc" cmake -S . -B "$nocrit" -DCMAKE_BUILD_TYPE=Release \
  >"$nocrit/configure.log" 2>&1 || fail "a configure without Criterion failed (see $nocrit/configure.log)"
[ "$(grep -c "the tests are skipped" "$nocrit/configure.log")" = 1 ] ||
  fail "a configure without Criterion did not say once that the tests are skipped"
[ "$(cached "$nocrit" PEAT_TESTS)" = OFF ] || fail "PEAT_TESTS is on without Criterion"
echo "check-fresh-configure: without Criterion the configure works and skips the tests" \
  "($(($(date +%s) - t0)) s in all)"
