#!/usr/bin/env bash
# The vLLM-graph GPU run on one lent H100 / H200, in one call: the wheels of .whl (gpu_env.sh);
# FlashInfer's decode and prefill modules built in the background (vllm_standin.py) while the GPU
# tests of the fusions on vLLM's attention ops run; then bench_e2e_vllm.py (stand-in check, the
# end-to-end table of Inductor / irfuse / irfuse with the vLLM-op kernels, kernel profiles, the
# attention + quant table). Outputs in $OUT. T_TESTS, T_FI, T_BENCH: timeouts (s); TEST_JOBS:
# pytest-xdist workers; GPU_TESTS: test paths; ROUNDS: interleaved rounds; VARIANTS: the irfuse
# variants beside Inductor; PROFILE='' leaves out the kernel profiles; BENCH_ARGS: more arguments
# for the benchmark (e.g. --decode-configs ...). The multi-GPU tests (dist) are gpu_multi.sh's.
set -u
# shellcheck source=benchmarks/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"
step "FlashInfer builds (background, decode and prefill side by side)"
timeout "${T_FI:-300}" python3 benchmarks/vllm_standin.py decode >"$OUT/fi_build.log" 2>&1 &
fi_pid=$!
timeout "${T_FI:-300}" python3 benchmarks/vllm_standin.py prefill >"$OUT/fi_build2.log" 2>&1 &
fi_pid2=$!
if [ "${T_TESTS:-150}" != 0 ]; then
  step "GPU tests"
  par=""
  python3 -c "import xdist" 2>/dev/null && par="-n ${TEST_JOBS:-4} --dist load"
  # shellcheck disable=SC2086 (lists of paths and flags)
  timeout "${T_TESTS:-150}" python3 -m pytest -v -p no:cacheprovider \
    ${GPU_TESTS:-tests/fusions/test_vllm_attention_gpu.py} -m "gpu and not dist" $par -rfE \
    >"$OUT/gpu_tests.log" 2>&1
  echo "pytest exit $?"
  grep -E "(FAILED|ERROR)" "$OUT/gpu_tests.log" | sort -u | head -n 20
  tail -n 2 "$OUT/gpu_tests.log"
fi
step "waiting for FlashInfer's builds"
wait "$fi_pid" "$fi_pid2"
tail -q -n 2 "$OUT/fi_build.log" "$OUT/fi_build2.log"
step "end-to-end benchmark"
# shellcheck disable=SC2086 (a list of arguments)
timeout "${T_BENCH:-300}" python3 benchmarks/bench_e2e_vllm.py --check --attn-table ${PROFILE---profile} \
  --variants ${VARIANTS:-irfuse irfuse-vllm-kernels-off} --rounds "${ROUNDS:-15}" \
  --out "$OUT/e2e_vllm.md" \
  ${BENCH_ARGS:-} >"$OUT/e2e_vllm.log" 2>&1
echo "bench exit $?"
grep -v "^  " "$OUT/e2e_vllm.log" | grep -v "^$" | tail -n 45
step "done"
