"""The reference quantizers against hand-computed values (`docs/numerics.md`)."""

from __future__ import annotations

import pytest
import torch

from irfuse.kernels import quant_ref as qr

FP8 = torch.float8_e4m3fn
FNUZ = torch.float8_e4m3fnuz


def test_static_known_values_and_saturation() -> None:
    x = torch.tensor([[1.0, -2.0, 0.0, 1000.0, -1000.0, 0.3]], dtype=torch.bfloat16)
    q = qr.quant_fp8_static(x, torch.tensor([0.5]))
    assert q.dtype == FP8 and q.shape == x.shape
    # x * 2, clamped to ±448; 0.3 (bf16 0.30078125) * 2 = 0.6015625 → nearest e4m3 0.625.
    assert q.float().tolist() == [[2.0, -4.0, 0.0, 448.0, -448.0, 0.625]]
    q_fnuz = qr.quant_fp8_static(x, torch.tensor([0.5]), FNUZ)
    assert q_fnuz.dtype == FNUZ
    assert q_fnuz.float().tolist()[0][3:5] == [224.0, -224.0]


def test_static_rounds_ties_to_even() -> None:
    # e4m3 steps are 0.125 in [1, 2): 1.0625 ties 1.0/1.125 → 1.0 (even), 1.1875 → 1.25,
    # and in [16, 32) steps of 2: 17 → 16, 19 → 20; 31.6 → 32 (carry into the exponent).
    x = torch.tensor([1.0625, 1.1875, 17.0, 19.0, 31.6, -1.0625])
    q = qr.quant_fp8_static(x, torch.ones(1))
    assert q.float().tolist() == [1.0, 1.25, 16.0, 20.0, 32.0, -1.0]


def test_static_multiplies_by_the_reciprocal() -> None:
    # NUMERICS: x * (1 / s). For x = -50.75, s = 7 that is -7.5 in fp8, while x / s rounds to
    # -7.0: the two formulas differ here, so this pins the static rule down.
    q = qr.quant_fp8_static(torch.tensor([-50.75]), torch.tensor([7.0]))
    assert q.float().item() == -7.5
    assert (torch.tensor([-50.75]) / 7.0).to(FP8).float().item() == -7.0


def test_per_token_scales_min_scale_and_upper_bound() -> None:
    x = torch.tensor([[896.0, 1.0, -448.0], [0.0, 0.0, 0.0], [1000.0, -1.0, 2.0]])
    q, s = qr.quant_fp8_per_token(x)
    assert s.shape == (3, 1) and s.dtype == torch.float32
    assert s[0, 0].item() == 2.0
    assert s[1, 0].item() == pytest.approx(1 / (448 * 512), rel=1e-6)  # MIN_SCALE
    assert q[0].float().tolist() == [448.0, 0.5, -224.0]
    assert q[1].float().abs().sum().item() == 0.0
    # An upper bound: amax 1000 → min(1000, 448) / 448 = 1, so 1000 saturates at 448.
    q_ub, s_ub = qr.quant_fp8_per_token(x, torch.tensor([448.0]))
    assert s_ub[2, 0].item() == 1.0 and q_ub[2].float().tolist() == [448.0, -1.0, 2.0]
    assert s_ub[0, 0].item() == 1.0  # amax 896 capped too


def test_per_token_keeps_leading_dims_and_divides() -> None:
    x = torch.randn(2, 3, 64, dtype=torch.bfloat16)
    q, s = qr.quant_fp8_per_token(x)
    assert q.shape == x.shape and s.shape == (2, 3, 1)
    expected = (x.float() / s).clamp(-448, 448).to(FP8)  # x / s, as NUMERICS says
    assert torch.equal(q.view(torch.uint8), expected.view(torch.uint8))


def test_per_tensor_dynamic() -> None:
    x = torch.tensor([[-8.96, 1.0], [2.0, 4.48]])
    q, s = qr.quant_fp8_per_tensor(x)
    assert s.shape == (1,)
    assert s.item() == pytest.approx(8.96 / 448, rel=1e-6)
    assert q.float()[0, 0].item() == -448.0
    _, s0 = qr.quant_fp8_per_tensor(torch.zeros(2, 4))
    assert s0.item() == pytest.approx(qr.fp8_min_scale(FP8), rel=1e-6)


def test_group_scales_floor_and_values() -> None:
    x = torch.zeros(2, 256)
    x[0, :128] = torch.linspace(-4.48, 4.48, 128)
    x[0, 128] = 448.0 * 3
    x[1, 5] = 1e-12  # amax below the 1e-10 floor, then MIN_SCALE
    q, s = qr.quant_fp8_group(x, 128)
    assert s.shape == (2, 2) and s.stride() == (2, 1)
    assert s[0, 0].item() == pytest.approx(4.48 / 448, rel=1e-6)
    assert s[0, 1].item() == 3.0
    assert s[1, 0].item() == pytest.approx(qr.fp8_min_scale(FP8), rel=1e-6)
    assert q[0, 128].float().item() == 448.0
    deq = qr.dequant_fp8_group(q, s, 128)
    assert torch.allclose(deq[0, :128], x[0, :128], rtol=0.0625, atol=1e-3)


def test_ue8m0_scales_are_powers_of_two_rounded_up() -> None:
    # amax = 448 * 2**k gives exactly 2**k; a hair above gives 2**(k+1).
    x = torch.zeros(1, 512)
    x[0, 0] = 448.0 * 0.25
    x[0, 128] = 448.0 * 0.25 * (1 + 2**-20)
    x[0, 256] = 3.0
    x[0, 384] = 448.0 * 1024
    _, s = qr.quant_fp8_group(x, 128, ue8m0=True)
    assert s.tolist() == [[0.25, 0.5, 2.0**-7, 1024.0]]  # 3/448 = 0.0067 → 2**-7
    mantissa, _ = torch.frexp(s)
    assert torch.all(mantissa == 0.5)


def test_ue8m0_round_up_is_exact_on_the_bits() -> None:
    s = torch.tensor([2.0**-10 * (1 + 2**-23), 2.0**-10, 0.75, 3.0])
    assert qr.ue8m0_round_up(s).tolist() == [2.0**-9, 2.0**-10, 1.0, 4.0]


def test_column_major_scale_layout() -> None:
    x = torch.randn(5, 256, dtype=torch.bfloat16)
    q_row, s_row = qr.quant_fp8_group(x, 128)
    q_col, s_col = qr.quant_fp8_group(x, 128, col_major=True)
    assert s_col.shape == (5, 2) and s_col.stride() == (1, 5)
    assert torch.equal(s_col, s_row) and torch.equal(q_col.view(torch.uint8),
                                                     q_row.view(torch.uint8))
    x3 = torch.randn(2, 3, 128, dtype=torch.bfloat16)
    _, s3 = qr.quant_fp8_group(x3, 64, col_major=True)
    assert s3.shape == (2, 3, 2) and s3.stride() == (3, 1, 6)
    assert qr.group_scale_shape_strides((7,), 4, True) == ((7, 4), (1, 7))
    assert qr.group_scale_shape_strides((7,), 4, False) == ((7, 4), (4, 1))


def test_e2m1_rounding_ties_to_even_and_sign() -> None:
    v = torch.tensor([0.0, 0.25, 0.26, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.01, 6.0, -0.1, -6.0,
                      -1.5])
    codes = qr.e2m1_encode(v)
    assert codes.tolist() == [0, 0, 1, 2, 2, 4, 4, 6, 6, 7, 7, 8, 15, 11]
    assert qr.e2m1_decode(codes).tolist() == [0.0, 0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0,
                                              6.0, -0.0, -6.0, -1.5]


def test_e2m1_packing_low_nibble_first() -> None:
    codes = torch.tensor([[1, 2, 15, 8]], dtype=torch.uint8)
    packed = qr.pack_e2m1(codes)
    assert packed.tolist() == [[0x21, 0x8F]]
    assert torch.equal(qr.unpack_e2m1(packed), codes)


def test_swizzle_layout_offsets_and_round_trip() -> None:
    m, k = 130, 9
    sb = torch.arange(m * k, dtype=torch.float32).reshape(m, k) + 1
    sw = qr.swizzle_block_scales(sb)
    assert sw.shape == (256, 12)
    flat = sw.reshape(-1)
    kp4 = 12 // 4
    for row, col in ((0, 0), (1, 0), (31, 3), (32, 0), (127, 8), (128, 5), (129, 8)):
        off = ((row // 128 * kp4 + col // 4) * 32 + row % 32) * 16 + (row % 128 // 32) * 4 \
            + col % 4
        assert flat[off].item() == sb[row, col].item()
    assert torch.equal(qr.unswizzle_block_scales(sw, m, k), sb)
    assert (flat != 0).sum().item() == m * k  # padding is zero


def test_nvfp4_round_trip_and_block_scales() -> None:
    torch.manual_seed(0)
    x = torch.randn(3, 64, dtype=torch.bfloat16)
    x[1, 16:32] = 0.0  # an all-zero block: scale 0, codes 0
    gs = (448.0 * 6.0 / x.float().abs().amax()).reshape(1)
    packed, sf = qr.quant_nvfp4(x, gs)
    assert packed.shape == (3, 32) and packed.dtype == torch.uint8
    assert sf.shape == (128, 4) and sf.dtype == FP8
    sb = qr.unswizzle_block_scales(sf.float(), 3, 4)
    amax = x.float().reshape(3, 4, 16).abs().amax(-1)
    assert torch.equal(sb, (gs * amax / 6).clamp(-448, 448).to(FP8).float())
    assert sb[1, 1].item() == 0.0 and packed[1, 8:16].sum().item() == 0
    deq = qr.dequant_nvfp4(packed, sf, gs)
    err = (deq - x.float()).abs().mean() / x.float().abs().mean()
    assert err.item() < 0.1
    # Values on the e2m1 grid times the block scale come back exactly.
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0] * 2).reshape(1, 16)
    p2, s2 = qr.quant_nvfp4(grid, torch.tensor([448.0]))
    assert torch.equal(qr.dequant_nvfp4(p2, s2, torch.tensor([448.0])), grid)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.float8_e4m3fn])
def test_unsupported_input_dtypes_raise(dtype: torch.dtype) -> None:
    x = torch.ones(2, 32).to(dtype)
    with pytest.raises(ValueError, match="unsupported input dtype"):
        qr.quant_fp8_static(x, torch.ones(1))


def test_bad_group_size_and_output_dtype_raise() -> None:
    x = torch.ones(2, 96)
    with pytest.raises(ValueError, match="group size 64 does not divide"):
        qr.quant_fp8_group(x, 64)
    with pytest.raises(ValueError, match="unsupported FP8 output dtype"):
        qr.quant_fp8_static(x, torch.ones(1), torch.float8_e5m2)
    with pytest.raises(ValueError, match="multiple of 16"):
        qr.quant_nvfp4(torch.ones(2, 40), torch.ones(1))
