"""Compile the row kernel of (add +) RMSNorm + FP8 (static, per-token or, with --group, per
group) for sm90 on a machine without a GPU and print its memory, barrier and shuffle
instructions and its register use.

Where loads sit relative to the reduction's barrier, and how many registers a launch shape
takes (so how many programs share a multiprocessor), can be read before spending device time,
and so can a layout conversion (tensors of one row held in two register layouts are exchanged
through shared memory: `STS`/`LDS` and a `BAR.SYNC` beyond the reductions' own):
Triton builds the cubin with its own ptxas, and cuobjdump (shipped with Triton) disassembles it.

    python benchmarks/sass_rows.py --hidden 4096 --warps 16 [--rows 1] [--early] [--no-evict]
        [--no-residual] [--per-token | --group 128] [--vec 8] [--pdl]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from irfuse.kernels import norm_quant
from irfuse.kernels.triton_support import cache_hints

PTRS = {"x_ptr": "*bf16", "res_ptr": "*bf16", "w_ptr": "*bf16", "y_ptr": "*bf16",
        "res_out_ptr": "*bf16", "q_ptr": "*fp8e4nv", "s_ptr": "*fp32",
        **{f"q{i}_ptr": "*fp8e4nv" for i in range(4)},
        **{f"s{i}_ptr": "*fp32" for i in range(4)}, "ub_ptr": "*fp32"}
INTERESTING = re.compile(r"\b(LDG|STG|BAR|SHFL|LDS|STS|EXIT|ACQBULK|PREEXIT)\b")


def compile_rows(hidden: int, warps: int, early: bool, evict: bool, rows: int = 1,
                 residual: bool = True, per_token: bool = False, group: int = 0,
                 vec: int = 0, pdl: bool = False) -> bytes:
    """The cubin of `_norm_rows_kernel` (one static FP8 output, or per-token FP8) or, with
    `group`, of `_norm_group_kernel`; `vec`: the kernels' VEC hint; `pdl`: their PDL constexpr
    (programmatic dependent launch)."""
    common = dict(HAS_RES=residual, WEIGHT_F32=False, HAS_OFFSET=False, FP8_MAX=448.0,
                  MIN_SCALE=1.0 / (448.0 * 512.0), ROUND_SUM=False, EARLY=early, **cache_hints(evict), VEC=vec, PDL=pdl)
    if group:
        fn = norm_quant._norm_group_kernel
        consts = dict(common, UE8M0=False, BLOCK_G=triton.next_power_of_2(hidden // group),
                      GROUP=group, FAST_DIV=True)
    else:
        fn = norm_quant._norm_rows_kernel
        consts = dict(common, NORM=True, QUANT=2 if per_token else 1, NUM_OUT=1, HAS_UB=False,
                      ROWS=rows, BLOCK_H=triton.next_power_of_2(hidden), DIVIDE=False,
                      FAST_DIV=per_token)
    names = fn.arg_names
    sig = {n: "constexpr" if n in consts else PTRS.get(n, "fp32" if n in ("eps", "weight_offset")
                                                        else "i32") for n in names}
    aligned = [n for n in names
               if n in PTRS or n in ("H", "stride_x", "stride_res", "stride_s_row")]
    src = ASTSource(fn, sig, constexprs={(names.index(k),): v for k, v in consts.items()},
                    attrs={(names.index(n),): [["tt.divisibility", 16]] for n in aligned})
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": warps})
    return kernel.asm["cubin"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--warps", type=int, default=16)
    p.add_argument("--early", action="store_true")
    p.add_argument("--no-evict", action="store_true")
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--no-residual", action="store_true")
    p.add_argument("--per-token", action="store_true")
    p.add_argument("--group", type=int, default=0, help="the per-group kernel, this group size")
    p.add_argument("--vec", type=int, default=0, help="elements per thread hint (VEC)")
    p.add_argument("--pdl", action="store_true", help="programmatic dependent launch (PDL)")
    args = p.parse_args(argv)
    cubin = compile_rows(args.hidden, args.warps, args.early, not args.no_evict, args.rows,
                         not args.no_residual, args.per_token, args.group, args.vec,
                         args.pdl)
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        usage = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True,
                               check=True).stdout
        sass = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True,
                              check=True).stdout
    print(next((line.strip() for line in usage.splitlines() if "REG:" in line), usage))
    for line in sass.splitlines():
        if INTERESTING.search(line):
            print(line.split(";")[0].strip() + ";")
    return 0


if __name__ == "__main__":
    sys.exit(main())
