#!/usr/bin/env bash
# The GPU batch run on the lent H200 (torch 2.11, Triton 3.6; xDSL carried as wheels in .whl):
# GPU tests, the kernel benchmark (and, with SWEEP_OPS, a launch-shape sweep), the end-to-end
# FP8 Llama benchmark and the demo at real size. T_<STEP> are the steps' timeouts in seconds.
# Outputs go to $OUT (the device tool's result folder) or ./gpu-out.
# GPU_TESTS narrows the GPU tests to some files or folders (default: tests); KERNEL_ROUNDS the
# kernel table's interleaved rounds (3); E2E_ROUNDS the end-to-end benchmark's rounds (41). Both
# benchmarks also time irfuse with programmatic dependent launch flipped (--pdl).
# FlashInfer is optional (its wheels in .whl, see gpu_env.sh; enough for its norm kernels), and its
# norm kernels are compiled (nvcc, about a minute) before the tests and the benchmark.
set -u
# shellcheck source=benchmarks/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"
step "FlashInfer JIT build of its norm kernels"
timeout "${T_FI_WARM:-300}" python3 -c "from irfuse.kernels import flashinfer_norm as f
print(f.warm())" 2>&1 | tail -n 5
step "GPU tests"
# Every test marked gpu (pyproject's marker) but the multi-GPU ones (dist: gpu_multi.sh runs
# them), found by pytest's own collection: no file list to keep in step.
# shellcheck disable=SC2086 (a list of files)
timeout "${T_TESTS:-300}" python3 -m pytest -q -p no:cacheprovider ${GPU_TESTS:-tests} \
  -m "gpu and not dist" 2>&1 | tee "$OUT/gpu_tests.log" | tail -n 8
step "kernel benchmark"
timeout "${T_KERNELS:-450}" python3 benchmarks/bench_norm_act_quant.py --jobs 12 \
  --rounds "${KERNEL_ROUNDS:-3}" --pdl --out "$OUT/bench_norm_act_quant.md" \
  --json "$OUT/bench_norm_act_quant.json" 2>&1 | tail -n 60
if [ -n "${SWEEP_OPS:-}" ]; then  # e.g. SWEEP_OPS=add_rms_static,silu_nvfp4
  step "launch-shape sweep of $SWEEP_OPS"
  timeout "${T_SWEEP:-300}" python3 benchmarks/bench_norm_act_quant.py --jobs 12 --sweep \
    --ops "$SWEEP_OPS" --tokens "${SWEEP_TOKENS:-1,16,4096,16384}" --out "$OUT/sweep.md" \
    --json "$OUT/sweep.json" 2>&1 | grep -v "^    " | tail -n 30
fi
step "attention-family kernels: QK norm + RoPE (+ KV write), attention + FP8"
timeout "${T_ATTN:-300}" python3 benchmarks/bench_qk_norm_rope.py --rounds 3 \
  --out "$OUT/bench_qk_norm_rope.md" --json "$OUT/bench_qk_norm_rope.json" 2>&1 | tail -n 30
timeout "${T_ATTN_QUANT:-480}" python3 benchmarks/bench_attention_quant.py --rounds 2 \
  --out "$OUT/bench_attention_quant.md" --json "$OUT/bench_attention_quant.json" 2>&1 | tail -n 30
step "end-to-end FP8 Llama"
timeout "${T_E2E:-240}" python3 benchmarks/bench_e2e_llama_fp8.py --layers 4 --rounds "${E2E_ROUNDS:-41}" \
  --pdl --out "$OUT/bench_e2e_llama_fp8.md" 2>&1 | tail -n 20
step "demo"
timeout "${T_DEMO:-150}" python3 -m irfuse.cli demo --dump-dir /tmp/irfuse-demo 2>&1 | tail -n 30
step "done"
