"""Every pass irfuse-opt and the pipeline know, by name, loaded lazily.

Names are the CLI names (kebab case; fusion passes are their PassConfig flag in kebab case).
A pass module is imported only when the pass is asked for, so `irfuse-opt --help` stays fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.passes import ModulePass

PASS_MODULES: dict[str, tuple[str, str]] = {
    # xDSL's generic clean-ups.
    "cse": ("xdsl.transforms.common_subexpression_elimination", "CommonSubexpressionElimination"),
    "dce": ("xdsl.transforms.dead_code_elimination", "DeadCodeElimination"),
    # Canonicalization before raising: exact clean-ups that let more code match.
    "cse-pure": ("irfuse.rewrites.cse_pure", "CsePure"),
    # Raising (stage 3): ATen chains -> semantic ops.
    "raise-vllm-ops": ("irfuse.lowering.raise_vllm_ops", "RaiseVllmOps"),
    "raise-collectives": ("irfuse.lowering.raise_collectives", "RaiseCollectives"),
    "raise-attention": ("irfuse.lowering.raise_attention", "RaiseAttention"),
    "raise-kv-cache-write": ("irfuse.lowering.raise_kv_cache_write", "RaiseKvCacheWrite"),
    "raise-rms-norm": ("irfuse.lowering.raise_rms_norm", "RaiseRmsNorm"),
    "raise-gemm": ("irfuse.lowering.raise_gemm", "RaiseGemm"),
    "raise-quant": ("irfuse.lowering.raise_quant", "RaiseQuant"),
    "raise-silu-mul": ("irfuse.lowering.raise_silu_mul", "RaiseSiluMul"),
    "raise-rope": ("irfuse.lowering.raise_rope", "RaiseRope"),
    "raise-pad": ("irfuse.lowering.raise_pad", "RaisePad"),
    # Fusion (stage 4): one pass per PassConfig flag.
    "eliminate-noops": ("irfuse.rewrites.eliminate_noops", "EliminateNoops"),
    "fuse-norm-quant": ("irfuse.rewrites.fuse_norm_quant", "FuseNormQuant"),
    "fuse-act-quant": ("irfuse.rewrites.fuse_act_quant", "FuseActQuant"),
    # Emit: fused ops -> kernel calls.
    "select-kernels": ("irfuse.emit.select_kernels", "SelectKernels"),
}
"""Pass name -> (module, class). Raising and fusion passes register themselves below."""


class UnknownPass(KeyError):
    def __str__(self) -> str:
        return f"unknown pass '{self.args[0]}'; known passes: {', '.join(sorted(PASS_MODULES))}"


def pass_class(name: str) -> type[ModulePass]:
    if name not in PASS_MODULES:
        raise UnknownPass(name)
    module, cls = PASS_MODULES[name]
    return getattr(importlib.import_module(module), cls)


def instantiate(spec: str) -> ModulePass:
    """A pass from its pipeline spec, `name` or `name{option=value ...}` (irfuse-opt's syntax)."""
    from xdsl.utils.arg_spec import parse_spec

    parsed = parse_spec(spec)
    return pass_class(parsed.name).from_spec(parsed)


def spec_name(spec: str) -> str:
    """The pass name of a pipeline spec."""
    return spec.split("{", 1)[0].strip()


def factories() -> dict[str, Callable[[], type[ModulePass]]]:
    """Lazy factories, the form xDSL's pass pipeline parser takes."""
    return {name: (lambda n=name: pass_class(n)) for name in PASS_MODULES}
