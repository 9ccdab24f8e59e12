"""Linear layers with quantized weights, and the activation quantizers they call.

Every quantized linear stores its weight quantized (deterministic random init from the build
seed) and quantizes its activation in the forward, written in native torch as docs/numerics.md
defines the scheme, or through `torch.ops.irfuse.quant_*` (`impl="custom_op"`): `Linear`
(unquantized, counted as `gemm`), `Fp8StaticLinear`, `Fp8DynamicLinear` (per-token or
per-tensor), `Fp8GroupLinear` and `Nvfp4Linear`, each class saying how it spells its quant and
its GEMM.

Static scales (FP8 static input scale, per-token `scale_ub`, NVFP4 input global scale) start at
placeholders and are set by `calibrate(model, inputs)`, which runs the model once with every
quantized linear computing in the model dtype while it records its input's amax.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from irfuse.models.layers import frozen, require_custom_ops

NVFP4_BLOCK = 16
E2M1_MAX = 6.0
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


_FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e4m3fnuz: 224.0}


def fp8_max(dtype: torch.dtype) -> float:
    """Clamp bound M: 448 for e4m3fn, 224 for ROCm's e4m3fnuz (as vLLM uses it)."""
    return _FP8_MAX[dtype]


def min_scale(dtype: torch.dtype) -> float:
    """MIN_SCALE = 1 / (M * 512), the floor of dynamic scales."""
    return 1.0 / (fp8_max(dtype) * 512.0)


def fp8_to_float(t: torch.Tensor) -> torch.Tensor:
    """fp8 -> float32 through bf16: exact (every e4m3 value is a bf16 value), and the CPU's
    fp8 -> bf16 cast is about 4x faster than its fp8 -> float32 cast."""
    return t.to(torch.bfloat16).to(torch.float32)


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


# --- activation quantizers (native torch) ------------------------------------------------------


def _clamp(x: torch.Tensor, bound: float, spelling: str) -> torch.Tensor:
    if spelling == "clamp":
        return x.clamp(min=-bound, max=bound)
    if spelling == "clamp_minmax":
        return x.clamp_min(-bound).clamp_max(bound)
    lo = torch.full((), -bound, dtype=x.dtype, device=x.device)
    hi = torch.full((), bound, dtype=x.dtype, device=x.device)
    return torch.min(torch.max(x, lo), hi)


def quant_fp8_static(x: torch.Tensor, scale: torch.Tensor, *, inv_scale: torch.Tensor | None = None,
                     fp8_dtype: torch.dtype = torch.float8_e4m3fn, scale_spelling: str = "div",
                     clamp_spelling: str = "clamp") -> torch.Tensor:
    """fp8(clamp(x / s)) with a static per-tensor float32 scale s of one element."""
    x32 = x.to(torch.float32)
    if scale_spelling == "div":
        y = x32 / scale
    elif scale_spelling == "reciprocal":
        y = x32 * scale.reciprocal()
    else:
        assert inv_scale is not None, "scale_spelling='inv_scale' needs inv_scale"
        y = x32 * inv_scale
    return _clamp(y, fp8_max(fp8_dtype), clamp_spelling).to(fp8_dtype)


def quant_fp8_per_token(x: torch.Tensor, scale_ub: torch.Tensor | None = None,
                        fp8_dtype: torch.dtype = torch.float8_e4m3fn
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-token: s_t = max(min(amax_t, scale_ub) / fp8_max, MIN_SCALE), [T, 1] f32."""
    bound = fp8_max(fp8_dtype)
    x32 = x.to(torch.float32)
    amax = x32.abs().amax(dim=-1, keepdim=True)
    if scale_ub is not None:
        amax = torch.minimum(amax, scale_ub)
    scale = (amax / bound).clamp_min(min_scale(fp8_dtype))
    q = (x32 / scale).clamp(-bound, bound).to(fp8_dtype)
    return q, scale


def quant_fp8_per_tensor(x: torch.Tensor, fp8_dtype: torch.dtype = torch.float8_e4m3fn
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-tensor: s = max(amax / fp8_max, MIN_SCALE), one-element f32."""
    bound = fp8_max(fp8_dtype)
    x32 = x.to(torch.float32)
    scale = (x32.abs().amax() / bound).clamp_min(min_scale(fp8_dtype)).reshape(1)
    q = (x32 / scale).clamp(-bound, bound).to(fp8_dtype)
    return q, scale


def quant_fp8_group(x: torch.Tensor, group_size: int, col_major: bool = False,
                    ue8m0: bool = False, fp8_dtype: torch.dtype = torch.float8_e4m3fn
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-group along the last dim of x [T, H]: q [T, H], scales [T, H / g].

    Column-major scales have shape [T, H / g] and strides (1, T).
    """
    bound = fp8_max(fp8_dtype)
    num_tokens, hidden = x.shape
    xg = x.to(torch.float32).view(num_tokens, hidden // group_size, group_size)
    amax = xg.abs().amax(dim=-1)
    scale = amax.clamp_min(1e-10) / bound
    if ue8m0:
        scale = torch.exp2(torch.ceil(torch.log2(scale)))
    scale = scale.clamp_min(min_scale(fp8_dtype))
    q = (xg / scale.unsqueeze(-1)).clamp(-bound, bound).to(fp8_dtype).view(num_tokens, hidden)
    if col_major:
        scale = scale.t().contiguous().t()
    return q, scale


def _e2m1_codes(a: torch.Tensor) -> torch.Tensor:
    """|v| in [0, 6] -> e2m1 magnitude code 0..7, round to nearest, ties to the even code."""
    code = ((a > 0.25).to(torch.uint8) + (a >= 0.75).to(torch.uint8)
            + (a > 1.25).to(torch.uint8) + (a >= 1.75).to(torch.uint8)
            + (a > 2.5).to(torch.uint8) + (a >= 3.5).to(torch.uint8)
            + (a > 5.0).to(torch.uint8))
    return code


def swizzle_block_scales(scales: torch.Tensor) -> torch.Tensor:
    """[M, S] -> padded [round_up(M, 128), round_up(S, 4)] in the swizzled 128x4 layout."""
    rows, cols = scales.shape
    padded_rows, padded_cols = _round_up(rows, 128), _round_up(cols, 4)
    scales = torch.cat([scales, scales.new_zeros(rows, padded_cols - cols)], dim=1)
    scales = torch.cat([scales, scales.new_zeros(padded_rows - rows, padded_cols)], dim=0)
    tiled = scales.view(padded_rows // 128, 4, 32, padded_cols // 4, 4)
    return tiled.permute(0, 3, 2, 1, 4).reshape(padded_rows, padded_cols)


def unswizzle_block_scales(swizzled: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Inverse of `swizzle_block_scales`: back to [rows, cols] fp8 (int32 words accepted)."""
    if swizzled.dtype == torch.int32:
        swizzled = swizzled.view(torch.float8_e4m3fn)
    padded_rows, padded_cols = _round_up(rows, 128), _round_up(cols, 4)
    tiled = swizzled.reshape(padded_rows // 128, padded_cols // 4, 32, 4, 4)
    return tiled.permute(0, 3, 2, 1, 4).reshape(padded_rows, padded_cols)[:rows, :cols]


def quant_nvfp4(x: torch.Tensor, global_scale: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 of x [M, N] as docs/numerics.md: packed uint8 [M, N/2], swizzled fp8 block scales."""
    rows, cols = x.shape
    xb = x.to(torch.float32).view(rows, cols // NVFP4_BLOCK, NVFP4_BLOCK)
    amax = xb.abs().amax(dim=-1)
    block_scale = (global_scale * amax / E2M1_MAX).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    bs32 = block_scale.to(torch.float32)
    # An all-zero block has scale 0; divide by 1 there so it quantizes to 0, not NaN.
    bs32 = torch.where(bs32 == 0, torch.ones_like(bs32), bs32)
    y = (xb * global_scale / bs32.unsqueeze(-1)).clamp(-E2M1_MAX, E2M1_MAX)
    code = _e2m1_codes(y.abs()) | (torch.signbit(y).to(torch.uint8) << 3)
    code = code.view(rows, cols // 2, 2)
    packed = code[..., 0] | (code[..., 1] << 4)
    swizzled = swizzle_block_scales(block_scale.to(torch.float32)).to(torch.float8_e4m3fn)
    return packed, swizzled


def dequant_e2m1(packed: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Packed uint8 [M, N/2] -> float32 [M, N] e2m1 values (`values` = E2M1_VALUES)."""
    rows = packed.shape[0]
    codes = torch.stack((packed & 0xF, packed >> 4), dim=-1).view(rows, -1)
    magnitude = values[(codes & 0x7).to(torch.int64)]
    return torch.where((codes & 0x8) != 0, -magnitude, magnitude)


# --- linear layers -----------------------------------------------------------------------------


class QuantLinearBase(nn.Module):
    """Shared parts: shapes, calibration switch, the TP narrowing interface."""

    in_features: int
    out_features: int

    def __init__(self) -> None:
        super().__init__()
        self.calibrating = False
        self.calib_amax = 0.0

    def _record(self, x: torch.Tensor) -> None:
        self.calib_amax = max(self.calib_amax, float(x.detach().abs().amax()))

    def finish_calibration(self) -> None:
        """Set static scales from the recorded amax (no-op for dynamic schemes)."""

    def dequantized_weight(self) -> torch.Tensor:
        """The weight as float32 [N, K] (what the quantized weight stands for)."""
        raise NotImplementedError

    def narrow_out(self, rows: torch.Tensor) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be column-sharded")

    def narrow_in(self, start: int, length: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be row-sharded")

    def _reference(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.dequantized_weight().to(x.dtype))


class Linear(QuantLinearBase):
    """Unquantized linear without bias: `F.linear(x, w)`."""

    def __init__(self, weight: torch.Tensor, dtype: torch.dtype) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.weight = frozen(weight.to(dtype))

    def dequantized_weight(self) -> torch.Tensor:
        return self.weight.float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)

    def narrow_out(self, rows: torch.Tensor) -> None:
        self.weight = frozen(self.weight.data[rows.to(self.weight.device)].contiguous())
        self.out_features = self.weight.shape[0]

    def narrow_in(self, start: int, length: int) -> None:
        self.weight = frozen(self.weight.data[:, start:start + length].contiguous())
        self.in_features = length


def _quantize_per_tensor_weight(w: torch.Tensor, fp8_dtype: torch.dtype
                                ) -> tuple[torch.Tensor, torch.Tensor]:
    scale = (w.abs().amax() / fp8_max(fp8_dtype)).clamp_min(min_scale(fp8_dtype)).reshape(1)
    return (w / scale).clamp(-fp8_max(fp8_dtype), fp8_max(fp8_dtype)).to(fp8_dtype), scale


def resolve_scaled_gemm(mode: str, device: torch.device) -> str:
    """"auto" -> "rowwise" on the CPU (its per-tensor _scaled_mm is a slow reference loop)."""
    if mode == "auto":
        return "rowwise" if device.type == "cpu" else "scaled_mm"
    return mode


class _ScaledMMMixin:
    """GEMM of an fp8 activation with the fp8 weight: `_scaled_mm` or dequantize + matmul.

    With "rowwise", per-tensor scales are expanded to `_scaled_mm`'s row-wise shapes
    ([M, 1] and [1, N], contiguous), which selects the fast CPU kernel.
    """

    scaled_gemm: str
    act_per_tensor: bool
    weight_per_tensor: bool

    def _gemm(self, xq: torch.Tensor, x_scale: torch.Tensor, out_dtype: torch.dtype
              ) -> torch.Tensor:
        if self.scaled_gemm == "dequant":
            x = (fp8_to_float(xq) * x_scale).to(out_dtype)
            return F.linear(x, self.dequantized_weight().to(out_dtype))
        scale_a, scale_b = x_scale, self.weight_scale
        if self.scaled_gemm == "rowwise":
            if self.act_per_tensor:
                scale_a = scale_a.expand(xq.shape[0], 1).contiguous()
            if self.weight_per_tensor:
                scale_b = scale_b.expand(1, self.out_features).contiguous()
        return torch._scaled_mm(xq, self.weight.t(), scale_a=scale_a, scale_b=scale_b,
                                out_dtype=out_dtype)


class Fp8StaticLinear(_ScaledMMMixin, QuantLinearBase):
    """FP8 static per-tensor activation scale, per-tensor weight scale, `_scaled_mm`. The
    activation is scaled by `x / s`, `x * s.reciprocal()` or `x * inv_s`, clamped by `clamp`,
    `clamp_min/clamp_max` or `torch.max/min`, then cast; the GEMM runs behind the
    `view(-1, K)` / `view(*lead, N)` reshapes linear layers add (`scaled_gemm`:
    `_ScaledMMMixin`)."""

    def __init__(self, weight: torch.Tensor, dtype: torch.dtype, *, fp8_dtype: torch.dtype,
                 scale_spelling: str = "div", clamp_spelling: str = "clamp",
                 impl: str = "native", scaled_gemm: str = "auto") -> None:
        super().__init__()
        if impl == "custom_op":
            require_custom_ops("quant_fp8_static")
        self.out_features, self.in_features = weight.shape
        self.out_dtype, self.fp8_dtype = dtype, fp8_dtype
        self.scale_spelling, self.clamp_spelling = scale_spelling, clamp_spelling
        self.impl = impl
        self.scaled_gemm = resolve_scaled_gemm(scaled_gemm, weight.device)
        self.act_per_tensor = self.weight_per_tensor = True
        wq, w_scale = _quantize_per_tensor_weight(weight, fp8_dtype)
        self.weight = frozen(wq)
        self.register_buffer("weight_scale", w_scale)
        ones = torch.ones(1, dtype=torch.float32, device=weight.device)
        self.register_buffer("input_scale", ones.clone())
        if scale_spelling == "inv_scale":
            self.register_buffer("input_scale_inv", ones.clone())

    def finish_calibration(self) -> None:
        scale = max(self.calib_amax / fp8_max(self.fp8_dtype), min_scale(self.fp8_dtype))
        self.input_scale.fill_(scale)
        if self.scale_spelling == "inv_scale":
            self.input_scale_inv.fill_(1.0 / scale)

    def dequantized_weight(self) -> torch.Tensor:
        return fp8_to_float(self.weight) * self.weight_scale

    def quantize_input(self, x: torch.Tensor) -> torch.Tensor:
        if self.impl == "custom_op":
            return torch.ops.irfuse.quant_fp8_static(x, self.input_scale, self.fp8_dtype)
        inv = self.input_scale_inv if self.scale_spelling == "inv_scale" else None
        return quant_fp8_static(x, self.input_scale, inv_scale=inv, fp8_dtype=self.fp8_dtype,
                                scale_spelling=self.scale_spelling,
                                clamp_spelling=self.clamp_spelling)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.calibrating:
            self._record(x)
            return self._reference(x)
        lead = x.shape[:-1]
        xq = self.quantize_input(x.view(-1, self.in_features))
        return self._gemm(xq, self.input_scale, self.out_dtype).view(*lead, self.out_features)

    def narrow_out(self, rows: torch.Tensor) -> None:
        self.weight = frozen(self.weight.data[rows.to(self.weight.device)].contiguous())
        self.out_features = self.weight.shape[0]

    def narrow_in(self, start: int, length: int) -> None:
        self.weight = frozen(self.weight.data[:, start:start + length].contiguous())
        self.in_features = length


class Fp8DynamicLinear(_ScaledMMMixin, QuantLinearBase):
    """FP8 dynamic per-token (per-channel weight scales) or per-tensor activation scale."""

    def __init__(self, weight: torch.Tensor, dtype: torch.dtype, *, fp8_dtype: torch.dtype,
                 per_token: bool = True, use_scale_ub: bool = False, impl: str = "native",
                 scaled_gemm: str = "auto") -> None:
        super().__init__()
        if impl == "custom_op":
            require_custom_ops("quant_fp8_per_token" if per_token else "quant_fp8_per_tensor")
        self.out_features, self.in_features = weight.shape
        self.out_dtype, self.fp8_dtype, self.per_token = dtype, fp8_dtype, per_token
        self.impl = impl
        self.scaled_gemm = resolve_scaled_gemm(scaled_gemm, weight.device)
        self.act_per_tensor = self.weight_per_tensor = not per_token
        bound = fp8_max(fp8_dtype)
        if per_token:
            # per output channel, stored [1, N] as `_scaled_mm`'s row-wise scale_b
            w_scale = (weight.abs().amax(dim=1) / bound).clamp_min(min_scale(fp8_dtype))
            wq = (weight / w_scale[:, None]).clamp(-bound, bound).to(fp8_dtype)
            w_scale = w_scale[None, :].contiguous()
        else:
            wq, w_scale = _quantize_per_tensor_weight(weight, fp8_dtype)
        self.weight = frozen(wq)
        self.register_buffer("weight_scale", w_scale)
        self.use_scale_ub = use_scale_ub and per_token
        if self.use_scale_ub:
            self.register_buffer("scale_ub", torch.full((1,), 448.0, device=weight.device))

    def finish_calibration(self) -> None:
        if self.use_scale_ub:
            self.scale_ub.fill_(self.calib_amax)

    def dequantized_weight(self) -> torch.Tensor:
        if self.per_token:
            return fp8_to_float(self.weight) * self.weight_scale.t()
        return fp8_to_float(self.weight) * self.weight_scale

    def quantize_input(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ub = self.scale_ub if self.use_scale_ub else None
        if self.impl == "custom_op":
            if self.per_token:
                return torch.ops.irfuse.quant_fp8_per_token(x, ub, self.fp8_dtype)
            return torch.ops.irfuse.quant_fp8_per_tensor(x, self.fp8_dtype)
        if self.per_token:
            return quant_fp8_per_token(x, ub, self.fp8_dtype)
        return quant_fp8_per_tensor(x, self.fp8_dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.calibrating:
            self._record(x)
            return self._reference(x)
        lead = x.shape[:-1]
        xq, x_scale = self.quantize_input(x.view(-1, self.in_features))
        return self._gemm(xq, x_scale, self.out_dtype).view(*lead, self.out_features)

    def narrow_out(self, rows: torch.Tensor) -> None:
        rows = rows.to(self.weight.device)
        self.weight = frozen(self.weight.data[rows].contiguous())
        if self.per_token:
            self.weight_scale = self.weight_scale[:, rows].contiguous()
        self.out_features = self.weight.shape[0]

    def narrow_in(self, start: int, length: int) -> None:
        self.weight = frozen(self.weight.data[:, start:start + length].contiguous())
        self.in_features = length


class Fp8GroupLinear(QuantLinearBase):
    """FP8 per-group activation quant (1 x g, g 128 or 64, row- or column-major scales,
    optional UE8M0), block-quantized weight (g x g), GEMM emulated by dequantize + matmul
    (block-scaled `_scaled_mm` is not on the CPU)."""

    def __init__(self, weight: torch.Tensor, dtype: torch.dtype, *, fp8_dtype: torch.dtype,
                 group_size: int = 128, col_major: bool = False, ue8m0: bool = False,
                 impl: str = "native") -> None:
        super().__init__()
        if impl == "custom_op":
            require_custom_ops("quant_fp8_group")
        out_features, in_features = weight.shape
        if in_features % group_size:
            raise ValueError(f"in_features {in_features} is not a multiple of the group size "
                             f"{group_size}")
        self.out_features, self.in_features = out_features, in_features
        self.out_dtype, self.fp8_dtype, self.group_size = dtype, fp8_dtype, group_size
        self.col_major, self.ue8m0, self.impl = col_major, ue8m0, impl
        g, bound = group_size, fp8_max(fp8_dtype)
        nb = -(-out_features // g)
        padded = torch.cat([weight, weight.new_zeros(nb * g - out_features, in_features)])
        blocks = padded.view(nb, g, in_features // g, g)
        w_scale = (blocks.abs().amax(dim=(1, 3)) / bound).clamp_min(min_scale(fp8_dtype))
        if ue8m0:
            w_scale = torch.exp2(torch.ceil(torch.log2(w_scale)))
        wq = (blocks / w_scale[:, None, :, None]).clamp(-bound, bound).to(fp8_dtype)
        self.weight = frozen(wq.view(nb * g, in_features)[:out_features].contiguous())
        self.register_buffer("weight_scale", w_scale)  # [ceil(N / g), K / g]

    def dequantized_weight(self) -> torch.Tensor:
        g = self.group_size
        scale = self.weight_scale.repeat_interleave(g, dim=0)[: self.out_features]
        scale = scale.repeat_interleave(g, dim=1)
        return fp8_to_float(self.weight) * scale

    def quantize_input(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.impl == "custom_op":
            return torch.ops.irfuse.quant_fp8_group(x, self.group_size, self.col_major,
                                                    self.ue8m0, self.fp8_dtype)
        return quant_fp8_group(x, self.group_size, self.col_major, self.ue8m0, self.fp8_dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.calibrating:
            self._record(x)
            return self._reference(x)
        lead = x.shape[:-1]
        x2 = x.view(-1, self.in_features)
        xq, x_scale = self.quantize_input(x2)
        rows = x2.shape[0]
        groups = self.in_features // self.group_size
        xd = fp8_to_float(xq).view(rows, groups, self.group_size) * x_scale.unsqueeze(-1)
        xd = xd.view(rows, self.in_features).to(self.out_dtype)
        y = F.linear(xd, self.dequantized_weight().to(self.out_dtype))
        return y.view(*lead, self.out_features)


class Nvfp4Linear(QuantLinearBase):
    """NVFP4 activation quant (custom op or native), NVFP4 weight, emulated GEMM."""

    def __init__(self, weight: torch.Tensor, dtype: torch.dtype, *, impl: str = "custom_op"
                 ) -> None:
        super().__init__()
        if impl == "custom_op":
            require_custom_ops("quant_nvfp4")
        out_features, in_features = weight.shape
        if in_features % NVFP4_BLOCK:
            raise ValueError(f"in_features {in_features} is not a multiple of {NVFP4_BLOCK}")
        self.out_features, self.in_features = out_features, in_features
        self.out_dtype, self.impl = dtype, impl
        self.register_buffer("e2m1_values", torch.tensor(E2M1_VALUES, device=weight.device))
        w_gs = (448.0 * E2M1_MAX / weight.abs().amax().clamp_min(1e-12)).reshape(1)
        packed, swizzled = quant_nvfp4(weight, w_gs)
        self.weight = frozen(packed)
        blocks = in_features // NVFP4_BLOCK
        self.register_buffer("weight_block_scale",
                             unswizzle_block_scales(swizzled, out_features, blocks).contiguous())
        self.register_buffer("weight_global_scale", w_gs)
        self.register_buffer("input_global_scale", torch.ones(1, device=weight.device))

    def finish_calibration(self) -> None:
        self.input_global_scale.fill_(448.0 * E2M1_MAX / max(self.calib_amax, 1e-12))

    def _dequant(self, packed: torch.Tensor, block_scale: torch.Tensor,
                 global_scale: torch.Tensor) -> torch.Tensor:
        values = dequant_e2m1(packed, self.e2m1_values)
        rows, cols = values.shape
        values = values.view(rows, cols // NVFP4_BLOCK, NVFP4_BLOCK)
        scale = fp8_to_float(block_scale) / global_scale
        return (values * scale.unsqueeze(-1)).view(rows, cols)

    def dequantized_weight(self) -> torch.Tensor:
        return self._dequant(self.weight, self.weight_block_scale, self.weight_global_scale)

    def quantize_input(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.impl == "custom_op":
            return torch.ops.irfuse.quant_nvfp4(x, self.input_global_scale)
        return quant_nvfp4(x, self.input_global_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.calibrating:
            self._record(x)
            return self._reference(x)
        lead = x.shape[:-1]
        x2 = x.view(-1, self.in_features)
        packed, swizzled = self.quantize_input(x2)
        block_scale = unswizzle_block_scales(swizzled, x2.shape[0],
                                             self.in_features // NVFP4_BLOCK)
        xd = self._dequant(packed, block_scale, self.input_global_scale).to(self.out_dtype)
        y = F.linear(xd, self.dequantized_weight().to(self.out_dtype))
        return y.view(*lead, self.out_features)


def make_linear(weight: torch.Tensor, dtype: torch.dtype, opts, *, quantized: bool = True
                ) -> QuantLinearBase:
    """A linear for the float32 master weight [N, K] with the scheme `opts.quant` selects.

    `quantized=False` gives a plain `Linear` whatever the scheme (lm_head).
    """
    scheme = opts.quant if quantized else None
    if scheme is None:
        return Linear(weight, dtype)
    if scheme == "fp8":
        return Fp8StaticLinear(weight, dtype, fp8_dtype=opts.fp8_dtype,
                               scale_spelling=opts.scale_spelling,
                               clamp_spelling=opts.clamp_spelling, impl=opts.quant_impl,
                               scaled_gemm=opts.scaled_gemm)
    if scheme in ("fp8-per-token", "fp8-per-tensor"):
        return Fp8DynamicLinear(weight, dtype, fp8_dtype=opts.fp8_dtype,
                                per_token=scheme == "fp8-per-token", use_scale_ub=opts.scale_ub,
                                impl=opts.quant_impl, scaled_gemm=opts.scaled_gemm)
    if scheme == "fp8-group":
        return Fp8GroupLinear(weight, dtype, fp8_dtype=opts.fp8_dtype,
                              group_size=opts.group_size, col_major=opts.group_col_major,
                              ue8m0=opts.group_ue8m0, impl=opts.quant_impl)
    if scheme == "nvfp4":
        return Nvfp4Linear(weight, dtype, impl=opts.quant_impl)
    raise ValueError(f"unknown quant scheme {scheme!r}")


def gemm_kind(opts) -> str:
    """The raised kind of a quantized linear's GEMM under `opts`."""
    if opts.quant in ("fp8", "fp8-per-token", "fp8-per-tensor") and opts.scaled_gemm != "dequant":
        return "scaled_gemm"
    return "gemm"


def quant_kind(opts) -> str | None:
    if opts.quant is None:
        return None
    return "quant_nvfp4" if opts.quant == "nvfp4" else "quant_fp8"


@torch.no_grad()
def calibrate(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> int:
    """Set every static scale from one forward over `inputs` (clones: caches stay untouched).

    Returns the number of quantized linears calibrated.
    """
    linears = [m for m in model.modules() if isinstance(m, QuantLinearBase)
               and not isinstance(m, Linear)]
    for m in linears:
        m.calibrating, m.calib_amax = True, 0.0
    try:
        model(*[t.clone() for t in inputs])
    finally:
        for m in linears:
            m.calibrating = False
    for m in linears:
        m.finish_calibration()
    return len(linears)
