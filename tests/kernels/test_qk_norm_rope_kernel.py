"""Per-head QK RMSNorm + RoPE (+ paged KV-cache write): the torch reference against model code,
the Triton kernel against the reference.

- The reference equals the unfused torch code bit for bit in the spellings models use: Hugging
  Face Qwen3's (`q_norm` on [B, T, H, D], transpose, `q * cos + rotate_half(q) * sin` with
  full-width bf16 tables), vLLM's native RMSNorm + rotary (`cos_sin_cache[positions].chunk(2)`
  cast to the model dtype; NeoX and GPT-J; partial rotary), `F.rms_norm` (`weight_f32`), Gemma's
  `1 + w`, no norm (plain RoPE), RoPE in float32; and the KV variant equals writing the model's
  rotated k and v into the caches with `index_put` at the slots (FP8 caches with scales, vLLM's
  5-D FlashAttention cache unbound into k and v, negative slots skipped).
- The kernel, under TRITON_INTERPRET=1 on the CPU (a subprocess: the interpreter must be on
  before triton loads) at small sizes, and on the GPU at real sizes (marked `gpu`): without a
  norm, outputs and caches bit for bit; with one, at most 1% of the elements off at all and each
  within two units in the last place (bf16/fp16; 1e-5 relative in fp32) of the rotated pair's
  magnitude (a value one ulp off before the rotation moves the rotated value by that much, which
  can be many of its own ulps where x1 * c and x2 * s cancel), FP8 cache values within one FP8
  step beyond that.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F

from irfuse.kernels import qk_norm_rope_ref as ref
from irfuse.kernels.compare import agreement

HERE = pathlib.Path(__file__).resolve().parents[1]  # tests/: the shared helpers
sys.path.insert(0, str(HERE))

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
FP8 = torch.float8_e4m3fn
EPS = 1e-6
MAX_POS = 4096


# --- inputs ------------------------------------------------------------------------------------


def _qkv(t, hq, hk, d, dtype, device="cpu", seed=0, dv=None):
    """q, k, v as strided views of one fused qkv tensor (as after the qkv projection)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    dv = d if dv is None else dv
    qkv = torch.randn(t, hq * d + hk * d + hk * dv, generator=gen, device=device).to(dtype)
    q, k, v = qkv.split([hq * d, hk * d, hk * dv], dim=-1)
    qw = (torch.rand(d, generator=gen, device=device) + 0.5).to(dtype)
    kw = (torch.rand(d, generator=gen, device=device) + 0.5).to(dtype)
    pos = torch.randint(0, MAX_POS, (t,), generator=gen, device=device)
    return q.view(t, hq, d), k.view(t, hk, d), v.view(t, hk, dv), qw, kw, pos


def _freqs(positions, rotary_dim, base=1e6):
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, device=positions.device).float()
                               / rotary_dim))
    return positions.float()[:, None] * inv_freq[None, :]


def _cos_sin_cache(rotary_dim, dtype, device="cpu"):
    """vLLM's cache: row p = [cos | sin], each rotary_dim / 2 wide."""
    f = _freqs(torch.arange(MAX_POS, device=device), rotary_dim)
    return torch.cat([f.cos(), f.sin()], dim=-1).to(dtype)


def _hf_tables(positions, rotary_dim, dtype, neox=True):
    """Hugging Face's duplicated tables [T, rotary_dim] (NeoX: cat(f, f); GPT-J: interleaved)."""
    f = _freqs(positions, rotary_dim)
    emb = torch.cat([f, f], dim=-1) if neox else f.repeat_interleave(2, dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


# --- the reference against model code ----------------------------------------------------------


def _hf_rms_norm(x, w):  # Qwen3RMSNorm.forward
    input_dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + EPS)
    return w * h.to(input_dtype)


def _rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def _hf_qwen3(q, k, qw, kw, pos, d):
    """Qwen3Attention: projections viewed [B, T, H, D], q_norm / k_norm, transpose to
    [B, H, T, D], apply_rotary_pos_emb with bf16 [B, T, D] tables; back to [T, H, D]."""
    t = q.shape[0]
    qs = _hf_rms_norm(q.reshape(1, t, -1, d), qw).transpose(1, 2)
    ks = _hf_rms_norm(k.reshape(1, t, -1, d), kw).transpose(1, 2)
    cos, sin = _hf_tables(pos, d, q.dtype)
    cos, sin = cos[None, None], sin[None, None]  # unsqueeze(0) batch, unsqueeze(1) heads
    q_embed = (qs * cos) + (_rotate_half(qs) * sin)
    k_embed = (ks * cos) + (_rotate_half(ks) * sin)
    return q_embed.transpose(1, 2)[0], k_embed.transpose(1, 2)[0]


def _vllm_rms_norm(x, w):  # RMSNorm.forward_native, no residual
    orig_dtype = x.dtype
    x = x.to(torch.float32)
    variance = x.pow(2).mean(dim=-1, keepdim=True)
    x = x * torch.rsqrt(variance + EPS)
    x = x.to(orig_dtype)
    return x * w


def _vllm_apply_rotary(x, cos, sin, is_neox):
    cos = cos.unsqueeze(-2).to(x.dtype)
    sin = sin.unsqueeze(-2).to(x.dtype)
    if is_neox:
        x1, x2 = torch.chunk(x, 2, dim=-1)
    else:
        x1, x2 = x[..., ::2], x[..., 1::2]
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    if is_neox:
        return torch.cat((o1, o2), dim=-1)
    return torch.stack((o1, o2), dim=-1).flatten(-2)


def _vllm_rope(positions, query, key, head_size, rotary_dim, cache, is_neox):
    """RotaryEmbedding.forward_native on [T, H * D] q and k."""
    positions = positions.flatten()
    num_tokens = positions.shape[0]
    cos_sin = cache.index_select(0, positions)
    cos, sin = cos_sin.chunk(2, dim=-1)
    outs = []
    for x in (query, key):
        shape = x.shape
        x = x.view(num_tokens, -1, head_size)
        rot = _vllm_apply_rotary(x[..., :rotary_dim], cos, sin, is_neox)
        outs.append(torch.cat((rot, x[..., rotary_dim:]), dim=-1).reshape(shape))
    return outs


def _vllm_qk_norm_rope(q, k, qw, kw, pos, d, rotary_dim, cache, is_neox, norm=True):
    """Qwen3 in vLLM: q/k by head, RMSNorm (native), back to [T, H * D], rotary (native)."""
    t = q.shape[0]
    q2, k2 = q.reshape(t, -1), k.reshape(t, -1)
    if norm:
        q2 = _vllm_rms_norm(q2.view(t, -1, d), qw).view(t, -1)
        k2 = _vllm_rms_norm(k2.view(t, -1, d), kw).view(t, -1)
    qo, ko = _vllm_rope(pos, q2, k2, d, rotary_dim, cache, is_neox)
    return qo.view(t, -1, d), ko.view(t, -1, d)


def _gemma_norm(x, w):  # Gemma3RMSNorm
    h = x.float()
    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    out = out * (1.0 + w.float())
    return out.type_as(x)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(_bits(a), _bits(b))


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_reference_is_hf_qwen3(dtype):
    q, k, _, qw, kw, pos = _qkv(7, 4, 2, 128, DTYPES[dtype])
    want = _hf_qwen3(q, k, qw, kw, pos, 128)
    cos, sin = _hf_tables(pos, 128, q.dtype)
    got = ref.qk_norm_rope(q, k, qw, kw, cos, sin, None, None, eps=EPS, is_neox=True,
                           rotary_dim=128)
    assert _same(got[0], want[0].contiguous()) and _same(got[1], want[1].contiguous())


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("table_dtype", ["bf16", "fp32"])
@pytest.mark.parametrize(("is_neox", "rotary_dim"), [(True, 128), (False, 128), (True, 64),
                                                     (False, 32)])
@pytest.mark.parametrize("norm", [True, False])
def test_reference_is_vllm_native(dtype, table_dtype, is_neox, rotary_dim, norm):
    q, k, _, qw, kw, pos = _qkv(9, 4, 2, 128, DTYPES[dtype], seed=rotary_dim)
    cache = _cos_sin_cache(rotary_dim, DTYPES[table_dtype])
    want = _vllm_qk_norm_rope(q, k, qw, kw, pos, 128, rotary_dim, cache, is_neox, norm)
    got = ref.qk_norm_rope(q, k, qw if norm else None, kw if norm else None, None, None, pos,
                           cache, eps=EPS, is_neox=is_neox, rotary_dim=rotary_dim)
    assert _same(got[0], want[0]) and _same(got[1], want[1])
    # The half-width table form gives the same bits (the cache rows, split).
    cs = cache[pos]
    half = ref.qk_norm_rope(q, k, qw if norm else None, kw if norm else None,
                            cs[:, : rotary_dim // 2], cs[:, rotary_dim // 2:], None, None,
                            eps=EPS, is_neox=is_neox, rotary_dim=rotary_dim)
    assert _same(half[0], want[0]) and _same(half[1], want[1])


def _vllm_mrope_tables(cache, positions, sections, interleaved):
    """MRotaryEmbedding.forward_native's tables (vLLM 0.32): the cache rows at the three position
    rows, then per channel the row its section names (`apply_interleaved_rope`, or the sections'
    `cat`)."""
    cos, sin = cache[positions].chunk(2, dim=-1)
    out = []
    for x in (cos, sin):
        if interleaved:
            ch = torch.arange(x.shape[-1])
            picked = torch.where((ch % 3 == 1) & (ch < sections[1] * 3), x[1], x[0])
            out.append(torch.where((ch % 3 == 2) & (ch < sections[2] * 3), x[2], picked))
        else:
            out.append(torch.cat([m[i] for i, m in enumerate(x.split(sections, dim=-1))], -1))
    return out


MROPES = [((24, 20, 20), True, True), ((16, 24, 24), False, True), ((8, 12, 12), True, False)]


@pytest.mark.parametrize(("sections", "interleaved", "is_neox"), MROPES)
def test_reference_multimodal_is_vllm_native(sections, interleaved, is_neox):
    """A multimodal rope's two forms (positions `[3, T]` + cache; the tables at the three rows
    `[3, T, rotary_dim / 2]`, strided halves of one gather as vLLM's CUDA path passes them) give
    vLLM's native bits: the rows picked per channel, then its rotary."""
    rd = 2 * sum(sections)
    q, k, _, qw, kw, _ = _qkv(9, 4, 2, 128, torch.bfloat16, seed=rd)
    pos3 = torch.randint(0, MAX_POS, (3, 9), generator=torch.Generator().manual_seed(5))
    cache = _cos_sin_cache(rd, torch.bfloat16)
    cos, sin = _vllm_mrope_tables(cache, pos3, list(sections), interleaved)
    want = [_vllm_rms_norm(x, w) for x, w in ((q, qw), (k, kw))]
    want = [torch.cat((_vllm_apply_rotary(x[..., :rd], cos, sin, is_neox), x[..., rd:]), -1)
            for x in want]
    mm = {"mrope_section": list(sections), "mrope_interleaved": interleaved}
    opts = {"eps": EPS, "is_neox": is_neox, "rotary_dim": rd, **mm}
    by_cache = ref.qk_norm_rope(q, k, qw, kw, None, None, pos3, cache, **opts)
    cos3, sin3 = cache[pos3].chunk(2, dim=-1)
    by_table = ref.qk_norm_rope(q, k, qw, kw, cos3, sin3, None, None, **opts)
    for got in (by_cache, by_table):
        assert _same(got[0], want[0]) and _same(got[1], want[1])


def test_reference_is_f_rms_norm_with_weight_f32():
    q, k, _, qw, kw, pos = _qkv(6, 4, 2, 128, torch.bfloat16, seed=3)
    cache = _cos_sin_cache(128, torch.bfloat16)
    t = q.shape[0]
    qn = F.rms_norm(q, (128,), qw, EPS).reshape(t, -1)
    kn = F.rms_norm(k, (128,), kw, EPS).reshape(t, -1)
    want = _vllm_rope(pos, qn, kn, 128, 128, cache, True)
    got = ref.qk_norm_rope(q, k, qw, kw, None, None, pos, cache, eps=EPS, is_neox=True,
                           rotary_dim=128, weight_f32=True)
    assert _same(got[0], want[0].view(t, 4, 128)) and _same(got[1], want[1].view(t, 2, 128))
    plain = ref.qk_norm_rope(q, k, qw, kw, None, None, pos, cache, eps=EPS, is_neox=True,
                             rotary_dim=128)
    assert not torch.equal(plain[0], got[0])  # the option matters on these inputs


def test_reference_is_gemma_offset_norm():
    q, k, _, qw, kw, pos = _qkv(6, 4, 2, 128, torch.bfloat16, seed=4)
    qw, kw = qw - 1.0, kw - 1.0  # Gemma stores w - 1
    cos, sin = _hf_tables(pos, 128, torch.bfloat16)
    qn, kn = _gemma_norm(q, qw), _gemma_norm(k, kw)
    want = [x * cos[:, None] + _rotate_half(x) * sin[:, None] for x in (qn, kn)]
    got = ref.qk_norm_rope(q, k, qw, kw, cos, sin, None, None, eps=EPS, is_neox=True,
                           rotary_dim=128, weight_offset=1.0)
    assert _same(got[0], want[0]) and _same(got[1], want[1])


def test_reference_is_rope_in_float32_and_hf_gptj_tables():
    q, k, _, qw, kw, pos = _qkv(6, 4, 2, 64, torch.bfloat16, seed=5)
    cos, sin = _hf_tables(pos, 64, torch.float32)
    want = []
    for x, w in ((q, qw), (k, kw)):
        h = _vllm_rms_norm(x, w).float()
        want.append((h * cos[:, None] + _rotate_half(h) * sin[:, None]).to(torch.bfloat16))
    got = ref.qk_norm_rope(q, k, qw, kw, cos, sin, None, None, eps=EPS, is_neox=True,
                           rotary_dim=64, rope_f32=True)
    assert _same(got[0], want[0]) and _same(got[1], want[1])
    # GPT-J with interleaved duplicated tables (rotate_every_two), no norm.
    cos, sin = _hf_tables(pos, 64, torch.bfloat16, neox=False)

    def every_two(x):
        return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)

    want = [x * cos[:, None] + every_two(x) * sin[:, None] for x in (q, k)]
    got = ref.qk_norm_rope(q, k, None, None, cos, sin, None, None, eps=EPS, is_neox=False,
                           rotary_dim=64)
    assert _same(got[0], want[0].contiguous()) and _same(got[1], want[1].contiguous())


def _slots(t, num_slots, device="cpu", seed=0):
    """Distinct slots for t tokens, every third one -1 (padding)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    s = torch.randperm(num_slots, generator=gen)[:t]
    s[1::3] = -1
    return s.to(device)


@pytest.mark.parametrize("cache_dtype", ["bf16", "fp8"])
def test_reference_kv_is_index_put_into_unbound_5d_cache(cache_dtype):
    t, hk, d, nb, bs = 11, 2, 128, 3, 16
    q, k, v, qw, kw, pos = _qkv(t, 4, hk, d, torch.bfloat16, seed=6)
    cache = _cos_sin_cache(128, torch.bfloat16)
    cdt = torch.bfloat16 if cache_dtype == "bf16" else FP8
    kv = torch.randn(2, nb, bs, hk, d).to(cdt)  # vLLM's FlashAttention layout
    want_kv = kv.clone()
    slots = _slots(t, nb * bs, seed=1)
    k_scale, v_scale = torch.tensor(0.25), torch.tensor([3.0])
    # The model: norm + rope, then reshape_and_cache_flash's semantics with index_put.
    qo, ko = _vllm_qk_norm_rope(q, k, qw, kw, pos, d, 128, cache, True)
    keep = slots >= 0
    wk, wv = ko[keep], v[keep]
    if cdt == FP8:
        wk = (wk.float() / k_scale).clamp(-448, 448).to(FP8)
        wv = (wv.float() / v_scale).clamp(-448, 448).to(FP8)
    kc_w, vc_w = want_kv.unbind(0)
    kc_w.view(-1, hk, d).index_put_((slots[keep],), wk)
    vc_w.view(-1, hk, d).index_put_((slots[keep],), wv)
    kc, vc = kv.unbind(0)
    got = ref.qk_norm_rope_kv(q, k, v, qw, kw, None, None, pos, cache, kc, vc, slots, k_scale,
                              v_scale, eps=EPS, is_neox=True, rotary_dim=128)
    assert _same(got, qo)
    assert _same(kv, want_kv)
    assert not _same(kv, torch.randn(2, nb, bs, hk, d).to(cdt))


@pytest.mark.parametrize(("change", "message"), [
    ({"rotary_dim": 3}, "rotary_dim must be even"),
    ({"rotary_dim": 256}, "rotary_dim must be even"),
    ({"cos": "table"}, "exactly one of"),
    ({"positions": None}, "go together"),
    ({"q_weight": torch.ones(64)}, "q_weight must be None or"),
    ({"k": torch.zeros(3, 2, 128, dtype=torch.float16)}, "different dtypes"),
    ({"k": torch.zeros(2, 2, 128, dtype=torch.bfloat16)}, "does not match q"),
])
def test_reference_refuses_bad_arguments(change, message):
    q, k, _, qw, kw, pos = _qkv(3, 4, 2, 128, torch.bfloat16)
    args = {"q": q, "k": k, "q_weight": qw, "k_weight": kw, "cos": None, "sin": None,
            "positions": pos, "cos_sin_cache": _cos_sin_cache(128, torch.float32),
            "rotary_dim": 128}
    args.update(change)
    if args["cos"] == "table":
        args["cos"], args["sin"] = _hf_tables(pos, 128, torch.bfloat16)
    rd = args.pop("rotary_dim")
    with pytest.raises(ValueError, match=message):
        ref.qk_norm_rope(**args, eps=EPS, is_neox=True, rotary_dim=rd)


def test_reference_kv_refuses_short_slot_mapping_and_fp8_without_scales():
    q, k, v, qw, kw, pos = _qkv(4, 4, 2, 64, torch.bfloat16)
    cache = _cos_sin_cache(64, torch.bfloat16)
    kc = torch.zeros(2, 16, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="slot_mapping has 3 entries for 4 tokens"):
        ref.qk_norm_rope_kv(q, k, v, qw, kw, None, None, pos, cache, kc, kc.clone(),
                            torch.arange(3), None, None, eps=EPS, is_neox=True, rotary_dim=64)
    kc8 = kc.to(FP8)
    with pytest.raises(ValueError, match="needs k_scale"):
        ref.qk_norm_rope_kv(q, k, v, qw, kw, None, None, pos, cache, kc8, kc8.clone(),
                            torch.arange(4), None, None, eps=EPS, is_neox=True, rotary_dim=64)


# --- the kernel against the reference ----------------------------------------------------------

BASE = {"T": 5, "hq": 4, "hk": 2, "d": 64, "rd": 64, "dtype": "bf16", "neox": True,
        "norm": "qk", "table": "cache", "table_dtype": "bf16", "weight_f32": False,
        "offset": 0.0, "rope_f32": False, "kv": None, "dv": None, "config": None,
        "return_k": False, "mrope": None}


def _case(**kw) -> dict:
    unknown = set(kw) - set(BASE)
    assert not unknown, unknown
    return {**BASE, **kw}


KERNEL_CASES = [
    _case(T=1), _case(T=17), _case(T=5, norm="none"), _case(T=17, norm="none", neox=False),
    _case(d=128, rd=128), _case(d=128, rd=32), _case(d=128, rd=32, neox=False, T=17),
    _case(d=128, rd=64, norm="none", neox=False), _case(norm="q"),
    _case(table="full", d=128, rd=128), _case(table="full", neox=False, norm="none"),
    _case(table="half", table_dtype="fp32"), _case(table="bcast", norm="none"),
    _case(table_dtype="fp32", rope_f32=True), _case(table="full", rope_f32=True, norm="none"),
    _case(weight_f32=True), _case(offset=1.0, table="full"),
    _case(dtype="fp16", d=128, rd=32), _case(dtype="fp16", norm="none", table_dtype="fp32"),
    _case(dtype="fp32", table_dtype="fp32"), _case(dtype="fp32", norm="none", neox=False),
    _case(T=17, config=(4, 2, 2)), _case(T=5, config=(8, 4, 1), norm="none"),
    _case(hq=6, hk=3, d=128, rd=64, config=(2, 4, 2)),
    _case(kv="same", T=17), _case(kv="same", norm="none", d=128, rd=32),
    _case(kv="fp8", T=17), _case(kv="fp8", norm="none", neox=False),
    _case(kv="same", dv=32, d=128, rd=128, config=(4, 2, 2)),
    _case(kv="fp8", T=1, table="full", d=128, rd=128), _case(kv="same", T=5, dtype="fp16"),
    # The rotated k returned too (a k read besides the cache write).
    _case(kv="same", T=17, return_k=True), _case(kv="fp8", norm="none", return_k=True),
    _case(kv="same", dv=32, d=128, rd=64, neox=False, return_k=True, config=(4, 2, 2)),
    # A multimodal rope: positions [3, T] + cache, or the gathered tables [3, T, rd / 2].
    _case(T=17, mrope=((16, 8, 8), False)), _case(T=5, mrope=((12, 10, 10), True)),
    _case(T=17, table="half", mrope=((12, 10, 10), True)),
    _case(table="half", neox=False, norm="none", d=128, rd=64, mrope=((16, 8, 8), False)),
    _case(kv="same", T=17, mrope=((12, 10, 10), True)),
    _case(kv="fp8", table="half", return_k=True, mrope=((16, 8, 8), False)),
]


def _case_id(c: dict) -> str:
    parts = [f"T{c['T']}", f"H{c['hq']}x{c['hk']}", f"D{c['d']}", f"R{c['rd']}", c["dtype"],
             "neox" if c["neox"] else "gptj", f"norm-{c['norm']}", f"{c['table']}-{c['table_dtype']}"]
    for key in ("weight_f32", "rope_f32"):
        if c[key]:
            parts.append(key)
    if c["offset"]:
        parts.append(f"offset{c['offset']}")
    if c["kv"]:
        parts.append(f"kv-{c['kv']}" + (f"-dv{c['dv']}" if c["dv"] else ""))
    if c["return_k"]:
        parts.append("return_k")
    if c["config"]:
        parts.append("cfg" + "x".join(map(str, c["config"])))
    if c["mrope"]:
        parts.append("mrope" + "x".join(map(str, c["mrope"][0]))
                     + ("-interleaved" if c["mrope"][1] else ""))
    return "-".join(parts)


def _pair_mag(x: torch.Tensor, is_neox: bool, rotary_dim: int) -> torch.Tensor:
    """|(x1, x2)| of each rotated element's pair (|x| past rotary_dim), in float32."""
    x = x.float()
    half = rotary_dim // 2
    m = x.abs().clone()
    if is_neox:
        a, b = x[..., :half], x[..., half:rotary_dim]
        mag = torch.sqrt(a * a + b * b)
        m[..., :half], m[..., half:rotary_dim] = mag, mag
    else:
        a, b = x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]
        mag = torch.sqrt(a * a + b * b)
        m[..., 0:rotary_dim:2], m[..., 1:rotary_dim:2] = mag, mag
    return m


def _close(out, want, exact: bool, dtype: torch.dtype, is_neox: bool, rotary_dim: int,
           deq_scale: float | None = None) -> str | None:
    """None if out agrees with want (bit for bit with `exact`), else what differs."""
    if out.shape != want.shape or out.dtype != want.dtype:
        return f"{tuple(out.shape)} {out.dtype} vs {tuple(want.shape)} {want.dtype}"
    if exact:
        if _same(out, want):
            return None
        off = (_bits(out) != _bits(want)).float().mean().item()
        return f"not bit for bit: {off:.2%} of the elements differ"
    a, b = out.float(), want.float()
    rel = 0.0
    if deq_scale is not None:  # FP8 values: one code step (1/8) on top
        a, b, rel = a * deq_scale, b * deq_scale, 0.125
    step = 1e-5 if dtype == torch.float32 else 2 * torch.finfo(dtype).eps
    m = _pair_mag(b, is_neox, rotary_dim)
    bound = (rel + step) * torch.maximum(a.abs(), b.abs()) + step * m
    far = ((a - b).abs() > bound * (1 + 1e-6)).sum().item()
    agr = agreement(a, b, step_rel=1.0)
    if far or agr.mismatch > (1.0 if dtype == torch.float32 else 0.01) or agr.mean_rel_err > 1e-3:
        return f"{far} elements beyond 2 ulp of the pair; {agr}"
    return None


def check_case(c: dict, device: str) -> dict:
    """Run the kernel and the reference on one case; {"ok": bool, "detail": str}."""
    from irfuse.kernels import qk_norm_rope as kern

    dtype = DTYPES[c["dtype"]]
    t, hq, hk, d, rd = c["T"], c["hq"], c["hk"], c["d"], c["rd"]
    q, k, v, qw, kw, pos = _qkv(t, hq, hk, d, dtype, device, seed=t * 7 + d + rd, dv=c["dv"])
    qw = qw if c["norm"] in ("qk", "q") else None
    kw = kw if c["norm"] == "qk" else None
    if c["offset"]:
        qw = None if qw is None else qw - 1.0
        kw = None if kw is None else kw - 1.0
    tdt = DTYPES[c["table_dtype"]]
    cos = sin = positions = cache = None
    if c["table"] == "cache":
        positions, cache = pos, _cos_sin_cache(rd, tdt, device)
        if t > 1:
            positions = positions.to(torch.int32)
    elif c["table"] == "full":
        cos, sin = _hf_tables(pos, rd, tdt, c["neox"])
    elif c["table"] == "half":
        f = _freqs(pos, rd)
        cos, sin = f.cos().to(tdt), f.sin().to(tdt)
    else:  # "bcast": one position for every token, stride 0
        f = _freqs(pos[:1], rd)
        cos, sin = f.cos().to(tdt).expand(t, -1), f.sin().to(tdt).expand(t, -1)
    opts = {"eps": EPS, "is_neox": c["neox"], "rotary_dim": rd, "weight_offset": c["offset"],
            "weight_f32": c["weight_f32"], "rope_f32": c["rope_f32"]}
    if c["mrope"]:  # three position rows; the tables: strided halves of one gather (vLLM's)
        gen = torch.Generator(device=device).manual_seed(t)
        pos3 = torch.randint(0, MAX_POS, (3, t), generator=gen, device=device)
        mcache = _cos_sin_cache(rd, tdt, device)
        if c["table"] == "cache":
            positions, cache = pos3, mcache
        else:
            cos, sin = mcache[pos3].chunk(2, dim=-1)
        opts.update(mrope_section=list(c["mrope"][0]), mrope_interleaved=c["mrope"][1])
    cfg = kern.RopeConfig(*c["config"]) if c["config"] else None
    exact = c["norm"] == "none"
    problems = []
    if c["kv"] is None:
        out = kern.qk_norm_rope(q, k, qw, kw, cos, sin, positions, cache, config=cfg, **opts)
        want = ref.qk_norm_rope(q, k, qw, kw, cos, sin, positions, cache, **opts)
        for name, o, w, ex in (("q", out[0], want[0], exact or qw is None),
                               ("k", out[1], want[1], exact or kw is None)):
            if not o.is_contiguous():
                problems.append(f"{name} not contiguous")
            p = _close(o, w, ex, dtype, c["neox"], rd)
            if p:
                problems.append(f"{name}: {p}")
    else:
        nb, bs = 4, 16
        dv = v.shape[-1]
        cdt = dtype if c["kv"] == "same" else FP8
        gen = torch.Generator(device=device).manual_seed(t)
        if dv == d:  # vLLM's FlashAttention layout, unbound
            kv = torch.randn(2, nb, bs, hk, d, generator=gen, device=device).to(cdt)
            caches = [kv[0], kv[1]]
        else:
            caches = [torch.randn(nb, bs, hk, x, generator=gen, device=device).to(cdt)
                      for x in (d, dv)]
        want_caches = [x.clone() for x in caches]
        slots = _slots(t, nb * bs, device, seed=t)
        ks = torch.tensor(0.2, device=device)
        vs = torch.tensor([1.7], device=device)
        rk = c["return_k"]
        out = kern.qk_norm_rope_kv(q, k, v, qw, kw, cos, sin, positions, cache, *caches, slots,
                                   ks, vs, config=cfg, return_k=rk, **opts)
        want = ref.qk_norm_rope_kv(q, k, v, qw, kw, cos, sin, positions, cache, *want_caches,
                                   slots, ks, vs, return_k=rk, **opts)
        if rk:
            p = _close(out[1], want[1], exact or kw is None, dtype, c["neox"], rd)
            if p:
                problems.append(f"k: {p}")
            if not out[1].is_contiguous():
                problems.append("k not contiguous")
            out, want = out[0], want[0]
        p = _close(out, want, exact or qw is None, dtype, c["neox"], rd)
        if p:
            problems.append(f"q: {p}")
        fp8 = cdt == FP8
        for name, got, exp, ex, sc in (("k_cache", caches[0], want_caches[0], exact or kw is None, ks),
                                       ("v_cache", caches[1], want_caches[1], True, vs)):
            p = _close(got, exp, ex, dtype, c["neox"], rd, float(sc) if fp8 else None)
            if p:
                problems.append(f"{name}: {p}")
    return {"ok": not problems, "detail": "; ".join(problems) or "ok"}


def check_keep_k_vllm_layout(device: str) -> dict:
    """`qk_norm_rope_kv` returning k on vLLM 0.32's cache (`[blocks, kv_heads, block_size,
    2 * D]`, HND or NHD strides, k and v halves split on the last dim as its FlashAttention backend
    splits them): q_out, k_out and the cache as the references give them (rope only: exact;
    with the norms: within the kernel's usual agreement), and an FP8 cache's bytes exactly."""
    from irfuse.kernels import qk_norm_rope as kern

    t, hq, hk, d, nb, bs = 5, 4, 2, 64, 4, 16
    problems = []
    for layout in ("HND", "NHD"):
        for norm in (False, True):
            q, k, v, qw, kw, pos = _qkv(t, hq, hk, d, torch.bfloat16, device, seed=3)
            qw, kw = (qw, kw) if norm else (None, None)
            cache = _cos_sin_cache(d, torch.bfloat16, device)
            gen = torch.Generator(device=device).manual_seed(9)
            if layout == "HND":
                kv = torch.randn(nb, hk, bs, 2 * d, generator=gen, device=device)
            else:
                kv = torch.randn(nb, bs, hk, 2 * d, generator=gen, device=device).transpose(1, 2)
            kv = kv.to(torch.bfloat16)
            want = kv.clone()
            slots = _slots(t, nb * bs, device, seed=t)
            opts = {"eps": EPS, "is_neox": True, "rotary_dim": d}
            qo, ko = kern.qk_norm_rope_kv(q, k, v, qw, kw, None, None, pos, cache,
                                          *kv.transpose(1, 2).split(d, -1), slots, None, None,
                                          return_k=True, **opts)
            wq = ref.qk_norm_rope_kv(q, k, v, qw, kw, None, None, pos, cache,
                                     *want.transpose(1, 2).split(d, -1), slots, None, None,
                                     **opts)
            _, wk = ref.qk_norm_rope(q, k, qw, kw, None, None, pos, cache, **opts)
            for name, o, w in (("q", qo, wq), ("k", ko, wk), ("cache", kv, want)):
                p = _close(o, w, not norm, torch.bfloat16, True, d)
                if p:
                    problems.append(f"{layout} norm={norm} {name}: {p}")
        # vLLM's FP8 cache (uint8, viewed as e4m3) scaled per tensor: the same bytes.
        q, k, v, _, _, pos = _qkv(t, hq, hk, d, torch.bfloat16, device, seed=4)
        gen = torch.Generator(device=device).manual_seed(10)
        kv = torch.randn(nb, hk, bs, 2 * d, generator=gen, device=device).to(torch.float8_e4m3fn)
        if layout == "NHD":
            kv = kv.transpose(1, 2).contiguous().transpose(1, 2)
        want = kv.clone()
        scales = (torch.tensor([0.05], device=device), torch.tensor([0.125], device=device))
        slots = _slots(t, nb * bs, device, seed=t + 1)
        opts = {"eps": EPS, "is_neox": False, "rotary_dim": d}
        qo, ko = kern.qk_norm_rope_kv(q, k, v, None, None, None, None, pos, cache,
                                      *kv.transpose(1, 2).split(d, -1), slots, *scales,
                                      return_k=True, **opts)
        wq, wk = ref.qk_norm_rope_kv(q, k, v, None, None, None, None, pos, cache,
                                     *want.transpose(1, 2).split(d, -1), slots, *scales,
                                     return_k=True, **opts)
        if not (torch.equal(qo, wq) and torch.equal(ko, wk)
                and torch.equal(kv.view(torch.uint8), want.view(torch.uint8))):
            problems.append(f"{layout} fp8: q, k or the cache bytes differ")
    return {"ok": not problems, "detail": "; ".join(problems) or "ok"}


def _worker() -> None:
    import json

    import triton

    assert triton.knobs.runtime.interpret, "TRITON_INTERPRET=1 must be set before triton loads"
    results = {}
    for c in KERNEL_CASES:
        key = _case_id(c)
        try:
            results[key] = check_case(c, "cpu")
        except Exception as e:  # noqa: BLE001 (reported to the test of that case)
            results[key] = {"ok": False, "detail": f"raised {type(e).__name__}: {e}"}
    from irfuse.kernels import qk_norm_rope as kern

    q, k, _, qw, kw, pos = _qkv(0, 4, 2, 64, torch.bfloat16)
    qo, ko = kern.qk_norm_rope(q, k, qw, kw, None, None, pos, _cos_sin_cache(64, torch.bfloat16),
                               eps=EPS, is_neox=True, rotary_dim=64)
    results["empty"] = {"ok": qo.shape == (0, 4, 64) and ko.shape == (0, 2, 64), "detail": ""}
    try:
        results["keep_k_vllm_layout"] = check_keep_k_vllm_layout("cpu")
    except Exception as e:  # noqa: BLE001 (reported to its test)
        results["keep_k_vllm_layout"] = {"ok": False, "detail": f"raised {type(e).__name__}: {e}"}
    print(json.dumps(results))


@pytest.fixture(scope="module")
def interpreted() -> dict:
    from interpret_worker import run_worker

    return run_worker(__file__)


@pytest.mark.parametrize("case", KERNEL_CASES, ids=_case_id)
def test_kernel_matches_reference_interpreted(interpreted, case):
    r = interpreted[_case_id(case)]
    assert r["ok"], r["detail"]


def test_kernel_takes_no_tokens_interpreted(interpreted):
    assert interpreted["empty"]["ok"]


def test_kernel_keeps_k_and_writes_vllms_cache_interpreted(interpreted):
    r = interpreted["keep_k_vllm_layout"]
    assert r["ok"], r["detail"]


def test_kernel_default_config():
    from irfuse.kernels import qk_norm_rope as kern

    for t in (1, 16, 4096, 16384):
        cfg = kern.rope_config(t, 40, 128)
        assert cfg.heads & (cfg.heads - 1) == 0 and cfg.tokens & (cfg.tokens - 1) == 0
        assert 1 <= cfg.num_warps <= 8


QWEN3 = {"hq": 32, "hk": 8, "d": 128, "rd": 128}
GPU_CASES = [_case(T=t, **QWEN3) for t in (1, 7, 256, 4096)] + [
    _case(T=4096, norm="none", **QWEN3), _case(T=1024, neox=False, **QWEN3),
    _case(T=333, hq=32, hk=8, d=128, rd=64), _case(T=1000, hq=32, hk=8, d=128, rd=64, neox=False,
                                                   norm="none"),
    _case(T=2048, table="full", table_dtype="bf16", **QWEN3),
    _case(T=512, table="full", rope_f32=True, table_dtype="fp32", **QWEN3),
    _case(T=512, weight_f32=True, **QWEN3), _case(T=512, offset=1.0, **QWEN3),
    _case(T=4096, dtype="fp16", **QWEN3), _case(T=777, dtype="fp32", table_dtype="fp32", **QWEN3),
    _case(T=1, kv="same", **QWEN3), _case(T=33, kv="same", **QWEN3),
    _case(T=64, kv="fp8", **QWEN3), _case(T=64, kv="fp8", norm="none", **QWEN3),
    _case(T=40, kv="same", norm="none", neox=False, hq=32, hk=8, d=128, rd=64),
    # Qwen3-VL's multimodal rope (interleaved [24, 20, 20]) in both forms; Qwen2-VL's [16, 24, 24].
    *(_case(T=t, mrope=((24, 20, 20), True), table=tb, **QWEN3)
      for t in (1, 128, 4096) for tb in ("cache", "half")),
    _case(T=300, mrope=((16, 24, 24), False), **QWEN3),
    _case(T=64, kv="same", table="half", mrope=((24, 20, 20), True), **QWEN3),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=_case_id)
def test_kernel_matches_reference_on_gpu(case):
    r = check_case(case, "cuda")
    assert r["ok"], r["detail"]


@pytest.mark.gpu
def test_keep_k_on_vllms_cache_on_gpu():
    """The kernel behind every `_k` op (the rotated k returned besides the cache write)."""
    r = check_keep_k_vllm_layout("cuda")
    assert r["ok"], r["detail"]


@pytest.mark.gpu
def test_kernel_refuses_cpu_tensors_and_is_captured_by_a_cuda_graph():
    from irfuse.kernels import qk_norm_rope as kern

    q, k, _, qw, kw, pos = _qkv(4, 32, 8, 128, torch.bfloat16)
    cache = _cos_sin_cache(128, torch.bfloat16)
    with pytest.raises(RuntimeError, match="need CUDA tensors"):
        kern.qk_norm_rope(q, k, qw, kw, None, None, pos, cache, eps=EPS, is_neox=True,
                          rotary_dim=128)
    q, k, _, qw, kw, pos = _qkv(64, 32, 8, 128, torch.bfloat16, "cuda")
    cache = _cos_sin_cache(128, torch.bfloat16, "cuda")

    def run():
        return kern.qk_norm_rope(q, k, qw, kw, None, None, pos, cache, eps=EPS, is_neox=True,
                                 rotary_dim=128)

    run()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        qo, ko = run()
    q.copy_(torch.randn_like(q))
    g.replay()
    torch.cuda.synchronize()
    qr, kr = run()
    assert torch.equal(qo, qr) and torch.equal(ko, kr)


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker()
