"""Every fusion and utility rewrite, declared one a file, in pipeline order: vLLM's pass order,
except that enable-qk-norm-rope-fusion runs before fuse-rope-kvcache, so that with both on the
norms, the rope and the cache write become one kernel. As in vLLM 0.32, fuse-qk-norm-rope-kvcache
runs before both (it takes the layers with all three first), fuse-mla-dual-rms-norm next, and
fuse-rope-kvcache-cat-mla after fuse-rope-kvcache.

Adding a fusion: write its folder (`<flag>/__init__.py`, the declaration, light metadata;
`<flag>/pattern.py`, its patterns; `<flag>/ops.py`, its kernels' typed references and lowerings,
if it has kernels), its Triton kernel and torch reference (irfuse/kernels/), its measured
choices (`choices/<platform>.toml`), and add it to FUSIONS below: the PassConfig, the support
matrix, the pass registry, custom-op registration and select-kernels read it from there.
Importing this package imports the declarations only (`declare.Fusion.load` imports the rest).
"""

from __future__ import annotations

from irfuse.fusions import (
    eliminate_noops,
    enable_qk_norm_rope_fusion,
    enable_sp,
    fuse_act_padding,
    fuse_act_quant,
    fuse_allreduce_rms,
    fuse_attn_quant,
    fuse_gemm_comms,
    fuse_mla_dual_rms_norm,
    fuse_norm_quant,
    fuse_qk_norm_rope_kvcache,
    fuse_rope_kvcache,
    fuse_rope_kvcache_cat_mla,
)
from irfuse.fusions.declare import Fusion

FUSIONS: tuple[Fusion, ...] = tuple(m.FUSION for m in (
    eliminate_noops, enable_sp, fuse_gemm_comms, fuse_allreduce_rms, fuse_norm_quant,
    fuse_act_quant, fuse_act_padding, fuse_qk_norm_rope_kvcache, fuse_mla_dual_rms_norm,
    enable_qk_norm_rope_fusion, fuse_rope_kvcache, fuse_rope_kvcache_cat_mla, fuse_attn_quant,
))
