#!/usr/bin/env bash
# A launch-shape sweep on the lent H200, beside the code Inductor generates for the same ops:
# the variant tests on the GPU (T_TESTS=0 skips them), Inductor's kernels for INDUCTOR_OPS (one
# tarball), then the sweep of SWEEP_OPS at SWEEP_TOKENS (and of SWEEP_OPS2 at SWEEP_TOKENS2, if
# set), of the configs matching SWEEP_ONLY if set (bench_norm_act_quant.py --only), timed in
# SWEEP_ROUNDS interleaved rounds if set (--rounds). Wheels as in
# gpu_batch.sh; outputs in $OUT. T_<STEP>: each step's timeout in seconds.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TORCHINDUCTOR_CACHE_DIR=/tmp/ic TRITON_CACHE_DIR=/tmp/tc \
  PYTHONUNBUFFERED=1
step() { echo "=== $1 ($(date +%T))"; }
if [ "${T_TESTS:-150}" != 0 ]; then
  step "variant tests on the GPU"
  timeout "${T_TESTS:-150}" python3 -m pytest -q -p no:cacheprovider -x \
    tests/kernels/test_norm_kernel_variants.py tests/kernels/test_act_kernel_variants.py -k "gpu" 2>&1 | tail -n 6
fi
if [ -n "${INDUCTOR_OPS:-}" ]; then
  step "Inductor's code for $INDUCTOR_OPS"
  timeout "${T_INDUCTOR:-120}" python3 benchmarks/inductor_code.py --ops "$INDUCTOR_OPS" \
    --hidden "${INDUCTOR_HIDDEN:-4096}" --tokens "${INDUCTOR_TOKENS:-1,4096}" \
    --out-dir /tmp/inductor-code 2>&1 | tail -n 3
  tar czf "$OUT/inductor-code.tar.gz" -C /tmp inductor-code
fi
sweep() {  # ops tokens name
  step "sweep of $1 at T $2"
  timeout "${T_SWEEP:-300}" python3 benchmarks/bench_norm_act_quant.py --jobs 14 --sweep \
    --ops "$1" --tokens "$2" ${SWEEP_ONLY:+--only "$SWEEP_ONLY"} \
    ${SWEEP_ROUNDS:+--rounds "$SWEEP_ROUNDS"} --out "$OUT/$3.md" \
    --json "$OUT/$3.json" 2>&1 \
    | grep -v "^    " | tail -n 40
}
sweep "$SWEEP_OPS" "${SWEEP_TOKENS:-1,4096,16384}" sweep
[ -n "${SWEEP_OPS2:-}" ] && sweep "$SWEEP_OPS2" "${SWEEP_TOKENS2:-1,16,4096}" sweep2
step "done"
