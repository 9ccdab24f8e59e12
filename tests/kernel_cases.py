"""Kernel-vs-reference cases shared by the interpreter (CPU) and GPU kernel tests.

Each case runs one Triton launcher and its torch reference on the same random inputs and returns
whether they agree, with the figures. Quantizers alone (no norm, no activation) must match the
reference bit for bit: their arithmetic is fully specified (IEEE divisions, round to nearest even).
Where a norm or SiLU precedes the quant, rsqrt/exp and the sum order may differ in the last bit, so
a few codes may move one step: at most 1% of them (or 2 elements), every element within one
quantization step, and the mean dequantized error within the tolerance vLLM's tests use
(`docs/numerics.md`). SiLU·Mul cases with an `up` option run the two-tensor form (gate and up
apart, laid out as that option says) and also check it against the [gate | up] form on the
concatenation, bit for bit, for the kernel and for the reference. Static cases with the `divide`
option quantize `y / s` instead of `y * (1 / s)` (models that spell their quant with a division);
they also check that the reference's two spellings disagree somewhere on the case's inputs (bf16
and fp16 values land on fp8 ties), so a kernel that ignored `divide` would fail; with `exact` they
hold a norm or SiLU·Mul kernel to the reference bit for bit (under the interpreter, which computes
rsqrt and exp in float32 as torch's CPU does). Residual norm cases with the `round_sum` option
normalize the sum rounded to the model dtype (Hugging Face's add) instead of the float32 sum; they
check likewise that the reference's two readings give different outputs on the case's inputs.
The kernel modules are imported inside the runner, so that the interpreter test can set
TRITON_INTERPRET before triton loads.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from irfuse.kernels import act_quant_ref, norm_quant_ref, quant_ref
from irfuse.kernels.compare import Agreement, agreement, fp8_agreement

FP8 = torch.float8_e4m3fn
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# Mean dequantized error allowed after a norm (fp16 2e-3, bf16 1e-2) or SiLU·Mul.
NORM_TOL = {"bf16": 1e-2, "fp16": 2e-3, "fp32": 2e-3}
FP8_OUT = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}


@dataclass(frozen=True)
class Case:
    """One kernel check: a runner name, sizes, input dtype and runner options."""

    kind: str
    tokens: int
    hidden: int
    dtype: str = "bf16"
    opts: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        extra = "-".join(f"{k}={v}" for k, v in sorted(self.opts.items()))
        return f"{self.kind}-T{self.tokens}-H{self.hidden}-{self.dtype}" + (
            f"-{extra}" if extra else "")


def _exact(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype or a.stride() != b.stride():
        return False
    if a.dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        return bool(torch.equal(a.view(torch.uint8), b.view(torch.uint8)))
    return bool(torch.equal(a, b))


class _Checks:
    """Collects named checks; `ok` when all pass."""

    def __init__(self, numel: int, tol: float):
        self.items: list[tuple[str, bool, str]] = []
        self.max_mismatch = max(0.01, 2.0 / max(numel, 1))
        self.tol = tol

    def exact(self, name: str, a: torch.Tensor, b: torch.Tensor) -> None:
        same = _exact(a, b)
        detail = "" if same else (f"shape {tuple(a.shape)}/{tuple(b.shape)} stride "
                                  f"{a.stride()}/{b.stride()} dtype {a.dtype}/{b.dtype}")
        self.items.append((name, same, detail or "exact"))

    def close(self, name: str, agr: Agreement, tol: float | None = None,
              max_mismatch: float | None = None) -> None:
        ok = agr.ok(self.tol if tol is None else tol,
                    self.max_mismatch if max_mismatch is None else max_mismatch)
        self.items.append((name, ok, str(agr)))

    def layout(self, name: str, a: torch.Tensor, b: torch.Tensor) -> None:
        ok = a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
        self.items.append((name, ok, f"{tuple(a.shape)} {a.stride()} {a.dtype} vs "
                                     f"{tuple(b.shape)} {b.stride()} {b.dtype}"))

    def scales(self, name: str, s: torch.Tensor, s_ref: torch.Tensor) -> None:
        ok = s.shape == s_ref.shape and s.stride() == s_ref.stride() and bool(
            torch.allclose(s, s_ref, rtol=1e-2, atol=0.0))
        self.items.append((name, ok, f"layout {tuple(s.shape)} {s.stride()} vs "
                                     f"{tuple(s_ref.shape)} {s_ref.stride()}"))

    def result(self) -> dict:
        return {"ok": all(ok for _, ok, _ in self.items),
                "detail": "; ".join(f"{n}: {'ok' if ok else 'FAIL'} ({d})"
                                    for n, ok, d in self.items)}


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32}


def _codes_differ(c: _Checks, name: str, a: list[torch.Tensor],
                  b: list[torch.Tensor]) -> None:
    """Check that two lists of outputs (fp8 codes, or model-dtype values) differ in at least one
    element, compared as bits (the case can tell them apart)."""
    n = sum(int((x.view(_BITS[x.element_size()]) != y.view(_BITS[y.element_size()])).sum())
            for x, y in zip(a, b, strict=True))
    c.items.append((name, n > 0, f"{n} elements differ"))


def _q_check(case: Case, c: _Checks, name: str, q: torch.Tensor, s: torch.Tensor,
             q_ref: torch.Tensor) -> None:
    """A static output against the reference: bit for bit with the `exact` option, else
    within the fused-kernel tolerance."""
    if case.opts.get("exact"):
        c.exact(name, q, q_ref)
    else:
        c.close(name, fp8_agreement(q, s, q_ref, s))


def _dynamic_check(case: Case, c: _Checks, got: tuple[torch.Tensor, torch.Tensor],
                   ref: tuple[torch.Tensor, torch.Tensor], group: int | None = None) -> None:
    """A dynamic quant's (q, scales) against the reference: bit for bit with the `exact` option,
    else within the fused-kernel tolerance (scales within 1%)."""
    (q, s), (q_ref, s_ref) = got, ref
    if case.opts.get("exact"):
        c.exact("q", q, q_ref)
        c.exact("scale", s, s_ref)
    else:
        c.close("q", fp8_agreement(q, s, q_ref, s_ref, group))
        c.scales("scale", s, s_ref)


def _ulp_close(c: _Checks, name: str, a: torch.Tensor, b: torch.Tensor) -> None:
    """Model-dtype outputs: bf16/fp16 within two units in the last place (a norm rounds twice:
    once before the weight product, once after), rarely off at all; float32 (no rounding to
    hide exp/rsqrt differences) within 1e-5 relative."""
    if a.dtype == torch.float32:
        c.close(name, agreement(a, b, step_rel=1e-5), max_mismatch=1.0)
    else:
        c.close(name, agreement(a, b, step_rel=2 * torch.finfo(a.dtype).eps))


def _inputs(case: Case, device: str) -> dict:
    # Drawn on the device itself: at T=4096 the CPU would spend seconds per case.
    gen = torch.Generator(device=device).manual_seed(zlib.crc32(case.id.encode()))
    dt = DTYPES[case.dtype]
    t, h = case.tokens, case.hidden

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, device=device).to(dt)

    d = {"x": randn(t, h), "r": randn(t, h), "xa": randn(t, 2 * h),
         "w": (torch.rand(h, generator=gen, device=device) + 0.5).to(dt),
         "scale": torch.tensor([0.015], device=device),
         "scale2": torch.tensor([0.04], device=device),
         "ub": torch.tensor([2.0], device=device)}
    if case.opts.get("up"):
        d["big"] = randn(t, 3 * h)  # a wider GEMM output that `up` is cut from
    return d


def _fp8_tol(case: Case) -> float:
    return NORM_TOL[case.dtype]


def run_rms_norm(case: Case, d: dict, c: _Checks) -> None:
    from irfuse.kernels import norm_quant

    off = case.opts.get("offset", 0.0)
    res = d["r"] if case.opts.get("residual") else None
    rs = case.opts.get("round_sum", False)
    wf = case.opts.get("weight_f32", False)
    y, r = norm_quant.rms_norm(d["x"], d["w"], 1e-5, off, res, round_sum=rs, weight_f32=wf)
    y_ref, r_ref = norm_quant_ref.rms_norm(d["x"], d["w"], 1e-5, off, res, rs, wf)
    if case.opts.get("exact"):
        c.exact("y", y, y_ref)
    else:
        _ulp_close(c, "y", y, y_ref)
    if rs:
        _codes_differ(c, "round_sum_matters", [y_ref],
                      [norm_quant_ref.rms_norm(d["x"], d["w"], 1e-5, off, res, False, wf)[0]])
    if wf and not off:
        _codes_differ(c, "weight_f32_matters", [y_ref],
                      [norm_quant_ref.rms_norm(d["x"], d["w"], 1e-5, off, res, rs)[0]])
    if res is not None:
        c.exact("residual_out", r, r_ref)


def run_norm_static(case: Case, d: dict, c: _Checks) -> None:
    from irfuse.kernels import norm_quant

    n = case.opts.get("scales", 1)
    scales = [d["scale"] * (1 + i) for i in range(n)]
    res = d["r"] if case.opts.get("residual") else None
    out = FP8_OUT[case.opts.get("out", "e4m3fn")]
    cfg = case.opts.get("rows")
    cfg = norm_quant.RowConfig(cfg, 1) if cfg else None
    divide = case.opts.get("divide", False)
    rs = case.opts.get("round_sum", False)
    wf = case.opts.get("weight_f32", False)
    off = case.opts.get("offset", 0.0)
    qs, r = norm_quant.rms_norm_quant_fp8_static(d["x"], d["w"], scales, 1e-6, off, out, res,
                                                 config=cfg, divide=divide, round_sum=rs,
                                                 weight_f32=wf)
    qs_ref, r_ref = norm_quant_ref.rms_norm_quant_fp8_static(d["x"], d["w"], scales, 1e-6,
                                                             off, out, res, divide=divide,
                                                             round_sum=rs, weight_f32=wf)
    for i, (q, q_ref) in enumerate(zip(qs, qs_ref, strict=True)):
        _q_check(case, c, f"q{i}", q, scales[i], q_ref)
    if divide:
        other, _ = norm_quant_ref.rms_norm_quant_fp8_static(d["x"], d["w"], scales, 1e-6, off,
                                                            out, res, round_sum=rs,
                                                            weight_f32=wf)
        _codes_differ(c, "divide_matters", qs_ref, other)
    if rs:
        other, _ = norm_quant_ref.rms_norm_quant_fp8_static(d["x"], d["w"], scales, 1e-6, off,
                                                            out, res, divide=divide,
                                                            weight_f32=wf)
        _codes_differ(c, "round_sum_matters", qs_ref, other)
    if wf and not off:
        other, _ = norm_quant_ref.rms_norm_quant_fp8_static(d["x"], d["w"], scales, 1e-6, off,
                                                            out, res, divide=divide,
                                                            round_sum=rs)
        _codes_differ(c, "weight_f32_matters", qs_ref, other)
    if res is not None:
        c.exact("residual_out", r, r_ref)


def run_norm_per_token(case: Case, d: dict, c: _Checks) -> None:
    from irfuse.kernels import norm_quant

    ub = d["ub"] if case.opts.get("ub") else None
    res = d["r"] if case.opts.get("residual") else None
    off = case.opts.get("offset", 0.0)
    rs = case.opts.get("round_sum", False)
    wf = case.opts.get("weight_f32", False)
    q, s, r = norm_quant.rms_norm_quant_fp8_per_token(d["x"], d["w"], ub, 1e-6, off, FP8, res,
                                                      round_sum=rs, weight_f32=wf)
    q_ref, s_ref, r_ref = norm_quant_ref.rms_norm_quant_fp8_per_token(
        d["x"], d["w"], ub, 1e-6, off, FP8, res, rs, weight_f32=wf)
    _dynamic_check(case, c, (q, s), (q_ref, s_ref))
    if rs:
        other = norm_quant_ref.rms_norm_quant_fp8_per_token(d["x"], d["w"], ub, 1e-6, off, FP8,
                                                            res, weight_f32=wf)
        _codes_differ(c, "round_sum_matters", [q_ref], [other[0]])
    if wf and not off:
        other = norm_quant_ref.rms_norm_quant_fp8_per_token(d["x"], d["w"], ub, 1e-6, off, FP8,
                                                            res, rs)
        _codes_differ(c, "weight_f32_matters", [q_ref], [other[0]])
    if res is not None:
        c.exact("residual_out", r, r_ref)


def run_norm_group(case: Case, d: dict, c: _Checks) -> None:
    from irfuse.kernels import norm_quant

    g, cm, ue = case.opts["group"], case.opts.get("col_major", False), case.opts.get("ue8m0",
                                                                                      False)
    res = d["r"] if case.opts.get("residual") else None
    rs = case.opts.get("round_sum", False)
    wf = case.opts.get("weight_f32", False)
    off = case.opts.get("offset", 0.0)
    q, s, r = norm_quant.rms_norm_quant_fp8_group(d["x"], d["w"], 1e-6, off, g, cm, ue, FP8,
                                                  res, round_sum=rs, weight_f32=wf)
    q_ref, s_ref, r_ref = norm_quant_ref.rms_norm_quant_fp8_group(
        d["x"], d["w"], 1e-6, off, g, cm, ue, FP8, res, rs, weight_f32=wf)
    _dynamic_check(case, c, (q, s), (q_ref, s_ref), g)
    if rs:
        other = norm_quant_ref.rms_norm_quant_fp8_group(d["x"], d["w"], 1e-6, off, g, cm, ue,
                                                        FP8, res, weight_f32=wf)
        _codes_differ(c, "round_sum_matters", [q_ref], [other[0]])
    if wf and not off:
        other = norm_quant_ref.rms_norm_quant_fp8_group(d["x"], d["w"], 1e-6, off, g, cm, ue,
                                                        FP8, res, rs)
        _codes_differ(c, "weight_f32_matters", [q_ref], [other[0]])
    if res is not None:
        c.exact("residual_out", r, r_ref)


def run_quant(case: Case, d: dict, c: _Checks) -> None:
    """Quantizers alone: bit-exact against the reference."""
    from irfuse.kernels import act_quant, norm_quant, nvfp4

    x, scheme = d["x"], case.opts["scheme"]
    out = FP8_OUT[case.opts.get("out", "e4m3fn")]
    if scheme == "static":
        divide = case.opts.get("divide", False)
        q_ref = quant_ref.quant_fp8_static(x, d["scale"], out, divide)
        c.exact("q", act_quant.quant_fp8_static(x, d["scale"], out, divide=divide), q_ref)
        if divide:
            _codes_differ(c, "divide_matters", [q_ref],
                              [quant_ref.quant_fp8_static(x, d["scale"], out)])
        return
    if scheme == "per_token":
        ub = d["ub"] if case.opts.get("ub") else None
        got, ref = norm_quant.quant_fp8_per_token(x, ub, out), quant_ref.quant_fp8_per_token(
            x, ub, out)
    elif scheme == "per_tensor":
        got, ref = act_quant.quant_fp8_per_tensor(x, out), quant_ref.quant_fp8_per_tensor(x, out)
    elif scheme == "group":
        args = (case.opts["group"], case.opts.get("col_major", False),
                case.opts.get("ue8m0", False), out)
        got, ref = act_quant.quant_fp8_group(x, *args), quant_ref.quant_fp8_group(x, *args)
    else:
        gs = (448.0 * 6.0 / x.float().abs().amax()).reshape(1)
        got, ref = nvfp4.quant_nvfp4(x, gs), quant_ref.quant_nvfp4(x, gs)
    c.exact("q", got[0], ref[0])
    c.exact("scale", got[1], ref[1])


def _gate_up(case: Case, d: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Gate and up apart, laid out as `case.opts["up"]` says: "slice", column slices of wider
    tensors (row strides 2H and 3H, as from a merged GEMM output); "contiguous"; "col", an up
    whose last dim is not contiguous (strides (1, T): the launcher must copy it)."""
    h, mode = case.hidden, case.opts["up"]
    gate, up = d["xa"][:, :h], d["big"][:, h:2 * h]
    if mode == "contiguous":
        return gate.contiguous(), up.contiguous()
    if mode == "col":
        return gate, up.t().contiguous().t()
    assert mode == "slice", mode
    return gate, up


def _silu_fns(case: Case, d: dict) -> tuple[Callable, Callable]:
    """(kernel, reference) of the case's SiLU·Mul scheme, each called as f(x, up=None); the
    option "act" names another gate activation (GeGLU: gelu_tanh, gelu)."""
    from irfuse.kernels import act_quant, nvfp4

    scheme = case.opts.get("scheme", "none")
    a = case.opts.get("act", "silu")
    if scheme == "none":
        return (lambda x, up=None: act_quant.silu_mul(x, up, activation=a),
                lambda x, up=None: act_quant_ref.silu_mul(x, up, activation=a))
    if scheme == "static":
        divide = case.opts.get("divide", False)
        return (lambda x, up=None: act_quant.silu_mul_quant_fp8_static(
                    x, d["scale"], FP8, up, divide=divide, activation=a),
                lambda x, up=None: act_quant_ref.silu_mul_quant_fp8_static(
                    x, d["scale"], FP8, up, divide=divide, activation=a))
    if scheme == "group":
        args = (case.opts["group"], case.opts.get("col_major", False),
                case.opts.get("ue8m0", False), FP8)
        return (lambda x, up=None: act_quant.silu_mul_quant_fp8_group(x, *args, up,
                                                                      activation=a),
                lambda x, up=None: act_quant_ref.silu_mul_quant_fp8_group(x, *args, up,
                                                                          activation=a))
    return (lambda x, up=None: nvfp4.silu_mul_quant_nvfp4(x, d["gs"], up, activation=a),
            lambda x, up=None: act_quant_ref.silu_mul_quant_nvfp4(x, d["gs"], up, activation=a))


def run_silu(case: Case, d: dict, c: _Checks) -> None:
    scheme = case.opts.get("scheme", "none")
    xa, up = d["xa"], None
    if case.opts.get("up"):
        xa, up = _gate_up(case, d)
        cat = torch.cat([xa, up], -1)
    if scheme == "nvfp4":
        y = act_quant_ref.silu_mul(xa, up, activation=case.opts.get("act", "silu"))
        d["gs"] = gs = (448.0 * 6.0 / y.float().abs().amax()).reshape(1)
    kernel, reference = _silu_fns(case, d)
    got, ref = kernel(xa, up), reference(xa, up)
    if up is not None:
        # Same kernel arithmetic, halves read from elsewhere: the same bits.
        for i, (a, b) in enumerate(zip(_flat(got), _flat(kernel(cat)), strict=True)):
            c.exact(f"kernel_two_tensor_vs_cat{i}", a, b)
        for i, (a, b) in enumerate(zip(_flat(ref), _flat(reference(cat)), strict=True)):
            c.exact(f"ref_two_tensor_vs_cat{i}", a, b)
    if scheme == "none":
        _ulp_close(c, "y", got, ref)
    elif scheme == "static":
        _q_check(case, c, "q", got, d["scale"], ref)
        if case.opts.get("divide"):
            other = act_quant_ref.silu_mul_quant_fp8_static(xa, d["scale"], FP8, up)
            _codes_differ(c, "divide_matters", [ref], [other])
    elif scheme == "group":
        (q, s), (q_ref, s_ref) = got, ref
        c.close("q", fp8_agreement(q, s, q_ref, s_ref, case.opts["group"]), tol=5e-2)
        c.scales("scale", s, s_ref)
    else:
        (q, sf), (q_ref, sf_ref) = got, ref
        deq = quant_ref.dequant_nvfp4(q, sf, gs)
        deq_ref = quant_ref.dequant_nvfp4(q_ref, sf_ref, gs)
        c.close("q", agreement(deq, deq_ref, 0.5, 0.0,
                               codes=(quant_ref.unpack_e2m1(q), quant_ref.unpack_e2m1(q_ref))),
                tol=1e-1)
        c.layout("scale_layout", sf, sf_ref)


RUNNERS: dict[str, Callable[[Case, dict, _Checks], None]] = {
    "rms_norm": run_rms_norm, "norm_static": run_norm_static,
    "norm_per_token": run_norm_per_token, "norm_group": run_norm_group, "quant": run_quant,
    "silu": run_silu,
}


def _flat(out: torch.Tensor | tuple) -> list[torch.Tensor]:
    return [out] if isinstance(out, torch.Tensor) else list(out)


def _output_bytes(out: object) -> list[torch.Tensor]:
    """A kernel's outputs (nested tuples and lists, Nones skipped) as flat byte tensors."""
    if out is None:
        return []
    if isinstance(out, (tuple, list)):
        return [b for o in out for b in _output_bytes(o)]
    return [out.contiguous().view(-1).view(torch.uint8)]


def same_bits(a: object, b: object) -> bool:
    """Whether two launches' outputs (as launchers return them) are equal bit for bit."""
    pa, pb = _output_bytes(a), _output_bytes(b)
    return len(pa) == len(pb) and all(torch.equal(x, y) for x, y in zip(pa, pb, strict=True))


def run_case(case: Case, device: str) -> dict:
    """Run one case; returns {"ok": bool, "detail": str}."""
    d = _inputs(case, device)
    numel = case.tokens * case.hidden
    checks = _Checks(numel, _fp8_tol(case))
    RUNNERS[case.kind](case, d, checks)
    return checks.result()


def interpreter_cases() -> list[Case]:
    """Small cases for TRITON_INTERPRET=1: several T, non-power-of-two H, T=1, all dtypes."""
    cases = []
    for t, h, dt in ((1, 64, "bf16"), (7, 96, "fp16"), (3, 256, "fp32")):
        cases += [
            Case("rms_norm", t, h, dt),
            Case("rms_norm", t, h, dt, {"residual": True}),
            Case("norm_static", t, h, dt, {"residual": True}),
            Case("norm_per_token", t, h, dt, {"residual": True, "ub": True}),
            Case("norm_group", t, h, dt, {"group": 32, "residual": True}),
            Case("silu", t, h, dt),
            Case("silu", t, h, dt, {"scheme": "static"}),
            Case("silu", t, h, dt, {"scheme": "group", "group": 32}),
            Case("silu", t, h, dt, {"scheme": "nvfp4"}),
            Case("silu", t, h, dt, {"scheme": "static", "up": "slice"}),
            Case("silu", t, h, dt, {"scheme": "nvfp4", "up": "slice"}),
            Case("quant", t, h, dt, {"scheme": "static"}),
            Case("quant", t, h, dt, {"scheme": "per_token"}),
            Case("quant", t, h, dt, {"scheme": "per_tensor"}),
            Case("quant", t, h, dt, {"scheme": "group", "group": 32, "col_major": True}),
            Case("quant", t, h, dt, {"scheme": "nvfp4"}),
        ]
    cases += [
        Case("rms_norm", 5, 64, "bf16", {"residual": True, "offset": 1.0}),
        Case("norm_static", 5, 96, "bf16", {"scales": 2}),
        Case("norm_static", 5, 64, "bf16", {"scales": 5, "residual": True}),
        Case("norm_static", 5, 64, "bf16", {"rows": 2}),
        Case("norm_static", 4, 64, "bf16", {"out": "e4m3fnuz"}),
        Case("norm_per_token", 4, 64, "bf16", {"offset": 1.0}),
        Case("norm_group", 4, 128, "bf16", {"group": 64, "col_major": True, "ue8m0": True}),
        Case("norm_group", 2, 96, "bf16", {"group": 32, "ue8m0": True}),
        Case("silu", 3, 256, "bf16", {"scheme": "group", "group": 128, "col_major": True,
                                      "ue8m0": True}),
        Case("silu", 5, 96, "bf16", {"up": "slice"}),
        Case("silu", 5, 96, "fp16", {"up": "col"}),
        Case("silu", 4, 128, "bf16", {"scheme": "group", "group": 64, "up": "slice"}),
        Case("silu", 3, 256, "fp32", {"scheme": "group", "group": 128, "col_major": True,
                                      "ue8m0": True, "up": "contiguous"}),
        Case("silu", 2, 64, "bf16", {"scheme": "static", "up": "col"}),
        Case("silu", 3, 64, "bf16", {"scheme": "nvfp4", "up": "col"}),
        # GeGLU: the SiLU·Mul kernels' GELU branches (ACT 2, 3), every scheme, both forms (the
        # quantized outputs: the CPU's vectorized tanh / erf round GELU's far negative tail to
        # -0 where the kernel keeps about -1e-7, a difference no quant code sees).
        *(Case("silu", t, h, dt, {"act": act, **opts})
          for act in ("gelu_tanh", "gelu")
          for t, h, dt in ((1, 64, "bf16"), (7, 96, "fp16"), (3, 256, "fp32"))
          for opts in ({"scheme": "static"}, {"scheme": "group", "group": 32},
                       {"scheme": "nvfp4"}, {"scheme": "static", "up": "slice"})),
        Case("silu", 4, 128, "bf16", {"act": "gelu_tanh", "scheme": "group", "group": 64,
                                      "up": "slice"}),
        Case("silu", 3, 64, "bf16", {"act": "gelu", "scheme": "nvfp4", "up": "col"}),
        Case("quant", 5, 128, "bf16", {"scheme": "per_token", "ub": True, "out": "e4m3fnuz"}),
        Case("quant", 5, 128, "bf16", {"scheme": "group", "group": 64, "ue8m0": True}),
        # Static quants spelled `y / s`: bit for bit, on inputs where the spelling matters.
        Case("quant", 16, 256, "bf16", {"scheme": "static", "divide": True}),
        Case("quant", 16, 256, "fp16", {"scheme": "static", "divide": True,
                                        "out": "e4m3fnuz"}),
        Case("norm_static", 16, 256, "bf16", {"residual": True, "divide": True, "exact": True}),
        Case("norm_static", 16, 256, "bf16", {"scales": 5, "divide": True, "exact": True}),
        Case("silu", 16, 256, "bf16", {"scheme": "static", "divide": True, "exact": True}),
        Case("silu", 16, 256, "fp16", {"scheme": "static", "up": "slice", "divide": True,
                                       "exact": True}),
        # Residual norms that read the sum rounded to the model dtype (Hugging Face's add): bit
        # for bit, on inputs where the two readings of the sum give different outputs.
        Case("rms_norm", 16, 256, "bf16", {"residual": True, "round_sum": True, "exact": True}),
        Case("norm_static", 16, 256, "bf16", {"residual": True, "round_sum": True,
                                              "exact": True}),
        Case("norm_static", 16, 256, "bf16", {"residual": True, "scales": 5, "divide": True,
                                              "round_sum": True, "exact": True}),
        Case("norm_static", 16, 256, "fp16", {"residual": True, "divide": True,
                                              "round_sum": True, "exact": True}),
        Case("norm_per_token", 16, 256, "bf16", {"residual": True, "ub": True,
                                                 "round_sum": True, "exact": True}),
        Case("norm_group", 16, 256, "fp16", {"group": 64, "col_major": True, "residual": True,
                                             "round_sum": True, "exact": True}),
    ]
    return cases + norm_reading_cases()


NORM_READINGS = {
    # The weight product in the model dtype (vLLM, Hugging Face Llama): the default.
    "model_dtype": {},
    # In float32, rounded once (`F.rms_norm`, `(normed * w.float()).to(dtype)`).
    "weight_f32": {"weight_f32": True},
    # Gemma's `1 + w`, a float32 product.
    "gemma": {"offset": 1.0},
}
NORM_SCHEMES = {
    "none": ("rms_norm", {}),
    "static": ("norm_static", {}),
    "static_divide": ("norm_static", {"divide": True}),
    "per_token": ("norm_per_token", {}),
    "group": ("norm_group", {"group": 64}),
}


def norm_reading_cases() -> list[Case]:
    """Every norm reading x every quant scheme x bf16 / fp16, with and without the residual
    add (the residual ones also in Hugging Face's rounded-sum reading), bit for bit against the
    reference on inputs where the weight product's reading changes outputs."""
    cases = []
    for reading, ropts in NORM_READINGS.items():
        for kind, sopts in NORM_SCHEMES.values():
            for dt in ("bf16", "fp16"):
                for res in ({}, {"residual": True}, {"residual": True, "round_sum": True}):
                    cases.append(Case(kind, 16, 256, dt, {**ropts, **sopts, **res,
                                                          "exact": True, "reading": reading}))
    return cases


def gpu_cases() -> list[Case]:
    """Real sizes: T in {1, 16, 4096} x H in {4096, 8192}, bf16, every kernel."""
    cases = []
    for t in (1, 16, 4096):
        for h in (4096, 8192):
            cases += [
                Case("rms_norm", t, h, opts={"residual": True}),
                Case("norm_static", t, h, opts={"residual": True, "scales": 2}),
                Case("norm_static", t, h),
                Case("norm_per_token", t, h, opts={"residual": True, "ub": True}),
                Case("norm_group", t, h, opts={"group": 128, "residual": True}),
                Case("norm_group", t, h, opts={"group": 64, "col_major": True, "ue8m0": True}),
                Case("silu", t, h),
                Case("silu", t, h, opts={"scheme": "static"}),
                Case("silu", t, h, opts={"scheme": "group", "group": 128}),
                Case("silu", t, h, opts={"scheme": "nvfp4"}),
                Case("silu", t, h, opts={"up": "slice"}),
                Case("silu", t, h, opts={"scheme": "static", "up": "slice"}),
                Case("silu", t, h, opts={"scheme": "group", "group": 128, "up": "slice"}),
                Case("silu", t, h, opts={"scheme": "nvfp4", "up": "slice"}),
                Case("silu", t, h, opts={"act": "gelu_tanh", "scheme": "static"}),
                Case("silu", t, h, opts={"act": "gelu", "scheme": "group", "group": 128,
                                         "up": "slice"}),
                Case("silu", t, h, opts={"act": "gelu_tanh", "scheme": "nvfp4"}),
                Case("quant", t, h, opts={"scheme": "static"}),
                Case("quant", t, h, opts={"scheme": "per_token", "ub": True}),
                Case("quant", t, h, opts={"scheme": "per_tensor"}),
                Case("quant", t, h, opts={"scheme": "group", "group": 128, "col_major": True,
                                          "ue8m0": True}),
                Case("quant", t, h, opts={"scheme": "nvfp4"}),
            ]
    for t in (16, 4096):  # `divide` (y / s): the quantizer is exact, norm and SiLU within tol
        cases += [
            Case("quant", t, 4096, opts={"scheme": "static", "divide": True}),
            Case("norm_static", t, 4096, opts={"residual": True, "divide": True}),
            Case("norm_static", t, 4096, opts={"residual": True, "scales": 2, "divide": True}),
            Case("silu", t, 4096, opts={"scheme": "static", "up": "slice", "divide": True}),
        ]
    for t in (16, 4096):  # `round_sum` (the norm reads the bf16 sum): within tol, every kernel
        cases += [
            Case("rms_norm", t, 4096, opts={"residual": True, "round_sum": True}),
            Case("norm_static", t, 4096, opts={"residual": True, "scales": 2, "divide": True,
                                               "round_sum": True}),
            Case("norm_per_token", t, 4096, opts={"residual": True, "ub": True,
                                                  "round_sum": True}),
            Case("norm_group", t, 4096, opts={"group": 128, "residual": True,
                                              "round_sum": True}),
        ]
    return cases
