"""Why a cache write into vLLM's FP8 cache costs more than into a bf16 one: MLA's RoPE + latent
write and QK norm + RoPE + paged write, each timed over a bf16 and an FP8 cache in one process
(CUDA-graph replay and plain launches, PDL on and off), with the compiled kernels' registers,
spills and the PTX instructions an FP8 store adds; beside each, the split the one launch replaces
inside vLLM (the paged write: irfuse's norm + RoPE kernel, then a one-launch write stand-in; MLA:
the Triton rope alone, to which vLLM's `concat_and_cache_mla` would add a launch).

`--div` picks how the kernels divide by the FP8 scale: `rn_by` (theirs, `norm_quant.div_rn_by`),
`rn` (an IEEE division of each element, `tl.math.div_rn`: the same bits, what the kernels did
first) or `mul` (`x * (1 / scale)`: not torch's bits, a floor for the timing); the kernels'
`_to_store` is replaced before anything compiles.

    PYTHONPATH=. python3 benchmarks/probe_fp8_write.py [--div rn_by|rn|mul]
"""

from __future__ import annotations

import argparse
import re
import sys

import torch
import triton
import triton.language as tl
import triton.testing

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench_mla_rope_cache as mla  # noqa: E402 (the benchmark's cases, by path)
import bench_qk_norm_rope as qk  # noqa: E402
import vllm_standin  # noqa: E402

from irfuse.kernels import mla_rope_cache, qk_norm_rope  # noqa: E402
from irfuse.kernels.qk_norm_rope import RopeConfig  # noqa: E402


@triton.jit
def _to_store_div_rn(x, scale, FP8: tl.constexpr, DST: tl.constexpr):
    y = x
    if FP8:
        y = tl.minimum(tl.maximum(tl.math.div_rn(x.to(tl.float32), scale), -448.0), 448.0)
    return y.to(DST)


@triton.jit
def _to_store_mul(x, scale, FP8: tl.constexpr, DST: tl.constexpr):
    y = x
    if FP8:
        y = tl.minimum(tl.maximum(x.to(tl.float32) * (1.0 / scale), -448.0), 448.0)
    return y.to(DST)


DIVISIONS = {"rn_by": None, "rn": _to_store_div_rn, "mul": _to_store_mul}
"""`--div`: the `_to_store` the kernels compile with (None: their own)."""


def graph_us(fn) -> float:
    fn()
    torch.cuda.synchronize()
    return triton.testing.do_bench_cudagraph(fn, rep=20, return_mode="median") * 1e3


def plain_us(fn) -> float:
    fn()
    torch.cuda.synchronize()
    return triton.testing.do_bench(fn, rep=20, return_mode="median") * 1e3


def kernels(jit) -> list:
    """The compiled specializations of a Triton JIT function (Triton 3.x's device caches)."""
    found = []
    for entry in getattr(jit, "device_caches", {}).values():
        cache = entry[0] if isinstance(entry, tuple) else entry
        found += list(cache.values())
    return found


def describe(jit) -> None:
    for k in kernels(jit):
        ptx = k.asm.get("ptx", "")
        ops = {name: len(re.findall(pat, ptx)) for name, pat in (
            ("div", r"\bdiv\.rn\.f32|\bdiv\.full|\brcp\."), ("cvt e4m3", r"cvt\.[a-z.]*e4m3"),
            ("st.global", r"\bst\.global"), ("ld.global", r"\bld\.global"),
            ("call", r"\bcall\b"))}
        fp8 = "FP8" in str(getattr(k, "src", "")) or "e4m3" in ptx
        print(f"  {jit.fn.__name__}: regs {k.n_regs} spills {k.n_spills} "
              f"{'fp8' if fp8 else 'bf16'} ptx lines {ptx.count(chr(10))} {ops}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--div", choices=sorted(DIVISIONS), default="rn_by")
    args = parser.parse_args(argv)
    store = DIVISIONS[args.div]
    if store is not None:  # both modules' kernels look `_to_store` up when they first compile
        qk_norm_rope._to_store = mla_rope_cache._to_store = store
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__,
          f"division by the FP8 scale: {args.div}", flush=True)
    print("MLA RoPE + latent write (µs): heads T | bf16 graph / plain | fp8 graph / plain "
          "| fp8 no-PDL graph | the Triton rope alone (graph: the split's first launch, before "
          "vLLM's concat_and_cache_mla)", flush=True)
    for heads in (16, 128):
        for t in (1, 256, 4096):
            row = []
            for fp8 in (False, True):
                d = mla.make(t, heads, fp8)
                row += [graph_us(lambda d=d: mla.irfuse(d)), plain_us(lambda d=d: mla.irfuse(d))]
            d = mla.make(t, heads, True)
            no_pdl = RopeConfig(2, 16, 4, pdl=False)
            row.append(graph_us(lambda d=d, c=no_pdl: mla.irfuse(d, c)))
            row.append(graph_us(lambda d=d: qk_norm_rope.qk_norm_rope(
                d["q_pe"], d["k_pe"], None, None, None, None, d["pos"], d["table"], eps=0.0,
                is_neox=False, rotary_dim=mla.ROPE)))
            print(f"  {heads} {t} | " + " | ".join(f"{x:.1f}" for x in row), flush=True)
    describe(mla_rope_cache._mla_rope_cache_kernel)
    print("QK norm + RoPE + paged write (µs): T | bf16 graph / plain | fp8 graph / plain | "
          "split: norm + RoPE kernel, then a one-launch bf16 write (graph)", flush=True)
    for t in (1, 256, 1024):
        row = []
        for fp8 in (False, True):
            qk.FP8_CACHE[0] = fp8
            d = qk.make(t, True)
            row += [graph_us(lambda d=d: qk.irfuse_kv(d, None)),
                    plain_us(lambda d=d: qk.irfuse_kv(d, None))]
        qk.FP8_CACHE[0] = False
        d = qk.make(t, True)
        _, k, v = (x.view(t, -1, qk.D) for x in d["qkv"].split(
            [qk.HQ * qk.D, qk.HK * qk.D, qk.HK * qk.D], dim=-1))
        kc, vc = d["kv"].unbind(0)

        def split(d=d, k=k, v=v, kc=kc, vc=vc):
            qk.irfuse(d, None)
            vllm_standin.write_kv(k, v, kc, vc, d["slots"])

        row.append(graph_us(split))
        print(f"  {t} | " + " | ".join(f"{x:.1f}" for x in row), flush=True)
    for name in dir(qk_norm_rope):
        obj = getattr(qk_norm_rope, name)
        if hasattr(obj, "device_caches") and kernels(obj):
            describe(obj)
    return 0


if __name__ == "__main__":
    sys.exit(main())
