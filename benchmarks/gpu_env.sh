#!/usr/bin/env bash
# Sourced by the GPU scripts: the environment of a lent GPU machine (torch and Triton there; xDSL
# and, optionally, FlashInfer carried as wheels in .whl). Sets OUT (the device tool's result
# folder, or ./gpu-out), PYTHONPATH, the compile caches and FLASHINFER_CUDA_ARCH_LIST (9.0a
# unless set), installs the wheels into /tmp/site and prints the GPUs and versions.
# FlashInfer's wheels (flashinfer_python + apache_tvm_ffi built for the machine's Python) are
# installed without their dependencies, apart from the others: a FlashInfer wheel that does not
# fit this Python must not cost xDSL. pytest-xdist and execnet wheels there let the GPU scripts run
# the tests in parallel.
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD
pipt() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$@"; }
FI_WHEELS=$(ls .whl/flashinfer_python-*.whl .whl/apache_tvm_ffi-*.whl 2>/dev/null)
OTHER_WHEELS=$(ls .whl/*.whl 2>/dev/null | grep -v -e /flashinfer_python- -e /apache_tvm_ffi-)
# shellcheck disable=SC2086 (lists of files)
[ -n "$OTHER_WHEELS" ] && pipt $OTHER_WHEELS && export PYTHONPATH=/tmp/site:$PWD
# shellcheck disable=SC2086
[ -n "$FI_WHEELS" ] && { pipt $FI_WHEELS || echo "FlashInfer wheels did not install"; } \
  && export PYTHONPATH=/tmp/site:$PWD
export FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:-9.0a}
export TORCHINDUCTOR_CACHE_DIR=/tmp/ic TRITON_CACHE_DIR=/tmp/tc PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton, xdsl; print('torch', torch.__version__, 'triton', triton.__version__)"
step() { echo "=== $1 ($(date +%T))"; }
