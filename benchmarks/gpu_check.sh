#!/usr/bin/env bash
# A short GPU check on the lent H200: the GPU tests (marked gpu, not dist) of the given files or
# folders (GPU_TESTS, default tests) and, with
# BENCH=1, the fuse_act_padding kernel table; xDSL and its dependencies carried as wheels in .whl.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/tc TORCHINDUCTOR_CACHE_DIR=/tmp/ic
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton, xdsl; print('torch', torch.__version__, 'triton', triton.__version__)"
echo "=== GPU tests ($(date +%T))"
# shellcheck disable=SC2086 (a list of files)
timeout "${T_TESTS:-300}" python3 -m pytest -q -p no:cacheprovider ${GPU_TESTS:-tests} \
  -m "gpu and not dist" 2>&1 | tee "$OUT/gpu_tests.log" | tail -n 15
if [ "${BENCH:-0}" = 1 ]; then
  echo "=== act padding kernel table ($(date +%T))"
  timeout "${T_BENCH:-200}" python3 benchmarks/bench_act_padding.py --jobs 12 --rounds 3 \
    --out "$OUT/bench_act_padding.md" 2>&1 | tail -n 30
fi
echo "=== done ($(date +%T))"
