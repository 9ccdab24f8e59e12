#!/usr/bin/env bash
# The vLLM FP8-KV-cache GPU run on one lent H100 / H200, in one call: the wheels of .whl
# (gpu_env.sh; FlashInfer's too, for the decode baseline); FlashInfer's attention modules built in
# the background while the GPU tests of the FP8-cache paths run (the paged decode reading an FP8
# cache, the one-launch writes into vLLM's paged and latent FP8 caches); then the tables behind
# each run-time variant's entry (`<kernel>.fp8_cache` in choices/cuda_sm90.toml): the
# paged decode against FlashInfer's FP8-cache decode + the quant, QK norm + RoPE + the FP8 write,
# MLA's RoPE + the FP8 latent write, each write against a bf16 one and the split it replaces
# (probe_fp8_write.py); and the multimodal RoPE against vLLM's own kernel (mrope.py
# carried from .venv-vllm). Outputs in $OUT. T_TESTS, T_FI, T_BENCH, T_LIB: timeouts (s);
# LIB_DECODE: the decode grid (bench_attention_quant.py's --lib-decode).
set -u
# shellcheck source=benchmarks/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"
step "FlashInfer builds (background)"
timeout "${T_FI:-300}" python3 benchmarks/attention_libs.py >"$OUT/fi_build.log" 2>&1 &
fi_pid=$!
step "GPU tests"
timeout "${T_TESTS:-200}" python3 -m pytest -q -p no:cacheprovider -m "gpu and not dist" -rfE \
  tests/fusions/test_vllm_attention_gpu.py tests/fusions/test_vllm_mla_rope_kvcache.py \
  tests/kernels/test_attention_quant_kernel.py tests/kernels/test_qk_norm_rope_kernel.py \
  tests/kernels/test_mla_rope_cache_kernel.py >"$OUT/gpu_tests.log" 2>&1
echo "pytest exit $?"
grep -E "(FAILED|ERROR)" "$OUT/gpu_tests.log" | sort -u | head -n 30
tail -n 2 "$OUT/gpu_tests.log"
T=${T_BENCH:-90}
step "QK norm + RoPE + the FP8 paged-cache write"
timeout "$T" python3 benchmarks/bench_qk_norm_rope.py --fp8-cache --tokens "" \
  --out "$OUT/qk_fp8.md" 2>&1 | tail -n 20
step "MLA RoPE + the FP8 latent-cache write"
timeout "$T" python3 benchmarks/bench_mla_rope_cache.py --fp8 --out "$OUT/mla_fp8.md" 2>&1 \
  | tail -n 20
step "the FP8 writes against bf16 ones and the split they replace"
for div in rn_by rn; do  # the kernels' division, then the per-element one they replaced
  timeout "$T" python3 benchmarks/probe_fp8_write.py --div "$div" 2>&1 | tail -n 30
done
MROPE=.venv-vllm/lib/python3.11/site-packages/vllm/model_executor/layers/rotary_embedding/mrope.py
if [ -f "$MROPE" ]; then
  step "multimodal RoPE against vLLM's kernel"
  timeout "$T" python3 benchmarks/bench_mrope.py --vllm-mrope "$MROPE" 2>&1 | tail -n 15
fi
step "waiting for FlashInfer's attention builds"
wait "$fi_pid"
tail -n 5 "$OUT/fi_build.log"
step "paged decode over FP8 caches against FlashInfer"
timeout "${T_LIB:-200}" python3 benchmarks/bench_attention_quant.py --fp8-cache --tokens '' \
  --mla-tokens '' --nvfp4-tokens '' --decode '' --lib-prefill '' \
  --lib-decode "${LIB_DECODE:-qwen3-8b:16x2048,16x8192r,64x2048,64x8192r,256x2048r;llama70b-tp8:16x8192r,64x8192}" \
  --lib-sweep light --rounds 3 --rep 6 --lib-out "$OUT/lib_fp8.md" --json "$OUT/lib_fp8.json" \
  2>&1 | tail -n 30
step "done"
