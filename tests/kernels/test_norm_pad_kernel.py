"""(Residual add +) RMSNorm -> pad: the torch reference against model code, the Triton kernel
against the reference.

- The reference equals the unfused torch code bit for bit in the spellings models use: vLLM's
  (f32 add, `.to(dtype) * w`), Hugging Face Llama's (bf16 add, `w * h.to(dtype)`), GPT-OSS's
  (`(w * h).to(dtype)`: `weight_f32`), Gemma's (`1 + w`), without a residual, and the pad spelled
  `F.pad`, `new_zeros` + a slice assignment, or `cat` with zeros.
- The kernel, under TRITON_INTERPRET=1 on the CPU (a subprocess: the interpreter must be on
  before triton loads) at small sizes, and on the GPU at real sizes (marked `gpu`): `residual_out`
  and the pad columns bit for bit; the norm's columns within two units in the last place in
  bf16/fp16 (1e-5 relative in fp32: the sum of squares adds up in another order, and rsqrt may
  round otherwise), at most 1% of them off at all.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F

from irfuse.kernels import norm_pad_ref
from irfuse.kernels.compare import agreement

HERE = pathlib.Path(__file__).resolve().parents[1]  # tests/: the shared helpers
sys.path.insert(0, str(HERE))

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
EPS = 1e-5


def _inputs(t: int, h: int, dtype: torch.dtype, device: str = "cpu", seed: int = 0):
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(t, h, generator=gen, device=device).to(dtype)
    r = torch.randn(t, h, generator=gen, device=device).to(dtype)
    w = (torch.rand(h, generator=gen, device=device) + 0.5).to(dtype)
    return x, r, w


# --- the reference against model code ----------------------------------------------------------


def _vllm(x, r, w, pad):
    dtype = x.dtype
    h = x.float() + r.float()
    res = h.to(dtype)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return F.pad(h.to(dtype) * w, (0, pad)), res


def _hf(x, r, w, pad):
    s = x + r
    h = s.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    y = w * h.to(s.dtype)
    buf = y.new_zeros(*y.shape[:-1], y.shape[-1] + pad)
    buf[..., : y.shape[-1]] = y
    return buf, s


def _gpt_oss(x, r, w, pad):
    s = x + r
    h = s.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    y = (w * h).to(s.dtype)
    return torch.cat([y, y.new_zeros(*y.shape[:-1], pad)], dim=-1), s


def _gemma(x, r, w, pad):
    s = x + r
    h = s.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return torch.ops.aten.constant_pad_nd((h * (1.0 + w.float())).type_as(s), [0, pad]), s


SPELLINGS = {  # name: (model code, reference options)
    "vllm": (_vllm, {}),
    "hf": (_hf, {"round_sum": True}),
    "gpt_oss": (_gpt_oss, {"round_sum": True, "weight_f32": True}),
    "gemma": (_gemma, {"round_sum": True, "weight_offset": 1.0}),
}


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
@pytest.mark.parametrize(("hidden", "multiple"), [(2880, 256), (2880, 128), (3000, 128),
                                                  (100, 64)])
def test_reference_is_the_model_code_bit_for_bit(spelling, dtype, hidden, multiple):
    x, r, w = _inputs(6, hidden, DTYPES[dtype])
    model, opts = SPELLINGS[spelling]
    pad = -hidden % multiple
    y, res = model(x, r, w, pad)
    out, res_out = norm_pad_ref.add_rms_norm_pad(x, r, w, EPS, pad_multiple=multiple, **opts)
    assert out.shape == (6, hidden + pad) and out.dtype == x.dtype
    assert torch.equal(out, y) and torch.equal(res_out, res)
    # The options matter on these inputs (a reference that ignored them would fail somewhere).
    if spelling != "vllm" and dtype != "fp32":
        plain, _ = norm_pad_ref.add_rms_norm_pad(x, r, w, EPS, pad_multiple=multiple)
        assert not torch.equal(plain, y)


def test_reference_without_residual_and_with_low_and_value():
    x, _, w = _inputs(5, 96, torch.bfloat16)
    h = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + EPS)
    y = F.pad(h.to(x.dtype) * w, (3, 29), value=-1.25)
    got = norm_pad_ref.rms_norm_pad(x, w, EPS, low=3, pad_multiple=64, value=-1.25)
    assert got.shape == (5, 128) and torch.equal(got, y)
    assert torch.equal(norm_pad_ref.rms_norm_pad(x, w, EPS, low=3, high=29, value=-1.25), y)


def test_reference_pads_nothing_at_a_multiple_and_keeps_leading_dims():
    x, r, w = _inputs(8, 256, torch.bfloat16)
    out, res = norm_pad_ref.add_rms_norm_pad(x.view(2, 4, 256), r.view(2, 4, 256), w, EPS,
                                             pad_multiple=128)
    assert out.shape == (2, 4, 256) and res.shape == (2, 4, 256)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.float8_e4m3fn])
def test_reference_refuses_other_dtypes(dtype):
    x = torch.zeros(2, 16).to(dtype)
    with pytest.raises(ValueError, match=str(dtype)):
        norm_pad_ref.add_rms_norm_pad(x, x, torch.ones(16), EPS, pad_multiple=32)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "exactly one of pad_multiple= and high="),
    ({"pad_multiple": 32, "high": 16}, "exactly one of"),
    ({"high": -2}, "negative pad amount high=-2"),
    ({"low": -1, "high": 2}, "negative pad amount low=-1"),
    ({"pad_multiple": 0}, "pad_multiple must be >= 1"),
    ({"high": 4, "value": float("nan")}, "NaN pad value"),
])
def test_reference_refuses_bad_pads(kwargs, message):
    x, r, w = _inputs(2, 16, torch.bfloat16)
    with pytest.raises(ValueError, match=message):
        norm_pad_ref.add_rms_norm_pad(x, r, w, EPS, **kwargs)


def test_pad_amounts():
    assert norm_pad_ref.pad_amounts(2880, pad_multiple=256) == (0, 192)
    assert norm_pad_ref.pad_amounts(2880, pad_multiple=128) == (0, 64)
    assert norm_pad_ref.pad_amounts(4096, pad_multiple=128) == (0, 0)
    assert norm_pad_ref.pad_amounts(10, pad_multiple=8, low=3) == (3, 3)
    assert norm_pad_ref.padded_shape((4, 2880), 0, 192) == (4, 3072)


# --- the kernel against the reference ----------------------------------------------------------

# (T, H, pad options, reference options, dtype): non-power-of-two H, T=1, several rows a
# program, low and high pads, a pad value, every numerics option.
KERNEL_CASES = [
    (5, 40, {"pad_multiple": 32}, {}, "bf16"),
    (3, 2880, {"pad_multiple": 256}, {}, "bf16"),
    (1, 2880, {"pad_multiple": 128}, {"round_sum": True}, "bf16"),
    (7, 3000, {"pad_multiple": 128}, {"weight_f32": True, "round_sum": True}, "bf16"),
    (4, 200, {"low": 3, "high": 9, "value": -1.5}, {"weight_offset": 1.0}, "bf16"),
    (9, 64, {"high": 0}, {}, "bf16"),
    (6, 96, {"pad_multiple": 128}, {"round_sum": True}, "fp16"),
    (4, 120, {"pad_multiple": 64}, {"weight_f32": True}, "fp16"),
    (5, 130, {"pad_multiple": 256}, {}, "fp32"),
    (3, 48, {"low": 16, "high": 0, "value": float("inf")}, {}, "fp32"),
]


def _case_id(case) -> str:
    t, h, pad, opts, dtype = case
    extra = "-".join(f"{k}={v}" for k, v in {**pad, **opts}.items())
    return f"T{t}-H{h}-{dtype}-{extra}"


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({2: torch.int16, 4: torch.int32}[t.element_size()])


def check_kernel(case, device: str, residual: bool = True) -> dict:
    """Run the kernel and the reference on one case; {"ok": bool, "detail": str}."""
    from irfuse.kernels import norm_pad

    t, h, pad, opts, dtype = case
    x, r, w = _inputs(t, h, DTYPES[dtype], device, seed=t * 1000 + h)
    if residual:
        out, res = norm_pad.add_rms_norm_pad(x, r, w, EPS, **pad, **opts)
        ref, res_ref = norm_pad_ref.add_rms_norm_pad(x, r, w, EPS, **pad, **opts)
    else:
        opts = {k: v for k, v in opts.items() if k != "round_sum"}
        out, res, res_ref = norm_pad.rms_norm_pad(x, w, EPS, **pad, **opts), None, None
        ref = norm_pad_ref.rms_norm_pad(x, w, EPS, **pad, **opts)
    low, high = norm_pad_ref.pad_amounts(h, **{k: pad[k] for k in pad if k != "value"})
    problems = []
    if out.shape != ref.shape or out.dtype != ref.dtype or not out.is_contiguous():
        return {"ok": False, "detail": f"out {out.shape} {out.dtype} vs {ref.shape}"}
    if res is not None and not (torch.equal(_bits(res), _bits(res_ref)) and res.is_contiguous()):
        problems.append("residual_out differs")
    pad_cols = torch.cat([torch.arange(low), torch.arange(low + h, low + h + high)]).to(device)
    if not torch.equal(_bits(out[:, pad_cols]), _bits(ref[:, pad_cols])):
        problems.append("pad columns differ")
    y, y_ref = out[:, low:low + h], ref[:, low:low + h]
    step = 1e-5 if dtype == "fp32" else 2 * torch.finfo(DTYPES[dtype]).eps
    agr = agreement(y, y_ref, step_rel=step)
    if not agr.ok(tol=1e-3, max_mismatch=1.0 if dtype == "fp32" else 0.01):
        problems.append(f"norm columns: {agr}")
    return {"ok": not problems, "detail": "; ".join(problems) or f"ok ({agr})"}


def _worker() -> None:
    import json

    import triton

    assert triton.knobs.runtime.interpret, "TRITON_INTERPRET=1 must be set before triton loads"
    results = {}
    for case in KERNEL_CASES:
        for residual in (True, False):
            key = f"{_case_id(case)}-residual={residual}"
            try:
                results[key] = check_kernel(case, "cpu", residual)
            except Exception as e:  # noqa: BLE001 (reported to the test of that case)
                results[key] = {"ok": False, "detail": f"raised {type(e).__name__}: {e}"}
    from irfuse.kernels import norm_pad

    x, r, w = _inputs(0, 40, torch.bfloat16)
    out, res = norm_pad.add_rms_norm_pad(x, r, w, EPS, pad_multiple=64)
    results["empty"] = {"ok": out.shape == (0, 64) and res.shape == (0, 40), "detail": ""}
    print(json.dumps(results))


@pytest.fixture(scope="module")
def interpreted() -> dict:
    from interpret_worker import run_worker

    return run_worker(__file__)


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("case", KERNEL_CASES, ids=_case_id)
def test_kernel_matches_reference_interpreted(interpreted, case, residual):
    r = interpreted[f"{_case_id(case)}-residual={residual}"]
    assert r["ok"], r["detail"]


def test_kernel_takes_no_rows_interpreted(interpreted):
    assert interpreted["empty"]["ok"]


GPU_CASES = [(t, h, {"pad_multiple": m}, opts, "bf16")
             for t in (1, 16, 4096) for h, m in ((2880, 128), (2880, 256), (5760, 256),
                                                 (3000, 128), (4096, 128))
             for opts in ({}, {"round_sum": True, "weight_f32": True})] + [
    (4096, 2880, {"pad_multiple": 256}, {"round_sum": True}, "fp16"),
    (4096, 2880, {"pad_multiple": 256}, {}, "fp32"),
    (256, 7000, {"low": 8, "high": 100, "value": 2.0}, {"weight_offset": 1.0}, "bf16"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=_case_id)
def test_kernel_matches_reference_on_gpu(case):
    for residual in (True, False):
        r = check_kernel(case, "cuda", residual)
        assert r["ok"], r["detail"]


@pytest.mark.gpu
def test_kernel_refuses_cpu_tensors_and_is_captured_by_a_cuda_graph():
    from irfuse.kernels import norm_pad

    x, r, w = _inputs(4, 2880, torch.bfloat16)
    with pytest.raises(RuntimeError, match="need CUDA tensors"):
        norm_pad.add_rms_norm_pad(x, r, w, EPS, pad_multiple=256)
    x, r, w = _inputs(64, 2880, torch.bfloat16, "cuda")
    norm_pad.add_rms_norm_pad(x, r, w, EPS, pad_multiple=256)  # compiled outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out, res = norm_pad.add_rms_norm_pad(x, r, w, EPS, pad_multiple=256)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    ref, res_ref = norm_pad.add_rms_norm_pad(x, r, w, EPS, pad_multiple=256)
    assert torch.equal(out, ref) and torch.equal(res, res_ref)


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker()
