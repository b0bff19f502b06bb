#!/usr/bin/env bash
# install-deps.sh: installs the Debian packages PEAT builds with, only those missing (idempotent).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libhdf5-dev hdf5-tools zlib1g-dev libgsl-dev libcriterion-dev)
# OpenBLAS: the golden GEMM on the CPU (golden/gemm_blas.c)
pkgs+=(libopenblas-dev)
# the tests of the published formats and of report.html: xmllint (junit.xml against tests/junit.xsd),
# python3-jsonschema (signature.json against docs/signature.schema.json), python3-h5py (campaign.h5
# as h5py reads it), headless Chromium
pkgs+=(libxml2-utils python3-jsonschema python3-h5py chromium fonts-dejavu-core)
# OpenCL: headers, the ICD loader, PoCL (an OpenCL device on the CPU, so the device path is tested
# without a GPU) and CLBlast (the OpenCL golden GEMM)
pkgs+=(opencl-headers ocl-icd-opencl-dev pocl-opencl-icd libclblast-dev)
# valgrind: CI runs a campaign under it; clang + libclang-rt-dev: the libFuzzer targets (tests/fuzz)
pkgs+=(valgrind clang libclang-rt-dev)
[ "${PEAT_DEV_TOOLS:-0}" = 1 ] && pkgs+=(clang-format)
# --hip: Debian's HIP compiler and runtime, so the GPU source is also checked to build for AMD
[ "${1:-}" = "--hip" ] && pkgs+=(hipcc libamdhip64-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "install-deps: all dependencies present"
