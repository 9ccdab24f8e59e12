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

from torch.library import custom_op

from irfuse.emit.kernel_choice import kernels
from irfuse.fusions.kernel_decl import Kernel

NAMESPACE = "irfuse"


def _define(k: Kernel) -> object:
    """The op of `k`: its schema and CPU implementation from its typed reference, its CUDA
    implementation and fake taking the call by name (`Kernel.run_cuda`, `Kernel.run_fake`)."""
    op = custom_op(f"{NAMESPACE}::{k.name}", k.reference, mutates_args=k.written,
                   device_types="cpu", schema=k.schema)
    op.register_kernel("cuda")(k.run_cuda)
    op.register_fake(k.run_fake)
    return op


OPS: dict[str, object] = {name: _define(k) for name, k in kernels().items()}
"""Op name (without the namespace) -> its torch.library custom op."""
