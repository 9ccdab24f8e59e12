"""Benchmark of all-reduce + residual add + RMSNorm (+ static FP8) across the GPUs of one host.

One process per GPU (NCCL, `irfuse.models.dist.spawn_ranks`), TP = the number of GPUs (or
`--world`). For each T and quant, four candidates, each captured in a CUDA graph and replayed
(all ranks in lockstep; median over interleaved rounds):

- `nccl+inductor`: torch's functional all-reduce (NCCL) + the add + RMSNorm (+ quant) in
  torch code, under `torch.compile` (Inductor, static shapes): what irfuse leaves without the
  fusion;
- `nccl+triton`: the same all-reduce + irfuse's fused norm (+ quant) Triton kernel (the fusion's
  CUDA path past FlashInfer's cap or without FlashInfer);
- `flashinfer`: FlashInfer's `allreduce_fusion` on a `trtllm` workspace (the fusion's CUDA path
  below the cap), where FlashInfer is installed and can run the size;
- `symm_mem`: the all-reduce through torch's symmetric memory (one-shot or two-shot by size,
  `allreduce_symm_mem`) + the same Triton kernel (the `symm_mem` choice, forced in a model by
  IRFUSE_ALLREDUCE_SYMM_MEM=1), where symmetric memory can run the size.

Outputs are checked against `nccl+inductor` first (the residual and norm within two bf16 ulps on
99% of elements; FP8 codes within one code). Prints a table of µs and ratios against the
unfused pair.

`--residual none` times the first layer's form: no residual add, and the op returns the norm's
output and the all-reduced value (vLLM's first norm after its vocab-parallel embedding; FlashInfer
writes both only with a zero residual, which is how irfuse calls it). `--group vllm` names the
group as vLLM does (`tp:0`, a group coordinator of `irfuse.models.dist.vllm_style_groups` whose
device group is the NCCL group): every candidate resolves it through `irfuse.groups`.

    PYTHONPATH=. python3 benchmarks/bench_allreduce_rms.py --hidden 8192 --quant none,fp8 \\
        --tokens 1,16,64,256,1024,4096,8192 [--residual add,none] [--group vllm] --out table.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import warnings
from typing import Any

import torch

EPS = 1e-5
DEFAULT_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 8192)
QUANTS = ("none", "fp8")
RESIDUALS = ("add", "none")
GROUPS = ("torch", "vllm")
CANDIDATES = ("nccl+inductor", "nccl+triton", "flashinfer", "symm_mem")
FUSED = CANDIDATES[1:]
FP8 = torch.float8_e4m3fn


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default=",".join(map(str, DEFAULT_TOKENS)),
                   help="comma-separated token counts")
    p.add_argument("--hidden", type=int, default=8192)
    p.add_argument("--quant", default="none,fp8", help=f"comma-separated, of {QUANTS}")
    p.add_argument("--residual", default="add",
                   help=f"comma-separated, of {RESIDUALS} (none: the first layer's form)")
    p.add_argument("--group", default="torch", choices=GROUPS,
                   help="name the group as torch does, or as vLLM's coordinator tp:0")
    p.add_argument("--world", type=int, default=None,
                   help="TP size (default: the number of visible GPUs)")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    p.add_argument("--rep", type=int, default=200, help="graph replays per measurement")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median)")
    p.add_argument("--out", help="write the markdown table here")
    args = p.parse_args(argv)
    try:
        args.tokens = [int(t) for t in args.tokens.split(",")]
    except ValueError:
        p.error(f"--tokens: not a comma-separated list of ints: {args.tokens!r}")
    if any(t < 1 for t in args.tokens):
        p.error("--tokens: every count must be >= 1")
    args.quant = [q.strip() for q in args.quant.split(",")]
    bad = [q for q in args.quant if q not in QUANTS]
    if bad:
        p.error(f"--quant: unknown {bad}; choose from {QUANTS}")
    args.residual = [r.strip() for r in args.residual.split(",")]
    bad = [r for r in args.residual if r not in RESIDUALS]
    if bad:
        p.error(f"--residual: unknown {bad}; choose from {RESIDUALS}")
    if args.hidden < 16 or args.hidden % 16:
        p.error("--hidden must be a positive multiple of 16")
    if args.world is not None and args.world < 2:
        p.error("--world must be >= 2 (an all-reduce over one rank is a copy)")
    return args


def markdown(rows: list[dict[str, Any]], header: str) -> str:
    """The table: per (quant, T) each candidate's µs and its ratio to the unfused pair."""
    lines = [header, "",
             "| quant | residual | T | MB | nccl+inductor µs | nccl+triton µs | "
             "triton / inductor | flashinfer µs | flashinfer / inductor | symm_mem µs | "
             "symm_mem / inductor | check |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        base = r["nccl+inductor"]
        cells = []
        for name in FUSED:
            us = r.get(name)
            cells += ["-", "-"] if us is None else [f"{us:.1f}", f"{us / base:.2f}"]
        lines.append(f"| {r['quant']} | {r.get('residual', 'add')} | {r['T']} | "
                     f"{r['mb']:.2f} | {base:.1f} | "
                     f"{' | '.join(cells)} | {r['check']} |")
    fused = [r[c] / r["nccl+inductor"] for r in rows for c in FUSED if r.get(c) is not None]
    if fused:
        lines += ["", f"fused / unfused: median {statistics.median(fused):.2f}, "
                  f"{min(fused):.2f}-{max(fused):.2f}"]
    return "\n".join(lines) + "\n"


# --- the ranks ----------------------------------------------------------------------------------


def _unfused(group_name: str, quant: str):
    import torch.distributed._functional_collectives as funcol

    from irfuse import groups
    from irfuse.kernels import quant_ref

    torch_name = groups.torch_name(group_name)

    def fn(x, r, w, s):
        a = funcol.wait_tensor(torch.ops._c10d_functional.all_reduce(x, "sum", torch_name))
        h = a.float() if r is None else a.float() + r.float()
        res = a if r is None else h.to(x.dtype)
        y = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * w
        if quant == "fp8":
            y = quant_ref.quant_fp8_static(y, s, FP8)
        return y, res

    return torch.compile(fn, dynamic=False)


def _graph(fn) -> tuple[torch.cuda.CUDAGraph, Any]:
    for _ in range(3):  # warm up (compiles, creates the FlashInfer workspace) off the graph
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g, out


def _time(graph: torch.cuda.CUDAGraph, rep: int) -> float:
    import torch.distributed as dist

    dist.barrier()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(rep):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / rep


def _check(out, ref, quant: str) -> str:
    y, res = out
    y_ref, res_ref = ref
    if quant == "fp8":
        a, b = y.float(), y_ref.float()
        far = ((a - b).abs() > 2 ** -3 * torch.maximum(a.abs(), b.abs()) + 2 ** -9).float()
        if far.mean().item() > 0.01:
            return "MISMATCH: fp8"
    else:
        a, b = y.float(), y_ref.float()
        if ((a - b).abs() > 2 * 2 ** -7 * torch.maximum(a.abs(), b.abs())).float().mean() > 0.01:
            return "MISMATCH: norm"
    if ((res.float() - res_ref.float()).abs() > 2 * 2 ** -7 * res_ref.float().abs()
            ).float().mean() > 0.01:
        return "MISMATCH: residual"
    return "ok"


def _symm_mem(x, r, w, s, name: str, quant: str):
    """The symmetric-memory candidate, or None where it cannot run this size (the reason is
    printed by rank 0). Its first call, made here on every rank, allocates and rendezvouses the
    buffer outside the graph; a failed rendezvous drops the candidate (never timing NCCL
    under its name)."""
    from irfuse.kernels import allreduce_rms
    from irfuse.kernels import allreduce_symm_mem as sm

    def fn():
        if quant == "fp8":
            return allreduce_rms.nccl_static(x, r, w, s, name, EPS, 0.0, FP8, False, False,
                                             False, True, symm="bench")
        return allreduce_rms.nccl_norm(x, r, w, name, EPS, 0.0, False, False, True,
                                       symm="bench")

    why = sm.reason(x, name)
    if why is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
        why = sm.reason(x, name)
    if why is not None:
        if torch.distributed.get_rank() == 0:
            print(f"symm_mem at {x.shape[0]} tokens: {why}", flush=True)
        return None
    return fn


def _candidates(x, r, w, s, name: str, quant: str) -> dict[str, Any]:
    """The timed callables for one size (FlashInfer and symm_mem only where they can run it)."""
    from irfuse.kernels import allreduce_rms

    unfused = _unfused(name, quant)
    cands: dict[str, Any] = {"nccl+inductor": lambda: unfused(x, r, w, s)}
    if quant == "fp8":
        cands["nccl+triton"] = lambda: allreduce_rms.nccl_static(
            x, r, w, s, name, EPS, 0.0, FP8, False, False, False, True)
    else:
        cands["nccl+triton"] = lambda: allreduce_rms.nccl_norm(
            x, r, w, name, EPS, 0.0, False, False, True)
    symm = _symm_mem(x, r, w, s, name, quant)
    if symm is not None:
        cands["symm_mem"] = symm
    if allreduce_rms.flashinfer_reason(x, r, w, name, 0.0, False) is not None:
        return cands

    def fi():
        if quant != "fp8":
            return allreduce_rms.flashinfer_fused(x, r, w, name, EPS, 0.0, "kARResidualRMSNorm")
        q = torch.empty(x.shape, dtype=FP8, device=x.device)
        _, res = allreduce_rms.flashinfer_fused(x, r, w, name, EPS, 0.0,
                                                "kARResidualRMSNormFP8Quant", quant_out=q,
                                                scale_factor=s)
        return q, res

    cands["flashinfer"] = fi
    return cands


def _measure(rank: int, args: argparse.Namespace, dtype: torch.dtype, name: str, quant: str,
             t: int, residual: str = "add") -> dict[str, Any]:
    h = args.hidden
    g = torch.Generator(device="cuda").manual_seed(rank)
    x = torch.randn(t, h, device="cuda", dtype=dtype, generator=g)
    r = torch.randn(t, h, device="cuda", dtype=dtype, generator=g)
    if residual == "none":
        r = None
    w = (torch.rand(h, device="cuda", generator=g) + 0.5).to(dtype)
    s = torch.tensor(0.05, device="cuda")
    graphs = {k: _graph(fn) for k, fn in _candidates(x, r, w, s, name, quant).items()}
    ref = graphs["nccl+inductor"][1]
    checks = [f"{k}: {v}" for k, (_, out) in graphs.items()
              if k != "nccl+inductor" and (v := _check(out, ref, quant)) != "ok"]
    times: dict[str, list[float]] = {k: [] for k in graphs}
    for _ in range(args.rounds):
        for k, (graph, _) in graphs.items():
            times[k].append(_time(graph, args.rep))
    row = {"quant": quant, "residual": residual, "T": t,
           "mb": t * h * x.element_size() / 2 ** 20, "check": "; ".join(checks) or "ok"}
    row.update({k: statistics.median(v) for k, v in times.items()})
    return row


def _worker(rank: int, world: int, opts: dict[str, Any], out_path: str) -> None:
    import torch.distributed as dist

    args = argparse.Namespace(**opts)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    from irfuse.models.dist import vllm_style_groups

    group = dist.group.WORLD
    rows: list[dict[str, Any]] = []
    with vllm_style_groups(group) as coordinator:
        name = coordinator.unique_name if args.group == "vllm" else group.group_name
        for quant in args.quant:
            for residual in args.residual:
                for t in args.tokens:
                    row = _measure(rank, args, dtype, name, quant, t, residual)
                    rows.append(row)
                    if rank == 0:
                        print(row, flush=True)
    if rank == 0:
        torch.save(rows, out_path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("needs CUDA GPUs (one process per GPU, NCCL)", file=sys.stderr)
        return 2
    world = args.world or torch.cuda.device_count()
    if world < 2 or world > torch.cuda.device_count():
        print(f"needs 2 or more GPUs for TP {world}; {torch.cuda.device_count()} visible",
              file=sys.stderr)
        return 2
    from irfuse.models.dist import spawn_ranks

    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "rows.pt")
        spawn_ranks(world, _worker, vars(args), out_path, backend="nccl",
                    init_file=os.path.join(tmp, "init"))
        rows = torch.load(out_path)
    command = "PYTHONPATH=. python3 benchmarks/bench_allreduce_rms.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    header = (f"`{command}` (TP {world}, {torch.cuda.get_device_name()}, "
              f"torch {torch.__version__}, H {args.hidden}, {args.dtype}, group named as "
              f"{args.group}, CUDA-graph replay)")
    table = markdown(rows, header)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
