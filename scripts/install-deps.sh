#!/usr/bin/env bash
# install-deps.sh [--test] [--hip]: installs the Debian packages PEAT needs, only those missing
# (idempotent). By default what building and running `peat` needs; --test adds the test tooling
# (scripts/test.sh passes it); --hip adds Debian's HIP compiler (the AMD build check).
set -euo pipefail
test=0 hip=0
for a in "$@"; do
  case "$a" in
    --test) test=1 ;;
    --hip) hip=1 ;;
    *)
      echo "install-deps: unknown option $a (--test, --hip)" >&2
      exit 2
      ;;
  esac
done
# building and running: compiler, CMake, HDF5 (and h5dump), zlib, GSL, OpenBLAS
pkgs=(build-essential cmake pkg-config libhdf5-dev hdf5-tools zlib1g-dev libgsl-dev)
# OpenBLAS: the golden GEMM on the CPU (golden/gemm_blas.c)
pkgs+=(libopenblas-dev)
# Open MPI: `mpirun -n N peat run|inject|ci` (PEAT_MPI, on where found; docs/scale-out.md)
pkgs+=(openmpi-bin libopenmpi-dev)
if [ "$test" = 1 ]; then
  # the tests: Criterion; the published formats and report.html: xmllint (junit.xml against
  # tests/junit.xsd), python3-jsonschema (signature.json against docs/signature.schema.json),
  # python3-h5py (campaign.h5 as h5py reads it), headless Chromium
  pkgs+=(libcriterion-dev libxml2-utils python3-jsonschema python3-h5py chromium fonts-dejavu-core)
  # OpenCL: headers, the ICD loader, PoCL (an OpenCL device on the CPU, so the device path is
  # tested without a GPU) and CLBlast (the OpenCL golden GEMM); a user with an OpenCL device
  # installs its vendor's ICD and these headers (docs/devices.md)
  pkgs+=(opencl-headers ocl-icd-opencl-dev pocl-opencl-icd libclblast-dev)
  # valgrind: CI runs a campaign under it; clang + libclang-rt-dev: the libFuzzer targets
  pkgs+=(valgrind clang libclang-rt-dev)
fi
[ "${PEAT_DEV_TOOLS:-0}" = 1 ] && pkgs+=(clang-format)
[ "$hip" = 1 ] && pkgs+=(hipcc libamdhip64-dev)
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
