#!/usr/bin/env bash
# The GPU batch run on the lent H200 (torch 2.11, Triton 3.6; xDSL carried as wheels in .whl):
# GPU tests, the kernel benchmark, the end-to-end FP8 Llama benchmark and the demo at real size.
# Outputs go to $OUT (the device tool's result folder) or ./gpu-out.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export TORCHINDUCTOR_CACHE_DIR=/tmp/ic TRITON_CACHE_DIR=/tmp/tc PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton, xdsl; print('torch', torch.__version__, 'triton', triton.__version__)"
step() { echo "=== $1 ($(date +%T))"; }
step "GPU tests"
timeout "${T_TESTS:-150}" python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py \
  tests/test_raise_attention.py -k "gpu or cuda" 2>&1 | tail -n 8
step "kernel benchmark"
timeout "${T_KERNELS:-240}" python3 benchmarks/bench_norm_act_quant.py --jobs 8 \
  --out "$OUT/bench_norm_act_quant.md" --json "$OUT/bench_norm_act_quant.json" 2>&1 | tail -n 60
step "launch-shape sweep of add + RMSNorm + FP8 static (single pass vs two pass)"
timeout "${T_SWEEP:-150}" python3 benchmarks/bench_norm_act_quant.py --jobs 8 --sweep \
  --ops add_rms_static --tokens 1024,4096,16384 --out "$OUT/sweep_add_rms_static.md" 2>&1 | tail -n 30
step "end-to-end FP8 Llama"
timeout "${T_E2E:-240}" python3 benchmarks/bench_e2e_llama_fp8.py --layers 4 \
  --out "$OUT/bench_e2e_llama_fp8.md" 2>&1 | tail -n 20
step "demo"
timeout "${T_DEMO:-150}" python3 -m irfuse.cli demo --dump-dir /tmp/irfuse-demo 2>&1 | tail -n 30
step "done"
