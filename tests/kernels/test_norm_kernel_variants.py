"""The norm kernels' config fields (`RowConfig` / `GroupConfig`), on the CPU under
TRITON_INTERPRET=1.

- `fast_div` (division by the row's or group's scale through its correctly rounded reciprocal
  and one FMA correction), `early` (the weight and scales loaded with the row), `evict` (cache
  hints) and several rows per program change neither the arithmetic nor the reduction order:
  every output must equal the default kernel's bit for bit, and the reference's where the
  default's does. So must `vec` (a contiguity hint) here, where the interpreter has no register
  layouts; on the GPU its layout changes the order of the sum of squares
  (`test_swept_configs_on_gpu`).
- `div_rn_by` itself against torch's float32 division, bit for bit, on inputs where the plain
  product by the reciprocal is off in the last bit (so the correction is what makes them
  agree), on signed zeros, infinite scales and dividends, and, bounded, an overflowing product
  and an infinite dividend under a finite scale.

Sizes are small and odd (T not a multiple of the rows per tile, H not a power of two), so that
masks cut tiles. One subprocess, started once with TRITON_INTERPRET=1 (see
`test_kernels_interpret.py` for why), runs every case; each test asserts one case.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest
import torch
import triton
import triton.language as tl

from irfuse.kernels.norm_quant import div_rn_by

HERE = pathlib.Path(__file__).resolve().parents[1]  # tests/: the shared helpers
ROOT = HERE.parent

FP8 = "float8_e4m3fn"
# (case id, kind, T, H, dtype, config kwargs, extra options)
ROW_VARIANTS = [
    ("rows2", dict(rows=2, num_warps=1)),
    ("fast_div", dict(rows=1, num_warps=2, fast_div=True)),
    ("fast_div_rows2", dict(rows=2, num_warps=2, fast_div=True)),
    ("early", dict(rows=1, num_warps=2, early=True)),
    ("early_rows2_fast_div", dict(rows=2, num_warps=2, fast_div=True, early=True)),
    ("early_no_evict", dict(rows=1, num_warps=1, early=True, evict=False)),
    ("rows4_no_evict_fast_div", dict(rows=4, num_warps=2, fast_div=True, evict=False)),
    ("vec8_early_fast_div", dict(rows=1, num_warps=2, fast_div=True, early=True, vec=8)),
    ("vec8_rows2", dict(rows=2, num_warps=1, vec=8)),
]
GROUP_VARIANTS = [
    ("fast_div", dict(num_warps=1, fast_div=True)),
    ("plain_warps2", dict(num_warps=2)),
    ("early_fast_div", dict(num_warps=2, fast_div=True, early=True)),
    ("early_no_evict", dict(num_warps=1, early=True, evict=False)),
    ("no_evict_fast_div", dict(num_warps=1, fast_div=True, evict=False)),
    ("vec8_early_fast_div", dict(num_warps=2, fast_div=True, early=True, evict=False, vec=8)),
]
SHAPES = [(13, 96, "bf16"), (6, 256, "fp16")]


def _case_ids() -> list[str]:
    ids = []
    for t, h, dt in SHAPES:
        for name, _ in ROW_VARIANTS:
            for op in ("per_token", "static", "rms_norm", "quant_per_token"):
                ids.append(f"rows-{name}-{op}-T{t}-H{h}-{dt}")
        for name, _ in GROUP_VARIANTS:
            for layout in ("row", "col_ue8m0"):
                ids.append(f"group-{name}-{layout}-T{t}-H{h}-{dt}")
    return ids + ["div_rn_by-bounded", "div_rn_by-own_amax"]


CASES = _case_ids()


@triton.jit
def _div_kernel(y_ptr, s_ptr, out_ptr, naive_ptr, N, BLOCK: tl.constexpr,
                BOUNDED: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    y = tl.load(y_ptr + offs, mask=m)
    s = tl.load(s_ptr + offs, mask=m, other=1.0)
    inv = tl.math.div_rn(1.0, s)
    tl.store(out_ptr + offs, div_rn_by(y, s, inv, BOUNDED), mask=m)
    tl.store(naive_ptr + offs, y * inv, mask=m)


def _worker() -> None:  # noqa: C901 (one runner for every case, reported as JSON)
    """Run in the subprocess: all cases, one JSON object on the last line of stdout."""
    assert triton.knobs.runtime.interpret, "TRITON_INTERPRET=1 must be set before triton loads"
    from irfuse.kernels import norm_quant as nq
    from irfuse.kernels import norm_quant_ref as ref
    from irfuse.kernels import quant_ref
    from irfuse.kernels.triton_support import patch_interpreter_casts

    patch_interpreter_casts()
    fp8 = getattr(torch, FP8)
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

    def same(a, b) -> bool:
        if a is None or b is None:
            return a is None and b is None
        if a.shape != b.shape or a.stride() != b.stride() or a.dtype != b.dtype:
            return False
        if a.dtype == fp8:
            return bool(torch.equal(a.view(torch.uint8), b.view(torch.uint8)))
        return bool(torch.equal(a, b))

    def inputs(t: int, h: int, dt: str, seed: int) -> dict:
        g = torch.Generator().manual_seed(seed)
        d = dtypes[dt]
        x, r = torch.randn(t, h, generator=g).to(d), torch.randn(t, h, generator=g).to(d)
        x[:, 1:3], r[:, 1:3] = -0.0, -0.0  # y = -0: its code is -0 (0x80) too
        return {"x": x, "r": r,
                "w": (torch.rand(h, generator=g) + 0.5).to(d), "ub": torch.tensor([2.0]),
                "s": [torch.tensor([0.015]), torch.tensor([0.04])]}

    def row_outputs(op: str, d: dict, cfg):
        if op == "per_token":
            return nq.rms_norm_quant_fp8_per_token(d["x"], d["w"], d["ub"], 1e-6, 0.0, fp8,
                                                   d["r"], config=cfg)
        if op == "static":  # two scales: two outputs from one launch
            qs, res = nq.rms_norm_quant_fp8_static(d["x"], d["w"], d["s"], 1e-6, 0.0, fp8,
                                                   d["r"], config=cfg)
            return (*qs, res)
        if op == "rms_norm":
            return nq.rms_norm(d["x"], d["w"], 1e-5, 0.0, d["r"], config=cfg)
        return nq.quant_fp8_per_token(d["x"], d["ub"], fp8, config=cfg)

    def row_reference(op: str, d: dict):
        if op == "per_token":
            return ref.rms_norm_quant_fp8_per_token(d["x"], d["w"], d["ub"], 1e-6, 0.0, fp8,
                                                    d["r"])
        if op == "static":
            qs, res = ref.rms_norm_quant_fp8_static(d["x"], d["w"], d["s"], 1e-6, 0.0, fp8,
                                                    d["r"])
            return (*qs, res)
        if op == "rms_norm":
            return ref.rms_norm(d["x"], d["w"], 1e-5, 0.0, d["r"])
        return quant_ref.quant_fp8_per_token(d["x"], d["ub"], fp8)

    def versus_default(got, default, reference, exact_ref: bool) -> dict:
        n = len(default)
        bad = [i for i in range(n) if not same(got[i], default[i])]
        detail = f"outputs differing from the default kernel's: {bad}"
        ok = not bad
        if exact_ref:  # a quantizer alone is exact: the default kernel and the variant both
            bad_ref = [i for i in range(n) if not same(got[i], reference[i])]
            ok = ok and not bad_ref
            detail += f"; from the reference's: {bad_ref}"
        return {"ok": ok, "detail": detail}

    def run(case: str) -> dict:
        if case.startswith("div_rn_by"):
            return check_div(case.endswith("bounded"))
        parts = case.split("-")
        family, name = parts[0], parts[1]
        t, h, dt = int(parts[-3][1:]), int(parts[-2][1:]), parts[-1]
        d = inputs(t, h, dt, seed=sum(map(ord, case)))
        if family == "rows":
            op = parts[2]
            cfg = nq.RowConfig(**dict(ROW_VARIANTS)[name])
            got, default = row_outputs(op, d, cfg), row_outputs(op, d, None)
            return versus_default(got, default, row_reference(op, d), op == "quant_per_token")
        if family == "group":
            cm = parts[2] == "col_ue8m0"
            cfg = nq.GroupConfig(**dict(GROUP_VARIANTS)[name])
            args = (d["x"], d["w"], 1e-6, 0.0, 32, cm, cm, fp8, d["r"])
            got = nq.rms_norm_quant_fp8_group(*args, config=cfg)
            default = nq.rms_norm_quant_fp8_group(*args)
            return versus_default(got, default, None, False)
        raise ValueError(f"unknown case {case}")

    def check_div(bounded: bool) -> dict:
        g = torch.Generator().manual_seed(7)
        n = 1 << 16
        y = torch.randn(n, generator=g) * torch.exp2(torch.randint(-30, 30, (n,), generator=g))
        s = torch.rand(n, generator=g) * torch.exp2(torch.randint(-17, 20, (n,), generator=g))
        s = s + quant_ref.fp8_min_scale(fp8)  # dynamic scales are at least MIN_SCALE
        inf = float("inf")
        # Signed zeros; an infinite scale (a group or row holding an infinity) with finite,
        # zero and infinite dividends; bounded, also finite scales under infinite dividends
        # and quotients that overflow.
        edge = [(-0.0, 0.5), (0.0, 0.5), (-0.0, inf), (5.0, inf), (-5.0, inf), (0.0, inf),
                (inf, inf), (-inf, inf)]
        if bounded:
            edge += [(1e38, 1e-5), (-3e38, 1e-5), (inf, 0.5), (-inf, 0.5)]
        y[:len(edge)] = torch.tensor([e[0] for e in edge])
        s[:len(edge)] = torch.tensor([e[1] for e in edge])
        out, naive = torch.empty_like(y), torch.empty_like(y)
        _div_kernel[(triton.cdiv(n, 1024),)](y, s, out, naive, n, BLOCK=1024, BOUNDED=bounded)
        want = y / s
        differ = out.view(torch.int32) != want.view(torch.int32)
        nan_both = out.isnan() & want.isnan()
        wrong = int((differ & ~nan_both).sum())
        naive_wrong = int((naive.view(torch.int32) != want.view(torch.int32)).sum())
        return {"ok": wrong == 0 and naive_wrong > 0,
                "detail": f"{wrong} of {n} quotients differ from torch's in their bits "
                          f"(the plain product: {naive_wrong})"}

    results = {}
    for case in CASES:
        try:
            results[case] = run(case)
        except Exception as e:  # noqa: BLE001 (reported to the test of that case)
            results[case] = {"ok": False, "detail": f"raised {type(e).__name__}: {e}"}
    print(json.dumps(results))


GPU_OPS = ("add_rms_static", "rms_static", "add_rms_per_token", "add_rms_group128")


@pytest.mark.gpu
@pytest.mark.parametrize("op", GPU_OPS)
@pytest.mark.parametrize("hidden", (4096, 8192))
@pytest.mark.parametrize("tokens", (1, 4099))
def test_swept_configs_on_gpu(op: str, hidden: int, tokens: int) -> None:
    """Every launch shape the benchmark sweeps (it checks only the default one): within the
    fused-kernel tolerance of eager, and, where it only adds `fast_div` / `early` / no cache
    hints / PDL, equal bit for bit to the same shape without them.
    (`vec` is not among them on the GPU: fewer elements a thread change the order in which the
    sum of squares adds up, so a `vec` shape is compared with the `vec` shape without the
    others.)"""
    import dataclasses

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_norm_act_quant as bench
    import kernel_cases

    spec = bench.op_specs()[op]
    d = spec.make(tokens, hidden)
    ref = spec.eager(d)
    failures = []
    for cfg in spec.configs(tokens, hidden):
        out = spec.kernel(d, cfg)
        parts = spec.check(out, ref)
        if not all(p.ok(1e-2, 0.02) for p in parts):
            failures.append(f"{cfg}: {'; '.join(map(str, parts))}")
        same_bits = {"fast_div": False, "early": False, "evict": True, "pdl": False}
        plain = dataclasses.replace(cfg, **{k: v for k, v in same_bits.items()
                                            if hasattr(cfg, k)})
        if plain != cfg and not kernel_cases.same_bits(out, spec.kernel(d, plain)):
            failures.append(f"{cfg}: differs from {plain}")
    assert not failures, "\n".join(failures)


@pytest.fixture(scope="module")
def results() -> dict:
    from interpret_worker import run_worker

    return run_worker(__file__)


@pytest.mark.parametrize("case", CASES)
def test_variant_matches(results: dict, case: str) -> None:
    r = results[case]
    assert r["ok"], r["detail"]


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker()
