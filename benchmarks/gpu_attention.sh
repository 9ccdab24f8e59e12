#!/usr/bin/env bash
# The attention GPU run on one lent H100 / H200, in one call: the wheels of .whl (gpu_env.sh),
# FlashInfer's attention modules (and its norm modules, for their tests) built in the background
# while every gpu-marked test runs, then bench_attention_quant.py's library table (paged decode
# against FlashInfer with irfuse's launch-shape sweep; prefill against FlashInfer and SDPA's
# backends). Outputs in $OUT. LIB_DECODE / LIB_PREFILL: the grids ('default' or a grid spec; ''
# skips); LIB_SWEEP: full or light (--lib-sweep); LIB_CONFIGS: launch shapes the light sweep
# also times (--lib-configs); LIB_FLAGS: more flags of the table (--fp8-cache: vLLM's FP8
# caches); T_TESTS, T_LIB: timeouts (s); TEST_JOBS: pytest-xdist workers; GPU_TESTS: test paths.
set -u
# shellcheck source=benchmarks/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"
step "FlashInfer builds (background)"
timeout "${T_FI:-400}" python3 benchmarks/attention_libs.py >"$OUT/fi_build.log" 2>&1 &
fi_pid=$!
timeout "${T_FI:-400}" python3 -c "from irfuse.kernels import flashinfer_norm as f
print(f.warm())" >"$OUT/fi_norm_build.log" 2>&1 &
if [ "${T_TESTS:-200}" != 0 ]; then
  step "GPU tests"
  # shellcheck disable=SC2086 (a list of paths)
  par=""  # pytest-xdist and pytest-timeout where the image has them
  python3 -c "import xdist" 2>/dev/null && par="-n ${TEST_JOBS:-4} --dist loadfile"
  python3 -c "import pytest_timeout" 2>/dev/null && par="$par --timeout 120"
  # shellcheck disable=SC2086 (lists of paths and flags)
  timeout "${T_TESTS:-200}" python3 -m pytest -v -p no:cacheprovider ${GPU_TESTS:-tests} -m gpu \
    $par -rfE >"$OUT/gpu_tests.log" 2>&1
  echo "pytest exit $?"
  grep -E "(FAILED|ERROR)" "$OUT/gpu_tests.log" | sort -u | head -n 40
  tail -n 2 "$OUT/gpu_tests.log"
fi
step "waiting for FlashInfer's attention builds"
wait "$fi_pid"
tail -n 12 "$OUT/fi_build.log"
step "attention: library table"
# shellcheck disable=SC2086 (a list of launch shapes)
timeout "${T_LIB:-270}" python3 benchmarks/bench_attention_quant.py --tokens '' --mla-tokens '' \
  --nvfp4-tokens '' --decode '' --lib-decode "${LIB_DECODE-default}" \
  --lib-prefill "${LIB_PREFILL-default}" --lib-sweep "${LIB_SWEEP:-full}" \
  --rounds "${ROUNDS:-2}" --rep "${REP:-6}" ${LIB_FLAGS:-} --lib-configs ${LIB_CONFIGS:-} \
  --lib-out "$OUT/lib.md" --json "$OUT/lib.json" 2>&1 | tee "$OUT/lib.log" | tail -n 60
step "done"
