"""Benchmark of the norm / activation + quant kernels against eager and Inductor on one GPU.

For each fused op and size: the unfused torch code run eagerly, the same code under
`torch.compile` (Inductor, default mode, static shapes: its best case), irfuse's Triton kernel
with its default launch shape (and, with --sweep, the best of several launch shapes), and the
bandwidth the kernel reaches against a device-to-device copy measured in the same run. All
timings are CUDA-graph replays (`triton.testing.do_bench_cudagraph`, median), as serving engines
run decode. Outputs are checked against the eager result before timing.

    PYTHONPATH=. python3 benchmarks/bench_norm_act_quant.py --rounds 3 --pdl --out kernels.md
    PYTHONPATH=. python3 benchmarks/bench_norm_act_quant.py --ops add_rms_static --tokens 1,4096

For `add_rms_static` and `rms_static`, FlashInfer's `fused_add_rmsnorm_quant` / `rmsnorm_quant`
(`irfuse/kernels/flashinfer_norm.py`) are timed too when FlashInfer imports ("-" otherwise):
through irfuse's launcher (the residual form copies the residual first, since FlashInfer updates
it in place), and for the residual form also in place (the kernel alone), with the same check
against eager as irfuse's kernel (FlashInfer does not round y to bf16 before the quant: rows
that pass vLLM's tolerance but not the mismatch budget read `vllm-tol`) and a check against the
torch model of FlashInfer's own arithmetic. Warm its JIT build first (`flashinfer_norm.warm()`).

`--pdl` also times irfuse's default config with programmatic dependent launch flipped (on if
the default is off, and the other way), checked like the default: the *PDL off* / *PDL on*
columns.

`silu_static_2t` is SiLU·Mul + FP8 static with gate and up as two tensors (separate projections,
as in Hugging Face Llama/Qwen/Mistral MLPs); the others of the family read one [gate | up] tensor.

Working sets under the 60 MB L2 stay cached between replays: those rows are marked `L2`, and
their "bandwidth" can exceed the copy's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from irfuse.kernels import (
    act_quant,
    act_quant_ref,
    flashinfer_norm,
    norm_quant,
    norm_quant_ref,
    nvfp4,
    quant_ref,
)
from irfuse.kernels.compare import agreement, fp8_agreement
from irfuse.kernels.triton_support import pdl_override

FP8 = torch.float8_e4m3fn
EPS = 1e-6
L2_BYTES = 60e6
DEFAULT_TOKENS = (1, 16, 128, 1024, 4096, 16384)
DEFAULT_HIDDEN = (4096, 8192)
INTERMEDIATE = {4096: 14336, 8192: 28672}
DEVICE = os.environ.get("IRFUSE_BENCH_DEVICE", "cuda")  # "cpu" only to smoke-test the script


@dataclass
class OpSpec:
    """One benchmarked op: inputs, the unfused torch code, irfuse's kernel, bytes, check."""

    name: str
    label: str
    act: bool  # SiLU·Mul family: the width is the intermediate size
    make: Callable[[int, int], dict]
    eager: Callable[[dict], Any]
    kernel: Callable[[dict, Any], Any]
    configs: Callable[[int, int], list]
    bytes: Callable[[int, int], int]
    check: Callable[[Any, Any], Any]
    # FlashInfer's kernel for the op: (inputs, residual in place) -> the kernel's result form.
    flashinfer: Callable[[dict, bool], Any] | None = None
    # irfuse's default config for (T, width) (--pdl times it with `pdl` flipped).
    default: Callable[[int, int], Any] | None = None


def _norm_inputs(residual: bool) -> Callable[[int, int], dict]:
    def make(t: int, h: int) -> dict:
        d = {"x": torch.randn(t, h, device=DEVICE, dtype=torch.bfloat16),
             "w": (torch.rand(h, device=DEVICE) + 0.5).to(torch.bfloat16),
             "scale": torch.tensor([0.02], device=DEVICE),
             "ub": torch.tensor([5.0], device=DEVICE)}
        if residual:
            d["r"] = torch.randn(t, h, device=DEVICE, dtype=torch.bfloat16)
        return d
    return make


def _act_inputs(t: int, i: int) -> dict:
    x = torch.randn(t, 2 * i, device=DEVICE, dtype=torch.bfloat16)
    y = act_quant_ref.silu_mul(x)
    return {"x": x, "scale": torch.tensor([0.01], device=DEVICE),
            "gs": (448.0 * 6.0 / y.float().abs().amax()).reshape(1)}


def _act_two_tensor_inputs(t: int, i: int) -> dict:
    # Gate and up from separate projections (Hugging Face MLPs): two contiguous [T, I] tensors.
    return {"x": torch.randn(t, i, device=DEVICE, dtype=torch.bfloat16),
            "up": torch.randn(t, i, device=DEVICE, dtype=torch.bfloat16),
            "scale": torch.tensor([0.01], device=DEVICE)}


# (early, evict) pairs swept beside a shape: the loads in program order, the weight and scales
# loaded with the row, and that without cache hints.
_LOAD_VARIANTS = ((False, True), (True, True), (True, False))


def _row_configs(t: int, h: int) -> list:
    rc = norm_quant.RowConfig
    shapes = ((1, 4), (1, 8), (1, 16), (2, 16))
    single = [rc(r, w) for r, w in shapes]
    early = [rc(r, w, early=True, evict=e) for r, w in shapes for e in (True, False)]
    # fast_div: per-token's division through the reciprocal (bit-exact; static ignores it).
    fast = [rc(1, w, fast_div=True, early=e, evict=v) for w in (4, 8, 16)
            for e, v in _LOAD_VARIANTS]
    # vec: one register layout for the row's loads and stores, with and without cache hints.
    vec = [rc(r, w, fast_div=True, early=True, evict=e, vec=8)
           for r, w in shapes + ((1, 32),) for e in (True, False)]
    pdl = [replace(c, pdl=True) for c in early + vec]
    cfgs = single + early + fast + vec + pdl
    if t <= 16:  # decode: one program, its latency chain is the time
        cfgs += [rc(1, 32, fast_div=True, early=e, evict=v) for e, v in _LOAD_VARIANTS]
    return cfgs


def _group_configs(t: int, h: int) -> list:
    gc = norm_quant.GroupConfig
    plain = [gc(w) for w in (4, 8, 16)] + [
        gc(w, fast_div=True, early=e, evict=v) for w in (4, 8, 16) for e, v in _LOAD_VARIANTS]
    plain += [gc(w, fast_div=True, early=True, evict=e, vec=8) for w in (4, 8, 16, 32)
              for e in (True, False)]
    plain += [replace(c, pdl=True) for c in plain if c.early]
    if t <= 16:
        plain += [gc(32, fast_div=True, early=e, evict=v) for e, v in _LOAD_VARIANTS]
    return plain


def _act_configs(t: int, i: int) -> list:
    # Plain silu, then the inline-PTX silu (`act_quant.ActConfig`); small tiles (more programs,
    # fewer warps) only where T is small; each also with the static scale loaded early, and
    # without cache hints.
    shapes = ((4, 2), (16, 4), (16, 8), (32, 8)) + (((1, 1), (2, 1), (2, 2), (8, 4))
                                                    if t <= 128 else ())
    fast = ((1, 1), (2, 1), (4, 2)) if t <= 128 else ((16, 4), (16, 8), (32, 8))
    cfgs = ([act_quant.ActConfig(g, w, early=e, evict=v) for g, w in shapes
             for e, v in _LOAD_VARIANTS]
            + [act_quant.ActConfig(g, w, fast_silu=True, early=e, evict=v)
               for g, w in fast for e, v in _LOAD_VARIANTS])
    return cfgs + [replace(c, pdl=True) for c in cfgs]  # and with PDL


def _nvfp4_configs(t: int, i: int) -> list:
    # (blocks, warps, split): the paired layout, then a thread owning whole blocks
    # (`nvfp4.Nvfp4Config`); each with and without cache hints, and with PDL.
    shapes = ((128, 4, False), (32, 2, False), (32, 1, True), (64, 2, True), (128, 4, True),
              (128, 2, True), (256, 8, True), (256, 4, True))
    cfgs = [nvfp4.Nvfp4Config(b, w, split=s, evict=e) for b, w, s in shapes
            for e in (True, False)]
    return cfgs + [replace(c, pdl=True) for c in cfgs]


def _check_static(out, ref):
    (qs, res), (qs_ref, res_ref) = out, ref
    parts = [fp8_agreement(q, torch.ones(1, device=q.device), qr, torch.ones(1, device=q.device))
             for q, qr in zip(qs, qs_ref)]
    if res is not None:
        parts.append(agreement(res, res_ref, 2.0**-8))
    return parts


def _check_dynamic(group: int | None):
    def check(out, ref):
        parts = [fp8_agreement(out[0], out[1], ref[0], ref[1], group)]
        if len(out) > 2 and out[2] is not None:
            parts.append(agreement(out[2], ref[2], 2.0**-8))
        return parts
    return check


def _check_act_static(out, ref):
    one = torch.ones(1, device=out.device)
    return [fp8_agreement(out, one, ref, one)]


def _check_nvfp4(gs):
    def check(out, ref):
        deq = quant_ref.dequant_nvfp4(out[0], out[1], gs)
        deq_ref = quant_ref.dequant_nvfp4(ref[0], ref[1], gs)
        return [agreement(deq, deq_ref, 0.5, 0.0,
                          codes=(quant_ref.unpack_e2m1(out[0]), quant_ref.unpack_e2m1(ref[0])))]
    return check


def _flashinfer_static(residual: bool) -> Callable[[dict, bool], Any]:
    def run(d: dict, in_place: bool) -> Any:
        return flashinfer_norm.rms_norm_quant_fp8_static(
            d["x"], d["w"], [d["scale"]], EPS, 0.0, FP8, d["r"] if residual else None,
            residual_in_place=in_place)
    return run


def measure_flashinfer(spec: OpSpec, d: dict, ref: Any, rep: int) -> dict:
    """FlashInfer's figures for one row: µs through irfuse's launcher, µs in place (residual
    form), and its check against eager; {"fi_note": why} when it cannot run here."""
    if spec.flashinfer is None:
        return {}
    reason = flashinfer_norm.fallback_reason(d["x"], d["w"], [d["scale"]], 0.0, FP8, d.get("r"))
    if reason is not None:
        return {"fi_note": reason}
    parts = spec.check(spec.flashinfer(d, False), ref)
    status = ("ok" if all(p.ok(1e-2, 0.02) for p in parts)
              else "vllm-tol" if all(p.ok(1e-2, 1.0) for p in parts) else "MISMATCH")
    q_model, _ = flashinfer_norm.flashinfer_numerics(d["x"], d["w"], d["scale"], EPS, d.get("r"))
    own = fp8_agreement(spec.flashinfer(d, False)[0][0], d["scale"], q_model, d["scale"])
    out = {"fi_check": status, "fi_own": "ok" if own.ok(1e-2, 0.01) else "MISMATCH",
           "fi_check_detail": "; ".join(str(p) for p in parts) + f"; vs its model: {own}",
           "fi_us": bench_us(lambda: spec.flashinfer(d, False), rep)}
    if "r" in d:
        scratch = {**d, "r": d["r"].clone()}  # replays keep adding x into it: a random walk
        out["fi_inplace_us"] = bench_us(lambda: spec.flashinfer(scratch, True), rep)
    return out


def op_specs() -> dict[str, OpSpec]:
    """The benchmarked ops, by name."""
    ref = norm_quant_ref
    specs = [
        OpSpec("add_rms_static", "add + RMSNorm + FP8 static", False, _norm_inputs(True),
               lambda d: ref.rms_norm_quant_fp8_static(d["x"], d["w"], [d["scale"]], EPS, 0.0,
                                                       FP8, d["r"]),
               lambda d, c: norm_quant.rms_norm_quant_fp8_static(
                   d["x"], d["w"], [d["scale"]], EPS, 0.0, FP8, d["r"], config=c),
               _row_configs, lambda t, h: 7 * t * h + 2 * h, _check_static,
               _flashinfer_static(residual=True)),
        OpSpec("rms_static", "RMSNorm + FP8 static", False, _norm_inputs(False),
               lambda d: ref.rms_norm_quant_fp8_static(d["x"], d["w"], [d["scale"]], EPS, 0.0,
                                                       FP8),
               lambda d, c: norm_quant.rms_norm_quant_fp8_static(
                   d["x"], d["w"], [d["scale"]], EPS, 0.0, FP8, config=c),
               _row_configs, lambda t, h: 3 * t * h + 2 * h, _check_static,
               _flashinfer_static(residual=False)),
        OpSpec("add_rms_per_token", "add + RMSNorm + FP8 per-token (ub)", False,
               _norm_inputs(True),
               lambda d: ref.rms_norm_quant_fp8_per_token(d["x"], d["w"], d["ub"], EPS, 0.0,
                                                          FP8, d["r"]),
               lambda d, c: norm_quant.rms_norm_quant_fp8_per_token(
                   d["x"], d["w"], d["ub"], EPS, 0.0, FP8, d["r"], config=c),
               _row_configs, lambda t, h: 7 * t * h + 2 * h + 4 * t, _check_dynamic(None)),
        OpSpec("add_rms_group128", "add + RMSNorm + FP8 group 128", False, _norm_inputs(True),
               lambda d: ref.rms_norm_quant_fp8_group(d["x"], d["w"], EPS, 0.0, 128, False,
                                                      False, FP8, d["r"]),
               lambda d, c: norm_quant.rms_norm_quant_fp8_group(
                   d["x"], d["w"], EPS, 0.0, 128, False, False, FP8, d["r"], config=c),
               _group_configs, lambda t, h: 7 * t * h + 2 * h + 4 * t * h // 128,
               _check_dynamic(128)),
        OpSpec("silu_static", "SiLU·Mul + FP8 static", True, _act_inputs,
               lambda d: act_quant_ref.silu_mul_quant_fp8_static(d["x"], d["scale"], FP8),
               lambda d, c: act_quant.silu_mul_quant_fp8_static(d["x"], d["scale"], FP8,
                                                                config=c),
               _act_configs, lambda t, i: 5 * t * i, _check_act_static),
        OpSpec("silu_static_2t", "SiLU·Mul (gate, up apart) + FP8 static", True,
               _act_two_tensor_inputs,
               lambda d: act_quant_ref.silu_mul_quant_fp8_static(d["x"], d["scale"], FP8,
                                                                 d["up"]),
               lambda d, c: act_quant.silu_mul_quant_fp8_static(d["x"], d["scale"], FP8,
                                                                d["up"], config=c),
               _act_configs, lambda t, i: 5 * t * i, _check_act_static),
        OpSpec("silu_group128", "SiLU·Mul + FP8 group 128", True, _act_inputs,
               lambda d: act_quant_ref.silu_mul_quant_fp8_group(d["x"], 128, False, False, FP8),
               lambda d, c: act_quant.silu_mul_quant_fp8_group(d["x"], 128, False, False, FP8,
                                                               config=c),
               _act_configs, lambda t, i: 5 * t * i + 4 * t * i // 128, _check_dynamic(128)),
        OpSpec("silu_nvfp4", "SiLU·Mul + NVFP4", True, _act_inputs,
               lambda d: act_quant_ref.silu_mul_quant_nvfp4(d["x"], d["gs"]),
               lambda d, c: nvfp4.silu_mul_quant_nvfp4(d["x"], d["gs"], config=c),
               _nvfp4_configs, lambda t, i: 4 * t * i + t * i // 2 + t * i // 16, None),
    ]
    row_config, static = norm_quant.row_config, norm_quant.QUANT_STATIC
    defaults = {
        "add_rms_static": lambda t, h: row_config(t, h, True, static),
        "rms_static": lambda t, h: row_config(t, h, False, static),
        "add_rms_per_token": lambda t, h: row_config(t, h, True, norm_quant.QUANT_PER_TOKEN),
        "add_rms_group128": norm_quant.group_config,
        "silu_static": lambda t, i: act_quant.act_config(t, i, act_quant.CHUNK),
        "silu_static_2t": lambda t, i: act_quant.act_config(t, i, act_quant.CHUNK),
        "silu_group128": lambda t, i: act_quant.act_config(t, i, 128, act_quant.QUANT_GROUP),
        "silu_nvfp4": nvfp4.nvfp4_config,
    }
    return {s.name: replace(s, default=defaults[s.name]) for s in specs}


def bench_us(fn: Callable[[], Any], rep: int) -> float:
    """Median µs of `fn` under CUDA-graph replay."""
    import triton.testing

    fn()
    torch.cuda.synchronize()
    return triton.testing.do_bench_cudagraph(fn, rep=rep, return_mode="median") * 1e3


def interleaved_us(fns: dict[str, Callable[[], Any]], rep: int, rounds: int) -> dict[str, float]:
    """Median µs of each of `fns` over `rounds` rounds, each round timing all of them once,
    starting one further along each round.

    Two captures of the same kernel can differ by a few percent (two configs with identical
    SASS measured 3% apart in one sweep), so candidates are compared over rounds taken side by
    side rather than by one capture each.
    """
    names = list(fns)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            times[n].append(bench_us(fns[n], rep))
    return {n: statistics.median(v) for n, v in times.items()}


def copy_bandwidths(rep: int) -> dict[str, float]:
    """Bytes/s (read + write counted) of a 1 GiB device-to-device copy, three ways.

    `memcpy_graph`: `copy_` replayed in a CUDA graph (a memcpy node, which the copy engines
    serve: slower than the SMs on an H200); `sm_graph`: an elementwise kernel that copies
    (`torch.mul(src, 1, out=dst)`) replayed in a graph; `memcpy`: `copy_` launched plainly
    (`do_bench`). The fastest is the 100% of "% copy".
    """
    import triton.testing

    src = torch.randn(2**29, device=DEVICE, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    nbytes = 2 * 2**30
    out = {
        "memcpy_graph": bench_us(lambda: dst.copy_(src), rep),
        "sm_graph": bench_us(lambda: torch.mul(src, 1, out=dst), rep),
        "memcpy": triton.testing.do_bench(lambda: dst.copy_(src), rep=max(rep, 20),
                                          return_mode="median") * 1e3,
    }
    return {k: nbytes / (us * 1e-6) for k, us in out.items()}


def same_size_copy_us(nbytes: int, rep: int) -> float:
    """µs of an SM copy moving `nbytes` (half read, half written), replayed in a CUDA graph: what
    a kernel of this size can reach at best, fixed launch and ramp costs included."""
    src = torch.empty(max(1, nbytes // 4), device=DEVICE, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    return bench_us(lambda: torch.mul(src, 1, out=dst), rep)


def _cfg_str(cfg: Any) -> str:
    return ",".join(f"{k}={v}" for k, v in asdict(cfg).items())


def measure(spec: OpSpec, compiled: Callable, h: int, t: int, bw: float,
            args: argparse.Namespace) -> dict:
    """One row: check irfuse against eager, then time eager, Inductor and irfuse."""
    width = INTERMEDIATE[h] if spec.act else h
    d = spec.make(t, width)
    ref = spec.eager(d)
    out = spec.kernel(d, None)
    parts = (spec.check or _check_nvfp4(d["gs"]))(out, ref)
    tol = 1e-1 if spec.name == "silu_nvfp4" else 1e-2
    ok = all(p.ok(tol, 0.02) for p in parts)
    row = {"op": spec.name, "label": spec.label, "H": h, "width": width, "T": t,
           "bytes": spec.bytes(t, width), "check": "ok" if ok else "MISMATCH",
           "check_detail": "; ".join(str(p) for p in parts), "copy_tbs": bw / 1e12}
    row["eager_us"] = bench_us(lambda: spec.eager(d), args.rep)
    timed: dict[str, Callable[[], Any]] = {"inductor": lambda: compiled(d),
                                           "irfuse": lambda: spec.kernel(d, None)}
    if args.sweep:  # every config checked like the default, then timed with it
        row["sweep"] = {}
        for cfg in _swept(spec, t, width, args.only):
            cfg_parts = (spec.check or _check_nvfp4(d["gs"]))(spec.kernel(d, cfg), ref)
            if all(p.ok(tol, 0.02) for p in cfg_parts):
                timed[_cfg_str(cfg)] = lambda cfg=cfg: spec.kernel(d, cfg)
            else:
                row["sweep"][_cfg_str(cfg)] = "MISMATCH: " + "; ".join(map(str, cfg_parts))
    default_pdl = None
    if args.pdl:  # the default config with programmatic dependent launch flipped
        cfg = spec.default(t, width)
        default_pdl = cfg.pdl  # (main refuses --pdl under IRFUSE_PDL, which would override it)
        flipped = replace(cfg, pdl=not default_pdl)
        flip_parts = (spec.check or _check_nvfp4(d["gs"]))(spec.kernel(d, flipped), ref)
        row["pdl_check"] = "ok" if all(p.ok(tol, 0.02) for p in flip_parts) else "MISMATCH"
        timed["pdl_flipped"] = lambda: spec.kernel(d, flipped)
    us = interleaved_us(timed, args.rep, args.rounds)
    row["inductor_us"], row["irfuse_us"] = us.pop("inductor"), us.pop("irfuse")
    if default_pdl is not None:
        flipped_us = us.pop("pdl_flipped")
        row["pdl_on_us"] = row["irfuse_us"] if default_pdl else flipped_us
        row["pdl_off_us"] = flipped_us if default_pdl else row["irfuse_us"]
    if args.rounds > 1:
        row["rounds"] = args.rounds
    row.update(measure_flashinfer(spec, d, ref, args.rep))
    if args.sweep:
        row["sweep"].update({k: round(v, 2) for k, v in us.items()})
        row["best_us"], row["best_cfg"] = min(((v, k) for k, v in us.items()),
                                              default=(float("nan"), "none"))
    row["l2"] = row["bytes"] < L2_BYTES
    row["irfuse_tbs"] = row["bytes"] / (row["irfuse_us"] * 1e-6) / 1e12
    row["copy_frac"] = row["bytes"] / (row["irfuse_us"] * 1e-6) / bw
    row["inductor_copy_frac"] = row["bytes"] / (row["inductor_us"] * 1e-6) / bw
    row["same_copy_us"] = same_size_copy_us(row["bytes"], args.rep)
    row["same_copy_frac"] = row["same_copy_us"] / row["irfuse_us"]
    return row


def _raise_recompile_limits() -> None:
    import torch._dynamo

    for knob in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 4096)


def _swept(spec: OpSpec, t: int, width: int, only: str | None) -> list:
    """The configs the sweep times for one row: all of them, or those whose `k=v` fields match
    every comma-separated item of `only`, an item being one field or alternatives joined by `|`
    (e.g. "evict=False" or "num_warps=8|num_warps=16")."""
    cfgs = spec.configs(t, width)
    if not only:
        return cfgs

    def fields(c: Any) -> set[str]:
        return set(_cfg_str(c).split(","))

    return [c for c in cfgs if all(fields(c) & set(item.split("|")) for item in only.split(","))]


def _warm(name: str, h: int, tokens: list[int], sweep: bool, only: str | None = None,
          pdl: bool = False) -> str:
    """Compile Inductor's graphs and irfuse's kernels for one (op, H) into the on-disk caches."""
    _raise_recompile_limits()
    t0 = time.time()
    spec = op_specs()[name]
    compiled = torch.compile(spec.eager, dynamic=False)
    width = INTERMEDIATE[h] if spec.act else h
    for t in tokens:
        d = spec.make(t, width)
        compiled(d)
        spec.kernel(d, None)
        for cfg in _swept(spec, t, width, only) if sweep else ():
            spec.kernel(d, cfg)
        if pdl:
            for on in (False, True):
                spec.kernel(d, replace(spec.default(t, width), pdl=on))
        del d
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return f"warmed {name} H={h} in {time.time() - t0:.0f}s"


def prewarm(args: argparse.Namespace) -> None:
    """Fill the Inductor and Triton caches from `args.jobs` processes at once, so the timing
    process finds every graph and kernel compiled (compiles are CPU-bound and independent)."""
    import concurrent.futures
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=ctx) as pool:
        futures = [pool.submit(_warm, name, h, args.tokens, args.sweep, args.only, args.pdl)
                   for name in args.ops for h in args.hidden]
        for f in concurrent.futures.as_completed(futures):
            try:
                print(f.result(), flush=True)
            except Exception as e:  # noqa: BLE001 (the timing pass reports it again)
                print(f"warm-up failed: {type(e).__name__}: {e}", flush=True)


def run(args: argparse.Namespace, on_row: Callable[[list[dict]], None] | None = None,
        ) -> list[dict]:
    """Measure every selected (op, H, T); a failing row is reported and skipped."""
    _raise_recompile_limits()
    if args.jobs > 1:
        t0 = time.time()
        prewarm(args)
        print(f"# warm-up {time.time() - t0:.0f}s", flush=True)
    specs = op_specs()
    torch.manual_seed(0)
    bws = copy_bandwidths(args.rep)
    bw = max(bws.values())
    print("# copy bandwidth " + ", ".join(f"{k} {v / 1e12:.2f} TB/s" for k, v in bws.items())
          + f" on {torch.cuda.get_device_name()}", flush=True)
    args.copy_detail = ", ".join(f"{k} {v / 1e12:.2f}" for k, v in bws.items())
    rows: list[dict] = []
    for name in args.ops:
        spec = specs[name]
        compiled = torch.compile(spec.eager, dynamic=False)
        for h in args.hidden:
            for t in args.tokens:
                t0 = time.time()
                try:
                    row = measure(spec, compiled, h, t, bw, args)
                except Exception as e:  # noqa: BLE001 (report and go on: one run, many rows)
                    traceback.print_exc()
                    print(f"{spec.label} H={h} T={t}: FAILED {type(e).__name__}: {e}",
                          flush=True)
                    continue
                rows.append(row)
                print(_line(row), f"[{time.time() - t0:.1f}s]", flush=True)
                if on_row is not None:
                    on_row(rows)
    return rows


def _line(r: dict) -> str:
    s = (f"{r['label']:<36} H={r['H']:<5} T={r['T']:<6} eager {r['eager_us']:9.1f}  "
         f"inductor {r['inductor_us']:8.1f}  irfuse {r['irfuse_us']:8.1f}  "
         f"ratio {r['irfuse_us'] / r['inductor_us']:5.2f}  {100 * r['copy_frac']:5.1f}% copy"
         f"{' L2' if r['l2'] else ''}  {r['check']}")
    if "best_us" in r:
        s += f"  best {r['best_us']:.1f} ({r['best_cfg']})"
        s += "".join(f"\n    {cfg}: {us}" for cfg, us in r.get("sweep", {}).items())
    if "pdl_on_us" in r:
        s += f"  PDL off {r['pdl_off_us']:.2f} on {r['pdl_on_us']:.2f} ({r['pdl_check']})"
    if "fi_us" in r:
        s += (f"  flashinfer {r['fi_us']:.1f} ({r['fi_us'] / r['inductor_us']:.2f}x"
              + (f", in place {r['fi_inplace_us']:.1f}" if "fi_inplace_us" in r else "")
              + f") {r['fi_check']}/{r['fi_own']}")
    return s


def _same_copy_cell(r: dict) -> str:
    """irfuse's time against an SM copy of the same bytes ("-" in rows from older runs)."""
    return f"{100 * r['same_copy_frac']:.0f}" if "same_copy_frac" in r else "-"


def _fi_cells(r: dict) -> str:
    """FlashInfer's cells: µs, ratio to Inductor, µs in place, check ("-" where it did not run:
    not its op, or not importable here)."""
    if "fi_us" not in r:
        return " | ".join(["-"] * 4)
    inplace = f"{r['fi_inplace_us']:.1f}" if "fi_inplace_us" in r else "-"
    return (f"{r['fi_us']:.1f} | {r['fi_us'] / r['inductor_us']:.2f} | {inplace} | "
            f"{r['fi_check']} (own {r['fi_own']})")


def markdown(rows: list[dict], command: str, copy_detail: str = "") -> str:
    """The results as a markdown section (with the command that produced them)."""
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "?"
    import triton

    lines = [
        "## Norm / activation + quant kernels",
        "",
        f"`{command}`",
        "",
        f"{dev}, torch {torch.__version__}, Triton {triton.__version__}; CUDA-graph replay "
        "(`triton.testing.do_bench_cudagraph`, median"
        + (f"; Inductor, irfuse and the swept configs: the median of {rows[0]['rounds']} "
           "interleaved rounds" if rows and rows[0].get("rounds") else "")
        + "), bf16 inputs, FP8 e4m3fn outputs. "
        "Times in µs. *ratio* = irfuse / Inductor (below 1: irfuse faster). *% copy* = bytes "
        "moved (inputs read once, outputs written once) per second over a 1 GiB "
        "device-to-device copy measured in the same run: the fastest of "
        f"{copy_detail or 'one measurement'} TB/s ({rows[0]['copy_tbs']:.2f} TB/s). "
        "`L2`: the working set is under the 60 MB L2, so "
        "replays hit the cache and the % can pass 100. Inductor compiles the same unfused "
        "torch code with static shapes. *% same-size copy*: an SM copy moving the same bytes, "
        "timed the same way, over irfuse's time (what a kernel of that size can reach, "
        "launch and ramp included). *check*: irfuse's output against eager's. "
        "*FlashInfer*: its kernel through irfuse's launcher (the residual form copies the "
        "residual first: FlashInfer updates it in place); *FI ratio* = that / Inductor; "
        "*FI in place*: the kernel alone, updating the residual; *FI check*: against eager "
        "(`vllm-tol`: within vLLM's tolerance, over the mismatch budget, since FlashInfer does "
        "not round y to bf16 before the quant), *own*: against the model of its arithmetic."
        + (" *PDL off* / *PDL on*: irfuse's default config launched without / with "
           "programmatic dependent launch (one of them is the *irfuse* column), *PDL check*: "
           "the other one's output against eager's." if any("pdl_on_us" in r for r in rows)
           else ""),
        "",
    ]
    notes = sorted({r["fi_note"] for r in rows if "fi_note" in r})
    if notes:
        lines += [f"FlashInfer did not run: {'; '.join(notes)}.", ""]
    has_best = any("best_us" in r for r in rows)
    has_pdl = any("pdl_on_us" in r for r in rows)
    head = "| op | H | T | MB | eager | Inductor | irfuse | ratio | irfuse % copy | " \
           "Inductor % copy | % same-size copy | check | FlashInfer | FI ratio | FI in place | " \
           "FI check |"
    sep = "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    if has_pdl:
        head += " PDL off | PDL on | on / off | PDL check |"
        sep += "---|---|---|---|"
    if has_best:
        head += " best swept | best config |"
        sep += "---|---|"
    lines += [head, sep]
    for r in rows:
        width = f"{r['H']}" if r["width"] == r["H"] else f"{r['H']} (I {r['width']})"
        line = (f"| {r['label']} | {width} | {r['T']} | {r['bytes'] / 1e6:.1f}"
                f"{' L2' if r['l2'] else ''} | {r['eager_us']:.1f} | {r['inductor_us']:.1f} | "
                f"{r['irfuse_us']:.1f} | {r['irfuse_us'] / r['inductor_us']:.2f} | "
                f"{100 * r['copy_frac']:.0f} | {100 * r['inductor_copy_frac']:.0f} | "
                f"{_same_copy_cell(r)} | {r['check']} | {_fi_cells(r)} |")
        if has_pdl:
            line += (f" {r['pdl_off_us']:.2f} | {r['pdl_on_us']:.2f} | "
                     f"{r['pdl_on_us'] / r['pdl_off_us']:.3f} | {r['pdl_check']} |"
                     if "pdl_on_us" in r else " - | - | - | - |")
        if has_best:
            line += f" {r.get('best_us', float('nan')):.1f} | {r.get('best_cfg', '')} |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Parse options, run, print and write the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", default=",".join(op_specs()),
                   help="comma-separated subset of: " + ", ".join(op_specs()))
    p.add_argument("--tokens", default=",".join(map(str, DEFAULT_TOKENS)))
    p.add_argument("--hidden", default=",".join(map(str, DEFAULT_HIDDEN)),
                   help="4096 and/or 8192 (SiLU·Mul uses I 14336 / 28672)")
    p.add_argument("--rep", type=int, default=10, help="ms of replays per measurement")
    p.add_argument("--rounds", type=int, default=1,
                   help="time Inductor, irfuse (and the swept configs) this many times, "
                        "interleaved, and report the medians")
    p.add_argument("--sweep", action="store_true", help="also time several launch shapes")
    p.add_argument("--only", help="sweep only the configs with these comma-separated k=v "
                                  "fields, alternatives joined by | (e.g. evict=False)")
    p.add_argument("--pdl", action="store_true",
                   help="also time the default config with programmatic dependent launch "
                        "flipped")
    p.add_argument("--jobs", type=int, default=1,
                   help="compile in this many processes before timing (shares the on-disk "
                        "Inductor/Triton caches; set TORCHINDUCTOR_CACHE_DIR)")
    p.add_argument("--warm-only", action="store_true",
                   help="only fill the caches (with --jobs processes), time nothing")
    p.add_argument("--out", help="write the markdown table here")
    p.add_argument("--json", help="write the raw rows here")
    args = p.parse_args(argv)
    args.ops = [o for o in args.ops.split(",") if o]
    unknown = set(args.ops) - set(op_specs())
    if unknown:
        p.error(f"unknown ops: {sorted(unknown)}")
    args.tokens = [int(t) for t in args.tokens.split(",")]
    args.hidden = [int(h) for h in args.hidden.split(",")]
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    if args.pdl and pdl_override() is not None:
        p.error("--pdl flips each config's `pdl`, which IRFUSE_PDL overrides: unset it")
    if args.warm_only:
        prewarm(args)
        return 0
    command = "PYTHONPATH=. python3 benchmarks/bench_norm_act_quant.py " + " ".join(
        argv if argv is not None else sys.argv[1:])

    def save(rows: list[dict]) -> None:
        # Written after every row, so that a run cut short still leaves its results.
        if args.out:
            with open(args.out, "w") as f:
                f.write(markdown(rows, command, getattr(args, "copy_detail", "")))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)

    rows = run(args, save)
    if not rows:
        return 1
    save(rows)
    print(markdown(rows, command, getattr(args, "copy_detail", "")))
    expected = len(args.ops) * len(args.hidden) * len(args.tokens)
    return 0 if len(rows) == expected and all(
        r["check"] == "ok" and r.get("fi_check") != "MISMATCH"
        and r.get("pdl_check") != "MISMATCH" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
