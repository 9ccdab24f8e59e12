"""The irfuse:: custom ops: schemas, fake implementations, CPU = reference, fused vs unfused.

The SiLU·Mul ops run in both forms: x = [gate | up], and gate and up apart (the optional
argument `up`, here a column slice of a wider tensor, as cut from a merged GEMM output). The static
fused ops also run with their argument `divide=True` (quantize `y / s`, not `y * (1 / s)`), and the
residual fused ops with their last argument `round_sum=True` (normalize the sum rounded to the
model dtype, as Hugging Face's `hidden = residual + hidden` feeds its norm)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import irfuse.emit.custom_ops as custom_ops
from irfuse.emit import kernel_choice
from irfuse.fusions import FUSIONS, kernel_decl
from irfuse.kernels import act_quant_ref, dispatch, norm_quant_ref, quant_ref
from irfuse.kernels.compare import agreement, fp8_agreement

ROOT = pathlib.Path(__file__).resolve().parents[2]
FP8 = torch.float8_e4m3fn
ops = torch.ops.irfuse


def _inputs(shape: tuple[int, ...] = (4, 256), dtype: torch.dtype = torch.bfloat16) -> dict:
    g = torch.Generator().manual_seed(7)
    h = shape[-1]
    return {"x": torch.randn(*shape, generator=g).to(dtype),
            "r": torch.randn(*shape, generator=g).to(dtype),
            "xa": torch.randn(*shape[:-1], 2 * h, generator=g).to(dtype),
            "w": (torch.rand(h, generator=g) + 0.5).to(dtype),
            "s": torch.tensor([0.03]), "s2": torch.tensor([0.05]), "ub": torch.tensor([1.5])}


def _calls(d: dict) -> list[tuple[str, tuple]]:
    """(op name, args) for every op, on the inputs of `_inputs`."""
    x, r, xa, w, s, s2, ub = d["x"], d["r"], d["xa"], d["w"], d["s"], d["s2"], d["ub"]
    return [
        ("rms_norm", (x, w, 1e-6)),
        ("add_rms_norm", (x, r, w, 1e-5, 1.0)),
        ("silu_mul", (xa,)),
        ("quant_fp8_static", (x, s)),
        ("quant_fp8_per_token", (x, ub)),
        ("quant_fp8_per_tensor", (x, torch.float8_e4m3fnuz)),
        ("quant_fp8_group", (x, 64, True, True)),
        ("quant_nvfp4", (x, s)),
        ("rms_norm_quant_fp8_static", (x, w, [s, s2], 1e-6, 0.0, FP8)),
        ("add_rms_norm_quant_fp8_static", (x, r, w, [s], 1e-6, 0.0, FP8)),
        ("rms_norm_quant_fp8_per_token", (x, w, None, 1e-6, 0.0, FP8)),
        ("add_rms_norm_quant_fp8_per_token", (x, r, w, ub, 1e-6, 0.0, FP8)),
        ("rms_norm_quant_fp8_group", (x, w, 1e-6, 0.0, 128, True, False, FP8)),
        ("add_rms_norm_quant_fp8_group", (x, r, w, 1e-6, 0.0, 64, False, True, FP8)),
        ("silu_mul_quant_fp8_static", (xa, s, FP8)),
        ("silu_mul_quant_fp8_group", (xa, 128, True, False, FP8)),
        ("silu_mul_quant_nvfp4", (xa, s)),
    ]


def _gate_up(d: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Gate and up apart, both non-contiguous: column slices of wider tensors."""
    h = d["x"].shape[-1]
    big = torch.cat([d["r"], d["x"], d["r"]], -1)
    return d["xa"][..., :h], big[..., h:2 * h]


def _two_tensor_calls(d: dict) -> list[tuple[str, tuple]]:
    """(op name, args) for each SiLU·Mul op in its two-tensor form."""
    gate, up, s = *_gate_up(d), d["s"]
    return [
        ("silu_mul", (gate, up)),
        ("silu_mul_quant_fp8_static", (gate, s, FP8, up)),
        ("silu_mul_quant_fp8_group", (gate, 64, True, True, FP8, up)),
        ("silu_mul_quant_nvfp4", (gate, s, up)),
    ]


def _divide_calls(d: dict) -> list[tuple[str, tuple]]:
    """(op name, args) for each static fused op with `divide=True` (its last argument)."""
    x, r, xa, w, s, s2 = d["x"], d["r"], d["xa"], d["w"], d["s"], d["s2"]
    gate, up = _gate_up(d)
    return [
        ("rms_norm_quant_fp8_static", (x, w, [s, s2], 1e-6, 0.0, FP8, True)),
        ("add_rms_norm_quant_fp8_static", (x, r, w, [s], 1e-6, 0.0, FP8, True)),
        ("silu_mul_quant_fp8_static", (xa, s, FP8, None, True)),
        ("silu_mul_quant_fp8_static", (gate, s, FP8, up, True)),
    ]


def _round_sum_calls(d: dict) -> list[tuple[str, tuple]]:
    """(op name, args) for each residual fused op with `round_sum=True` (its last argument)."""
    x, r, w, s, s2, ub = d["x"], d["r"], d["w"], d["s"], d["s2"], d["ub"]
    return [
        ("add_rms_norm_quant_fp8_static", (x, r, w, [s, s2], 1e-6, 0.0, FP8, True, True)),
        ("add_rms_norm_quant_fp8_per_token", (x, r, w, ub, 1e-6, 0.0, FP8, True)),
        ("add_rms_norm_quant_fp8_group", (x, r, w, 1e-6, 1.0, 64, True, False, FP8, True)),
    ]


def _declared_calls(shape: tuple[int, ...]) -> list[tuple[str, tuple]]:
    """The calls kernels declare for themselves (`Kernel.examples`), for an x of `shape`."""
    return [(name, args) for name, k in kernel_choice.kernels().items()
            for args in k.example_calls(shape)]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (fp8 compared as bytes), same dtype and strides."""
    if a.dtype != b.dtype or a.shape != b.shape or a.stride() != b.stride():
        return False
    if a.dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        a, b = a.view(torch.uint8), b.view(torch.uint8)
    return bool(torch.equal(a, b))


def _flat(out: object) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for o in out for t in _flat(o)]


def test_every_schema_is_registered_exactly() -> None:
    assert set(custom_ops.OPS) == set(kernel_choice.kernels())
    for name, schema in ((n, k.schema) for n, k in kernel_choice.kernels().items()):
        registered = str(getattr(ops, name).default._schema)
        assert registered.startswith(f"irfuse::{name}(")
        # The dtype default prints as its enum number and 0.0 as "0."; the rest verbatim.
        printed = re.sub(r"=0\.([,)])", r"=0.0\1", registered.replace("=24", "=float8_e4m3fn"))
        assert printed == f"irfuse::{name}{schema}"


@pytest.mark.parametrize("shape", [(4, 256), (2, 3, 128)])
def test_fake_outputs_match_real_shapes_dtypes_strides(shape: tuple[int, ...]) -> None:
    d = _inputs(shape)
    calls = _calls(d) + _two_tensor_calls(d) + _divide_calls(d) + _round_sum_calls(d)
    for name, args in calls + _declared_calls(shape):
        real = _flat(getattr(ops, name)(*args))
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fake_args = tuple(
                [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in a]
                if isinstance(a, list) else
                mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)
            fake = _flat(getattr(ops, name)(*fake_args))
        assert len(fake) == len(real), name
        for f, r in zip(fake, real, strict=True):
            assert (f.shape, f.dtype, f.stride()) == (r.shape, r.dtype, r.stride()), name


def test_column_major_and_nvfp4_layouts() -> None:
    d = _inputs((5, 256))
    _, s = ops.rms_norm_quant_fp8_group(d["x"], d["w"], 1e-6, 0.0, 128, True, False, FP8)
    assert s.shape == (5, 2) and s.stride() == (1, 5)
    q, sf = ops.silu_mul_quant_nvfp4(d["xa"], d["s"])
    assert q.shape == (5, 128) and q.dtype == torch.uint8
    assert sf.shape == (128, 16) and sf.dtype == FP8


@pytest.mark.parametrize("name", list(custom_ops.OPS))
def test_opcheck(name: str) -> None:
    calls = dict(_calls(_inputs((3, 128))))
    for declared, args in _declared_calls((3, 128)):
        calls.setdefault(declared, args)
    if name not in calls and "str group" in str(getattr(ops, name).default._schema):
        pytest.skip("a collective: opchecked under a process group in "
                    "tests/fusions/test_fuse_allreduce_rms.py")
    if name not in calls and " layer_name" in str(getattr(ops, name).default._schema):
        pytest.skip("reads vLLM's forward context: opchecked under the stand-in context in "
                    "tests/fusions/test_vllm_attention_fusions.py")
    torch.library.opcheck(getattr(ops, name).default, calls[name])


@pytest.mark.parametrize("name,args", _declared_calls((3, 128)),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_opcheck_declared_examples(name: str, args: tuple) -> None:
    torch.library.opcheck(getattr(ops, name).default, args)


@pytest.mark.parametrize("name,args", _two_tensor_calls(_inputs((3, 128))),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_opcheck_two_tensor_form(name: str, args: tuple) -> None:
    torch.library.opcheck(getattr(ops, name).default, args)


@pytest.mark.parametrize("name,args", _divide_calls(_inputs((3, 128))),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_opcheck_divide(name: str, args: tuple) -> None:
    torch.library.opcheck(getattr(ops, name).default, args)


@pytest.mark.parametrize("name,args", _round_sum_calls(_inputs((3, 128))),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_opcheck_round_sum(name: str, args: tuple) -> None:
    torch.library.opcheck(getattr(ops, name).default, args)


def _hf_add_norm(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face's residual add + RMSNorm, written as its models write it: the add in the
    model dtype, then the norm of that rounded sum in float32. Returns (normed, new residual)."""
    h = r + x
    h32 = h.to(torch.float32)
    normed = h32 * torch.rsqrt(h32.pow(2).mean(-1, keepdim=True) + eps)
    return w * normed.to(h.dtype), h


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_round_sum_is_the_model_dtype_add_chain_bit_for_bit(dtype: torch.dtype) -> None:
    # With round_sum the residual fused ops quantize what Hugging Face's add + RMSNorm computes,
    # bit for bit, whatever the scheme; without it they normalize the float32 sum, and some codes
    # move (the two sums differ by up to half a unit in the last place of the model dtype).
    d = _inputs((16, 256), dtype)
    x, r, w, s, ub = d["x"], d["r"], d["w"], torch.tensor([0.015]), d["ub"]
    y, h = _hf_add_norm(x, r, w, 1e-6)
    static = _chain(y, s, True), None
    per_token = ops.quant_fp8_per_token(y, ub)
    group = ops.quant_fp8_group(y, 64, True, False)
    cases = [
        (lambda rs: ops.add_rms_norm_quant_fp8_static(x, r, w, [s], 1e-6, 0.0, FP8, True, rs),
         static),
        (lambda rs: ops.add_rms_norm_quant_fp8_per_token(x, r, w, ub, 1e-6, 0.0, FP8,
                                                         round_sum=rs), per_token),
        (lambda rs: ops.add_rms_norm_quant_fp8_group(x, r, w, 1e-6, 0.0, 64, True, False, FP8,
                                                     rs), group),
    ]
    for fused, (q_chain, s_chain) in cases:
        q, *rest = _flat(fused(True))
        assert _same(q, q_chain)
        if s_chain is not None:
            assert _same(rest[0], s_chain)
        assert _same(rest[-1], h)  # the new residual is the model's sum either way
        q_f32, *rest_f32 = _flat(fused(False))
        assert _same(rest_f32[-1], h)
        moved = int((q.view(torch.uint8) != q_f32.view(torch.uint8)).sum())
        assert 0 < moved < 0.05 * q.numel()


def _chain(y: torch.Tensor, s: torch.Tensor, divide: bool) -> torch.Tensor:
    """A static quant as a model spells it: `fp8(clamp(y.float() / s))` with `divide`, else
    `fp8(clamp(y.float() * (1 / s)))`."""
    scaled = y.float() / s if divide else y.float() * s.reciprocal()
    return scaled.clamp(-448.0, 448.0).to(FP8)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_divide_is_the_division_chain_bit_for_bit(dtype: torch.dtype) -> None:
    # 16 x 256 values, scales 0.015 and 0.0075 (1 / s is 5e-8 off in float32): some values
    # land on fp8 ties, where `y / s` and `y * (1 / s)` round apart; `divide=True` gives the
    # division's codes, the default the product's.
    d = _inputs((16, 256), dtype)
    x, r, xa, w = d["x"], d["r"], d["xa"], d["w"]
    s, s2 = torch.tensor([0.015]), torch.tensor([0.0075])
    gate, up = _gate_up(d)
    y, _ = ops.add_rms_norm(x, r, w, 1e-6)
    cases = [
        (lambda div: ops.add_rms_norm_quant_fp8_static(x, r, w, [s], 1e-6, 0.0, FP8, div)[0],
         y, s),
        (lambda div: ops.rms_norm_quant_fp8_static(x, w, [s, s2], 1e-6, 0.0, FP8,
                                                   divide=div)[1],
         ops.rms_norm(x, w, 1e-6), s2),
        (lambda div: ops.silu_mul_quant_fp8_static(xa, s, FP8, divide=div), ops.silu_mul(xa), s),
        (lambda div: ops.silu_mul_quant_fp8_static(gate, s, FP8, up, div),
         ops.silu_mul(gate, up), s),
    ]
    for fused, value, scale in cases:
        quotient, product = _chain(value, scale, True), _chain(value, scale, False)
        assert _same(fused(True), quotient)
        assert _same(fused(False), product)
        moved = int((quotient.view(torch.uint8) != product.view(torch.uint8)).sum())
        assert 0 < moved < 0.02 * quotient.numel()


@pytest.mark.parametrize("shape", [(4, 256), (2, 3, 128)])
def test_two_tensor_form_equals_concatenated_form(shape: tuple[int, ...]) -> None:
    d = _inputs(shape)
    gate, up = _gate_up(d)
    assert not up.is_contiguous() and up.stride(-1) == 1
    cat = torch.cat([gate, up], -1)
    for name, args in _two_tensor_calls(d):
        # The concatenated form: the same arguments with `up` dropped and x = [gate | up].
        one = (cat, *args[1:-1])
        got = _flat(getattr(ops, name)(*args))
        assert all(_same(a, b) for a, b in zip(got, _flat(getattr(ops, name)(*one)),
                                               strict=True)), name
        # `up` by keyword is the same call.
        by_kw = _flat(getattr(ops, name)(*args[:-1], up=up))
        assert all(_same(a, b) for a, b in zip(got, by_kw, strict=True)), name
    assert _same(ops.silu_mul(gate, up), act_quant_ref.silu_mul(gate, up))
    assert _same(ops.silu_mul(gate, up), torch.nn.functional.silu(gate) * up)


def test_cpu_implementation_is_the_reference() -> None:
    d = _inputs()
    x, r, xa, w, s, ub = d["x"], d["r"], d["xa"], d["w"], d["s"], d["ub"]
    pairs = [
        (ops.add_rms_norm(x, r, w, 1e-5, 1.0), norm_quant_ref.rms_norm(x, w, 1e-5, 1.0, r)),
        (ops.rms_norm_quant_fp8_per_token(x, w, ub, 1e-6, 0.0, FP8),
         norm_quant_ref.rms_norm_quant_fp8_per_token(x, w, ub, 1e-6, 0.0, FP8)[:2]),
        (ops.add_rms_norm_quant_fp8_group(x, r, w, 1e-6, 0.0, 64, True, True, FP8),
         norm_quant_ref.rms_norm_quant_fp8_group(x, w, 1e-6, 0.0, 64, True, True, FP8, r)),
        (ops.silu_mul_quant_nvfp4(xa, s), act_quant_ref.silu_mul_quant_nvfp4(xa, s)),
        (ops.quant_fp8_group(x, 128), quant_ref.quant_fp8_group(x, 128)),
    ]
    for got, ref in pairs:
        for a, b in zip(_flat(got), _flat(ref), strict=True):
            assert _same(a, b)


@pytest.mark.parametrize("dtype,tol", [(torch.bfloat16, 1e-2), (torch.float16, 2e-3)])
def test_fused_norm_quant_matches_unfused_chain(dtype: torch.dtype, tol: float) -> None:
    d = _inputs((8, 256), dtype)
    x, r, w, s, ub = d["x"], d["r"], d["w"], d["s"], d["ub"]
    y, res = ops.add_rms_norm(x, r, w, 1e-6)
    *qs, res_f = ops.add_rms_norm_quant_fp8_static(x, r, w, [s, d["s2"]], 1e-6, 0.0, FP8)
    assert torch.equal(res_f, res)
    for q, sc in zip(qs, (s, d["s2"]), strict=True):
        assert fp8_agreement(q, sc, ops.quant_fp8_static(y, sc), sc).ok(tol, 0.01)
    q, st, _ = ops.add_rms_norm_quant_fp8_per_token(x, r, w, ub, 1e-6, 0.0, FP8)
    q_u, st_u = ops.quant_fp8_per_token(y, ub)
    assert fp8_agreement(q, st, q_u, st_u).ok(tol, 0.01)
    q, sg, _ = ops.add_rms_norm_quant_fp8_group(x, r, w, 1e-6, 0.0, 128, False, False, FP8)
    q_u, sg_u = ops.quant_fp8_group(y, 128)
    assert fp8_agreement(q, sg, q_u, sg_u, 128).ok(tol, 0.01)
    # The plain form (no residual) too.
    y0 = ops.rms_norm(x, w, 1e-6)
    (q0,) = ops.rms_norm_quant_fp8_static(x, w, [s], 1e-6, 0.0, FP8)
    assert fp8_agreement(q0, s, ops.quant_fp8_static(y0, s), s).ok(tol, 0.01)


def test_fused_act_quant_matches_unfused_chain() -> None:
    d = _inputs((8, 256))
    xa, s = d["xa"], d["s"]
    y = ops.silu_mul(xa)
    q = ops.silu_mul_quant_fp8_static(xa, s, FP8)
    assert fp8_agreement(q, s, ops.quant_fp8_static(y, s), s).ok(1e-3, 0.01)
    q, sg = ops.silu_mul_quant_fp8_group(xa, 64, False, False, FP8)
    q_u, sg_u = ops.quant_fp8_group(y, 64)
    assert fp8_agreement(q, sg, q_u, sg_u, 64).ok(5e-2, 0.01)
    gs = (448.0 * 6.0 / y.float().abs().amax()).reshape(1)
    p, sf = ops.silu_mul_quant_nvfp4(xa, gs)
    p_u, sf_u = ops.quant_nvfp4(y, gs)
    deq, deq_u = quant_ref.dequant_nvfp4(p, sf, gs), quant_ref.dequant_nvfp4(p_u, sf_u, gs)
    assert agreement(deq, deq_u, 0.5).ok(1e-1, 0.01)
    # And the quantization itself is near the unquantized product: e2m1 keeps 3 bits of
    # magnitude, so Gaussian data dequantizes with a mean relative error of about 12%.
    assert agreement(deq, y.float(), 1.0).mean_rel_err < 0.15


def test_two_tensor_form_errors() -> None:
    gate = torch.ones(4, 64, dtype=torch.bfloat16)
    bad_shape = torch.ones(4, 32, dtype=torch.bfloat16)
    bad_dtype = torch.ones(4, 64, dtype=torch.float16)
    s = torch.tensor([0.1])
    calls = [
        lambda up: ops.silu_mul(gate, up),
        lambda up: ops.silu_mul_quant_fp8_static(gate, s, FP8, up),
        lambda up: ops.silu_mul_quant_fp8_group(gate, 32, False, False, FP8, up),
        lambda up: ops.silu_mul_quant_nvfp4(gate, s, up),
    ]
    for call in calls:
        for up in (bad_shape, bad_dtype):
            with pytest.raises(ValueError, match="must have the gate's shape and dtype"):
                call(up)
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            with pytest.raises(ValueError, match="must have the gate's shape and dtype"):
                call(mode.from_tensor(bad_shape))
    # The output width is the gate's (not half of it): a group must divide it, NVFP4 blocks too.
    g48 = torch.ones(2, 48, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="group size 32 does not divide"):
        ops.silu_mul_quant_fp8_group(g48, 32, False, False, FP8, g48)
    with pytest.raises(ValueError, match="multiple of 16"):
        ops.silu_mul_quant_nvfp4(g48[:, :40], s, g48[:, :40])
    # An odd gate width is fine in the two-tensor form (no halving).
    odd = torch.randn(2, 33).to(torch.bfloat16)
    assert ops.silu_mul(odd, odd).shape == (2, 33)


def test_errors_are_clear_in_eager_and_under_fake() -> None:
    x = torch.ones(2, 96, dtype=torch.float64)
    w = torch.ones(96, dtype=torch.float64)
    with pytest.raises(ValueError, match="unsupported input dtype"):
        ops.rms_norm(x, w, 1e-6)
    xb = torch.ones(2, 96, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="group size 64 does not divide"):
        ops.quant_fp8_group(xb, 64)
    with FakeTensorMode() as mode:
        fx = mode.from_tensor(xb)
        fw = mode.from_tensor(torch.ones(96, dtype=torch.bfloat16))
        with pytest.raises(ValueError, match="group size 64 does not divide"):
            ops.rms_norm_quant_fp8_group(fx, fw, 1e-6, 0.0, 64, False, False, FP8)
        with pytest.raises(ValueError, match="weight shape"):
            ops.rms_norm(fx, mode.from_tensor(torch.ones(32, dtype=torch.bfloat16)), 1e-6)


def test_ops_trace_with_dynamic_token_count() -> None:
    def fn(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, s: torch.Tensor):
        *qs, res = ops.add_rms_norm_quant_fp8_static(x, r, w, [s], 1e-6, 0.0, FP8)
        q, sc = ops.silu_mul_quant_fp8_group(torch.cat([x, r], -1), 64, True, False, FP8)
        q2 = ops.silu_mul_quant_fp8_static(x, s, FP8, torch.cat([r, x], -1)[:, :x.shape[-1]])
        return qs[0], res, q, sc, q2

    compiled = torch.compile(fn, backend="aot_eager", dynamic=True, fullgraph=True)
    for t in (3, 5):
        d = _inputs((t, 128))
        got = compiled(d["x"], d["r"], d["w"], d["s"])
        ref = fn(d["x"], d["r"], d["w"], d["s"])
        for a, b in zip(got, ref, strict=True):
            assert _same(a, b)


def test_import_is_cheap_and_needs_no_gpu_or_flashinfer() -> None:
    # The ops are declared with their fusions (IR included); Triton and FlashInfer load late.
    code = ("import sys, irfuse.emit.custom_ops\n"
            "print('triton' in sys.modules, 'flashinfer' in sys.modules)\n")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["False", "False"]


def test_kernel_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    assert kernel_choice.choose("irfuse::rms_norm_quant_fp8_static", "cpu").impl == "reference"
    assert dispatch.platform_of("cpu") == "cpu"
    for op in kernel_choice.kernels():
        for platform in ("cuda:sm90", "cuda:sm80", "rocm"):
            choice = kernel_choice.choose(op, platform)
            assert choice.impl in ("triton", "inductor"), (op, platform)
            assert choice.reason
        assert kernel_choice.choose(op, "mps").impl == "reference"
    with pytest.raises(KeyError):
        kernel_choice.choose("rope", "cpu")
    with pytest.raises(ValueError):
        kernel_choice.Choice("cutlass", "no such implementation")
    available, reason = dispatch.flashinfer_status()
    assert isinstance(available, bool) and reason
    # Size steps: without a token count, the decode (smallest) step, naming the split.
    op = "add_rms_norm_quant_fp8_static"
    monkeypatch.setitem(kernel_decl.measured("cuda:sm90"), op, (
        (1, kernel_choice.Choice("triton", "measured faster")),
        (16384, kernel_choice.Choice("inductor", "Inductor measured faster"))))
    small = kernel_choice.choose(op, "cuda:sm90")
    assert small.impl == "triton" and "from 16384 tokens: inductor" in small.reason
    assert kernel_choice.choose(op, "cuda:sm90", 16383).impl == "triton"
    assert kernel_choice.choose(op, "cuda:sm90", 16384).impl == "inductor"
    assert kernel_choice.choose(op, "cuda:sm80", 8192).impl == "triton"  # sm90 only


def test_a_run_time_variant_is_off_until_measured(monkeypatch) -> None:
    """`rope_vllm_mla_kv_cache_update` writes vLLM's FP8 latent cache in its launch only where
    its `.fp8_cache` entry chose irfuse's kernel (the exact platform, else the family); sm90's
    file has none for it, and has entries that turn the paged write's and the decode's on."""
    for name in ("rope_vllm_kv_cache_update", "vllm_attention_quant_fp8_static"):
        assert kernel_choice.kernel(name).runs_variant("fp8_cache", "cuda:sm90")
        assert not kernel_choice.kernel(name).runs_variant("fp8_cache", "cuda:sm80")
    k = kernel_choice.kernel("rope_vllm_mla_kv_cache_update")
    assert k.variants == ("fp8_cache",)
    assert not k.runs_variant("fp8_cache", "cuda:sm90")
    assert k.variants_note("cuda:sm90") == "; run-time path fp8_cache: off (not measured on " \
        "cuda:sm90)"
    monkeypatch.setitem(kernel_decl.measured("cuda"), f"{k.name}.fp8_cache",
                        ((1, kernel_choice.Choice("triton", "measured faster")),))
    assert k.runs_variant("fp8_cache", "cuda:sm90") and k.runs_variant("fp8_cache", "cuda:sm80")
    assert k.variants_note("cuda:sm90") == "; run-time path fp8_cache: on"
    monkeypatch.setitem(kernel_decl.measured("cuda:sm90"), f"{k.name}.fp8_cache",
                        ((1, kernel_choice.Choice("inductor", "measured slower")),))
    assert not k.runs_variant("fp8_cache", "cuda:sm90") and k.runs_variant("fp8_cache", "cuda:sm80")
    with pytest.raises(ValueError, match="no variant"):
        k.runs_variant("e5m2_cache", "cuda:sm90")


def test_every_measured_choice_names_a_kernel() -> None:
    """A choices file's entries are `default`, kernels that exist or their declared variants
    (`<kernel>.<variant>`; a typo would be ignored), and every kernel's choice on every platform
    a file or rule names loads."""
    names = set(kernel_choice.kernels())
    variants = {f"{k.name}.{v}" for k in kernel_choice.kernels().values() for v in k.variants}
    for platform in kernel_choice.platforms():
        assert set(kernel_decl.measured(platform)) - {kernel_decl.DEFAULT} <= names | variants, \
            platform
    table = kernel_choice.table()
    assert set(table) == names and all(table[n]["cpu"] for n in names)


def test_each_fusion_loads_what_it_declares() -> None:
    """The pattern classes a declaration names exist, its lowerings are of fused ops and its
    kernels' names are unique across the package."""
    seen: list[str] = []
    for fusion in FUSIONS:
        assert len(fusion.pattern_objects) == len(fusion.patterns)
        assert all(name.startswith("fused.") for name in fusion.lowerings)
        assert bool(fusion.kernels) == bool(fusion.lowerings)
        seen += [k.name for k in fusion.kernels]
    assert len(seen) == len(set(seen))
