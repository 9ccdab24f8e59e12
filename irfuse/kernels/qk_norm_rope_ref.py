"""Torch references of per-head QK RMSNorm + RoPE, and of the same with a paged KV-cache write.

These are the numerics definition of `qk_norm_rope.py`'s Triton kernel, written literally with
torch ops so that they equal, bit for bit, the unfused model code spelled the same way (Hugging
Face Qwen3's `q_norm` + `q * cos + rotate_half(q) * sin`, vLLM's native RMSNorm + rotary,
`F.rms_norm`, Gemma's `1 + w`; `tests/kernels/test_qk_norm_rope_kernel.py` holds them to it).
The norm is `rms_norm_heads` (no weight: no norm, plain RoPE), the rotation `rope_heads` on the
tables of `rope_tables`; the KV variant writes the rotated k and v, in the cache's dtype, into
the paged caches at `slot_mapping` (`write_cache`; an FP8 cache: `to_cache`, scalar float32
scales). Errors are ValueErrors naming what is wrong (`check_args`), shared with the Triton
wrapper.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FLOATS = (torch.bfloat16, torch.float16, torch.float32)
FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


@dataclass(frozen=True)
class Shapes:
    """What `check_args` read off the arguments."""

    tokens: int
    q_heads: int
    kv_heads: int
    head_dim: int
    v_dim: int  # 0 without v
    full_table: bool  # cos/sin given [T, rotary_dim] (HF) rather than half-width or the cache
    block_size: int  # 0 without a cache
    fp8_cache: bool


def _fail(msg: str) -> None:
    raise ValueError(f"irfuse: qk_norm_rope: {msg}")


def check_args(q, k, q_weight, k_weight, cos, sin, positions, cos_sin_cache, rotary_dim: int,
               v=None, k_cache=None, v_cache=None, slot_mapping=None, k_scale=None,
               v_scale=None, kv: bool = False, mrope_section: list[int] | None = None,
               mrope_interleaved: bool = False) -> Shapes:
    """Validate the arguments of `qk_norm_rope` (and, with `kv`, `qk_norm_rope_kv`); ValueError
    on anything the functions do not take. Cheap: shapes and dtypes only (no device sync)."""
    for name, t in (("q", q), ("k", k)):
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            _fail(f"{name} must be a [T, heads, head_dim] tensor")
    if q.dtype not in FLOATS:
        _fail(f"dtype {q.dtype} is not supported (bf16, fp16, fp32)")
    if k.dtype != q.dtype:
        _fail(f"q and k have different dtypes ({q.dtype}, {k.dtype})")
    tokens, _, head_dim = q.shape
    if k.shape[0] != tokens or k.shape[2] != head_dim:
        _fail(f"k {tuple(k.shape)} does not match q {tuple(q.shape)} in tokens or head_dim")
    for name, w in (("q_weight", q_weight), ("k_weight", k_weight)):
        if w is not None and (w.dim() != 1 or w.shape[0] != head_dim or w.dtype not in FLOATS):
            _fail(f"{name} must be None or a float [{head_dim}] tensor, got "
                  f"{tuple(w.shape)} {w.dtype}")
    if not (isinstance(rotary_dim, int) and rotary_dim >= 2 and rotary_dim % 2 == 0
            and rotary_dim <= head_dim):
        _fail(f"rotary_dim must be even, >= 2 and <= head_dim {head_dim}, got {rotary_dim}")
    rows = _check_sections(mrope_section, mrope_interleaved, rotary_dim // 2)
    by_cache = positions is not None or cos_sin_cache is not None
    by_table = cos is not None or sin is not None
    if by_cache == by_table:
        _fail("give the RoPE tables as exactly one of (positions, cos_sin_cache) and (cos, sin)")
    full = False
    if by_cache:
        if positions is None or cos_sin_cache is None:
            _fail("positions and cos_sin_cache go together")
        if positions.shape != (*rows, tokens) or positions.dtype not in (torch.int64,
                                                                          torch.int32):
            _fail(f"positions must be an int64/int32 {[*rows, tokens]} tensor, got "
                  f"{tuple(positions.shape)} {positions.dtype}")
        if (cos_sin_cache.dim() != 2 or cos_sin_cache.shape[1] != rotary_dim
                or cos_sin_cache.dtype not in FLOATS):
            _fail(f"cos_sin_cache must be a float [max_pos, {rotary_dim}] tensor, got "
                  f"{tuple(cos_sin_cache.shape)} {cos_sin_cache.dtype}")
    else:
        if cos is None or sin is None:
            _fail("cos and sin go together")
        widths = (rotary_dim // 2,) if rows else (rotary_dim, rotary_dim // 2)
        for name, t in (("cos", cos), ("sin", sin)):
            if (t.shape[:-1] != (*rows, tokens) or t.dim() != len(rows) + 2
                    or t.shape[-1] not in widths or t.dtype not in FLOATS):
                _fail(f"{name} must be a float {[*rows, tokens]} x "
                      f"{' or '.join(map(str, widths))} tensor, got {tuple(t.shape)} {t.dtype}")
        if cos.shape != sin.shape:
            _fail(f"cos {tuple(cos.shape)} and sin {tuple(sin.shape)} differ in shape")
        full = cos.shape[-1] == rotary_dim
    v_dim = block_size = 0
    fp8 = False
    if kv:
        kv_heads = k.shape[1]
        if not isinstance(v, torch.Tensor) or v.dim() != 3 or v.shape[:2] != (tokens, kv_heads):
            _fail(f"v must be a [{tokens}, {kv_heads}, Dv] tensor")
        if v.dtype != q.dtype:
            _fail(f"v's dtype {v.dtype} is not q's {q.dtype}")
        v_dim = v.shape[2]
        for name, c, d in (("k_cache", k_cache, head_dim), ("v_cache", v_cache, v_dim)):
            if not isinstance(c, torch.Tensor) or c.dim() != 4 or c.shape[2:] != (kv_heads, d):
                _fail(f"{name} must be a [num_blocks, block_size, {kv_heads}, {d}] tensor")
            if c.dtype not in (q.dtype, FP8):
                _fail(f"{name}'s dtype {c.dtype} is neither the model's {q.dtype} nor {FP8}")
        if k_cache.shape[:2] != v_cache.shape[:2] or k_cache.dtype != v_cache.dtype:
            _fail("k_cache and v_cache differ in blocks, block size or dtype")
        block_size = k_cache.shape[1]
        if (not isinstance(slot_mapping, torch.Tensor) or slot_mapping.dim() != 1
                or slot_mapping.dtype not in (torch.int64, torch.int32)):
            _fail("slot_mapping must be a 1-D int64 (or int32) tensor")
        if slot_mapping.shape[0] != tokens:
            _fail(f"slot_mapping has {slot_mapping.shape[0]} entries for {tokens} tokens")
        fp8 = k_cache.dtype == FP8
        if fp8:
            for name, s in (("k_scale", k_scale), ("v_scale", v_scale)):
                if (not isinstance(s, torch.Tensor) or s.numel() != 1 or s.dim() > 1
                        or s.dtype != torch.float32):
                    _fail(f"an FP8 cache needs {name} as a float32 tensor of shape [] or [1]")
    return Shapes(tokens, q.shape[1], k.shape[1], head_dim, v_dim, full, block_size, fp8)


def rms_norm_heads(x: torch.Tensor, weight: torch.Tensor | None, eps: float,
                   weight_offset: float = 0.0, weight_f32: bool = False) -> torch.Tensor:
    """The per-head RMSNorm over the last dim (x itself when weight is None): `xf = x.float()`,
    `n = xf * rsqrt(mean(xf²) + eps)`; then `y = n.to(dtype) * weight` (the product in the model
    dtype, rounded: vLLM's and HF's spelling), or, with `weight_f32` or a nonzero
    `weight_offset` (Gemma's `1 + w`), `y = (n * (weight.float() + weight_offset)).to(dtype)`
    (one rounding: `F.rms_norm`'s, Gemma's)."""
    if weight is None:
        return x
    dtype = x.dtype
    xf = x.float()
    n = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if weight_f32 or weight_offset != 0.0:
        w = weight.float() + weight_offset if weight_offset != 0.0 else weight.float()
        return (n * w).to(dtype)
    return n.to(dtype) * weight.to(dtype)


def _check_sections(sections: list[int] | None, interleaved: bool, half: int
                    ) -> tuple[int, ...]:
    """The leading dims of a multimodal rope's positions and tables: (3,), or () without one."""
    if sections is None:
        if interleaved:
            _fail("mrope_interleaved needs mrope_section")
        return ()
    if len(sections) != 3 or min(sections) < 0 or (not interleaved and sum(sections) != half):
        _fail(f"mrope_section {list(sections)} does not split the {half} table channels into "
              "three sections")
    return (3,)


def mrope_rows(width: int, sections: list[int], interleaved: bool,
               device: torch.device | None = None) -> torch.Tensor:
    """The position row (0 temporal, 1 height, 2 width) each table channel of a multimodal RoPE
    reads, as vLLM's MRoPE kernels pick it: the sections `[t, h, w]` one after another, or
    (`interleaved`, Qwen3-VL) height where `j % 3 == 1` and `j < 3h`, width where `j % 3 == 2`
    and `j < 3w`, else temporal."""
    channel = torch.arange(width, device=device)
    if interleaved:
        row = torch.where((channel % 3 == 1) & (channel < 3 * sections[1]), 1, 0)
        return torch.where((channel % 3 == 2) & (channel < 3 * sections[2]), 2, row)
    return (channel >= sections[0]).long() + (channel >= sections[0] + sections[1]).long()


def rope_tables(cos, sin, positions, cos_sin_cache, rotary_dim: int,
                mrope_section: list[int] | None = None, mrope_interleaved: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) [T, W] per token: the rows of `cos_sin_cache` [max_pos, rotary_dim] (row p =
    [cos | sin], vLLM's layout) at `positions` [T], split, or the tables `cos`, `sin` [T, W]
    themselves (W = rotary_dim / 2, or rotary_dim for Hugging Face's duplicated tables).

    With `mrope_section`, positions are `[3, T]` (or the tables `[3, T, rotary_dim / 2]`) and
    channel j comes from the row `mrope_rows` names: a selection, every value one of the
    cache's."""
    if cos_sin_cache is not None:
        cs = cos_sin_cache[positions.long()]
        cos, sin = cs[..., : rotary_dim // 2], cs[..., rotary_dim // 2:]
    if mrope_section is None:
        return cos, sin
    rows = mrope_rows(cos.shape[-1], mrope_section, mrope_interleaved, cos.device)
    index = rows.view(1, 1, -1).expand(1, cos.shape[1], -1)
    return cos.gather(0, index)[0], sin.gather(0, index)[0]


def rope_heads(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, is_neox: bool,
               rotary_dim: int, rope_f32: bool = False) -> torch.Tensor:
    """RoPE of x [T, H, D] with per-token tables cos, sin [T, W] (W = rotary_dim / 2 or
    rotary_dim); the dims past rotary_dim pass through.

    NeoX style rotates the two halves (x1, x2), GPT-J style the pairs (x[2i], x[2i+1]);
    `o1 = x1 * c1 - x2 * s1`, `o2 = x2 * c2 + x1 * s2`. With W = rotary_dim / 2, c1 = c2 = cos;
    with W = rotary_dim (Hugging Face's duplicated tables) each element is used where the HF
    formula `x * cos + rotate(x) * sin` uses it: c1 = cos[:R/2], c2 = cos[R/2:] for NeoX, the
    even / odd entries for GPT-J. Without `rope_f32` the tables are cast to the model dtype first
    and every product and sum rounds in it as torch rounds
    (`round(round(x1 * c1) - round(x2 * s1))`; HF's `rotate` negates before its product, which
    rounds to the same bits); with `rope_f32` everything is float32, rounded once at the end."""
    dtype = x.dtype
    half = rotary_dim // 2
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    if rope_f32:
        rot, c, s = rot.float(), cos.float(), sin.float()
    else:
        c, s = cos.to(dtype), sin.to(dtype)
    c, s = c[:, None, :], s[:, None, :]  # broadcast over heads
    if is_neox:
        x1, x2 = rot[..., :half], rot[..., half:]
    else:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
    if c.shape[-1] == half:
        c1 = c2 = c
        s1 = s2 = s
    elif is_neox:
        c1, c2, s1, s2 = c[..., :half], c[..., half:], s[..., :half], s[..., half:]
    else:
        c1, c2, s1, s2 = c[..., 0::2], c[..., 1::2], s[..., 0::2], s[..., 1::2]
    o1 = x1 * c1 - x2 * s1
    o2 = x2 * c2 + x1 * s2
    if rope_f32:
        o1, o2 = o1.to(dtype), o2.to(dtype)
    out = torch.cat((o1, o2), dim=-1) if is_neox else torch.stack((o1, o2), dim=-1).flatten(-2)
    return torch.cat((out, rest), dim=-1)


def qk_norm_rope(q, k, q_weight, k_weight, cos, sin, positions, cos_sin_cache, *, eps: float,
                 is_neox: bool, rotary_dim: int, weight_offset: float = 0.0,
                 weight_f32: bool = False, rope_f32: bool = False,
                 mrope_section: list[int] | None = None, mrope_interleaved: bool = False
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head RMSNorm (where a weight is given) + RoPE of q and k: new contiguous
    (q_out [T, Hq, D], k_out [T, Hk, D]) in the input dtype. q [T, Hq, D] and k [T, Hk, D] may
    have any strides, one dtype of bf16 / fp16 / fp32; the numerics are `rms_norm_heads`' and
    `rope_heads`'."""
    check_args(q, k, q_weight, k_weight, cos, sin, positions, cos_sin_cache, rotary_dim,
               mrope_section=mrope_section, mrope_interleaved=mrope_interleaved)
    c, s = rope_tables(cos, sin, positions, cos_sin_cache, rotary_dim, mrope_section,
                       mrope_interleaved)
    outs = []
    for x, w in ((q, q_weight), (k, k_weight)):
        y = rms_norm_heads(x, w, eps, weight_offset, weight_f32)
        outs.append(rope_heads(y, c, s, is_neox=is_neox, rotary_dim=rotary_dim,
                               rope_f32=rope_f32).contiguous())
    return outs[0], outs[1]


def to_cache(x: torch.Tensor, cache_dtype: torch.dtype, scale: torch.Tensor | None
             ) -> torch.Tensor:
    """x as the cache stores it: itself, or `(x.float() / scale).clamp(-448, 448)` in FP8."""
    if cache_dtype != FP8:
        return x.to(cache_dtype)
    return (x.float() / scale.float().reshape(())).clamp(-FP8_MAX, FP8_MAX).to(FP8)


def write_cache(cache: torch.Tensor, x: torch.Tensor, slot_mapping: torch.Tensor,
                scale: torch.Tensor | None) -> None:
    """Write x [T, H, D] into cache [blocks, block_size, H, D] at the slots >= 0, in place (slot
    s: block s // block_size, row s % block_size; slots < 0 are vLLM's padding)."""
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].long()
    block_size = cache.shape[1]
    cache[slots // block_size, slots % block_size] = to_cache(x[keep], cache.dtype, scale)


def qk_norm_rope_kv(q, k, v, q_weight, k_weight, cos, sin, positions, cos_sin_cache, k_cache,
                    v_cache, slot_mapping, k_scale, v_scale, *, eps: float, is_neox: bool,
                    rotary_dim: int, weight_offset: float = 0.0, weight_f32: bool = False,
                    rope_f32: bool = False, return_k: bool = False,
                    mrope_section: list[int] | None = None, mrope_interleaved: bool = False
                    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """`qk_norm_rope`, with the rotated k and v written into the paged caches at slot_mapping
    (in place; slots < 0 skipped; FP8 caches scaled by k_scale / v_scale). Returns q_out, or
    with `return_k` (q_out, k_out): the rotated k itself, for a k also read besides the
    write."""
    check_args(q, k, q_weight, k_weight, cos, sin, positions, cos_sin_cache, rotary_dim, v,
               k_cache, v_cache, slot_mapping, k_scale, v_scale, kv=True,
               mrope_section=mrope_section, mrope_interleaved=mrope_interleaved)
    q_out, k_out = qk_norm_rope(q, k, q_weight, k_weight, cos, sin, positions, cos_sin_cache,
                                eps=eps, is_neox=is_neox, rotary_dim=rotary_dim,
                                weight_offset=weight_offset, weight_f32=weight_f32,
                                rope_f32=rope_f32, mrope_section=mrope_section,
                                mrope_interleaved=mrope_interleaved)
    write_cache(k_cache, k_out, slot_mapping, k_scale)
    write_cache(v_cache, v, slot_mapping, v_scale)
    return (q_out, k_out) if return_k else q_out
