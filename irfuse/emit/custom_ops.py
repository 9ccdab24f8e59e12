"""The `irfuse::` torch.library ops, registered from their declarations: the library ops
(`irfuse.fusions.library_ops`) and every fusion's kernels (`irfuse.fusions`).

All ops are functional (new tensors, never views of their inputs). Each has its torch reference
on the CPU, its CUDA implementation (what its declared choice selects, normally the Triton
kernel), and a fake with the real outputs' shapes, dtypes and strides, so Dynamo, aot_autograd,
Inductor and CUDA graphs can trace and plan around it. Outputs are contiguous, except per-group
scales with `col_major=True` (token index fastest) and NVFP4 block scales (swizzled 128x4).
Inputs must be bf16, fp16 or fp32; an unsupported dtype or a group size that does not divide H
raises a ValueError, from the fake too, so a compile fails early. Importing this module imports
torch and the fusions' declarations (IR included); Triton and the kernels load on the first CUDA
call, FlashInfer on the first call that selects it.
"""

from __future__ import annotations

import re

from torch.library import custom_op

from irfuse.emit.kernel_choice import kernels
from irfuse.fusions.declare import Kernel

NAMESPACE = "irfuse"


def _written(schema: str) -> tuple[str, ...]:
    """The arguments a schema marks as written in place (`Tensor(a!) k_cache`)."""
    return tuple(re.findall(r"Tensor\(\w+!\) (\w+)", schema))


def _define(k: Kernel) -> object:
    op = custom_op(f"{NAMESPACE}::{k.name}", k.reference, mutates_args=_written(k.schema),
                   device_types="cpu", schema=k.schema)
    op.register_kernel("cuda")(k.cuda)
    op.register_fake(k.fake)
    return op


OPS: dict[str, object] = {name: _define(k) for name, k in kernels().items()}
"""Op name (without the namespace) -> its torch.library custom op."""
