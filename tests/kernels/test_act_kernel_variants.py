"""The NVFP4 and SiLU·Mul + FP8 kernels' arithmetic and config fields, bit for bit.

- Markstein's quotient (NVFP4's and the FP8 group quant's division): exhaustively, for every float32
  significand of the dividend and every significand an fp8 block scale (or the divisor 6) can
  have, `fma(-fma(q0, b, -p), r, q0)` (`norm_quant.div_rn_by`; nvfp4's `fma(fma(q0, -b, p), r,
  q0)` has the same value) with `q0 = RN(p * r)`, `r = RN(1 / b)` equals `RN(p / b)`
  (true fmas: the interpreter's C fma). Scaling p or b by a power of two scales every step
  exactly, so this covers every normal quotient.
- Under TRITON_INTERPRET=1 (one subprocess for the module, as in test_kernels_interpret.py):
  the default and other launch configs against the torch reference, bit for bit, on
  inputs built to hit every e2m1 boundary and tie (exactly, and one ulp either side), -0.0,
  all-zero blocks, tiny blocks (subnormal and zero fp8 scales), clamped block scales (a large
  global scale), random blocks, bf16/fp16/fp32, T 1 and 3, [gate | up] and gate and up apart;
  the e2m1 encoder alone on every float32 within 300 ulps of each boundary and grid value,
  zeros, tiny, huge and infinite values; the FP8 group kernel on groups whose quotients land on
  fp8 ties and on -0.0.
- On the GPU (@pytest.mark.gpu): every NVFP4 config against the default at a real size, the
  quantizer alone against the reference, and `fast_silu` on every bf16 gate value above -87
  (same bits as the plain form's silu there).
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
E2M1_TIES = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def test_markstein_quotient_is_correctly_rounded() -> None:
    from triton._C.libtriton import interpreter as native  # a true fused multiply-add

    p = (np.arange(2**23, dtype=np.uint32) + np.uint32(0x3F800000)).view(np.float32)
    divisors = [1 + k / 8 for k in range(8)] + [6.0]  # fp8 e4m3 significands, and 6
    bad = {}
    for m in divisors:
        b = np.float32(m)
        r = np.float32(1.0) / b  # numpy's float32 division is IEEE: RN(1 / b)
        q0 = p * r
        q = native.fma_fp32(-native.fma_fp32(q0, np.full_like(p, b), -p), np.full_like(p, r), q0)
        bad[m] = int((q != p / b).sum())
    # Without the correction, q0 alone is off in many places (the test can fail).
    assert int(((p * (np.float32(1.0) / np.float32(1.125))) != p / np.float32(1.125)).sum()) > 0
    assert bad == {m: 0 for m in divisors}


# --- the interpreter worker -----------------------------------------------------------------


def _nvfp4_configs() -> list:
    """The default (None) and other launch shapes of both layouts."""
    from irfuse.kernels import nvfp4

    c = nvfp4.Nvfp4Config
    return [None, c(16, 1), c(32, 2), c(32, 1, split=True), c(64, 2, split=True),
            c(32, 1, split=True, evict=False), c(32, 2, evict=False)]


def _tie_blocks() -> torch.Tensor:
    """Rows of fp32 blocks (gs = 1) whose quotients x / sb hit every e2m1 boundary exactly and
    one ulp either side, every grid value, +-0, for several fp8 block scales sb (each block's
    amax is 6 * sb, so sb = fp8(6 * sb / 6) = sb exactly)."""
    blocks = []
    for s in (1.0, 0.375, 1.875 * 2.0**-3, 2.0**-9, 3 * 2.0**-9, 13.0, 240.0):
        vals = [t * s for t in E2M1_TIES] + [g * s for g in E2M1_GRID]
        up = [float(np.nextafter(np.float32(v), np.float32(np.inf))) for v in vals]
        down = [float(np.nextafter(np.float32(v), np.float32(-np.inf))) for v in vals]
        pool = vals + up + down
        pool += [-v for v in pool] + [-0.0]
        for i in range(0, len(pool), 15):
            chunk = pool[i:i + 15]
            chunk += [0.0] * (15 - len(chunk))
            blocks.append([6.0 * s] + chunk)
            blocks.append(chunk[:7] + [-6.0 * s] + chunk[7:])
    blocks.append([0.0] * 16)
    blocks.append([-0.0] * 16)
    blocks.append([-0.0, 0.0] * 8)
    blocks.append([1e-30, -1e-30] * 8)  # sb rounds to fp8 zero
    blocks.append([2.0**-12, -(2.0**-13)] * 8)  # sb = fp8(2**-12 / 6): subnormal fp8 or zero
    return torch.tensor(blocks, dtype=torch.float32)


def _rows(blocks: torch.Tensor, rows: int, per_row: int) -> torch.Tensor:
    n = blocks.shape[0]
    idx = torch.arange(rows * per_row) % n
    return blocks[idx].reshape(rows, per_row * 16)


def _same(a: tuple, b: tuple) -> bool:
    return all(torch.equal(x.view(torch.uint8), y.view(torch.uint8)) for x, y in zip(a, b))


def _nvfp4_checks() -> dict:
    from irfuse.kernels import act_quant_ref, nvfp4, quant_ref

    g = torch.Generator().manual_seed(0)
    configs = _nvfp4_configs()
    out: dict = {}
    ties = _tie_blocks()
    inputs = {
        "ties_T3": (_rows(ties, 3, 48), torch.ones(1)),
        "ties_T1": (_rows(ties, 1, 40), torch.ones(1)),
        # A large global scale: most block scales clamp at 448, quotients past 6 saturate.
        "clamped": (_rows(ties, 2, 48), torch.tensor([3e4])),
        "huge_gs": (torch.randn(2, 256, generator=g), torch.tensor([1e36])),
        "random_fp32": (torch.randn(3, 320, generator=g) * torch.rand(3, 1, generator=g) * 10,
                        torch.tensor([37.5])),
    }
    for dt in (torch.bfloat16, torch.float16):
        x = (torch.randn(3, 256, generator=g) * 3).to(dt)
        inputs[f"random_{dt}"] = (x, (448.0 * 6.0 / x.float().abs().amax()).reshape(1))
    for name, (x, gs) in inputs.items():
        ref = quant_ref.quant_nvfp4(x, gs)
        for cfg in configs:
            out[f"quant/{name}/{_cfg(cfg)}"] = _same(nvfp4.quant_nvfp4(x, gs, cfg), ref)
    # SiLU·Mul: [gate | up] and gate, up apart; every config gives the reference's bits (the
    # interpreter runs the plain silu).
    for dt in (torch.bfloat16, torch.float16):
        x = (torch.randn(3, 512, generator=g) * 2).to(dt)
        x[0, :16] = 0.0  # silu(0) * up = +-0: a zero block and signed zeros
        x[1, 256:272] = -x[1, 256:272].abs()
        gs = (448.0 * 6.0 / act_quant_ref.silu_mul(x).float().abs().amax()).reshape(1)
        gate, up = x[:, :256], x[:, 256:]
        for form, args in (("cat", (x, gs)), ("apart", (gate, gs, up))):
            ref = act_quant_ref.silu_mul_quant_nvfp4(*args)
            for cfg in configs:
                got = nvfp4.silu_mul_quant_nvfp4(*args, config=cfg)
                out[f"silu/{dt}/{form}/{_cfg(cfg)}"] = _same(got, ref)
    return out


def _cfg(cfg) -> str:
    if cfg is None:
        return "default"
    return ",".join(f"{k}={int(v) if isinstance(v, bool) else v}"
                    for k, v in cfg.__dict__.items())


def _e2m1_check() -> dict:
    """The bit encoder (with the sign as the kernel takes it) against quant_ref.e2m1_encode on
    every float32 within 300 ulps of each boundary and grid value, and special values."""
    import triton
    import triton.language as tl

    from irfuse.kernels import quant_ref

    global _nvfp4  # the kernel below resolves names in this module's globals
    from irfuse.kernels import nvfp4 as _nvfp4

    @triton.jit
    def enc(v_ptr, c_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(v_ptr + offs, mask=offs < n, other=0.0)
        code = _nvfp4._e2m1_magnitude_bits(v) | ((v.to(tl.int32, bitcast=True) >> 28) & 8)
        tl.store(c_ptr + offs, code, mask=offs < n)

    centers = np.array(E2M1_TIES + E2M1_GRID[1:] + (8.0, 12.0), dtype=np.float32)
    bits = centers.view(np.int32)[:, None] + np.arange(-300, 301, dtype=np.int32)[None, :]
    vals = np.concatenate([bits.reshape(-1).view(np.float32),
                           np.array([0.0, 1e-45, 1e-38, 1e-20, 0.1, 6.5, 7.99, 1e10, 3e38,
                                     np.inf], dtype=np.float32)])
    vals = np.concatenate([vals, -vals, np.array([-0.0], dtype=np.float32)])
    v = torch.from_numpy(vals)
    codes = torch.empty(v.shape, dtype=torch.int32)
    enc[(triton.cdiv(v.numel(), 1024),)](v, codes, v.numel(), BLOCK=1024)
    ref = quant_ref.e2m1_encode(v.clamp(-6.0, 6.0)).to(torch.int32)
    return {"e2m1_bits": bool(torch.equal(codes, ref)), "e2m1_count": int(v.numel())}


def _act_checks() -> dict:
    from irfuse.kernels import act_quant, act_quant_ref, quant_ref

    out: dict = {}
    fp8 = torch.float8_e4m3fn
    g = torch.Generator().manual_seed(1)
    configs = [None, act_quant.ActConfig(4, 2), act_quant.ActConfig(1, 1, fast_silu=True),
               act_quant.ActConfig(2, 2, fast_silu=True), act_quant.ActConfig(4, 4),
               act_quant.ActConfig(2, 1, early=True),
               act_quant.ActConfig(1, 1, fast_silu=True, early=True, evict=False)]
    # Quantizer alone (fp32 input): groups whose quotients y / s hit fp8 ties and neighbours.
    grp = []
    for amax in (448.0, 300.0, 0.75, 1e-3):
        s = np.float32(amax) / np.float32(448.0)
        vals = []
        for m in np.arange(-448, 449, 7, dtype=np.float32):
            v = np.float32(m * s)
            vals += [v, np.nextafter(v, np.float32(np.inf)), np.nextafter(v, np.float32(-np.inf))]
        vals = [np.float32(amax)] + vals + [np.float32(-0.0)]
        vals += [np.float32(0.0)] * (-len(vals) % 128)
        grp += vals
    x = torch.tensor(np.array(grp, dtype=np.float32))
    x = torch.cat([x, torch.zeros(-x.numel() % 512)]).reshape(-1, 512)
    for ue8m0 in (False, True):
        want = quant_ref.quant_fp8_group(x, 128, False, ue8m0, fp8)
        for cfg in configs:
            got = act_quant.quant_fp8_group(x, 128, False, ue8m0, fp8, config=cfg)
            out[f"group_quant/ue8m0={ue8m0}/{_cfg(cfg)}"] = _same(got, want)
    for dt in (torch.bfloat16, torch.float16):
        xa = (torch.randn(3, 768, generator=g) * 2).to(dt)
        xa[0, :8] = 0.0
        gate, up = xa[:, :384], xa[:, 384:]
        for form, args in (("cat", (xa,)), ("apart", (gate,))):
            kw = {} if form == "cat" else {"up": up}
            ref_g = act_quant_ref.silu_mul_quant_fp8_group(*args, 128, False, False, fp8, **kw)
            ref_s = act_quant_ref.silu_mul_quant_fp8_static(*args, torch.tensor([0.01]), fp8,
                                                            **kw)
            for cfg in configs:
                got = act_quant.silu_mul_quant_fp8_group(*args, 128, False, False, fp8,
                                                         config=cfg, **kw)
                out[f"silu_group/{dt}/{form}/{_cfg(cfg)}"] = _same(got, ref_g)
                got_s = act_quant.silu_mul_quant_fp8_static(*args, torch.tensor([0.01]), fp8,
                                                            config=cfg, **kw)
                out[f"silu_static/{dt}/{form}/{_cfg(cfg)}"] = _same((got_s,), (ref_s,))
    return out


def _worker() -> None:
    import triton

    assert triton.knobs.runtime.interpret, "TRITON_INTERPRET=1 must be set before triton loads"
    results = {}
    for fn in (_nvfp4_checks, _e2m1_check, _act_checks):
        try:
            results.update(fn())
        except Exception as e:  # noqa: BLE001 (reported to the tests)
            results[fn.__name__] = f"raised {type(e).__name__}: {e}"
    print(json.dumps(results))


@pytest.fixture(scope="module")
def results() -> dict:
    from interpret_worker import run_worker

    return run_worker(__file__)


def test_worker_ran_every_check(results: dict) -> None:
    failed = {k: v for k, v in results.items() if isinstance(v, str)}
    assert not failed
    # 7 inputs x 7 configs (the default and 6 others), 2 dtypes x 2 forms x 7 configs.
    assert sum(k.startswith("quant/") for k in results) == 7 * 7
    assert sum(k.startswith("silu/") for k in results) == 2 * 2 * 7
    assert results["e2m1_count"] > 10000


def test_nvfp4_configs_bit_exact(results: dict) -> None:
    bad = [k for k, v in results.items()
           if k.startswith(("quant/", "silu/")) and v is not True]
    assert not bad


def test_e2m1_bit_encoder(results: dict) -> None:
    assert results["e2m1_bits"] is True


def test_act_quant_configs_bit_exact(results: dict) -> None:
    keys = [k for k in results if k.startswith(("group_quant/", "silu_group/", "silu_static/"))]
    n = 7  # configs
    assert len(keys) == 2 * n + 2 * 2 * (n + n)
    assert [k for k in keys if results[k] is not True] == []


# --- GPU ---------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_nvfp4_configs_agree() -> None:
    """Both layouts and every launch shape give the default's bits; the quantizer alone, the
    reference's."""
    from irfuse.kernels import act_quant_ref, nvfp4

    torch.manual_seed(0)
    x = torch.randn(300, 2 * 1024, device="cuda", dtype=torch.bfloat16) * 3
    gs = (448.0 * 6.0 / act_quant_ref.silu_mul(x).float().abs().amax()).reshape(1)
    base = nvfp4.silu_mul_quant_nvfp4(x, gs)
    for cfg in _nvfp4_configs()[1:] + [nvfp4.Nvfp4Config(128, 4, split=True),
                                       nvfp4.Nvfp4Config(256, 8)]:
        assert _same(nvfp4.silu_mul_quant_nvfp4(x, gs, config=cfg), base), cfg
    xf = x.float()
    for cfg in (None, nvfp4.Nvfp4Config(128, 4, split=True), nvfp4.Nvfp4Config(32, 2)):
        assert _same(nvfp4.quant_nvfp4(xf, gs, cfg), act_quant_ref.quant_ref.quant_nvfp4(xf, gs))


@pytest.mark.gpu
def test_gpu_fast_silu_same_bits_above_minus_87() -> None:
    from irfuse.kernels import act_quant, act_quant_ref

    every = torch.arange(2**16, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    gate = every[torch.isfinite(every) & (every.float() > -87.0)].cuda()
    gate = gate[:gate.numel() // 128 * 128].reshape(-1, 128)
    up = torch.ones_like(gate)  # y = bf16(silu(gate)): the silu bits themselves
    plain = act_quant.silu_mul(gate, up, act_quant.ActConfig(1, 1))
    fast = act_quant.silu_mul(gate, up, act_quant.ActConfig(1, 1, fast_silu=True))
    assert torch.equal(fast.view(torch.int16), plain.view(torch.int16))
    # Both are approximations of eager's silu (ex2.approx and a reciprocal): report-size check.
    eager = act_quant_ref.silu_mul(gate, up)
    assert int((fast.view(torch.int16) != eager.view(torch.int16)).sum()) < gate.numel() // 100


if __name__ == "__main__" and "--worker" in sys.argv:
    sys.path.insert(0, str(ROOT))
    _worker()
