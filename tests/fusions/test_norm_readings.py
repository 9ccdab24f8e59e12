"""Every RMSNorm reading irfuse raises stays bit-exact with eager through the passes that replace
the norm: fuse-norm-quant (each FP8 scheme), fuse-allreduce-rms and fuse-act-padding, in bf16 and
fp16, with and without the residual add.

A reading is where the model rounds: the weight product in the model dtype (vLLM's
`normed.to(dtype) * w`, Hugging Face's `w * normed.to(dtype)`) or in float32, rounded once
(`F.rms_norm`, `(normed * w.float()).to(dtype)`, irfuse's built-in "square" and "functional"
styles), Gemma's `1 + w` (always float32), and the residual summed in float32 (vLLM) or in the
model dtype (Hugging Face). The fused kernels carry the reading (`weight_f32`, `weight_offset`,
`round_sum`); a kernel that rounded another way moves FP8 codes by one step (2,180-4,007 of
131,072 in bf16 before `weight_f32` reached fuse-norm-quant).

One spelling is not a reading: the "square" style's `1 / sqrt`, which the fused kernels compute
as rsqrt. Where torch's CPU rsqrt is `1 / sqrt` bit for bit (AVX-512 builds) it stays bit-exact;
where it is not (AVX2: up to 2 float32 ulps apart, in 13% of values), an output moves by at most
one step of its dtype in a few elements, which is what those readings are held to there
(docs/numerics.md).

Each fuse-norm-quant graph holds four norms of one reading, one per scheme (static, per-token,
per-group 128, dynamic per-tensor): the first three fuse whatever order the schemes come in, the
per-tensor one stays with a remark that names it and its line (mixed schemes in one graph are
judged site by site). The Triton kernels are held to the same readings under the interpreter
(`tests/kernel_cases.py: norm_reading_cases`).
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F

from irfuse.models.dist import fake_process_group
from irfuse.models.layers import RMSNorm
from irfuse.models.quant import (
    quant_fp8_group,
    quant_fp8_per_tensor,
    quant_fp8_per_token,
    quant_fp8_static,
)
from irfuse.testing import assert_bit_exact, compile_and_run

H = 256
T = 64
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
BUILTIN = ("vllm", "hf", "square", "functional")


def _rsqrt_is_one_over_sqrt() -> bool:
    v = torch.linspace(1e-3, 100.0, 4099)
    return torch.equal(torch.rsqrt(v), 1.0 / torch.sqrt(v))


RSQRT_IS_ONE_OVER_SQRT = _rsqrt_is_one_over_sqrt()
MOVED_AT_MOST = 0.001
"""The share of a tensor's elements a `1 / sqrt` reading may move by one step where torch's rsqrt
is not `1 / sqrt`."""


def _assert_as_eager(reading: str, actual, expected, model_dtype: torch.dtype) -> None:
    """Bit-exact, or for a `1 / sqrt` reading on a host whose rsqrt differs: each tensor within
    one step of its dtype (float32 scales: of the model dtype), in at most MOVED_AT_MOST of it."""
    if not reading.startswith("square") or RSQRT_IS_ONE_OVER_SQRT:
        assert_bit_exact(actual, expected)
        return
    for i, (a, e) in enumerate(zip(_tensors(actual), _tensors(expected), strict=True)):
        assert a.shape == e.shape and a.dtype == e.dtype, f"output[{i}]: {a.dtype} != {e.dtype}"
        info = torch.finfo(model_dtype if a.dtype == torch.float32 else a.dtype)
        a, e = a.float(), e.float()
        moved = a != e
        bound = info.eps * torch.maximum(a.abs(), e.abs()) + info.smallest_normal * info.eps
        assert bool(((a - e).abs() <= bound).all()), f"output[{i}]: more than one step apart"
        assert moved.float().mean().item() <= MOVED_AT_MOST, (
            f"output[{i}]: {moved.sum().item()} of {moved.numel()} values moved")


def _tensors(x) -> list[torch.Tensor]:
    return [x] if isinstance(x, torch.Tensor) else [t for item in x for t in _tensors(item)]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


class _Explicit(torch.nn.Module):
    """Readings written out, as model code outside irfuse writes them."""

    def __init__(self, reading: str, dtype: torch.dtype, seed: int) -> None:
        super().__init__()
        w = torch.randn(H, generator=_gen(seed)) * 0.1
        self.weight = torch.nn.Parameter((w if reading == "gemma_f32" else w + 1).to(dtype),
                                         requires_grad=False)
        self.reading = reading

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        dtype = x.dtype
        if residual is not None:
            x = x + residual
            residual = x
        if self.reading == "rms_norm_op":
            y = F.rms_norm(x, (H,), self.weight, 1e-6)
            return y if residual is None else (y, residual)
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)
        if self.reading == "f32_product":
            y = (normed * self.weight.float()).to(dtype)
        elif self.reading == "weight_first_f32":
            y = (self.weight.float() * normed).to(dtype)
        elif self.reading == "gemma_f32":
            y = (normed * (1.0 + self.weight.float())).to(dtype)
        else:  # "model_dtype"
            y = normed.to(dtype) * self.weight
        return y if residual is None else (y, residual)


EXPLICIT = ("model_dtype", "f32_product", "weight_first_f32", "gemma_f32", "rms_norm_op")
READINGS = (*BUILTIN, *(f"{s}-gemma" for s in BUILTIN), *EXPLICIT)


def _norm(reading: str, dtype: torch.dtype, seed: int) -> torch.nn.Module:
    if reading in EXPLICIT:
        return _Explicit(reading, dtype, seed)
    style, _, gemma = reading.partition("-")
    return RMSNorm(H, 1e-6, style, gemma=bool(gemma), dtype=dtype, device=torch.device("cpu"),
                   gen=_gen(seed))


SCHEMES = ("static", "per_token", "group128", "per_tensor")


class _FourSchemes(torch.nn.Module):
    """Four norms of one reading on one input (with the residual add, each its own residual),
    each feeding one quant scheme, in the order given."""

    def __init__(self, reading: str, dtype: torch.dtype, residual: bool,
                 schemes: tuple[str, ...]) -> None:
        super().__init__()
        self.norms = torch.nn.ModuleList(_norm(reading, dtype, i) for i in range(len(schemes)))
        self.schemes, self.residual = schemes, residual
        self.register_buffer("scale", torch.tensor([0.01]))

    def forward(self, x: torch.Tensor, r: torch.Tensor):
        outs = []
        for i, (norm, scheme) in enumerate(zip(self.norms, self.schemes, strict=True)):
            xi = x * (i + 1)
            if self.residual:
                y, new_r = norm(xi, r)
                outs.append(new_r)
            else:
                y = norm(xi)
            if scheme == "static":
                outs.append(quant_fp8_static(y, self.scale))
            elif scheme == "per_token":
                outs.extend(quant_fp8_per_token(y))
            elif scheme == "group128":
                outs.extend(quant_fp8_group(y, 128))
            else:
                outs.extend(quant_fp8_per_tensor(y))
        return outs


def _inputs(dtype: torch.dtype) -> list[torch.Tensor]:
    g = _gen(7)
    return [(torch.randn(T, H, generator=g) * 3).to(dtype), torch.randn(T, H, generator=g).to(dtype)]


def _missed(compiled, pass_name: str) -> list[tuple[str, str]]:
    return [(m.reason, m.location) for r in compiled.reports for p in r.passes
            if p.name == pass_name for m in p.missed]


@pytest.mark.parametrize("residual", [False, True], ids=["norm", "add_norm"])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("reading", READINGS)
def test_norm_quant_is_bit_exact_in_every_reading_and_scheme(reading, dtype, residual):
    model = _FourSchemes(reading, DTYPES[dtype], residual, SCHEMES)
    compiled = compile_and_run(model, _inputs(DTYPES[dtype]), dynamic_dims=[(0, 0), (1, 0)],
                               options={"optimization_level": 2})
    _assert_as_eager(reading, compiled.outputs[0], compiled.eager[0], DTYPES[dtype])
    assert compiled.fused("fuse-norm-quant") == 3
    (missed,) = _missed(compiled, "fuse-norm-quant")
    assert "dynamic per-tensor" in missed[0] and ".py:" in missed[1]  # a reason and a location


@pytest.mark.parametrize("order", [("per_tensor", "static", "per_token", "group128"),
                                   ("static", "per_tensor")], ids=["per_tensor_first",
                                                                   "static_first"])
def test_each_site_is_judged_by_its_own_scheme(order):
    # A dynamic per-tensor quant first used to turn fuse-norm-quant off for the whole graph
    # ("off (config)"): every other site then stayed unfused.
    model = _FourSchemes("f32_product", torch.bfloat16, True, order)
    compiled = compile_and_run(model, _inputs(torch.bfloat16), dynamic_dims=[(0, 0), (1, 0)],
                               options={"optimization_level": 2})
    assert_bit_exact(compiled.outputs[0], compiled.eager[0])
    assert compiled.fused("fuse-norm-quant") == len(order) - 1
    assert [m[0] for m in _missed(compiled, "fuse-norm-quant")] == [
        "dynamic per-tensor quant is not fused with the norm: its amax spans the whole tensor"]


# --- fuse-allreduce-rms (the fake process group: the all-reduce returns its input) ------------


class _AllReduceNorms(torch.nn.Module):
    """Four all-reduce -> residual add + norm sites of one reading: unquantized, then static,
    per-token and per-group 128 FP8."""

    def __init__(self, reading: str, dtype: torch.dtype) -> None:
        super().__init__()
        self.norms = torch.nn.ModuleList(_norm(reading, dtype, i) for i in range(4))
        self.register_buffer("scale", torch.tensor([0.01]))

    def forward(self, x: torch.Tensor, r: torch.Tensor):
        outs = []
        for i, norm in enumerate(self.norms):
            reduced = funcol.all_reduce(x * (i + 1), "sum", torch.distributed.group.WORLD)
            y, new_r = norm(reduced, r)
            outs.append(new_r)
            if i == 0:
                outs.append(y)
            elif i == 1:
                outs.append(quant_fp8_static(y, self.scale))
            elif i == 2:
                outs.extend(quant_fp8_per_token(y))
            else:
                outs.extend(quant_fp8_group(y, 128))
        return outs


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("reading", READINGS)
def test_allreduce_rms_is_bit_exact_in_every_reading(reading, dtype):
    with fake_process_group(2):
        compiled = compile_and_run(
            _AllReduceNorms(reading, DTYPES[dtype]), _inputs(DTYPES[dtype]),
            dynamic_dims=[(0, 0), (1, 0)],
            options={"optimization_level": 1, "pass_config": {"fuse_allreduce_rms": True}})
    _assert_as_eager(reading, compiled.outputs[0], compiled.eager[0], DTYPES[dtype])
    assert compiled.fused("fuse-allreduce-rms") == 4
    assert _missed(compiled, "fuse-allreduce-rms") == []


# --- fuse-act-padding ---------------------------------------------------------------------------


class _PaddedNorm(torch.nn.Module):
    def __init__(self, reading: str, dtype: torch.dtype, residual: bool) -> None:
        super().__init__()
        self.norm = _norm(reading, dtype, 0)
        self.residual = residual

    def forward(self, x: torch.Tensor, r: torch.Tensor):
        if self.residual:
            y, new_r = self.norm(x, r)
            return F.pad(y, (0, 128)), new_r
        return F.pad(self.norm(x), (0, 128))


@pytest.mark.parametrize("residual", [False, True], ids=["norm", "add_norm"])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("reading", READINGS)
def test_act_padding_is_bit_exact_in_every_reading(reading, dtype, residual):
    compiled = compile_and_run(_PaddedNorm(reading, DTYPES[dtype], residual),
                               _inputs(DTYPES[dtype]), dynamic_dims=[(0, 0), (1, 0)],
                               options={"optimization_level": 1})
    _assert_as_eager(reading, compiled.outputs[0], compiled.eager[0], DTYPES[dtype])
    assert compiled.fused("fuse-act-padding") == 1
    assert _missed(compiled, "fuse-act-padding") == []


def test_the_scheme_gate_reads_the_platforms_narrower_list():
    # fuse-allreduce-rms folds NVFP4 in on sm100, not on sm90: a site is judged there, whatever
    # the graph's other quants let the config turn on.
    from irfuse.fusions.fuse_allreduce_rms import FUSION
    from irfuse.fusions.fusion_pass import scheme_gate
    from irfuse.raising.match import NoMatch

    gate = scheme_gate(FUSION)
    gate("nvfp4", "cuda:sm100")
    gate("fp8-static-tensor", "cuda:sm90")
    with pytest.raises(NoMatch, match="does not fuse nvfp4 on cuda:sm90"):
        gate("nvfp4", "cuda:sm90")


class _TwoNormsOneInput(torch.nn.Module):
    """Two norms of one input, each with its own weight (a layer's two branches): cse-pure
    merges their identical normalizations, leaving one normalized value with two weights."""

    def __init__(self, reading: str, dtype: torch.dtype, residual: bool) -> None:
        super().__init__()
        self.a, self.b = _norm(reading, dtype, 1), _norm(reading, dtype, 2)
        self.residual = residual
        self.register_buffer("scale", torch.tensor([0.01]))

    def forward(self, x: torch.Tensor, r: torch.Tensor):
        if self.residual:
            ya, ra = self.a(x, r)
            yb, rb = self.b(x, r)
            return quant_fp8_static(ya, self.scale), quant_fp8_static(yb, self.scale), ra, rb
        return quant_fp8_static(self.a(x), self.scale), quant_fp8_static(self.b(x), self.scale)


@pytest.mark.parametrize("residual", [False, True], ids=["norm", "add_norm"])
@pytest.mark.parametrize("reading", ["vllm", "hf", "square", "model_dtype", "f32_product"])
def test_two_norms_of_one_input_both_fuse(reading, residual):
    # One norm was raised (without its weight), nothing fused, and no remark said so.
    compiled = compile_and_run(_TwoNormsOneInput(reading, torch.bfloat16, residual),
                               _inputs(torch.bfloat16), dynamic_dims=[(0, 0), (1, 0)],
                               options={"optimization_level": 2})
    assert_bit_exact(compiled.outputs[0], compiled.eager[0])
    assert compiled.fused("fuse-norm-quant") == 2
    assert _missed(compiled, "fuse-norm-quant") == []
