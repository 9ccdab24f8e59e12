#!/usr/bin/env bash
# The multi-GPU run of the collective fusions (issues 15 and 28), on one host of 2 to 8 GPUs:
#
#     STAGES="info tests bench_ar" bash benchmarks/gpu_multi.sh        # first call, < 8 minutes
#     STAGES="bench_tp" bash benchmarks/gpu_multi.sh                    # second call, < 8 minutes
#     STAGES="bench_gemm bench_tp_dynamic" bash benchmarks/gpu_multi.sh # third call, < 8 minutes
#
# Stages (STAGES, in this order; T_<STAGE> is each step's timeout in seconds):
#   info      GPUs, their topology (NVLink), torch / NCCL / Triton / FlashInfer versions, whether
#             flashinfer.comm imports and torch's symmetric memory is there;
#   tests     the 2-GPU tests of the fused all-reduce + RMSNorm (FlashInfer's trtllm fusion,
#             NCCL + Triton, symm_mem + Triton) and of the async-TP symmetric-memory ops
#             (row-wise scales in both of torch's forms; the group named as torch and as vLLM's
#             coordinator tp:0) (T_TESTS, 200);
#   bench_ar  benchmarks/bench_allreduce_rms.py at hidden 8192, T 1..8192, bf16 and static FP8
#             (FlashInfer, NCCL + Triton, symm_mem + Triton against NCCL + Inductor), with the
#             residual add and without (the first layer: norm output and all-reduced value;
#             FlashInfer with a zero residual), the group named as vLLM's tp:0; TP 2 and
#             (with 4 GPUs or more) TP 4 (T_BENCH_AR per TP size, 100);
#   bench_tp  benchmarks/bench_tp_e2e.py, the Llama-70B-shaped FP8 TP step, decode (16 tokens)
#             and prefill (4096, 8192): irfuse O2, + enable_sp, + fuse_gemm_comms (async TP),
#             + fuse_allreduce_rms, against Inductor with the same collectives; TP 2 and 4
#             (T_BENCH_TP per TP size, 220);
#   bench_gemm  benchmarks/bench_gemm_comms.py: the async-TP ops (all-gather + GEMM, GEMM +
#             reduce-scatter; bf16, FP8 per-tensor and row-wise sharded / replicated) against
#             NCCL + the GEMM, Llama-70B shapes, the group named as vLLM's tp:0
#             (T_BENCH_GEMM per TP size, 100);
#   bench_tp_dynamic  bench_tp_e2e.py with one dynamic range per variant (SP and async TP pad a
#             token count TP does not divide: 15, 4095, 8191) and vLLM's collectives on its
#             coordinator tp:0 (T_BENCH_TP per TP size, 220).
# TPS overrides the TP sizes ("2 4"; those beyond the GPU count are skipped), AR_TOKENS the
# all-reduce table's token counts, GEMM_TOKENS the async-TP table's, E2E_TOKENS, E2E_DYN_TOKENS
# and E2E_ROUNDS the end-to-end step's.
# Outputs (markdown tables and logs) go to $OUT (the device tool's result folder) or ./gpu-out.
# The device tool runs one command for at most 10 minutes: the timeouts keep each of the two
# calls above under 8 (STAGES defaults to every stage, up to 23 minutes).
# DRY_RUN=1 prints each step's command instead of running it (GPUS sets the GPU count there;
# tests/backend/test_gpu_multi_script.py parses them with the benchmarks' own parsers).
set -u
# shellcheck source=benchmarks/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"
STAGES=${STAGES:-info tests bench_ar bench_tp bench_gemm bench_tp_dynamic}
GPUS=${GPUS:-$(python3 -c "import torch; print(torch.cuda.device_count())")}
run() { if [ -n "${DRY_RUN:-}" ]; then echo "RUN: $*"; else "$@"; fi; }
TPS_RUN=""
for tp in ${TPS:-2 4}; do
  if [ "$tp" -le "$GPUS" ]; then TPS_RUN="$TPS_RUN $tp"; else echo "TP $tp: only $GPUS GPUs"; fi
done
has() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

if has info; then
  step "info"
  nvidia-smi topo -m 2>&1 | head -n 20
  timeout "${T_INFO:-60}" python3 - <<'PY' 2>&1 | tail -n 20
import torch
nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", nccl)
print("gpus", torch.cuda.device_count(), [torch.cuda.get_device_capability(i)
                                          for i in range(torch.cuda.device_count())])
from irfuse.kernels import allreduce_rms
comm = allreduce_rms.flashinfer_comm()
print("flashinfer.comm", "imports" if comm is not None else "does not import")
try:
    import torch.distributed._symmetric_memory as symm
    print("symmetric memory", "yes" if hasattr(symm, "enable_symm_mem_for_group") else "partial")
except ImportError as err:
    print("symmetric memory: no", err)
PY
fi

if has tests; then
  step "multi-GPU tests"
  run timeout "${T_TESTS:-200}" python3 -m pytest -q -p no:cacheprovider \
    tests/kernels/test_allreduce_rms_gpu.py tests/kernels/test_gemm_comms_gpu.py 2>&1 \
    | tee "$OUT/gpu_multi_tests.log" | tail -n 15
fi

if has bench_ar; then
  for tp in $TPS_RUN; do
    step "all-reduce + RMSNorm (+ FP8), TP $tp"
    run timeout "${T_BENCH_AR:-100}" python3 benchmarks/bench_allreduce_rms.py --world "$tp" \
      --hidden 8192 --quant none,fp8 --tokens "${AR_TOKENS:-1,4,16,64,256,1024,4096,8192}" \
      --residual add,none --group vllm --rounds 5 --out "$OUT/bench_allreduce_rms_tp$tp.md" \
      2>&1 | tail -n 40
  done
fi

if has bench_tp; then
  for tp in $TPS_RUN; do
    step "end-to-end TP $tp step, Llama-70B-shaped FP8 layers"
    # shellcheck disable=SC2086 (a list of token counts)
    run timeout "${T_BENCH_TP:-220}" python3 benchmarks/bench_tp_e2e.py --tp "$tp" --layers 2 \
      --tokens ${E2E_TOKENS:-16 4096 8192} --variants o2 sp async-tp ar-rms \
      --rounds "${E2E_ROUNDS:-15}" --out "$OUT/bench_tp_e2e_tp$tp.md" 2>&1 | tail -n 30
  done
fi
if has bench_gemm; then
  for tp in $TPS_RUN; do
    step "async-TP ops (all-gather + GEMM, GEMM + reduce-scatter), TP $tp"
    run timeout "${T_BENCH_GEMM:-100}" python3 benchmarks/bench_gemm_comms.py --world "$tp" \
      --tokens "${GEMM_TOKENS:-512,2048,8192}" --group vllm --rounds 5 \
      --out "$OUT/bench_gemm_comms_tp$tp.md" 2>&1 | tail -n 30
  done
fi

if has bench_tp_dynamic; then
  for tp in $TPS_RUN; do
    step "end-to-end TP $tp step, one dynamic range, vLLM's collectives"
    # shellcheck disable=SC2086 (a list of token counts)
    run timeout "${T_BENCH_TP:-220}" python3 benchmarks/bench_tp_e2e.py --tp "$tp" --layers 2 \
      --tokens ${E2E_DYN_TOKENS:-15 4095 8191} --variants o2 sp async-tp ar-rms \
      --shapes dynamic --collectives vllm --sp-min 1 --rounds "${E2E_ROUNDS:-15}" \
      --out "$OUT/bench_tp_e2e_dynamic_tp$tp.md" 2>&1 | tail -n 30
  done
fi
step "done"
