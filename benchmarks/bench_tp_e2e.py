"""An end-to-end tensor-parallel step of Llama-70B-shaped FP8 layers: irfuse (with the collective
fusions the flags turn on) against Inductor with the same collectives, decode and prefill.

The model is irfuse's built-in `llama-fp8-tp` (static FP8 linears, Megatron sharding, functional
all-reduce after o and down) at hidden 8192, 64 heads / 8 kv heads of 128, intermediate 28672,
a couple of layers, no lm_head. Every rank of one NCCL group (`irfuse.models.dist.spawn_ranks`,
rank r on GPU r) compiles each variant with num_tokens dynamic, and with `--shapes sizes` each
token count as its own compile size; with `--shapes dynamic` one compile serves every count of
its range (sequence parallelism and async TP pad a count TP does not divide: time odd counts
such as 4095 there). It runs each count once (the outputs are compared with Inductor's),
captures it as a CUDA graph (or, with `--timing events` or where capture fails, times plain
launches), and replays the variants in interleaved rounds. A figure is the slowest rank's median
over the rounds. `--collectives vllm` spells the all-reduces as vLLM does (`vllm.all_reduce` on
its coordinator `tp:0`, `irfuse.models.dist.vllm_style_groups`): the reduce-scatters and
all-gathers SP emits are vLLM's ops, and the fused kernels resolve `tp:0` to the NCCL group.

Variants (`--variants`): `o2` (irfuse O2), `sp` (+ enable_sp), `async-tp` (+ fuse_gemm_comms,
which implies enable_sp), `ar-rms` (+ fuse_allreduce_rms); `--sp-min` sets sp_min_token_num
(default: irfuse's threshold for the platform, hidden size and TP).

    python benchmarks/bench_tp_e2e.py --tp 2 [--layers 2] [--tokens 16 4096 8192]
        [--variants o2 sp async-tp ar-rms] [--shapes sizes|dynamic]
        [--collectives functional|vllm] [--rounds 15] [--out FILE.md]

CPU smoke test of everything but the timing's meaning (gloo, the tiny model, eager baseline):

    python benchmarks/bench_tp_e2e.py --device cpu --tp 2 --size tiny --layers 1 --tokens 16 \
        --baseline eager --no-inductor --sp-min 4 --rounds 2
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_e2e_llama_fp8 as e2e  # noqa: E402 (its CUDA-graph capture, by path)

LLAMA_70B = dict(hidden=8192, num_heads=64, num_kv_heads=8, head_dim=128, intermediate=28672,
                 max_positions=8192, rope_theta=500000.0, eps=1e-5, num_tokens=16)
VARIANTS = {
    "o2": {},
    "sp": {"enable_sp": True},
    "async-tp": {"fuse_gemm_comms": True},
    "ar-rms": {"fuse_allreduce_rms": True},
}


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--tokens", type=int, nargs="+", default=[16, 4096, 8192])
    p.add_argument("--variants", nargs="+", default=["o2", "sp", "async-tp"],
                   choices=sorted(VARIANTS))
    p.add_argument("--sp-min", type=int, default=None, help="pass_config.sp_min_token_num")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--timing", choices=("graph", "events"), default="graph")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--size", choices=("llama-70b", "tiny"), default="llama-70b")
    p.add_argument("--baseline", choices=("inductor", "eager"), default="inductor")
    p.add_argument("--no-inductor", action="store_true", help="irfuse without Inductor after it")
    p.add_argument("--shapes", choices=("sizes", "dynamic"), default="sizes",
                   help="each token count its own compile size, or one dynamic range")
    p.add_argument("--collectives", choices=("functional", "vllm"), default="functional",
                   help="torch's functional all-reduce, or vLLM's on its coordinator tp:0")
    p.add_argument("--out", default=None)
    return p.parse_args(argv)


def _options(args: argparse.Namespace, variant: str) -> dict:
    pass_config = {**VARIANTS[variant]}
    if args.sp_min is not None:
        pass_config["sp_min_token_num"] = args.sp_min
    options = {"optimization_level": 2, "pass_config": pass_config,
               "inductor": not args.no_inductor}
    if args.shapes == "sizes":
        options["compile_sizes"] = list(args.tokens)
    return options


def _time_once(fn, reps: int, cuda: bool) -> float:
    """µs per call of `fn` over `reps` calls (CUDA events on a GPU, wall time on the CPU)."""
    import torch.distributed as dist

    dist.barrier()
    if not cuda:
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - start) * 1e6 / reps
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) * 1e3 / reps


def _slowest(value: float, device: torch.device) -> float:
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _worker(rank: int, world: int, args: argparse.Namespace, out_file: str) -> None:
    import torch.distributed as dist

    from irfuse.models.dist import vllm_style_groups

    with vllm_style_groups(dist.group.WORLD):
        _run(rank, world, args, out_file)


def _run(rank: int, world: int, args: argparse.Namespace, out_file: str) -> None:
    from irfuse import backend, models

    cuda = args.device == "cuda"
    device = torch.device(f"cuda:{rank}" if cuda else "cpu")
    sizes = LLAMA_70B if args.size == "llama-70b" else {}
    dtype = torch.bfloat16
    collective = {"tp_collective": "vllm"} if args.collectives == "vllm" else {}
    built = models.build("llama-fp8-tp", device=device, dtype=dtype, num_layers=args.layers,
                         lm_head=False, scale_spelling="inv_scale", clamp_spelling="clamp_minmax",
                         **sizes, **collective)
    names = ["baseline", *args.variants]
    runners: dict[str, dict[int, object]] = {}
    outputs: dict[str, dict[int, torch.Tensor]] = {}
    fused: dict[str, str] = {}
    how: dict[str, str] = {}
    for name in names:
        torch._dynamo.reset()
        backend.clear_reports()
        if name == "baseline":
            compiled = (torch.compile(built.model) if args.baseline == "inductor"
                        else built.model)
        else:
            compiled = torch.compile(built.model, backend="irfuse",
                                     options=_options(args, name))
        runners[name], outputs[name] = {}, {}
        for t in args.tokens:
            inputs = built.make_inputs(t)
            built.mark_dynamic(inputs)
            with torch.no_grad():
                outputs[name][t] = compiled(*inputs).float()
            fn = functools.partial(compiled, *inputs)
            how[name] = "plain launches"
            if cuda and args.timing == "graph":
                try:
                    with torch.no_grad():
                        graph = e2e._capture(fn)
                    fn, how[name] = graph.replay, "CUDA graph"
                except Exception as err:  # noqa: BLE001 (reported, then events)
                    how[name] = f"plain launches (capture failed: {type(err).__name__})"
            runners[name][t] = fn
        if name != "baseline":
            fused[name] = "; ".join(
                f"range {r.range}: " + ", ".join(f"{p.name} {p.count}" for p in r.passes
                                                  if p.count)
                for r in backend.reports())
    times: dict[str, dict[int, list[float]]] = {n: {t: [] for t in args.tokens} for n in names}
    with torch.no_grad():
        for t in args.tokens:  # one untimed round: first-call work stays out of the figures
            for name in names:
                _time_once(runners[name][t], 1, cuda)
        for _ in range(args.rounds):
            for t in args.tokens:
                for name in names:
                    reps = 20 if t <= 256 else 3
                    us = _time_once(runners[name][t], reps, cuda)
                    times[name][t].append(_slowest(us, device))
    if rank == 0:
        text = _table(args, names, times, outputs, fused, how)
        with open(out_file, "w") as f:
            f.write(text)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _table(args, names, times, outputs, fused, how) -> str:
    device = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    lines = [
        f"TP {args.tp} step, llama-fp8-tp at {args.size} size, {args.layers} layers, bf16 "
        f"activations, {device}, torch {torch.__version__}; shapes: {args.shapes}; "
        f"collectives: {args.collectives}; baseline: {args.baseline} "
        f"({how['baseline']}); irfuse {'with' if not args.no_inductor else 'without'} "
        f"Inductor after it",
        "",
        f"({args.rounds} interleaved rounds; median µs per step of the slowest rank, "
        "min-max over the rounds)",
        "",
        "| num_tokens | variant | baseline (us) | irfuse (us) | irfuse / baseline | "
        "max rel. diff | timing |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in args.tokens:
        base = times["baseline"][t]
        for name in names[1:]:
            mine = times[name][t]
            ref = outputs["baseline"][t]
            diff = float((outputs[name][t] - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
            lines.append(
                f"| {t} | {name} | {_median(base):.1f} ({min(base):.1f}-{max(base):.1f}) | "
                f"{_median(mine):.1f} ({min(mine):.1f}-{max(mine):.1f}) | "
                f"{_median(mine) / _median(base):.3f} | {diff:.2e} | {how[name]} |")
    lines += ["", "Fused per variant (rank 0):"]
    lines += [f"- {name}: {fused[name] or 'nothing'}" for name in names[1:]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.device == "cuda" and torch.cuda.device_count() < args.tp:
        print(f"bench_tp_e2e: needs {args.tp} GPUs, found {torch.cuda.device_count()}",
              file=sys.stderr)
        return 1
    from irfuse.models.dist import spawn_ranks

    with tempfile.TemporaryDirectory() as tmp:
        out_file = os.path.join(tmp, "table.md")
        spawn_ranks(args.tp, _worker, args, out_file,
                    backend="nccl" if args.device == "cuda" else "gloo",
                    init_file=os.path.join(tmp, "init"))
        with open(out_file) as f:
            text = f.read()
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"Command: `python {' '.join(sys.argv)}`\n\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
