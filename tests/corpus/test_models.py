"""Tests of the built-in reference models (irfuse.models).

Every registered model builds, runs and counts what its `.expected` says (the counts are checked
against the ops the eager forward really calls); every spelling of an op computes what the
reference spelling computes; quantized linears stay close to the float linear and the native
quantizers match irfuse's reference quantizers; the paged step writes and reads its cache as a
direct reference does; the 8B config builds on the meta device with Llama-3-8B's parameter
count; tensor-parallel models trace under a fake process group and, across 2 gloo processes,
match the single-process model.
"""

from __future__ import annotations

import collections
import contextlib
import math
import os

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from irfuse.models import MODELS, RAISED_KINDS, build, resolve
from irfuse.models import llama as llama_mod
from irfuse.models.dist import fake_process_group, spawn_ranks
from irfuse.models.layers import (
    HFRotaryEmbedding,
    RMSNorm,
    RotaryEmbedding,
    _rotate,
    apply_hf_rotary,
    custom_ops_available,
    rms_norm_reference,
)
from irfuse.models.mla import MLAAttention
from irfuse.models.paged import PagedAttention
from irfuse.models.quant import (
    Fp8DynamicLinear,
    Fp8GroupLinear,
    Fp8StaticLinear,
    Nvfp4Linear,
    QuantLinearBase,
    calibrate,
    quant_fp8_group,
    quant_fp8_per_tensor,
    quant_fp8_per_token,
    quant_fp8_static,
    quant_nvfp4,
)

HAVE_CUSTOM_OPS = custom_ops_available()
needs_custom_ops = pytest.mark.skipif(
    not HAVE_CUSTOM_OPS, reason="torch.ops.irfuse.* not registered yet (irfuse.emit.custom_ops)")


def _context(name: str):
    return fake_process_group(2) if MODELS[name].distributed else contextlib.nullcontext()


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


# --- what the eager forward really calls ------------------------------------------------------


class _CallCounter(TorchFunctionMode):
    """Counts the torch-level calls that identify raised kinds."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter[str] = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kind = {
            F.scaled_dot_product_attention: "sdpa", torch._scaled_mm: "scaled_mm",
            F.linear: "linear", F.pad: "pad", torch.Tensor.index_put_: "kv_write",
            torch.Tensor.index_copy_: "kv_write", torch.Tensor.__setitem__: "kv_write",
            dist.all_reduce: "all_reduce",
        }.get(func)
        name = str(func)
        if kind is None and name.startswith("_c10d_functional."):
            kind = {"all_reduce": "all_reduce", "reduce_scatter_tensor": "reduce_scatter",
                    "all_gather_into_tensor": "all_gather"}.get(name.split(".")[1])
        if kind is not None:
            self.calls[kind] += 1
        return func(*args, **(kwargs or {}))


def observed_counts(model: torch.nn.Module, inputs, monkeypatch) -> dict[str, int]:
    """Run `model(*inputs)` once and count each raised kind from the calls it makes."""
    counts = dict.fromkeys(RAISED_KINDS, 0)
    handles = []

    def on(module_type, fn):
        for m in model.modules():
            if isinstance(m, module_type):
                handles.append(m.register_forward_pre_hook(fn, with_kwargs=True))

    def norm_hook(mod, args, kwargs):
        with_residual = len(args) > 1 and args[1] is not None
        counts["add_rms_norm" if with_residual else "rms_norm"] += 1

    def quant_hook(mod, args, kwargs):
        counts["quant_nvfp4" if isinstance(mod, Nvfp4Linear) else "quant_fp8"] += 1

    def count(kind):
        def hook(mod, args, kwargs):
            counts[kind] += 1
        return hook

    on(RMSNorm, norm_hook)
    on((Fp8StaticLinear, Fp8DynamicLinear, Fp8GroupLinear, Nvfp4Linear), quant_hook)
    on(llama_mod.LlamaMLP, count("silu_mul"))
    on(RotaryEmbedding, count("rope"))
    on(MLAAttention, count("mla_attention"))
    hf_calls = []

    def counting_hf_rotary(*args, **kwargs):
        hf_calls.append(1)
        return apply_hf_rotary(*args, **kwargs)

    monkeypatch.setattr(llama_mod, "apply_hf_rotary", counting_hf_rotary)
    try:
        with _CallCounter() as calls, torch.no_grad():
            out = model(*inputs)
    finally:
        for h in handles:
            h.remove()
    c = calls.calls
    counts["rope"] += len(hf_calls)
    counts["attention"] = c["sdpa"] - counts["mla_attention"]
    counts["gemm"], counts["scaled_gemm"], counts["pad"] = c["linear"], c["scaled_mm"], c["pad"]
    assert c["kv_write"] % 2 == 0, "k and v are written together"
    counts["kv_cache_write"] = c["kv_write"] // 2
    for kind in ("all_reduce", "reduce_scatter", "all_gather"):
        counts[kind] = c[kind]
    return counts, out


# --- the registry -----------------------------------------------------------------------------


def test_registry_resolves_and_rejects_bad_requests():
    for name, spec in MODELS.items():
        _, cfg, opts = resolve(name)
        assert spec.description and "tiny" in spec.sizes
        assert opts.uses_custom_ops == spec.uses_custom_ops
    with pytest.raises(KeyError, match="unknown model"):
        resolve("no-such-model")
    with pytest.raises(TypeError, match="unknown override 'hiden'"):
        resolve("llama", hiden=3)
    with pytest.raises(ValueError, match="norm_style"):
        resolve("llama", norm_style="layernorm")
    with pytest.raises(ValueError, match="sizes"):
        resolve("mla", size="llama-8b")
    with pytest.raises(ValueError, match="separate"):
        resolve("llama-fp8", silu_style="separate")
    with pytest.raises(RuntimeError, match="process group"):
        build("llama-tp")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_runs_and_has_the_expected_counts(name, monkeypatch):
    spec = MODELS[name]
    if spec.uses_custom_ops and not HAVE_CUSTOM_OPS:
        pytest.skip("torch.ops.irfuse.* not registered yet (irfuse.emit.custom_ops)")
    with _context(name):
        built = build(name)
        inputs = built.clone_inputs()
        counts, out = observed_counts(built.model, inputs, monkeypatch)
    cfg = built.config
    absorbed = _inside_mla(built)
    for kind, n in absorbed.items():
        counts[kind] -= n
    assert not built.model.training
    assert set(built.expected) == set(RAISED_KINDS)
    assert counts == built.expected, name
    t = cfg.num_tokens
    width = cfg.hidden if spec.family in ("paged", "paged_prefill") else cfg.vocab
    assert out.shape == (t, width) and out.dtype == torch.bfloat16
    assert torch.isfinite(out.float()).all()
    for index, dim in built.dynamic_dims.items():
        assert built.example_inputs[index].shape[dim] == t
    # Structural cross-check: one GEMM per linear module.
    linears = [m for m in built.model.modules() if isinstance(m, QuantLinearBase)]
    assert len(linears) == built.expected["gemm"] + built.expected["scaled_gemm"] + absorbed["gemm"]


def _inside_mla(built) -> dict[str, int]:
    """What the counting convention puts inside `mla_attention`: kv_b's GEMM and the v pad."""
    if built.expected["mla_attention"] == 0:
        return {"gemm": 0, "pad": 0}
    n = built.config.num_layers
    return {"gemm": n, "pad": n if built.options.pad_v else 0}


@pytest.mark.parametrize("name", ["llama", "mla", "paged"])
def test_fp32_build_agrees_with_bf16(name):
    y32, y16 = _logits(name), _logits(name, dtype=torch.bfloat16)
    assert y32.dtype == torch.float32 and torch.isfinite(y32).all()
    assert _rel_err(y16, y32) < 0.02


@pytest.mark.parametrize("name, tol", [("llama-fp8", 0.1), ("llama-fp8-per-token", 0.1),
                                       ("llama-fp8-group64", 0.1), ("llama-nvfp4-native", 0.3)])
def test_quantized_model_is_close_to_the_float_model(name, tol):
    # Same seed, same float32 master weights: only the quantization differs.
    quantized, ref = _logits(name), _logits("llama")
    assert torch.isfinite(quantized).all()
    assert 0 < _rel_err(quantized, ref) < tol


def test_make_inputs_gives_other_num_tokens():
    built = build("paged")
    inputs = built.make_inputs(5, seed=3)
    assert [inputs[i].shape[d] for i, d in built.dynamic_dims.items()] == [5] * 5
    with torch.no_grad():
        assert built.model(*inputs).shape == (5, built.config.hidden)


# --- spellings agree ----------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["vllm", "hf", "square", "functional", "custom_op"])
@pytest.mark.parametrize("gemma", [False, True])
def test_rms_norm_styles_match_reference(style, gemma):
    if style == "custom_op" and not HAVE_CUSTOM_OPS:
        pytest.skip("torch.ops.irfuse.* not registered yet (irfuse.emit.custom_ops)")
    gen = torch.Generator().manual_seed(1)
    for dtype, tol in ((torch.bfloat16, 1e-2), (torch.float32, 1e-5)):
        norm = RMSNorm(256, 1e-5, style, gemma=gemma, dtype=dtype, device=torch.device("cpu"),
                       gen=gen)
        x = (torch.randn(16, 256, generator=gen) * 3).to(dtype)
        res = torch.randn(16, 256, generator=gen).to(dtype)
        ref, _ = rms_norm_reference(x, norm.weight, 1e-5, gemma=gemma)
        torch.testing.assert_close(norm(x), ref, rtol=tol, atol=tol)
        out, new_res = norm(x, res)
        ref, ref_res = rms_norm_reference(x, norm.weight, 1e-5, residual=res, gemma=gemma)
        torch.testing.assert_close(out, ref, rtol=tol, atol=tol)
        torch.testing.assert_close(new_res, ref_res, rtol=0, atol=0)


def _logits(name, dtype=torch.float32, **overrides):
    built = build(name, dtype=dtype, **overrides)
    with torch.no_grad():
        return built.model(*built.clone_inputs())


LLAMA_SPELLINGS = [
    dict(norm_style="hf"), dict(norm_style="square"), dict(norm_style="functional"),
    dict(gemma_norm=True), dict(gemma_norm=True, norm_style="hf"), dict(rope_source="hf"),
    dict(rope_cache_index="index"), dict(silu_style="chunk"), dict(silu_style="split"),
    dict(silu_style="separate"), dict(silu_style="sigmoid"), dict(gqa_style="repeat_kv"),
    dict(lm_head_pad=64),
]


def test_llama_spellings_compute_the_same_model():
    one = dict(num_layers=1)  # one layer still has plain and residual-add norms
    base = _logits("llama", **one)
    for spelling in LLAMA_SPELLINGS:
        torch.testing.assert_close(_logits("llama", **one, **spelling), base, rtol=1e-4,
                                   atol=1e-4, msg=lambda m, s=spelling: f"{s}: {m}")
    gptj = dict(rope_style="gptj", rotary_fraction=0.5, **one)
    gptj_cache = _logits("llama", **gptj)
    torch.testing.assert_close(_logits("llama", rope_source="hf", **gptj), gptj_cache,
                               rtol=1e-4, atol=1e-4)
    assert _rel_err(gptj_cache, base) > 0.05  # the RoPE layout matters


@needs_custom_ops
def test_custom_op_spellings_compute_the_same_model():
    # llama-custom-ops: irfuse norms, SiLU·Mul and static FP8 quant; vs the same model native.
    native = dict(norm_style="vllm", silu_style="slice", quant_impl="native")
    for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 2e-2)):
        custom = _logits("llama-custom-ops", dtype, scale_spelling="reciprocal")
        ref = _logits("llama-custom-ops", dtype, scale_spelling="reciprocal", **native)
        assert _rel_err(custom, ref) < tol


@needs_custom_ops
@pytest.mark.parametrize("scheme", ["fp8", "fp8-per-token", "fp8-per-tensor", "fp8-group",
                                    "nvfp4"])
def test_custom_op_quantizers_match_native(scheme):
    from irfuse.models.config import ModelOptions
    from irfuse.models.quant import make_linear

    gen = torch.Generator().manual_seed(8)
    w = torch.randn(64, 256, generator=gen)
    x = (torch.randn(24, 256, generator=gen) * 3).to(torch.bfloat16)
    variants = [dict(scale_spelling="reciprocal")] if scheme == "fp8" else [{}]
    if scheme == "fp8-per-token":
        variants.append(dict(scale_ub=True))
    if scheme == "fp8-group":
        variants = [dict(group_size=g, group_col_major=c) for g in (64, 128) for c in (0, 1)]
    for v in variants:
        lins = [make_linear(w, torch.bfloat16, ModelOptions(quant=scheme, quant_impl=impl, **v))
                for impl in ("native", "custom_op")]
        for lin in lins:
            calibrate(lin, (x,))
        got, want = (lin.quantize_input(x) for lin in lins)
        got, want = (r if isinstance(r, tuple) else (r,) for r in (got, want))
        for a, b in zip(got, want):
            assert a.shape == b.shape and a.stride() == b.stride(), (scheme, v)
            assert torch.equal(a.view(torch.uint8) if a.element_size() == 1 else a,
                               b.view(torch.uint8) if b.element_size() == 1 else b), (scheme, v)


def _complex_rope(x: torch.Tensor, pos: torch.Tensor, rotary_dim: int, base: float,
                  neox: bool) -> torch.Tensor:
    """RoPE as a complex rotation of (x_a, x_b) pairs by pos * base^(-2i / rotary_dim)."""
    x = x.double()
    half = rotary_dim // 2
    idx = torch.arange(half)
    a_idx, b_idx = (idx, idx + half) if neox else (2 * idx, 2 * idx + 1)
    theta = pos.double()[:, None] * base ** (-2.0 * idx.double() / rotary_dim)
    z = torch.complex(x[..., a_idx], x[..., b_idx]) * torch.polar(
        torch.ones_like(theta), theta)[:, None, :]
    out = x.clone()
    out[..., a_idx], out[..., b_idx] = z.real, z.imag
    return out


@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_rope_matches_complex_rotation(neox, fraction):
    gen = torch.Generator().manual_seed(2)
    d = 64
    rot = int(d * fraction)
    cpu = torch.device("cpu")
    q = torch.randn(10, 4, d, generator=gen)
    k = torch.randn(10, 2, d, generator=gen)
    pos = torch.randint(0, 500, (10,), generator=gen)
    rope = RotaryEmbedding(d, rot, 512, 10000.0, neox, dtype=torch.float32, device=cpu)
    q_out, k_out = rope(pos, q, k)
    torch.testing.assert_close(q_out.double(), _complex_rope(q, pos, rot, 10000.0, neox),
                               rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(k_out.double(), _complex_rope(k, pos, rot, 10000.0, neox),
                               rtol=1e-4, atol=1e-4)
    cos, sin = HFRotaryEmbedding(rot, 10000.0, neox, device=cpu)(pos, torch.float32)
    hf_q, hf_k = apply_hf_rotary(q, k, cos, sin, neox)
    torch.testing.assert_close(hf_q, q_out, rtol=1e-5, atol=1e-5)
    cs = rope.cos_sin_cache[pos]
    torch.testing.assert_close(_rotate(k, *cs.chunk(2, -1), rot, neox), k_out)


# --- quantized linears --------------------------------------------------------------------------


QUANT_CASES = {
    "fp8-div-clamp": (Fp8StaticLinear, dict(scale_spelling="div", clamp_spelling="clamp")),
    "fp8-recip-clampminmax": (Fp8StaticLinear, dict(scale_spelling="reciprocal",
                                                    clamp_spelling="clamp_minmax")),
    "fp8-inv-minmax": (Fp8StaticLinear, dict(scale_spelling="inv_scale",
                                             clamp_spelling="minmax")),
    "fp8-static-dequant": (Fp8StaticLinear, dict(scaled_gemm="dequant")),
    "fp8-per-token": (Fp8DynamicLinear, dict(per_token=True)),
    "fp8-per-token-ub": (Fp8DynamicLinear, dict(per_token=True, use_scale_ub=True)),
    "fp8-per-tensor": (Fp8DynamicLinear, dict(per_token=False)),
    "fp8-group128": (Fp8GroupLinear, dict(group_size=128)),
    "fp8-group64-col-ue8m0": (Fp8GroupLinear, dict(group_size=64, col_major=True, ue8m0=True)),
    "fp8-group128-fnuz": (Fp8GroupLinear, dict(group_size=128,
                                               fp8_dtype=torch.float8_e4m3fnuz)),
    "nvfp4": (Nvfp4Linear, dict(impl="native")),
}


@pytest.mark.parametrize("case", sorted(QUANT_CASES))
def test_quantized_linear_is_close_to_the_float_linear(case):
    cls, kwargs = QUANT_CASES[case]
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(320, 512, generator=gen) / math.sqrt(512)
    x = torch.randn(2, 8, 512, generator=gen).to(torch.bfloat16)
    if cls is not Nvfp4Linear:
        kwargs = {"fp8_dtype": torch.float8_e4m3fn, **kwargs}
    lin = cls(w, torch.bfloat16, **kwargs)
    n = calibrate(lin, (x,))
    assert n == 1
    y = lin(x)
    assert y.shape == (2, 8, 320) and y.dtype == torch.bfloat16
    ref = F.linear(x.float(), w)
    assert _rel_err(y, ref) < (0.2 if cls is Nvfp4Linear else 0.05), case
    # The weight the module holds stands for the master weight.
    wd = lin.dequantized_weight()
    assert _rel_err(wd, w) < (0.2 if cls is Nvfp4Linear else 0.05)


def test_fp8_to_float_is_exact():
    from irfuse.models.quant import fp8_to_float

    for fp8 in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        every = torch.arange(256, dtype=torch.uint8).view(fp8)
        assert torch.equal(fp8_to_float(every).nan_to_num(7.0),
                           every.to(torch.float32).nan_to_num(7.0))


def test_scaled_mm_forms_agree():
    gen = torch.Generator().manual_seed(4)
    w = torch.randn(64, 128, generator=gen) / math.sqrt(128)
    x = torch.randn(8, 128, generator=gen).to(torch.bfloat16)
    outs = {}
    for mode in ("scaled_mm", "rowwise", "dequant"):
        lin = Fp8StaticLinear(w, torch.bfloat16, fp8_dtype=torch.float8_e4m3fn,
                              scaled_gemm=mode)
        calibrate(lin, (x,))
        outs[mode] = lin(x).float()
    torch.testing.assert_close(outs["rowwise"], outs["scaled_mm"], rtol=0, atol=0)
    torch.testing.assert_close(outs["dequant"], outs["scaled_mm"], rtol=1e-2, atol=1e-2)


def _quant_ref():
    return pytest.importorskip("irfuse.kernels.quant_ref",
                               reason="irfuse.kernels.quant_ref not available yet")


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e4m3fnuz])
def test_native_fp8_quantizers_match_the_reference(fp8):
    ref = _quant_ref()
    gen = torch.Generator().manual_seed(5)
    x = (torch.randn(24, 256, generator=gen) * 4).to(torch.bfloat16)
    x[3, :] = 0  # an all-zero row hits MIN_SCALE
    scale = torch.tensor([0.02])
    for spelling in ("reciprocal", "inv_scale"):
        q = quant_fp8_static(x, scale, inv_scale=scale.reciprocal(), fp8_dtype=fp8,
                             scale_spelling=spelling, clamp_spelling="minmax")
        assert torch.equal(q.view(torch.uint8), ref.quant_fp8_static(x, scale, fp8)
                           .view(torch.uint8))
    ub = torch.tensor([5.0])
    for got, want in [(quant_fp8_per_token(x, None, fp8), ref.quant_fp8_per_token(x, None, fp8)),
                      (quant_fp8_per_token(x, ub, fp8), ref.quant_fp8_per_token(x, ub, fp8)),
                      (quant_fp8_per_tensor(x, fp8), ref.quant_fp8_per_tensor(x, fp8))]:
        assert torch.equal(got[0].view(torch.uint8), want[0].view(torch.uint8))
        assert torch.equal(got[1], want[1]) and got[1].shape == want[1].shape
    for g in (128, 64):
        for col_major in (False, True):
            for ue8m0 in (False, True):
                q, s = quant_fp8_group(x, g, col_major, ue8m0, fp8)
                rq, rs = ref.quant_fp8_group(x, g, col_major, ue8m0, fp8)
                assert torch.equal(q.view(torch.uint8), rq.view(torch.uint8))
                assert torch.equal(s, rs) and s.stride() == rs.stride()


def test_native_nvfp4_matches_the_reference():
    ref = _quant_ref()
    gen = torch.Generator().manual_seed(6)
    x = (torch.randn(40, 96, generator=gen) * 2).to(torch.bfloat16)
    x[5, :16] = 0  # an all-zero block
    gs = (448.0 * 6.0 / x.float().abs().amax()).reshape(1)
    packed, scales = quant_nvfp4(x, gs)
    rp, rs = ref.quant_nvfp4(x, gs)
    assert packed.dtype == torch.uint8 and packed.shape == (40, 48)
    assert scales.shape == (128, 8)
    assert torch.equal(packed, rp)
    assert torch.equal(scales.view(torch.uint8), rs.view(torch.uint8))


# --- paged KV cache, MLA ------------------------------------------------------------------------


def test_paged_step_writes_the_cache_and_attends_over_its_pages():
    built = build("paged", num_layers=1, dtype=torch.float32)
    model, cfg = built.model, built.config
    hidden, positions, slots, tables, lens, k_cache, v_cache = built.clone_inputs()
    k_before, v_before = k_cache.clone(), v_cache.clone()
    layer = model.layers[0]
    attn: PagedAttention = layer.self_attn
    with torch.no_grad():
        x = layer.input_layernorm(hidden)
        q, k, v = attn.project_qkv(positions, x, None)
        out = attn(positions, x, slot_mapping=slots, block_tables=tables, seq_lens=lens,
                   k_cache=k_cache, v_cache=v_cache)
    hk, d, bs = cfg.num_kv_heads, cfg.head_dim, cfg.block_size
    flat_k, flat_v = k_cache.view(-1, hk, d), v_cache.view(-1, hk, d)
    torch.testing.assert_close(flat_k[slots], k, rtol=0, atol=0)
    torch.testing.assert_close(flat_v[slots], v, rtol=0, atol=0)
    untouched = torch.ones(flat_k.shape[0], dtype=torch.bool)
    untouched[slots] = False
    assert torch.equal(flat_k[untouched], k_before.view(-1, hk, d)[untouched])
    assert torch.equal(flat_v[untouched], v_before.view(-1, hk, d)[untouched])
    # Direct reference: each sequence's tokens gathered slot by slot.
    rep = cfg.num_heads // hk
    ref = []
    for i in range(q.shape[0]):
        p = torch.arange(int(lens[i]))
        seq_slots = tables[i, p // bs].long() * bs + p % bs
        keys = flat_k[seq_slots].repeat_interleave(rep, dim=1)  # [L, Hq, D]
        values = flat_v[seq_slots].repeat_interleave(rep, dim=1)
        scores = torch.einsum("hd,lhd->hl", q[i], keys) / math.sqrt(d)
        ref.append(torch.einsum("hl,lhd->hd", scores.softmax(-1), values).reshape(-1))
    with torch.no_grad():
        expected = attn.o_proj(torch.stack(ref))
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)


def test_paged_cache_write_spellings_agree():
    # slice-spelling inputs have slot_mapping == arange(T), so every spelling can run on them.
    inputs = build("paged-slice", dtype=torch.float32).example_inputs
    results = []
    for kv_write in ("index_put", "index_copy", "slice_scatter"):
        built = build("paged-slice", dtype=torch.float32, kv_write=kv_write)
        run_inputs = tuple(t.clone() for t in inputs)
        with torch.no_grad():
            results.append((built.model(*run_inputs), run_inputs[5:]))
    assert torch.equal(inputs[2], torch.arange(inputs[0].shape[0]))
    for out, caches in results[1:]:
        assert torch.equal(out, results[0][0])
        assert all(torch.equal(a, b) for a, b in zip(caches, results[0][1]))


def test_mla_attention_matches_the_latent_decomposition():
    built = build("mla", num_layers=1, dtype=torch.float32)
    cfg = built.config
    attn: MLAAttention = built.model.layers[0].self_attn
    gen = torch.Generator().manual_seed(7)
    t = 12
    x = torch.randn(t, cfg.hidden, generator=gen)
    pos = torch.arange(t)
    with torch.no_grad():
        out = attn(pos, x)
        padded = build("mla", num_layers=1, dtype=torch.float32, pad_v=True)
        out_padded = padded.model.layers[0].self_attn(pos, x)
        # Reference: scores = q_nope . k_nope + q_pe . k_pe, a separate dot product for each
        # part, with k_pe shared by all heads; softmax scale over nope + rope dims.
        qa = attn.fused_qkv_a_proj(x)
        q_c = qa[:, : cfg.q_lora_rank]
        kv_c = qa[:, cfg.q_lora_rank: cfg.q_lora_rank + cfg.kv_lora_rank]
        k_pe = qa[:, cfg.q_lora_rank + cfg.kv_lora_rank:]
        h, nope, rope, vd = cfg.num_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, \
            cfg.v_head_dim
        q = attn.q_b_proj(attn.q_a_layernorm(q_c)).view(t, h, nope + rope)
        kv = attn.kv_b_proj(attn.kv_a_layernorm(kv_c)).view(t, h, nope + vd)
        q_pe, k_pe = attn.rotary(pos, q[..., nope:], k_pe.view(t, 1, rope))
        scores = (torch.einsum("thd,shd->hts", q[..., :nope], kv[..., :nope])
                  + torch.einsum("thd,sd->hts", q_pe, k_pe[:, 0])) / math.sqrt(nope + rope)
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -math.inf)
        o = torch.einsum("hts,shd->thd", scores.softmax(-1), kv[..., nope:]).reshape(t, -1)
        expected = attn.o_proj(o)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out_padded, out, rtol=1e-5, atol=1e-5)


# --- real sizes on the meta device --------------------------------------------------------------

LLAMA3_8B_PARAMS = 8_030_261_248


@pytest.mark.parametrize("name", ["llama", "llama-fp8"])
def test_llama_8b_builds_on_meta_with_the_right_parameter_count(name):
    built = build(name, size="llama-8b", device="meta")
    params = list(built.model.parameters())
    assert all(p.device.type == "meta" for p in params)
    assert sum(p.numel() for p in params) == LLAMA3_8B_PARAMS
    assert len(built.model.layers) == 32
    assert built.example_inputs[0].device.type == "meta"
    assert built.expected["add_rms_norm"] == 64
    if name == "llama-fp8":
        qkv = built.model.layers[0].self_attn.qkv_proj
        assert qkv.weight.dtype == torch.float8_e4m3fn and qkv.weight.shape == (6144, 4096)
        assert built.expected["quant_fp8"] == built.expected["scaled_gemm"] == 128


def test_deepseek_v2_lite_mla_builds_on_meta():
    built = build("mla-lite", size="deepseek-v2-lite", device="meta")
    attn = built.model.layers[0].self_attn
    assert attn.fused_q_kv_a_proj.weight.shape == (16 * 192 + 512 + 64, 2048)
    assert attn.kv_b_proj.weight.shape == (16 * (128 + 128), 512)
    assert built.expected["mla_attention"] == 27 and built.expected["pad"] == 0


# --- tensor parallelism -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["llama-tp", "llama-fp8-tp", "llama-tp-inplace",
                                  "llama-tp-rs-ag"])
def test_tp_model_traces_under_a_fake_process_group(name):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    with fake_process_group(2):
        built = build(name)
        attn = built.model.layers[0].self_attn
        assert attn.num_heads == 2 and attn.num_kv_heads == 1
        assert attn.qkv_proj.weight.shape == ((2 + 2 * 1) * 64, 256)
        assert built.model.layers[0].mlp.down_proj.weight.shape == (256, 256)
        torch._dynamo.reset()
        compiled = torch.compile(built.model, backend=backend, fullgraph=True)
        out = compiled(*built.mark_dynamic(built.clone_inputs()))
    assert out.shape == (16, 512) and torch.isfinite(out.float()).all()
    targets = collections.Counter(str(n.target) for n in graphs[0].graph.nodes
                                  if n.op == "call_function")
    n = built.config.num_layers
    if name == "llama-tp-rs-ag":
        assert targets["_c10d_functional.reduce_scatter_tensor"] == 2 * n
        assert targets["_c10d_functional.all_gather_into_tensor"] == 2 * n
    else:
        assert targets["_c10d_functional.all_reduce"] == 2 * n


TP_CASES = {
    "llama-tp": ("llama", {}),
    "llama-tp-inplace": ("llama", {}),
    "llama-tp-rs-ag": ("llama", {}),
    "llama-fp8-tp": ("llama-fp8", dict(scale_spelling="inv_scale",
                                       clamp_spelling="clamp_minmax")),
}


def _tp_worker(rank: int, world: int, out_dir: str) -> None:
    for name in TP_CASES:
        built = build(name, dtype=torch.float32, num_layers=1)
        with torch.no_grad():
            out = built.model(*built.clone_inputs())
        if rank == 0:
            torch.save(out, os.path.join(out_dir, f"{name}.pt"))


@pytest.mark.dist
def test_tp_across_two_gloo_processes_matches_one_process(tmp_path):
    spawn_ranks(2, _tp_worker, str(tmp_path), init_file=str(tmp_path / "init"))
    for name, (single, overrides) in TP_CASES.items():
        tp_out = torch.load(tmp_path / f"{name}.pt")
        ref = _logits(single, num_layers=1, **overrides)
        torch.testing.assert_close(tp_out, ref, rtol=1e-4, atol=1e-4, msg=name)


def _environ_worker(rank: int, world: int, out_dir: str) -> None:
    with open(os.path.join(out_dir, f"env{rank}"), "w") as f:
        f.write(f"{os.environ.get('IRFUSE_RANK_PROBE')} {os.getpid()}")


@pytest.mark.dist
def test_ranks_run_with_the_callers_environment_of_the_moment(tmp_path, monkeypatch):
    # The gloo ranks fork from a server started once; what the caller sets afterwards must
    # reach them as it would reach spawned ranks, and what it removed must not.
    for probe in ("first", None):
        if probe is None:
            monkeypatch.delenv("IRFUSE_RANK_PROBE")
        else:
            monkeypatch.setenv("IRFUSE_RANK_PROBE", probe)
        run = tmp_path / str(probe)
        run.mkdir()
        spawn_ranks(2, _environ_worker, str(run), init_file=str(run / "init"))
        seen = [(run / f"env{r}").read_text().split() for r in range(2)]
        assert [v for v, _ in seen] == [str(probe)] * 2
        assert len({pid for _, pid in seen} | {str(os.getpid())}) == 3


def test_paged_context_len_gives_every_sequence_that_many_cached_tokens():
    built = build("paged", context_len=20, max_blocks_per_seq=2)
    _, positions, slots, block_tables, seq_lens = built.example_inputs[:5]
    assert (seq_lens == 21).all() and (positions == 20).all()
    bs = built.config.block_size
    assert torch.equal(slots, block_tables[:, 1].long() * bs + 20 % bs)
    with pytest.raises(ValueError, match="does not fit"):
        build("paged", context_len=32, max_blocks_per_seq=2)
