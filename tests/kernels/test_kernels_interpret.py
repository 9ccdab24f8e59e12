"""Every Triton kernel against its torch reference, on the CPU under TRITON_INTERPRET=1.

The interpreter must be switched on before triton is first imported, and other tests in the
same pytest process import triton (through Inductor) without it. So one subprocess, started
once for this module with TRITON_INTERPRET=1, runs all the cases of `kernel_cases` (small T and
H, T=1, non-power-of-two H, bf16/fp16/fp32, every quant scheme, SiLU·Mul with [gate | up] and
with gate and up apart (sliced, contiguous, column-major up), the interpreter's fp8/bf16
casts routed through torch) and reports each case's verdict; each test asserts one case.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parents[1]  # tests/: the shared helpers
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import kernel_cases  # noqa: E402

CASES = kernel_cases.interpreter_cases()
CAST_CHECK = "__interpreter_casts__"


def _worker() -> None:
    """Run in the subprocess: all cases, one JSON object on the last line of stdout."""
    import triton

    assert triton.knobs.runtime.interpret, "TRITON_INTERPRET=1 must be set before triton loads"
    import torch
    import triton.runtime.interpreter as interpreter

    original = interpreter._convert_float
    from irfuse.kernels import act_quant

    x = torch.tensor([31.6, 1.0 + 2**-8 + 2**-12])
    fp8 = act_quant.quant_fp8_static(x, torch.ones(1)).float().tolist()
    # silu(30) * (1 + 2**-7) = 30.234375: bf16 rounds it to 30.25, truncation gives 30.125.
    xb = torch.tensor([30.0, 1.0 + 2**-7], dtype=torch.bfloat16)
    bf16 = act_quant.silu_mul(xb).float().tolist()
    results: dict = {CAST_CHECK: {"patched": interpreter._convert_float is not original,
                                  "fp8": fp8, "bf16": bf16}}
    for case in CASES:
        try:
            results[case.id] = kernel_cases.run_case(case, "cpu")
        except Exception as e:  # noqa: BLE001 (reported to the test of that case)
            results[case.id] = {"ok": False, "detail": f"raised {type(e).__name__}: {e}"}
    print(json.dumps(results))


@pytest.fixture(scope="module")
def results() -> dict:
    from interpret_worker import run_worker

    return run_worker(__file__)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_kernel_matches_reference(results: dict, case: kernel_cases.Case) -> None:
    r = results[case.id]
    assert r["ok"], r["detail"]


def test_interpreter_casts_route_through_torch(results: dict) -> None:
    # The patch is what makes exact comparisons possible: the unpatched interpreter rounds
    # 31.6 to 16 in fp8 and truncates float32 to bf16 (triton #8322).
    assert results[CAST_CHECK] == {"patched": True, "fp8": [32.0, 1.0], "bf16": [30.25]}


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker()
