#!/usr/bin/env bash
# run.sh SRC BUILD: the file protocol's tests (ctest test_calls): `peat calls export`, the numpy
# harness of docs/calls.md, `peat judge`, against `peat run --plugin` on the same kernels written
# in C, and bad input. Needs a python3 with numpy and h5py (Debian: python3-h5py, which
# scripts/install-deps.sh installs); exits 77 (ctest: skipped) where there is none.
set -u
src="$1" build="$2"
for py in ${PEAT_PYTHON:-} /usr/bin/python3 python3 "$HOME/.cache/peat/venv/bin/python"; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import numpy, h5py' 2>/dev/null; then
    export PEAT_BIN="$build/peat" PEAT_SRC="$src" PEAT_PLUGIN="$build/tests/plugins/libplugin_test_gemms.so"
    exec "$py" "$src/tests/calls/test_calls.py" -v 2>&1
  fi
done
echo "skipped: no python3 with numpy and h5py (Debian: apt install python3-h5py)"
exit 77
