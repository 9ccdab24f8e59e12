"""Torch reference quantizers and dequantizers: the definition of irfuse's quantization numerics.

Every function here follows `docs/numerics.md` to the letter (FP8 static, dynamic per-token,
per-tensor and per-group, and NVFP4; they mirror vLLM's reference semantics), runs on any device
torch supports, and is what the CPU path of the custom ops calls. The Triton kernels are tested
against these functions, and the dequantizers are what the tests use for "dequantized compare".

`M` is the largest magnitude the scheme uses: 448 for float8_e4m3fn, 224 for ROCm's
float8_e4m3fnuz (as vLLM does), and `MIN_SCALE = 1 / (M * 512)`. Every division by a constant
divides by a float32 tensor on the input's device (`_div_const`), never by a Python number, so
these functions give the same bits on CPU and CUDA, as the Triton kernels do.
"""

from __future__ import annotations

import torch

FP8_DTYPES: tuple[torch.dtype, ...] = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)
MODEL_DTYPES: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16, torch.float32)
GROUP_AMAX_FLOOR = 1e-10
NVFP4_BLOCK = 16
E2M1_MAX = 6.0
NVFP4_SCALE_DTYPE = torch.float8_e4m3fn
_FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e4m3fnuz: 224.0}
# The eight magnitudes of e2m1, indexed by the 3-bit code.
_E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def fp8_max(dtype: torch.dtype) -> float:
    """The clamp bound M of an FP8 output dtype (448 for e4m3fn, 224 for e4m3fnuz)."""
    check_fp8_dtype(dtype)
    return _FP8_MAX[dtype]


def fp8_min_scale(dtype: torch.dtype) -> float:
    """MIN_SCALE = 1 / (M * 512), the floor of every dynamic scale."""
    return 1.0 / (fp8_max(dtype) * 512.0)


def check_fp8_dtype(dtype: torch.dtype) -> None:
    """Raise a ValueError unless `dtype` is an FP8 dtype irfuse quantizes to."""
    if dtype not in _FP8_MAX:
        raise ValueError(f"irfuse: unsupported FP8 output dtype {dtype}; expected one of "
                         f"{', '.join(str(d) for d in FP8_DTYPES)}")


def check_model_dtype(x: torch.Tensor, what: str = "input") -> None:
    """Raise a ValueError unless `x` is bf16, fp16 or fp32."""
    if x.dtype not in MODEL_DTYPES:
        raise ValueError(f"irfuse: unsupported {what} dtype {x.dtype}; expected bfloat16, "
                         "float16 or float32")


def check_group_size(hidden: int, group_size: int) -> None:
    """Raise a ValueError unless `group_size` is positive and divides `hidden`."""
    if group_size <= 0 or hidden % group_size != 0:
        raise ValueError(f"irfuse: group size {group_size} does not divide the last dimension "
                         f"{hidden}")


def _div_const(t: torch.Tensor, c: float) -> torch.Tensor:
    """`t / c` rounded once (IEEE division) on every device: divides by a 0-dim float32 tensor
    on t's device, since CUDA turns a division by a Python number (or by a CPU scalar tensor)
    into a multiply by the rounded reciprocal. ATen's true-division kernel turns a CPU scalar
    divisor into a multiply by its float32 reciprocal, one rounding away from the quotient,
    which gives other scales than the CPU for some amax (e.g. `amax * fp32(1/448)`); divided by
    a device tensor, both devices compute the IEEE quotient, as the Triton kernels
    (`tl.math.div_rn`) do. Every division by a constant (`amax / M`, `gs * amax / 6`) goes
    through here."""
    return t / t.new_full((), c, dtype=torch.float32)


def _scalar_f32(t: torch.Tensor, what: str) -> torch.Tensor:
    if t.numel() != 1:
        raise ValueError(f"irfuse: {what} must have one element, got shape {tuple(t.shape)}")
    return t.reshape(()).float()


# ---------------------------------------------------------------------------------------------
# FP8


def quant_fp8_static(x: torch.Tensor, scale: torch.Tensor,
                     out_dtype: torch.dtype = torch.float8_e4m3fn,
                     divide: bool = False) -> torch.Tensor:
    """Static per-tensor FP8: `fp8(clamp(x * (1 / scale), -M, M))`, same shape as `x`; with
    `divide`, `fp8(clamp(x / scale, -M, M))` (float32 division, rounded once), as a model that
    spells its quant `x / s` computes it. The two differ where `x / s` sits on a tie between two
    fp8 values and `x * (1 / s)`, one float32 rounding away, does not."""
    check_model_dtype(x)
    m = fp8_max(out_dtype)
    s = _scalar_f32(scale, "a static FP8 scale")
    scaled = x.float() / s if divide else x.float() * (1.0 / s)
    return scaled.clamp(-m, m).to(out_dtype)


def quant_fp8_per_token(x: torch.Tensor, scale_ub: torch.Tensor | None = None,
                        out_dtype: torch.dtype = torch.float8_e4m3fn, reciprocal: bool = False,
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-token FP8: returns (q like x, scales [..., 1] float32),
    `s_t = max(min(amax_t, ub) / M, MIN_SCALE)`, `q = fp8(clamp(x / s_t))`; `reciprocal`
    scales by `x * (1 / s)` instead, as a model that spells its quant `x * s.reciprocal()`
    (vLLM's native QuantFP8) computes it."""
    check_model_dtype(x)
    m = fp8_max(out_dtype)
    x32 = x.float()
    amax = x32.abs().amax(dim=-1, keepdim=True)
    if scale_ub is not None:
        amax = torch.minimum(amax, _scalar_f32(scale_ub, "scale_ub"))
    s = _div_const(amax, m).clamp(min=fp8_min_scale(out_dtype))
    return (_scaled(x32, s, reciprocal)).clamp(-m, m).to(out_dtype), s


def _scaled(x32: torch.Tensor, s: torch.Tensor, reciprocal: bool) -> torch.Tensor:
    """`x32 / s`, or `x32 * (1 / s)` with the reciprocal rounded to float32 first."""
    return x32 * s.reciprocal() if reciprocal else x32 / s


def quant_fp8_per_tensor(x: torch.Tensor, out_dtype: torch.dtype = torch.float8_e4m3fn,
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-tensor FP8: returns (q like x, scale [1] float32),
    `s = max(amax / M, MIN_SCALE)`, then the static rule with that `s`."""
    check_model_dtype(x)
    m = fp8_max(out_dtype)
    s = _div_const(x.float().abs().amax(), m).clamp(min=fp8_min_scale(out_dtype)).reshape(1)
    return quant_fp8_static(x, s, out_dtype), s


def ue8m0_round_up(s: torch.Tensor) -> torch.Tensor:
    """`2 ** ceil(log2(s))` for positive normal float32 `s`, exactly, on the float bits.

    (`torch.log2` rounds `log2(2**n * (1 + 2**-23))` down to n, so the float formula can
    miss the next power of two; the bit form cannot.)
    """
    bits = s.float().contiguous().view(torch.int32)
    exp_bits = bits & 0x7F800000
    exp_bits = torch.where((bits & 0x007FFFFF) != 0, exp_bits + 0x00800000, exp_bits)
    return exp_bits.view(torch.float32)


def group_scale_shape_strides(lead: tuple[int, ...], groups: int, col_major: bool,
                              ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and strides of per-group scales for an input of shape `lead + (H,)`.

    Row-major: contiguous [*lead, G]. Column-major: the flattened token index is the fastest
    (for 2D, [T, G] with strides (1, T)), i.e. the storage is a contiguous [G, *lead].
    """
    shape = (*lead, groups)
    if not col_major:
        strides, acc = [], 1
        for d in reversed(shape):
            strides.append(acc)
            acc *= d
        return shape, tuple(reversed(strides))
    tokens = 1
    for d in lead:
        tokens *= d
    lead_strides, acc = [], 1
    for d in reversed(lead):
        lead_strides.append(acc)
        acc *= d
    return shape, (*reversed(lead_strides), tokens)


def empty_group_scales(x: torch.Tensor, group_size: int, col_major: bool) -> torch.Tensor:
    """An uninitialised float32 scale tensor for per-group quantization of `x`."""
    shape, strides = group_scale_shape_strides(tuple(x.shape[:-1]), x.shape[-1] // group_size,
                                               col_major)
    return torch.empty_strided(shape, strides, dtype=torch.float32, device=x.device)


def quant_fp8_group(x: torch.Tensor, group_size: int, col_major: bool = False,
                    ue8m0: bool = False, out_dtype: torch.dtype = torch.float8_e4m3fn,
                    reciprocal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-group FP8 along the last dim: returns (q like x, scales [..., H/g]),
    `s = max(amax_g, 1e-10) / M`, with `ue8m0` rounded up to a power of two
    (`ue8m0_round_up`), then `s = max(s, MIN_SCALE)` and `q = fp8(clamp(x / s))`; scales
    row-major or `col_major` (`group_scale_shape_strides`); `reciprocal` as in
    `quant_fp8_per_token`."""
    check_model_dtype(x)
    hidden = x.shape[-1]
    check_group_size(hidden, group_size)
    m = fp8_max(out_dtype)
    xg = x.float().reshape(*x.shape[:-1], hidden // group_size, group_size)
    s = _div_const(xg.abs().amax(dim=-1).clamp(min=GROUP_AMAX_FLOOR), m)
    if ue8m0:
        s = ue8m0_round_up(s)
    s = s.clamp(min=fp8_min_scale(out_dtype))
    q = _scaled(xg, s.unsqueeze(-1), reciprocal).clamp(-m, m).to(out_dtype).reshape(x.shape)
    out = empty_group_scales(x, group_size, col_major)
    out.copy_(s)
    return q, out


def dequant_fp8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """`q * scale` in float32; `scale` one element (per-tensor) or [..., 1] (per-token)."""
    return q.float() * scale.float()


def dequant_fp8_group(q: torch.Tensor, scale: torch.Tensor, group_size: int) -> torch.Tensor:
    """Float32 values of a per-group FP8 tensor (any scale layout)."""
    g = q.shape[-1] // group_size
    qg = q.float().reshape(*q.shape[:-1], g, group_size)
    return (qg * scale.float().unsqueeze(-1)).reshape(q.shape)


# ---------------------------------------------------------------------------------------------
# NVFP4


def nvfp4_scale_shape(rows: int, cols: int) -> tuple[int, int]:
    """Shape [round_up(rows, 128), round_up(cols / 16, 4)] of swizzled NVFP4 block scales."""
    k = cols // NVFP4_BLOCK
    return (rows + 127) // 128 * 128, (k + 3) // 4 * 4


def swizzle_block_scales(sb: torch.Tensor) -> torch.Tensor:
    """[M, K] block scales → [Mp, Kp] in the 128×4 tiled layout, zero padded.

    Element (m, k) lands at flat offset
    `((m // 128 * Kp/4 + k // 4) * 32 + m % 32) * 16 + (m % 128 // 32) * 4 + k % 4`.
    """
    m, k = sb.shape
    mp, kp = (m + 127) // 128 * 128, (k + 3) // 4 * 4
    padded = sb.new_zeros(mp, kp)
    padded[:m, :k] = sb
    tiles = padded.reshape(mp // 128, 4, 32, kp // 4, 4).permute(0, 3, 2, 1, 4)
    return tiles.contiguous().reshape(mp, kp)


def unswizzle_block_scales(sf: torch.Tensor, rows: int, k: int) -> torch.Tensor:
    """Inverse of `swizzle_block_scales`: [Mp, Kp] tiled → [rows, k]."""
    mp, kp = sf.shape
    tiles = sf.reshape(mp // 128, kp // 4, 32, 4, 4).permute(0, 3, 2, 1, 4)
    return tiles.contiguous().reshape(mp, kp)[:rows, :k]


def e2m1_encode(v: torch.Tensor) -> torch.Tensor:
    """Round float32 `v` (already clamped to ±6) to e2m1 codes (uint8, 0..15), ties to even.

    The magnitude code counts the rounding boundaries below |v|; a tie goes to the even code
    (in values: 0.25→0, 0.75→1, 1.25→1, 1.75→2, 2.5→2, 3.5→4, 5→4). The sign bit (0x8) is the float's
    sign bit, as the hardware conversion keeps it (so -0.1 encodes as 0x8, "-0").
    """
    a = v.abs()
    code = ((a > 0.25).to(torch.uint8) + (a >= 0.75).to(torch.uint8)
            + (a > 1.25).to(torch.uint8) + (a >= 1.75).to(torch.uint8)
            + (a > 2.5).to(torch.uint8) + (a >= 3.5).to(torch.uint8)
            + (a > 5.0).to(torch.uint8))
    return code | (torch.signbit(v).to(torch.uint8) << 3)


def e2m1_decode(code: torch.Tensor) -> torch.Tensor:
    """Float32 values of e2m1 codes (uint8, low 4 bits used)."""
    table = torch.tensor(_E2M1_VALUES, dtype=torch.float32, device=code.device)
    mag = table[(code & 0x7).long()]
    return torch.where((code & 0x8) != 0, -mag, mag)


def pack_e2m1(code: torch.Tensor) -> torch.Tensor:
    """[..., N] codes → [..., N/2] bytes; element 2i in the low nibble, 2i+1 in the high."""
    pairs = code.reshape(*code.shape[:-1], code.shape[-1] // 2, 2)
    return pairs[..., 0] | (pairs[..., 1] << 4)


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """[..., N/2] bytes → [..., N] codes."""
    lo, hi = packed & 0xF, packed >> 4
    return torch.stack((lo, hi), dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def quant_nvfp4(x: torch.Tensor, global_scale: torch.Tensor,
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 with 16-element blocks along the last dim.

    `gs = global_scale` (float32, one element; by convention 448 * 6 / amax(x)).
    Per block: `sb = fp8(clamp(gs * amax_b / 6, -448, 448))`; `q = e2m1(clamp(x * gs / sb, ±6))`
    (q = 0 where sb is 0). Returns (packed uint8 [..., N/2], swizzled block scales
    float8_e4m3fn [round_up(M, 128), round_up(N/16, 4)]) with M the number of rows.
    """
    check_model_dtype(x)
    n = x.shape[-1]
    if n % NVFP4_BLOCK != 0:
        raise ValueError(f"irfuse: NVFP4 needs the last dimension ({n}) to be a multiple of 16")
    gs = _scalar_f32(global_scale, "the NVFP4 global scale")
    x32 = x.float().reshape(-1, n // NVFP4_BLOCK, NVFP4_BLOCK)
    amax = x32.abs().amax(dim=-1, keepdim=True)
    sb = _div_const(gs * amax, E2M1_MAX).clamp(-448.0, 448.0).to(NVFP4_SCALE_DTYPE)
    sbf = sb.float()
    v = torch.where(sbf == 0, torch.zeros_like(x32), x32 * gs / sbf).clamp(-E2M1_MAX, E2M1_MAX)
    packed = pack_e2m1(e2m1_encode(v).reshape(-1, n)).reshape(*x.shape[:-1], n // 2)
    scales = swizzle_block_scales(sbf.reshape(-1, n // NVFP4_BLOCK)).to(NVFP4_SCALE_DTYPE)
    return packed, scales


def dequant_nvfp4(packed: torch.Tensor, scales: torch.Tensor,
                  global_scale: torch.Tensor) -> torch.Tensor:
    """Float32 `q * sb / gs` of an NVFP4 tensor, shape [..., N]."""
    n = packed.shape[-1] * 2
    codes = unpack_e2m1(packed.reshape(-1, n // 2))
    rows = codes.shape[0]
    sb = unswizzle_block_scales(scales.float(), rows, n // NVFP4_BLOCK)
    vals = e2m1_decode(codes).reshape(rows, n // NVFP4_BLOCK, NVFP4_BLOCK) * sb.unsqueeze(-1)
    return (vals / _scalar_f32(global_scale, "the NVFP4 global scale")).reshape(
        *packed.shape[:-1], n)
