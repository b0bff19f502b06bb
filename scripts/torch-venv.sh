#!/usr/bin/env bash
# torch-venv.sh: creates (or reuses) the Python virtual environment that the PyTorch bridge
# (python/peat_torch) and its tests run in, with torch, torchvision, numpy and h5py from PyPI.
# Idempotent: a venv that already imports them is left as it is (a second call only imports torch:
# seconds).
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
  echo "torch-venv: installing torch torchvision numpy h5py into $venv (large download)" >&2
  "$py" -m pip install --quiet --upgrade pip >&2
  "$py" -m pip install --quiet torch torchvision numpy h5py >&2
fi
# a venv made before torchvision was asked for: the torchvision that goes with the torch it has
# (pinned, so that torch is not replaced); none to be had leaves the venv as it is (the tests
# that need torchvision say they are skipped)
if ! "$py" -c 'import torchvision' 2>/dev/null; then
  tv="$("$py" -c 'import torch; print(torch.__version__)')"
  echo "torch-venv: installing torchvision for torch $tv into $venv" >&2
  "$py" -m pip install --quiet torchvision "torch==$tv" >&2 ||
    echo "torch-venv: no torchvision for torch $tv: its tests will be skipped" >&2
fi
if [ "${1:-}" = "--package" ]; then
  "$py" -m pip install --quiet "$root/python" >&2
fi
"$py" -c 'import torch; print("torch-venv: torch", torch.__version__, file=__import__("sys").stderr)'
echo "$py"
