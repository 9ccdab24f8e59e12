"""Per-token and per-group FP8 spelled `x * s.reciprocal()` (vLLM's native QuantFP8), kept bit
for bit: the references with `reciprocal=True` equal the model's own spelling, and the norm
kernels (`norm_quant.py`) and the SiLU·Mul group kernel (`act_quant.py`), under
TRITON_INTERPRET=1 in a child process, equal the references in both readings. Every input here has elements where the two readings give different fp8 codes,
so a kernel or reference that ignored the flag fails."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest
import torch

HERE = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

import vllm_ops as V  # noqa: E402

from irfuse.kernels import act_quant_ref, norm_quant_ref, quant_ref  # noqa: E402

FP8 = torch.float8_e4m3fn
CASES = [(scheme, residual) for scheme in ("per_token", "group") for residual in (False, True)]
CASES.append(("silu_mul_group", False))


def _inputs(seed: int = 1, tokens: int = 16, hidden: int = 512):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, hidden, generator=g).to(torch.bfloat16)
    r = torch.randn(tokens, hidden, generator=g).to(torch.bfloat16)
    w = (torch.rand(hidden, generator=g) + 0.5).to(torch.bfloat16)
    return x, r, w


def _ref(scheme: str, residual: bool, reciprocal: bool):
    x, r, w = _inputs()
    res = r if residual else None
    if scheme == "silu_mul_group":
        return act_quant_ref.silu_mul_quant_fp8_group(torch.cat([x, r], -1), 128, False, False,
                                                      FP8, reciprocal=reciprocal)
    if scheme == "per_token":
        return norm_quant_ref.rms_norm_quant_fp8_per_token(x, w, None, 1e-6, 0.0, FP8, res,
                                                           reciprocal=reciprocal)
    return norm_quant_ref.rms_norm_quant_fp8_group(x, w, 1e-6, 0.0, 128, False, False, FP8, res,
                                                   reciprocal=reciprocal)


def _codes(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8)


def _group_by_reciprocal(x: torch.Tensor, g: int = 128):
    """A per-group quant spelled with the reciprocal, written out here."""
    xg = x.float().view(x.shape[0], -1, g)
    s = (xg.abs().amax(-1, keepdim=True).clamp(min=1e-10) / 448.0).clamp(min=1 / (448 * 512))
    q = (xg * s.reciprocal()).clamp(-448.0, 448.0).to(FP8).view(x.shape)
    return q, s.reshape(x.shape[0], -1)


def test_references_equal_the_reciprocal_spellings() -> None:
    x = _inputs(seed=3, tokens=64, hidden=1024)[0]
    q, s = quant_ref.quant_fp8_per_token(x, reciprocal=True)
    q_native, s_native = V.native_fp8_quant(x)
    assert torch.equal(s, s_native)
    assert torch.equal(_codes(q), _codes(q_native))
    divided, _ = quant_ref.quant_fp8_per_token(x)
    assert not torch.equal(_codes(divided), _codes(q))  # the readings differ on this input
    qg, _ = quant_ref.quant_fp8_group(x, 128, reciprocal=True)
    qg_spelled, _ = _group_by_reciprocal(x)
    assert torch.equal(_codes(qg), _codes(qg_spelled))
    assert not torch.equal(_codes(quant_ref.quant_fp8_group(x, 128)[0]), _codes(qg))


@pytest.mark.parametrize(("scheme", "residual"), CASES)
def test_the_two_readings_differ_on_the_kernel_inputs(scheme: str, residual: bool) -> None:
    """Keeps the kernel test below able to fail: its inputs have codes the spellings differ on."""
    assert not torch.equal(_codes(_ref(scheme, residual, True)[0]),
                           _codes(_ref(scheme, residual, False)[0]))


def _worker() -> None:
    import triton

    assert triton.knobs.runtime.interpret, "TRITON_INTERPRET=1 must be set before triton loads"
    from irfuse.kernels import act_quant, norm_quant

    results = {}
    for scheme, residual in CASES:
        x, r, w = _inputs()
        res = r if residual else None
        for reciprocal in (True, False):
            if scheme == "silu_mul_group":
                got = act_quant.silu_mul_quant_fp8_group(torch.cat([x, r], -1), 128, False,
                                                         False, FP8, reciprocal=reciprocal)
            elif scheme == "per_token":
                got = norm_quant.rms_norm_quant_fp8_per_token(x, w, None, 1e-6, 0.0, FP8, res,
                                                              reciprocal=reciprocal)
            else:
                got = norm_quant.rms_norm_quant_fp8_group(x, w, 1e-6, 0.0, 128, False, False,
                                                          FP8, res, reciprocal=reciprocal)
            want = _ref(scheme, residual, reciprocal)
            same = (torch.equal(_codes(got[0]), _codes(want[0])) and torch.equal(got[1], want[1])
                    and (not residual or torch.equal(got[2], want[2])))
            results[f"{scheme}-{residual}-{reciprocal}"] = same
    print(json.dumps(results))


@pytest.fixture(scope="module")
def interpreted() -> dict:
    from interpret_worker import run_worker

    return run_worker(__file__)


@pytest.mark.parametrize("reciprocal", [True, False])
@pytest.mark.parametrize(("scheme", "residual"), CASES)
def test_norm_kernels_match_the_reference(interpreted: dict, scheme: str, residual: bool,
                                          reciprocal: bool) -> None:
    assert interpreted[f"{scheme}-{residual}-{reciprocal}"]


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker()


def test_silu_mul_group_quant_by_reciprocal_fuses_bit_exact() -> None:
    """SiLU·Mul -> per-group FP8 written with the reciprocal: raised with `reciprocal`, fused,
    eager's codes (the two readings differ on this input, see above)."""
    import torch.nn.functional as F

    from irfuse.testing import assert_bit_exact, compile_and_run

    class Model(torch.nn.Module):
        def forward(self, x):
            d = x.shape[-1] // 2
            return _group_by_reciprocal(F.silu(x[:, :d]) * x[:, d:])

    x, r, _ = _inputs()
    compiled = compile_and_run(Model(), [torch.cat([x, r], -1)],
                               options={"optimization_level": 2})
    (report,) = compiled.reports
    assert report.raised["quant_fp8"] == 1
    assert report.fused("fuse-act-quant") == 1
    assert_bit_exact(compiled.outputs, compiled.eager)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("reciprocal", [True, False])
def test_per_token_quantizer_on_cuda_is_the_reference(reciprocal: bool) -> None:
    """The Triton per-token quantizer (no norm: nothing reordered) on CUDA gives the reference's
    codes and scales bit for bit in both readings, on inputs where the readings differ.

    The reference is computed on the CPU, where `amax / 448` is the IEEE quotient that
    docs/numerics.md defines: on CUDA torch computes `tensor / python_scalar` as a multiply by the
    float32 reciprocal (`amax * fp32(1/448)`), one rounding away, so a reference written with a
    Python divisor would not be the reference there. quant_ref divides by a device tensor for
    that reason; the last check holds it to giving the CPU's bits on CUDA too."""
    from irfuse.kernels import norm_quant

    x_cpu = _inputs(seed=3, tokens=64, hidden=1024)[0]
    q, s = norm_quant.quant_fp8_per_token(x_cpu.cuda(), reciprocal=reciprocal)
    want_q, want_s = quant_ref.quant_fp8_per_token(x_cpu, reciprocal=reciprocal)
    assert torch.equal(s.cpu(), want_s)
    assert torch.equal(_codes(q).cpu(), _codes(want_q))
    other, _ = quant_ref.quant_fp8_per_token(x_cpu, reciprocal=not reciprocal)
    assert not torch.equal(_codes(other), _codes(want_q))
    on_cuda_q, on_cuda_s = quant_ref.quant_fp8_per_token(x_cpu.cuda(), reciprocal=reciprocal)
    assert torch.equal(on_cuda_s.cpu(), want_s)
    assert torch.equal(_codes(on_cuda_q).cpu(), _codes(want_q))
