"""User Triton kernels in a graph: the `triton_kernel_wrapper_functional` (or `_mutation`) calls
Dynamo makes of a `@triton.jit` kernel launched from Python (vLLM's CUDA MRoPE is one).

Such a call names its kernel and its constant arguments by index into torch's per-process side
table. Import records the kernel's qualified name on the call as the `kernel` attribute, so that a
dump says which kernel runs and raising can recognize one; `constant_args` reads the constants
back (in the process that traced them).
"""

from __future__ import annotations

import types
from typing import Any

import torch.fx
from torch._higher_order_ops.triton_kernel_wrap import (
    kernel_side_table,
    triton_kernel_wrapper_functional,
    triton_kernel_wrapper_mutation,
)

KERNEL_ATTR = "kernel"
"""Attribute of an imported user-kernel call: the kernel's `module.qualname`."""

WRAPPERS = (triton_kernel_wrapper_functional, triton_kernel_wrapper_mutation)


def kernel_name(node: torch.fx.Node) -> str | None:
    """The `module.qualname` of the Triton kernel a wrapper call launches (None for other
    nodes, or where the side table no longer holds it)."""
    if node.op != "call_function" or node.target not in WRAPPERS:
        return None
    try:
        kernel: Any = kernel_side_table.get_kernel(node.kwargs["kernel_idx"])
    except (AssertionError, KeyError):
        return None
    while not isinstance(kernel, types.FunctionType) and hasattr(kernel, "fn"):
        kernel = kernel.fn  # an autotuner or heuristics holds the JIT function, which holds it
    module, name = getattr(kernel, "__module__", None), getattr(kernel, "__qualname__", None)
    return f"{module}.{name}" if module and name else None


def constant_args(index: int) -> dict[str, Any]:
    """The constant (non-tensor, non-symbolic) arguments a wrapper call's `constant_args_idx`
    names."""
    return dict(kernel_side_table.get_constant_args(index))
