#!/usr/bin/env bash
# torch-venv.sh: creates (or reuses) the Python virtual environment that the PyTorch bridge
# (python/peat_torch) and its tests run in, with torch, numpy and h5py from PyPI. Idempotent: a
# venv that already imports all three is left as it is (a second call only imports torch: seconds).
# The first call downloads torch (the default PyPI wheel pulls 3-5 GB of CUDA libraries; about
# 5-15 minutes on a fresh machine). Prints the venv's python path last.
#   PEAT_TORCH_VENV  where the venv lives (default ~/.cache/peat/venv)
#   --package        also installs ./python (peat_torch) into the venv (pip install ./python)
set -euo pipefail
venv="${PEAT_TORCH_VENV:-$HOME/.cache/peat/venv}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$venv/bin/python"
if [ ! -x "$py" ]; then
  echo "torch-venv: creating $venv" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
fi
if ! "$py" -c 'import torch, numpy, h5py' 2>/dev/null; then
  echo "torch-venv: installing torch numpy h5py into $venv (large download)" >&2
  "$py" -m pip install --quiet --upgrade pip >&2
  "$py" -m pip install --quiet torch numpy h5py >&2
fi
if [ "${1:-}" = "--package" ]; then
  "$py" -m pip install --quiet "$root/python" >&2
fi
"$py" -c 'import torch; print("torch-venv: torch", torch.__version__, file=__import__("sys").stderr)'
echo "$py"
