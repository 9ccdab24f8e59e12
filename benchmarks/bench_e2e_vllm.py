"""A serving step of Qwen3-8B-shaped FP8 layers as vLLM 0.32 traces them: attention as vLLM's
opaque ops (`vllm::unified_kv_cache_update`, `vllm::unified_attention_with_output`, backed by
FlashInfer through `vllm_standin.py`), Inductor (vLLM without irfuse) against irfuse, side by side.

The model: `irfuse.models`' Qwen3-style layers at the `llama-8b` size, as `bench_e2e_qwen3.py`
builds them (hidden 4096, 32 q / 8 kv heads of 128, intermediate 14336, per-head q/k RMSNorms,
RoPE from a cos/sin cache, static FP8 linears through `_scaled_mm`), whose attention is vLLM's
`Attention.forward` (the cache write and the attention as opaque ops reading the forward context
by layer name); `forward(hidden [T, 4096], positions [T])`, one graph for all layers (vLLM's
`splitting_ops=[]`), num_tokens dynamic. The context (block table, sequence lengths, slot
mapping, the FlashInfer wrapper planned once per step, each layer's cache `[num_blocks, 8, 16,
256]` stored NHD) is the stand-in's, read at run time by the ops and by irfuse's kernels
(`irfuse.kernels.vllm_context`).

Steps: decode at each `--batches` x `--contexts` (every sequence `context` tokens cached, one new
token each) and a prefill of `--prefill` tokens (one sequence). Variants, each compiled once
(dynamic num_tokens; irfuse's compile ranges compile at their first call):

- `inductor`: plain `torch.compile` (the baseline: vLLM without irfuse);
- `irfuse`: `backend="irfuse"`, O2 with the attention family (enable_qk_norm_rope_fusion,
  fuse_rope_kvcache, fuse_attn_quant), the platform detected, the committed kernel choices;
- `irfuse-vllm-kernels` (`--variants`): the same with the kernel choices of the two fusions on
  vLLM's ops (`rope_vllm_kv_cache_update`, `vllm_attention_quant_fp8_static`) set to irfuse's
  kernels on this platform at every size while it compiles, strict (a failure in irfuse's
  pipeline raises);
- `irfuse-vllm-kernels-off`: the same with both left unfused (their choices before sm90's
  measurements);
- `irfuse-attn-library`: `irfuse` with attention + quant left to vLLM's backend and the quant
  at every size (the cache-write kernel as committed).

On CUDA each (variant, step) is captured once as a CUDA graph and the graphs of a step replayed
in interleaved rounds (`bench_e2e_llama_fp8`'s helpers; median µs per forward, rounds won);
each row also gives the largest difference from Inductor's output. `--attn-table` adds the
attention + output quant alone on each decode step's layer-0 cache: FlashInfer's decode (as
the stand-in runs it) + Inductor's static FP8 quant of its output against irfuse's fused decode
read in place (`fuse_attn_quant.ops.paged_decode_in_place`, what the fused op runs), CUDA
graphs, interleaved. `--check` first compares the stand-in's FlashInfer calls and Triton cache
write with torch references. `--device cpu --tiny` runs the same code on the CPU at a tiny size
(torch reference attention, plain calls; a smoke path, its figures mean nothing).
`--kv-cache-dtype fp8`: every layer's cache is vLLM's per-tensor FP8 (`vllm_standin.KV_SCALES`),
written and read with the scales, FlashInfer's decode and prefill reading the e4m3 pages.

    python benchmarks/bench_e2e_vllm.py [--layers 4] [--batches 16 64] [--contexts 2048 8192]
        [--prefill 4096] [--variants irfuse irfuse-vllm-kernels] [--rounds 15] [--profile]
        [--attn-table [--decode-configs 64:4:3:1:prefetch ...]] [--check] [--out FILE.md]
        [--kv-cache-dtype fp8]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_e2e_llama_fp8 as e2e  # noqa: E402 (CUDA-graph and profiler helpers, by path)
import vllm_standin as S  # noqa: E402

ATTENTION_FAMILY = {"enable_qk_norm_rope_fusion": True, "fuse_rope_kvcache": True,
                    "fuse_attn_quant": True}
O2 = {"optimization_level": 2, "pass_config": ATTENTION_FAMILY}
VARIANTS = {"irfuse": O2, "irfuse-vllm-kernels": {**O2, "strict": True},
            "irfuse-vllm-kernels-off": {**O2, "debug": False},
            "irfuse-attn-library": {**O2, "strict": False}}
"""Options per variant. `strict` (a pipeline failure raises instead of falling back) and an
explicit `debug: False` (the default) make the options differ: Dynamo reuses a compile whose
backend and options are equal."""
VLLM_KERNELS = ("vllm_attention_quant_fp8_static", "rope_vllm_kv_cache_update")
FORCED = {"irfuse-vllm-kernels": dict.fromkeys(VLLM_KERNELS, True),
          "irfuse-vllm-kernels-off": dict.fromkeys(VLLM_KERNELS, False),
          "irfuse-attn-library": {"vllm_attention_quant_fp8_static": False}}
"""Variants whose vLLM-op kernels' choices are set while they compile: on or off."""
PASSES = ("enable-qk-norm-rope-fusion", "fuse-rope-kvcache", "fuse-attn-quant",
          "fuse-norm-quant", "fuse-act-quant")


# --- the model --------------------------------------------------------------------------------


def _model_classes():
    from irfuse.models import llama

    class VllmAttention(llama.LlamaAttention):
        """Qwen3 attention whose cache write and attention are vLLM's opaque ops."""

        layer: S.Layer

        def forward(self, positions, x, cos_sin=None):
            q, k, v = self.project_qkv(positions, x, cos_sin)
            return self.reduce(self.o_proj(S.attention(self.layer, q, k, v)))

    class VllmStep(nn.Module):
        """`forward(hidden [T, H], positions [T]) -> hidden [T, H]`: the decoder layers and
        the final norm (vLLM's model body without the embedding)."""

        def __init__(self, cfg, opts, *, dtype, device, gen):
            super().__init__()
            self.rotary = llama.make_rotary(cfg, opts, cfg.head_dim, dtype, device)
            self.layers = nn.ModuleList(
                llama.LlamaDecoderLayer(cfg, opts, VllmAttention, rotary=self.rotary,
                                        dtype=dtype, device=device, gen=gen)
                for _ in range(cfg.num_layers))
            for i, layer in enumerate(self.layers):
                name = f"model.layers.{i}.self_attn.attn"
                attn = S.Layer(name, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim)
                S.LAYERS[name] = attn
                layer.self_attn.layer = attn
            self.norm = llama.make_norm(cfg.hidden, cfg, opts, dtype, device, gen)

        def forward(self, hidden, positions):
            torch._check(positions.shape[0] == hidden.shape[0])
            x, residual = hidden, None
            for layer in self.layers:
                x, residual = layer(positions, x, residual)
            x, _ = self.norm(x, residual)
            return x

    return VllmStep


def build_model(args, device: torch.device):
    """(model, cfg) with static scales calibrated on a small prefill."""
    from irfuse.models import resolve
    from irfuse.models.quant import calibrate

    size = "tiny" if args.tiny else "llama-8b"
    _, cfg, opts = resolve("paged", size, num_layers=args.layers, qk_norm=True, quant="fp8",
                           block_size=args.block_size)  # bench_e2e_qwen3's layers
    longest = max([*args.contexts, args.prefill, 1]) + 1
    cfg = dataclasses.replace(cfg, max_positions=max(cfg.max_positions, longest))
    opts = dataclasses.replace(opts, lm_head=False, lm_head_pad=0)
    gen = torch.Generator().manual_seed(0)
    model = _model_classes()(cfg, opts, dtype=torch.bfloat16, device=device, gen=gen).eval()
    calib = plan(args, cfg, device, prefill=min(64, args.prefill or 64))
    S.set_step(calib)
    with torch.no_grad():
        calibrate(model, make_inputs(cfg, calib, device))
    S.set_step(None)
    return model, cfg


def plan(args, cfg, device: torch.device, *, batch: int = 0, context: int = 0,
         prefill: int = 0) -> S.Metadata:
    return S.plan_step(list(S.LAYERS), batch=batch, context=context, prefill=prefill,
                       num_heads=cfg.num_heads, num_kv_heads=cfg.num_kv_heads,
                       head_dim=cfg.head_dim, block_size=args.block_size, dtype=torch.bfloat16,
                       device=device, layout=args.layout, ragged=args.ragged,
                       kv_cache_dtype=args.kv_cache_dtype)


def make_inputs(cfg, meta: S.Metadata, device: torch.device, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(meta.num_actual_tokens, cfg.hidden, generator=gen).to(torch.bfloat16)
    return hidden.to(device), meta.positions.clone()


# --- kernel choices -----------------------------------------------------------------------------


@contextlib.contextmanager
def vllm_kernel_choices(platform: str, kernels: dict[str, bool]):
    """The kernel choices of `kernels` (of the fusions on vLLM's ops) set to irfuse's kernels
    (True) or to leaving the sites unfused (False) on `platform` (and its family), at every
    size, for the duration."""
    from irfuse.fusions import kernel_decl

    def choice(on: bool):
        return kernel_decl.Choice("triton" if on else "inductor",
                                  "bench_e2e_vllm: set for the measurement")

    tables = [kernel_decl.measured(p) for p in dict.fromkeys((platform, platform.split(":")[0]))]
    saved = [dict(t) for t in tables]
    try:
        for t in tables:
            t.update({n: ((1, choice(on)),) for n, on in kernels.items()})
        yield
    finally:
        for t, old in zip(tables, saved, strict=True):
            t.clear()
            t.update(old)


def _context(name: str, platform: str):
    if name in FORCED:
        return vllm_kernel_choices(platform, FORCED[name])
    return contextlib.nullcontext()


# --- checks and the attention table -----------------------------------------------------------


def check_standin(cfg, args, device: torch.device) -> list[str]:
    """The stand-in's Triton write and FlashInfer calls against torch references."""
    lines = []
    for batch, context, prefill in ((3, 40, 0), (0, 0, 37)):
        meta = plan(args, cfg, device, batch=batch, context=context, prefill=prefill)
        name = next(iter(S.LAYERS))
        layer = S.LAYERS[name]
        S.set_step(meta)
        t = meta.num_actual_tokens
        g = torch.Generator().manual_seed(7)
        q = torch.randn(t, cfg.num_heads, cfg.head_dim, generator=g).to(torch.bfloat16)
        k, v = (torch.randn(t, cfg.num_kv_heads, cfg.head_dim, generator=g)
                .to(torch.bfloat16) for _ in range(2))
        q, k, v = q.to(device), k.to(device), v.to(device)
        before = layer.kv_cache.clone()
        dep = torch.ops.vllm.unified_kv_cache_update(k, v, name)
        written = layer.kv_cache.clone()
        layer.kv_cache.copy_(before)
        kc, vc = S.as_stored(layer.kv_cache).transpose(1, 2).split(cfg.head_dim, -1)
        S.write_kv(k, v, kc, vc, meta.slot_mapping, triton_kernel=False, **S.kv_scales(layer))
        same = torch.equal(written, layer.kv_cache)
        out = torch.empty(t, cfg.num_heads, cfg.head_dim, dtype=torch.bfloat16, device=device)
        torch.ops.vllm.unified_attention_with_output(q, k, v, out, name, kv_cache_dummy_dep=dep)
        want = S.reference_attention(q, layer.kv_cache, meta, cfg.head_dim,
                                     cfg.head_dim ** -0.5, **S.kv_scales(layer))
        rel = ((out.float() - want.float()).abs().max() / want.float().abs().max()).item()
        what = (f"prefill {prefill}" if prefill else
                f"decode b{batch} ctx{'<=' if args.ragged else ''}{context}")
        lines.append(f"check {what}: cache write {'equal' if same else 'DIFFERS'} to torch's; "
                     f"attention max rel. diff to torch {rel:.1e}"
                     f"{'' if rel < 2e-2 else ' (TOO LARGE)'}")
        S.set_step(None)
    return lines


def decode_configs(specs: list[str]) -> dict[str, object]:
    """`--decode-configs`' launch shapes by their spec (`DecodeConfig.parse`)."""
    from irfuse.kernels.attention_quant import DecodeConfig

    try:
        return {spec: DecodeConfig.parse(spec) for spec in specs}
    except ValueError as err:
        raise SystemExit(f"bench_e2e_vllm: --decode-configs: {err}") from None


def attention_table(cfg, args, device: torch.device, steps: list) -> list[str]:
    """FlashInfer decode + Inductor's quant against irfuse's fused decode, layer 0's cache (and,
    with `--decode-configs`, the fused decode at each of those launch shapes)."""
    from irfuse.fusions.fuse_attn_quant import ops as attn_q
    from irfuse.kernels.dispatch import kernels

    fused_kernel = kernels("attention_quant").paged_decode_fp8

    def fp8_cache_on() -> bool:  # an FP8 cache (--kv-cache-dtype fp8) read in place
        return True
    others = decode_configs(args.decode_configs)
    quant = torch.compile(lambda x, s: (x.float() / s).clamp(-448.0, 448.0)
                          .to(torch.float8_e4m3fn))
    name = next(iter(S.LAYERS))
    scale = torch.tensor([0.02], device=device)
    rows = ["| decode step | FlashInfer + Inductor quant (us) | irfuse fused (us) | "
            "speed-up | rounds irfuse faster | max rel. diff |", "|---|---|---|---|---|---|"]
    for step, meta in steps:
        if meta.max_query_len != 1:
            continue
        S.set_step(meta)
        b = meta.num_actual_tokens
        q = torch.randn(b, cfg.num_heads, cfg.head_dim, device=device, dtype=torch.bfloat16)
        out = torch.empty_like(q)
        layer = S.LAYERS[name]

        def library(q=q, out=out, layer=layer, meta=meta):
            layer.impl.forward(layer, q, None, None, layer.kv_cache, meta, output=out)
            return quant(out.view(out.shape[0], -1), scale)

        def fused(q=q):
            return attn_q.paged_decode_in_place(q, name, scale, fused_kernel, fp8_cache_on)

        fns = {"lib": library, "fused": fused}
        for spec, config in others.items():
            fns[spec] = (lambda q=q, c=config: attn_q.paged_decode_in_place(
                q, name, scale, functools.partial(fused_kernel, config=c), fp8_cache_on))
        want = library().float()
        times = _time(fns, args.rounds, device.type == "cuda")
        lib, med = times["lib"], e2e._median
        for n, fn in fns.items():
            if n == "lib":
                continue
            diff = ((fn().float() - want).abs().max() / want.abs().max()).item()
            fus = times[n]
            ratios = sorted(a / b2 for a, b2 in zip(lib, fus, strict=True))
            label = step if n == "fused" else f"{step}, config {n}"
            rows.append(f"| {label} | {med(lib):.1f} | {med(fus):.1f} | "
                        f"{med(lib) / med(fus):.3f} | {sum(r > 1 for r in ratios)} of "
                        f"{len(ratios)} | {diff:.1e} |")
            print(rows[-1], flush=True)
        S.set_step(None)
    return rows


# --- the run --------------------------------------------------------------------------------


def _interleaved(fns: dict, rounds: int, cuda: bool, ms_per_round: float = 25.0
                 ) -> dict[str, list[float]]:
    """µs per call of each function, one figure per round, the functions taking turns; on CUDA
    timed with events over about `ms_per_round` of calls (as `bench_e2e_llama_fp8`), else
    one plain call by the wall clock."""
    times: dict[str, list[float]] = {n: [] for n in fns}
    if not cuda:
        for _ in range(rounds):
            for n, fn in fns.items():
                t0 = time.perf_counter()
                fn()
                times[n].append((time.perf_counter() - t0) * 1e6)
        return times

    def timed(fn, reps: int) -> float:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) * 1e3 / reps

    reps = {n: max(3, int(ms_per_round * 1e3 / timed(fn, 3))) for n, fn in fns.items()}
    for _ in range(rounds):
        for n, fn in fns.items():
            times[n].append(timed(fn, reps[n]))
    return times


def _time(fns: dict, rounds: int, cuda: bool) -> dict[str, list[float]]:
    """`_interleaved` of the functions, each captured as a CUDA graph and replayed on CUDA."""
    if cuda:
        fns = {n: e2e._capture(fn).replay for n, fn in fns.items()}
    return _interleaved(fns, rounds, cuda)


def _fused_text(reports) -> str:
    parts = []
    for r in reports:
        counts = ", ".join(f"{p.name} {p.count}" for p in r.passes if p.count)
        kern = ", ".join(sorted({f"{k.op} ({k.impl})" for k in r.kernels}))
        parts.append(f"range {r.range}: {counts or 'nothing'}; kernels: {kern or '-'}")
    return " | ".join(parts) or "-"


def _missed_text(reports) -> str:
    seen = []
    for r in reports:
        for p in r.passes:
            if p.name in ("fuse-rope-kvcache", "fuse-attn-quant"):
                for m in p.missed:
                    text = f"{p.name}: {m.reason}"
                    if text not in seen:
                        seen.append(text)
    return "; ".join(seen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batches", type=int, nargs="*", default=[16, 64])
    parser.add_argument("--contexts", type=int, nargs="*", default=[2048, 8192])
    parser.add_argument("--prefill", type=int, default=4096, help="prefill tokens (0: none)")
    parser.add_argument("--ragged", action="store_true",
                        help="decode contexts drawn in [C/2, C] (the first at C) instead of all C")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--layout", choices=("NHD", "HND"), default="NHD")
    parser.add_argument("--kv-cache-dtype", choices=("auto", "fp8"), default="auto",
                        help="the layers' KV cache: the model dtype, or vLLM's per-tensor FP8")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=["irfuse"])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--profile", action="store_true",
                        help="list each variant's kernels (first and last step)")
    parser.add_argument("--attn-table", action="store_true")
    parser.add_argument("--decode-configs", nargs="*", default=[],
                        help="also time the fused decode at these launch shapes in the "
                             "attention table (block_n:warps:stages:splits[:even][:prefetch])")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--tiny", action="store_true", help="the tiny size (CPU smoke runs)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("bench_e2e_vllm: no CUDA GPU (use --device cpu --tiny)", file=sys.stderr)
        return 1
    from irfuse import backend
    from irfuse.kernels.dispatch import platform_of

    device = torch.device(args.device)
    S.register()
    platform = platform_of(device)
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 32)
    model, cfg = build_model(args, device)
    card = torch.cuda.get_device_name() if cuda else "CPU"
    head = [
        f"Qwen3-8B-shaped FP8 step as vLLM 0.32 traces it ({'tiny' if args.tiny else 'hidden 4096, 32 q / 8 kv heads, D 128'}), "
        f"{args.layers} layers, attention through vLLM's opaque ops backed by "
        f"{'FlashInfer' if cuda else 'a torch reference'} (cache {args.layout}"
        f"{', FP8 (per-tensor scales)' if args.kv_cache_dtype == 'fp8' else ''}, block "
        f"{args.block_size}), {card} ({platform}), torch {torch.__version__}, "
        f"{'CUDA-graph replay' if cuda else 'plain calls'}, {args.rounds} interleaved rounds; "
        "median µs per forward (min-max); speed-up = Inductor / variant.", ""]
    out_lines: list[str] = []

    def emit(text: str = "") -> None:
        out_lines.append(text)
        print(text, flush=True)
        if args.out:
            with open(args.out, "w") as f:
                f.write(f"Command: `python {' '.join(sys.argv)}`\n\n" + "\n".join(head + out_lines)
                        + "\n")

    if args.check:
        for line in check_standin(cfg, args, device):
            emit(line)
        emit()
    steps = [(f"decode b{b} ctx{'<=' if args.ragged else ''}{c}", dict(batch=b, context=c))
             for b in args.batches for c in args.contexts]
    if args.prefill:
        steps.append((f"prefill {args.prefill}", dict(prefill=args.prefill)))
    variants = ["inductor", *args.variants]
    compiled = {}
    for name in variants:
        if name == "inductor":
            compiled[name] = torch.compile(model)
        else:
            compiled[name] = torch.compile(model, backend="irfuse", options=VARIANTS[name])
    emit("| step | variant | Inductor (us) | variant (us) | speed-up | per-round speed-up: "
         "median (min-max) | rounds faster | max rel. diff |")
    emit("|---|---|---|---|---|---|---|---|")
    notes, tables, metas = [], [], []
    reports: dict[str, list] = {n: [] for n in variants}
    for step, kw in steps:
        try:
            meta = plan(args, cfg, device, **kw)
        except Exception as err:  # noqa: BLE001 (reported; the next step runs)
            emit(f"| {step} | FAILED to plan: {type(err).__name__}: {str(err)[:200]} |")
            continue
        S.set_step(meta)
        inputs = make_inputs(cfg, meta, device)
        for x in inputs:
            torch._dynamo.mark_dynamic(x, 0)
        runners, outputs, first_s = {}, {}, {}
        for name in variants:
            backend.clear_reports()
            start = time.perf_counter()
            try:
                with _context(name, platform), torch.no_grad():
                    outputs[name] = compiled[name](*inputs).float()
                    if cuda:
                        torch.cuda.synchronize()
                    first_s[name] = time.perf_counter() - start
                    reports[name] += backend.reports()
                    if args.profile and cuda and step in (steps[0][0], steps[-1][0]):
                        tables.append(e2e._kernel_table(compiled[name], inputs,
                                                        f"{name}, {step}"))
                    runners[name] = lambda c=compiled[name], i=inputs: c(*i)
                    if cuda:  # captured here, within the variant's kernel choices
                        graph = e2e._capture(runners[name])
                        runners[name] = graph.replay
            except Exception as err:  # noqa: BLE001 (reported; the other variants run)
                emit(f"| {step} | {name} | FAILED: {type(err).__name__}: "
                     f"{str(err).splitlines()[0][:200] if str(err) else ''} |")
        if "inductor" not in runners:
            S.set_step(None)
            continue
        with torch.no_grad():
            times = _interleaved(runners, args.rounds, cuda)
        med = e2e._median
        ind = times["inductor"]
        for name in variants[1:]:
            if name not in times:
                continue
            irf = times[name]
            ratios = sorted(b / a for a, b in zip(ind, irf, strict=True))
            ref, out = outputs["inductor"], outputs[name]
            diff = ((out - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
            emit(f"| {step} | {name} | {med(ind):.1f} ({min(ind):.1f}-{max(ind):.1f}) | "
                 f"{med(irf):.1f} ({min(irf):.1f}-{max(irf):.1f}) | {med(ind) / med(irf):.3f} | "
                 f"{1 / med(ratios):.3f} ({1 / ratios[-1]:.3f}-{1 / ratios[0]:.3f}) | "
                 f"{sum(r < 1.0 for r in ratios)} of {len(ratios)} | {diff:.1e} |")
        notes.append(f"- {step}: first call (compile where new) " + ", ".join(
            f"{n} {s:.1f} s" for n, s in first_s.items()))
        del runners
        S.set_step(None)
        metas.append((step, meta))
        if cuda:
            torch.cuda.empty_cache()
    emit()
    for name in variants[1:]:
        emit(f"- fused by {name}: {_fused_text(reports[name])}")
        missed = _missed_text(reports[name])
        if missed:
            emit(f"  - left unfused: {missed}")
    for note in notes:
        emit(note)
    if args.attn_table:
        emit()
        emit("Attention + static FP8 output quant alone (layer 0's cache of each decode step):")
        emit()
        for line in attention_table(cfg, args, device, metas):
            emit(line)
    if tables:
        emit()
        emit("Kernel profiles (one forward, plain launches):")
        emit()
        emit("```\n" + "\n\n".join(tables) + "\n```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
