"""GeGLU (`gelu(gate) * up`, Gemma's MLP) -> FP8 static / FP8 per-group 128 / NVFP4: irfuse's
fused Triton kernel against Inductor on the unfused torch code (the reference, compiled per
shape), CUDA-graph replay, medians of interleaved rounds. The HBM floor beside them: the bytes the
op must move (read [T, 2I] in the model dtype, write the codes and scales) at the card's measured
copy bandwidth.

    PYTHONPATH=. python3 benchmarks/bench_geglu_quant.py [--tokens 16,1024,8192] [--width 14336]
"""

from __future__ import annotations

import argparse
import functools
import statistics

import torch
import triton.testing

from irfuse.kernels import act_quant, act_quant_ref, nvfp4

FP8 = torch.float8_e4m3fn


def cases(activation: str):
    """(scheme, irfuse's kernel, the unfused reference) for `activation`."""
    return (
        ("fp8 static",
         lambda x, s: act_quant.silu_mul_quant_fp8_static(x, s, FP8, activation=activation),
         lambda x, s: act_quant_ref.silu_mul_quant_fp8_static(x, s, FP8, activation=activation)),
        ("fp8 group 128",
         lambda x, s: act_quant.silu_mul_quant_fp8_group(x, 128, False, False, FP8,
                                                         activation=activation),
         lambda x, s: act_quant_ref.silu_mul_quant_fp8_group(x, 128, False, False, FP8,
                                                             activation=activation)),
        ("nvfp4",
         lambda x, s: nvfp4.silu_mul_quant_nvfp4(x, s, activation=activation),
         lambda x, s: act_quant_ref.silu_mul_quant_nvfp4(x, s, activation=activation)),
    )


def copy_bandwidth() -> float:
    """Bytes per µs of a 1 GiB device-to-device copy."""
    a = torch.empty(1 << 29, dtype=torch.float16, device="cuda")
    b = torch.empty_like(a)
    us = triton.testing.do_bench_cudagraph(lambda: b.copy_(a), rep=50) * 1e3
    return 2 * a.numel() * a.element_size() / us


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", default="16,1024,8192")
    p.add_argument("--width", type=int, default=14336, help="I: the up projection's width")
    p.add_argument("--activations", default="gelu_tanh,gelu")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}; copy {bw / 1e6:.2f} TB/s")
    print("| activation | scheme | T | Inductor µs | irfuse µs | irfuse / Inductor | floor µs |")
    print("|---|---|---|---|---|---|---|")
    scale = torch.tensor([0.05], device="cuda")
    for activation in args.activations.split(","):
        for scheme, fused, ref in cases(activation):
            for t in (int(v) for v in args.tokens.split(",")):
                x = torch.randn(t, 2 * args.width, device="cuda", dtype=torch.bfloat16)
                inductor = torch.compile(ref, dynamic=False)
                got, want = fused(x, scale), inductor(x, scale)
                for g, w in zip(got if isinstance(got, tuple) else (got,),
                                want if isinstance(want, tuple) else (want,), strict=True):
                    assert g.shape == w.shape and g.dtype == w.dtype, (scheme, g.shape, w.shape)
                times = {"inductor": [], "irfuse": []}
                calls = {"inductor": functools.partial(inductor, x, scale),
                         "irfuse": functools.partial(fused, x, scale)}
                for _ in range(args.rounds):  # interleaved
                    for name, fn in calls.items():
                        times[name].append(triton.testing.do_bench_cudagraph(fn, rep=30))
                ind, irf = (statistics.median(times[k]) * 1e3 for k in ("inductor", "irfuse"))
                out_bytes = sum(o.numel() * o.element_size() for o in
                                (got if isinstance(got, tuple) else (got,)))
                floor = (x.numel() * x.element_size() + out_bytes) / bw
                print(f"| {activation} | {scheme} | {t} | {ind:.1f} | {irf:.1f} | "
                      f"{irf / ind:.2f} | {floor:.1f} |")


if __name__ == "__main__":
    main()
