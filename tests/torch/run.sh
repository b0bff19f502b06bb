#!/usr/bin/env bash
# run.sh SRC BUILD: the peat_torch tests (ctest label `torch`) in the venv of scripts/torch-venv.sh.
# Exits 77 (ctest: skipped) with "skipped: torch not installed" when that venv has no torch.
set -u
src="$1" build="$2"
venv="${PEAT_TORCH_VENV:-$HOME/.cache/peat/venv}"
py="$venv/bin/python"
if [ ! -x "$py" ] || ! "$py" -c 'import torch, numpy, h5py' 2>/dev/null; then
  echo "skipped: torch not installed (run scripts/torch-venv.sh; venv $venv)"
  exit 77
fi
# one intra-op thread: torch's OpenMP threads spin on a loaded machine (20x slower steps)
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export PEAT_LIB="$build/libpeat.so" PEAT_BIN="$build/peat" PEAT_ZOO="$build/tests/zoo/libpeat_zoo.so"
export PYTHONPATH="$src/python:$src/examples/torch${PYTHONPATH:+:$PYTHONPATH}"
cd "$build" && exec "$py" "$src/tests/torch/test_peat_torch.py" -v 2>&1
