"""Leave-one-out timing of add + RMSNorm + FP8 group 128 (H 4096): where its time goes.

A probe kernel with the production group kernel's tile ([H / 128, 128], one row a program, PDL)
takes out, in turn, the group arithmetic (amax, scale, division: a static quant instead) and the
scale store (none; `tl.store`, which Triton routes through shared memory; or inline PTX, each
group's scale stored by the thread holding its first column, no exchange). They are timed
beside the production static and group kernels, CUDA-graph replay, interleaved rounds. Probe
outputs with the group quant and a store are checked against the production kernel's bits at
8 warps (16 warps change the order of the sum of squares). The probe is for measurement only:
its inline-PTX store assumes 8 contiguous elements a thread (bf16, H a multiple of 1024).

    PYTHONPATH=. python3 benchmarks/group_kernel_parts.py --rounds 5
"""

from __future__ import annotations

import argparse
import itertools
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench_norm_act_quant as bench  # noqa: E402 (the benchmark's op table, by path)

from irfuse.kernels import norm_quant as nq  # noqa: E402
from irfuse.kernels.triton_support import await_previous_kernel, pdl_launch  # noqa: E402

# One predicated 32-bit store per 8 elements (the first one's flag), 8 dummy results.
_STORE_ASM = tl.constexpr("{ .reg .pred p; setp.ne.b32 p, $24, 0; @p st.global.b32 [$16], $8; "
                          + "".join(f"mov.b32 ${i}, 0; " for i in range(8)) + "}")
_STORE_CONSTRAINTS = tl.constexpr(",".join(["=r"] * 8 + ["r"] * 8 + ["l"] * 8 + ["r"] * 8))
QUANTS = {"static quant": 1, "group quant": 2}
STORES = {"no scale store": 0, "tl.store": 1, "inline-PTX store": 2}


@triton.jit
def _probe_kernel(x_ptr, res_ptr, w_ptr, res_out_ptr, q_ptr, s_ptr, H, eps,
                  BLOCK_G: tl.constexpr, GROUP: tl.constexpr, QUANT: tl.constexpr,
                  STORE: tl.constexpr, PDL: tl.constexpr):
    await_previous_kernel(PDL)
    groups = tl.arange(0, BLOCK_G)
    cols = groups[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    mask = cols < H
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    row = tl.program_id(0).to(tl.int64)
    x = tl.load(x_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32)
    x += tl.load(res_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(res_out_ptr + row * H + cols, x.to(res_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.math.rsqrt(tl.sum(tl.sum(x * x, axis=1), axis=0) / H + eps)
    y = nq._apply_weight(x * rstd, w, 0.0, x_ptr, False, False)
    if QUANT == 1:  # a constant scale: no amax, no division
        scaled = y * 50.0
        s = tl.full([BLOCK_G], 0.02, tl.float32)
    else:
        s = nq.group_scales(tl.max(tl.abs(y), axis=1), 448.0, 1.0 / (448.0 * 512.0), False)
        scaled = nq.div_rn_by(y, s[:, None], tl.math.div_rn(1.0, s)[:, None], False)
    v = tl.minimum(tl.maximum(scaled, -448.0), 448.0)
    tl.store(q_ptr + row * H + cols, v.to(q_ptr.dtype.element_ty), mask=mask)
    if STORE == 1:
        tl.store(s_ptr + row * BLOCK_G + groups, s)
    if STORE == 2:
        ptrs = s_ptr + row * BLOCK_G + groups[:, None] + 0 * cols
        first = ((cols % GROUP) == 0).to(tl.int32)
        bits = (s[:, None] + 0.0 * y).to(tl.int32, bitcast=True)
        tl.inline_asm_elementwise(_STORE_ASM, _STORE_CONSTRAINTS, [bits, ptrs, first],
                                  dtype=tl.int32, is_pure=False, pack=8)


def time_parts(t: int, h: int, rounds: int, rep: int) -> dict[str, float] | None:
    """Median µs of every probe and of the two production kernels at `t` tokens; None if a
    probe that should give the production kernel's bits does not."""
    specs = bench.op_specs()
    group, static = specs["add_rms_group128"], specs["add_rms_static"]
    d = group.make(t, h)
    q = torch.empty(t, h, dtype=torch.float8_e4m3fn, device=d["x"].device)
    s = torch.empty(t, h // 128, device=d["x"].device)
    res_out = torch.empty_like(d["x"])
    ref_q, ref_s, _ = group.kernel(d, None)

    def probe(quant: int, store: int, warps: int) -> None:
        _probe_kernel[(t,)](d["x"], d["r"], d["w"], res_out, q, s, h, bench.EPS,
                            BLOCK_G=h // 128, GROUP=128, QUANT=quant, STORE=store,
                            **pdl_launch(True, d["x"].device), num_warps=warps)

    fns = {"production static kernel": lambda: static.kernel(d, None),
           "production group kernel": lambda: group.kernel(d, None)}
    for (qn, quant), (sn, store), warps in itertools.product(QUANTS.items(), STORES.items(),
                                                             (8, 16)):
        probe(quant, store, warps)
        if quant == 2 and store and warps == 8:
            same = (torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))
                    and torch.equal(s, ref_s))
            print(f"T {t}: {qn}, {sn}, 8 warps: production's bits: {same}", flush=True)
            if not same:
                return None
        fns[f"probe: {qn}, {sn}, {warps} warps"] = lambda a=(quant, store, warps): probe(*a)
    return bench.interleaved_us(fns, rep, rounds)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default="4096,16384")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rep", type=int, default=10, help="ms of replays per measurement")
    args = p.parse_args(argv)
    tokens = [int(t) for t in args.tokens.split(",")]
    rows: dict[str, dict[int, float]] = {}
    for t in tokens:
        us = time_parts(t, 4096, args.rounds, args.rep)
        if us is None:
            return 1
        for name, v in us.items():
            rows.setdefault(name, {})[t] = v
    print("\n| kernel | " + " | ".join(f"T {t} (µs)" for t in tokens) + " |")
    print("|---|" + "---|" * len(tokens))
    for name, by_t in sorted(rows.items(), key=lambda kv: kv[1][tokens[0]]):
        print(f"| {name} | " + " | ".join(f"{by_t[t]:.2f}" for t in tokens) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
