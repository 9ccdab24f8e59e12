"""Benchmark of Qwen3-VL's per-head QK RMSNorm + multimodal RoPE on one GPU: irfuse against
Inductor on the graph vLLM runs on CUDA.

Qwen3-VL-8B's attention (32 q / 8 kv heads of 128, bf16, interleaved sections [24, 20, 20],
`[3, T]` positions): q, k, v split from qkv, RMSNorm of q and k per head (vLLM's
`forward_native`), the tables gathered at the three position rows, and the MRoPE Triton kernel
launched in place on q and k (`MRotaryEmbedding.forward_cuda`). The kernel is vLLM's own with
`--vllm-mrope PATH` (its `mrope.py`: `triton_mrope` and `_triton_mrope_forward` are read from the
file and run as vLLM's, since vLLM does not install on the GPU machine), else
`tests/vllm_triton_mrope.py`'s stand-in (vLLM's parameter list and launch, its body ours).

- `inductor`: the graph under `torch.compile` (Inductor: the norms and the gather compiled, the
  user kernel launched as it is).
- `irfuse`: the same graph under `torch.compile(backend="irfuse")` at O2 with
  enable_qk_norm_rope_fusion: one launch, the fused QK norm + RoPE kernel reading the cache at the
  three position rows by section (the raise reads back through the model's gather, which is then
  dropped).

CUDA-graph replay, median of interleaved rounds (`bench_norm_act_quant.py`'s helpers); each
candidate checked against eager first by `bench_qk_norm_rope.py`'s rule (at most 1% of values
off, each within 2 bf16 ulps of its rotated pair's magnitude), its count of differing values
printed. `copy` is an SM copy of the bytes the fused
kernel must move (q and k read and written), the floor.

    PYTHONPATH=. python3 benchmarks/bench_mrope.py --rounds 3 [--vllm-mrope path/to/mrope.py]
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import types

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import bench_norm_act_quant as nq  # noqa: E402 (timing helpers, by path)
import bench_qk_norm_rope as qk  # noqa: E402 (its agreement rule)
import vllm_triton_mrope as mrope  # noqa: E402 (the stand-in kernel)

from irfuse import backend  # noqa: E402

HQ, HK, D = 32, 8, 128
SECTIONS = (24, 20, 20)
MAX_POS = 32768
EPS = 1e-6
DEFAULT_TOKENS = (1, 16, 128, 1024, 4096)


def vllm_triton_mrope(path: str):
    """vLLM's `triton_mrope` (and the kernel it launches) from its `mrope.py`; its platform check
    reads CUDA. The kernel is named as vLLM's, so that irfuse recognizes the launch; the module
    holding both is importable under its own name, as Dynamo imports the globals of what it
    inlines."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    wanted = ("_triton_mrope_forward", "triton_mrope")
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    for node in body:
        node.decorator_list = []
    module = types.ModuleType("bench_mrope_vllm")
    sys.modules[module.__name__] = module
    platform = types.SimpleNamespace(is_rocm=lambda: False)
    module.__dict__.update(torch=torch, triton=triton, tl=tl, current_platform=platform)
    exec(compile(ast.Module(body, []), path, "exec"), module.__dict__)
    module._triton_mrope_forward.__module__ = mrope.MODULE
    module._triton_mrope_forward = triton.jit(module._triton_mrope_forward)
    return module.triton_mrope


class Qwen3VLRope(torch.nn.Module):
    """The norms and the multimodal rope of one Qwen3-VL attention layer, as vLLM runs them."""

    rope = staticmethod(mrope.triton_mrope)

    def __init__(self):
        super().__init__()
        inv_freq = 1.0 / (5e6 ** (torch.arange(0, D, 2, device="cuda").float() / D))
        f = torch.arange(MAX_POS, device="cuda").float()[:, None] * inv_freq[None, :]
        self.register_buffer("cache", torch.cat([f.cos(), f.sin()], -1).to(torch.bfloat16))
        self.register_buffer("qw", (torch.rand(D, device="cuda") + 0.5).to(torch.bfloat16))
        self.register_buffer("kw", (torch.rand(D, device="cuda") + 0.5).to(torch.bfloat16))

    @staticmethod
    def _norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * w

    def forward(self, positions: torch.Tensor, qkv: torch.Tensor):
        q, k, _ = qkv.split([HQ * D, HK * D, HK * D], -1)
        q = self._norm(q.view(-1, HQ, D), self.qw).view(q.shape)
        k = self._norm(k.view(-1, HK, D), self.kw).view(k.shape)
        cos, sin = self.cache[positions].chunk(2, dim=-1)
        return self.rope(q, k, cos, sin, SECTIONS, D, D, True, True)


def measure(t: int, args: argparse.Namespace) -> dict:
    torch._dynamo.reset()
    backend.clear_reports()
    model = Qwen3VLRope()
    positions = torch.randint(0, MAX_POS, (3, t), device="cuda")
    qkv = torch.randn(t, (HQ + 2 * HK) * D, device="cuda", dtype=torch.bfloat16)
    ind = torch.compile(model, dynamic=False)
    mine = torch.compile(model, dynamic=False, backend="irfuse", options={
        "optimization_level": 2, "pass_config": {"enable_qk_norm_rope_fusion": True}})
    with torch.no_grad():
        want = model(positions, qkv)
        checks = {}
        for name, fn in (("inductor", ind), ("irfuse", mine)):
            got = fn(positions, qkv)
            far = [qk._close(a.view(-1, D), b.view(-1, D)) for a, b in zip(got, want, strict=True)]
            off = sum(int((a != b).sum()) for a, b in zip(got, want, strict=True))
            checks[name] = f"{off} off" if not any(far) else f"MISMATCH {far}"
        fused = sum(r.fused("enable-qk-norm-rope-fusion") for r in backend.reports())
        us = nq.interleaved_us({"inductor": lambda: ind(positions, qkv),
                                "irfuse": lambda: mine(positions, qkv)}, args.rep, args.rounds)
    nbytes = 2 * 2 * t * (HQ + HK) * D
    return {"T": t, "fused": fused, "checks": checks, **us,
            "copy": nq.same_size_copy_us(nbytes, args.rep)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, nargs="*", default=list(DEFAULT_TOKENS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rep", type=int, default=100)
    p.add_argument("--vllm-mrope", help="vLLM's mrope.py: its kernel is the baseline's")
    args = p.parse_args(argv)
    if args.vllm_mrope:
        Qwen3VLRope.rope = staticmethod(vllm_triton_mrope(args.vllm_mrope))
    import torch._dynamo

    torch._dynamo.config.recompile_limit = 64
    kernel = "vLLM's" if args.vllm_mrope else "the stand-in"
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {kernel} MRoPE kernel")
    print("| T | fused | checks | Inductor µs | irfuse µs | Inductor / irfuse | copy µs |")
    print("|---|---|---|---|---|---|---|")
    for t in args.tokens:
        r = measure(t, args)
        ok = " / ".join(f"{k} {v}" for k, v in r["checks"].items())
        print(f"| {t} | {r['fused']} | {ok} | {r['inductor']:.2f} | {r['irfuse']:.2f} | "
              f"{r['inductor'] / r['irfuse']:.2f}x | {r['copy']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
