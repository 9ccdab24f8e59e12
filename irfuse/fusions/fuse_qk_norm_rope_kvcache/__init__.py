"""fuse_qk_norm_rope_kvcache (vLLM 0.32): per-head RMSNorm of q and k -> RoPE -> the paged
KV-cache write, in one kernel, for ranges up to rope_kvcache_fusion_max_token_num tokens.

vLLM's meaning: it supersedes enable_qk_norm_rope_fusion and fuse_rope_kvcache for the layers
that have all three (its pass runs before theirs and takes those sites); they still apply where it
does not (a layer without QK norm, ranges past the token limit for QK norm + RoPE). vLLM runs it
only on ROCm with AITER (`QkNormRopeKvCacheFusionPass`, on from O2 with the rotary_embedding
custom op). Here the kernel is fuse-rope-kvcache's `rope_kv_cache_write` given the norm weights
(its lowering, its Triton kernel and its torch reference; `irfuse/kernels/qk_norm_rope.py`), so
this declaration adds a pattern, not a kernel: the flag selects that kernel without the two
separate flags. Opt-in on every platform: the kernel was measured on sm90 (5.37-8.34x
Inductor's code), where O1 already turns both separate flags on, which gives the same kernel.
"""

from __future__ import annotations

from irfuse.fusions.declare import Fusion, everywhere
from irfuse.fusions.fuse_qk_norm_rope_kvcache.pattern import QkNormRopeKvCachePattern
from irfuse.fusions.fuse_rope_kvcache import ROPE_KV, ROPE_KV_FLASH

FUSION = Fusion(
    name="fuse-qk-norm-rope-kvcache",
    flag="fuse_qk_norm_rope_kvcache",
    kind="fusion",
    fuses="per-head RMSNorm of q and k -> RoPE -> KV-cache write",
    quant="independent",
    schemes=(),
    range_rule="up-to-rope-kvcache-max",
    platforms=everywhere("triton", None),
    vllm_pass="QkNormRopeKvCacheFusionPass",
    note="vLLM 0.32; supersedes enable-qk-norm-rope-fusion and fuse-rope-kvcache where a layer "
    "has all three; opt-in (on sm90 O1 turns on those two, which give the same kernel); vLLM "
    "turns it on from O2 only on ROCm with AITER and its rotary_embedding custom op",
    patterns=(QkNormRopeKvCachePattern(),),
    kernels=(ROPE_KV, ROPE_KV_FLASH),  # fuse-rope-kvcache's: its lowering emits them
)
