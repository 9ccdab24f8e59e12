"""Benchmark of the async-TP ops (fuse_gemm_comms) across the GPUs of one host: irfuse's fused
all-gather + GEMM and GEMM + reduce-scatter (torch's symmetric-memory ops,
`irfuse.kernels.gemm_comms`) against the unfused pair (NCCL's collective, then the GEMM, or the
GEMM, then NCCL's collective: `irfuse.kernels.gemm_comms_ref`), plain bf16 and FP8-scaled.

Cases (`--cases`):
- `ag`: all-gather of the rows of a `[T / TP, K]` shard, then `@ [K, N]` (bf16);
- `ag-tensor`: FP8 a and b, per-tensor scales;
- `ag-rows-sharded`: FP8, row-wise scale_a of the shard's rows (`[T / TP, 1]`, gathered with a:
  torch's row-wise-sharded form; vLLM's per-token quant before a gather);
- `ag-rows-replicated`: FP8, row-wise scale_a of the gathered rows (`[T, 1]`, vLLM's async-TP
  test model: torch's row-wise-replicated form);
- `rs`: `[T, K] @ [K, N]` then reduce-scatter of the rows (bf16);
- `rs-rows`: FP8 with row-wise scale_a and column-wise scale_b, bf16 out.
Shapes: K and N of a Llama-70B layer at TP (`--hidden 8192 --intermediate 28672`): the gather
feeds gate_up (`[8192, 2 * 28672 / TP]`), the reduce-scatter follows down
(`[28672 / TP, 8192]`). `--group vllm` names the group as vLLM's coordinator `tp:0`
(`irfuse.models.dist.vllm_style_groups`), resolved by the kernels through `irfuse.groups`.

Timing: CUDA events over `--rep` calls after a warm-up, interleaved rounds, the slowest rank's
median (the symmetric-memory ops run side streams that a CUDA-graph capture may refuse). Each
fused output is checked against the unfused one (max relative difference in the table).

    PYTHONPATH=. python3 benchmarks/bench_gemm_comms.py --world 2 --tokens 512,2048,8192 \\
        [--cases ag,ag-rows-replicated,rs-rows] [--group vllm] --out table.md

CPU smoke test (gloo; both sides run the reference): `--device cpu --world 2 --tokens 8
--hidden 64 --intermediate 128 --rep 1 --rounds 1`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import torch

CASES = ("ag", "ag-tensor", "ag-rows-sharded", "ag-rows-replicated", "rs", "rs-rows")
FP8 = torch.float8_e4m3fn


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default="512,2048,8192", help="comma-separated token counts")
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {CASES}")
    p.add_argument("--hidden", type=int, default=8192)
    p.add_argument("--intermediate", type=int, default=28672)
    p.add_argument("--world", type=int, default=None, help="TP size (default: the GPUs)")
    p.add_argument("--group", default="torch", choices=("torch", "vllm"))
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--rep", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", help="write the markdown table here")
    args = p.parse_args(argv)
    try:
        args.tokens = [int(t) for t in args.tokens.split(",")]
    except ValueError:
        p.error(f"--tokens: not a comma-separated list of ints: {args.tokens!r}")
    args.cases = [c.strip() for c in args.cases.split(",")]
    bad = [c for c in args.cases if c not in CASES]
    if bad:
        p.error(f"--cases: unknown {bad}; choose from {CASES}")
    if args.world is not None and args.world < 2:
        p.error("--world must be >= 2")
    return args


def _operands(case: str, t: int, world: int, args, device, g) -> dict[str, Any]:
    """The op's arguments for one case: a, b, scale_a, scale_b, out_dtype."""
    gather = case.startswith("ag")
    k, n = ((args.hidden, 2 * args.intermediate // world) if gather
            else (args.intermediate // world, args.hidden))
    rows = t // world if gather else t
    a = torch.randn(rows, k, device=device, generator=g) / 4
    b = torch.randn(n, k, device=device, generator=g).t() / k ** 0.5  # column-major, as vLLM's
    if case in ("ag", "rs"):
        return dict(a=a.to(torch.bfloat16), b=b.to(torch.bfloat16), scale_a=None, scale_b=None,
                    out_dtype=None)
    scale_b = (torch.rand(1, n, device=device, generator=g) + 0.5) / 64
    if case == "ag-tensor":
        scale_a, scale_b = torch.tensor([0.02], device=device), scale_b[:, :1].reshape(1)
    elif case == "ag-rows-replicated":
        scale_a = (torch.rand(t, 1, device=device, generator=g) + 0.5) / 64
    else:  # rows of a: the shard's (ag-rows-sharded), the GEMM's own (rs-rows)
        scale_a = (torch.rand(rows, 1, device=device, generator=g) + 0.5) / 64
    return dict(a=(a * 16).to(FP8), b=(b * 16).to(FP8), scale_a=scale_a, scale_b=scale_b,
                out_dtype=torch.bfloat16)


def _time(fn, rep: int, cuda: bool) -> float:
    import torch.distributed as dist

    dist.barrier()
    if not cuda:
        start = time.perf_counter()
        for _ in range(rep):
            fn()
        return (time.perf_counter() - start) * 1e6 / rep
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(rep):
        fn()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) * 1e3 / rep


def _slowest(value: float, device) -> float:
    import torch.distributed as dist

    v = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(v, op=dist.ReduceOp.MAX)
    return float(v.item())


def _worker(rank: int, world: int, opts: dict[str, Any], out_path: str) -> None:
    import torch.distributed as dist

    from irfuse.kernels import gemm_comms_ref as ref
    from irfuse.models.dist import vllm_style_groups

    args = argparse.Namespace(**opts)
    cuda = args.device == "cuda"
    device = torch.device(f"cuda:{rank}" if cuda else "cpu")
    fused_impl = ref
    if cuda:
        from irfuse.kernels import gemm_comms as fused_impl  # type: ignore[no-redef]
    rows: list[dict[str, Any]] = []
    with vllm_style_groups(dist.group.WORLD) as coordinator:
        name = coordinator.unique_name if args.group == "vllm" else dist.group.WORLD.group_name
        for case in args.cases:
            for t in args.tokens:
                g = torch.Generator(device=device).manual_seed(1 + rank)
                ops = _operands(case, t, world, args, device, g)
                call = (ops["a"], ops["b"], ops["scale_a"], ops["scale_b"], ops["out_dtype"])
                if case.startswith("ag"):
                    def fused(call=call):
                        return fused_impl.all_gather_gemm(*call, name, world)

                    def unfused(call=call):
                        return ref.all_gather_gemm(*call, name, world)
                else:
                    def fused(call=call):
                        return fused_impl.gemm_reduce_scatter(*call, "sum", name, world)

                    def unfused(call=call):
                        return ref.gemm_reduce_scatter(*call, "sum", name, world)
                row: dict[str, Any] = {"case": case, "T": t}
                try:
                    want, got = unfused().float(), fused().float()
                    row["diff"] = float((got - want).abs().max()
                                        / want.abs().max().clamp_min(1e-30))
                    times: dict[str, list[float]] = {"unfused": [], "fused": []}
                    for _ in range(args.rounds):
                        for label, fn in (("unfused", unfused), ("fused", fused)):
                            times[label].append(_slowest(_time(fn, args.rep, cuda), device))
                    row.update({k: statistics.median(v) for k, v in times.items()})
                except Exception as err:  # noqa: BLE001 (the row says why, the table goes on)
                    row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
                rows.append(row)
                if rank == 0:
                    print(row, flush=True)
    if rank == 0:
        torch.save(rows, out_path)


def markdown(rows: list[dict[str, Any]], header: str) -> str:
    lines = [header, "", "| case | T | unfused µs | fused µs | fused / unfused | max rel. diff |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['case']} | {r['T']} | - | - | - | {r['error']} |")
            continue
        lines.append(f"| {r['case']} | {r['T']} | {r['unfused']:.1f} | {r['fused']:.1f} | "
                     f"{r['fused'] / r['unfused']:.2f} | {r['diff']:.1e} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("needs CUDA GPUs (or --device cpu for the smoke test)", file=sys.stderr)
        return 2
    world = args.world or (torch.cuda.device_count() if cuda else 2)
    if cuda and world > torch.cuda.device_count():
        print(f"needs {world} GPUs, found {torch.cuda.device_count()}", file=sys.stderr)
        return 2
    from irfuse.models.dist import spawn_ranks

    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "rows.pt")
        spawn_ranks(world, _worker, vars(args), out_path, backend="nccl" if cuda else "gloo",
                    init_file=os.path.join(tmp, "init"))
        rows = torch.load(out_path)
    device = torch.cuda.get_device_name() if cuda else "CPU (reference both sides)"
    command = "PYTHONPATH=. python3 benchmarks/bench_gemm_comms.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    table = markdown(rows, f"`{command}` (TP {world}, {device}, torch {torch.__version__}, "
                           f"group named as {args.group}, CUDA events)")
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
