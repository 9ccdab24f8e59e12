"""Platform thresholds the config and the compile ranges read: FlashInfer's all-reduce size cap
per compute capability and TP size, and where sequence parallelism pays.

They are vLLM's measured values (H100/B200): the SP threshold is 8 MiB of activations per GPU on
sm90, for hidden sizes of 8192 and up. irfuse keeps them until it measures its own.
"""

from __future__ import annotations

from irfuse.platform import Platform

MiB = 1024 * 1024

# FlashInfer all-reduce fusion: largest all-reduced tensor (MB) per capability and TP size.
FI_ALLREDUCE_FUSION_MAX_SIZE_MB: dict[int, dict[int, float]] = {
    90: {2: 64, 4: 2, 8: 0.5},
    100: {2: 64, 4: 32, 8: 1},
}
# TP sizes FlashInfer's fused all-reduce workspace supports (as vLLM configures it).
FI_ALLREDUCE_WORLD_SIZES: tuple[int, ...] = (2, 4, 8)

# Sequence parallelism pays once each GPU holds at least this much activation (MB), and only
# for hidden sizes from SP_MIN_HIDDEN_SIZE up; per compute capability, CUDA only.
SP_MIN_HIDDEN_SIZE: dict[int, int] = {90: 8192}
SP_MIN_PER_GPU_SIZE_MB: dict[int, float] = {90: 8}

# RoPE + KV-cache fusion pays up to this many tokens (PassConfig's default).
ROPE_KVCACHE_MAX_TOKEN_NUM = 256


def fi_allreduce_max_size_mb(platform: Platform, tp: int | None) -> float | None:
    """FlashInfer's default size cap (MB) for the fused all-reduce, or None if it has none
    for this platform and TP size (then the fusion is not turned on by default)."""
    if not platform.is_cuda or tp is None:
        return None
    return FI_ALLREDUCE_FUSION_MAX_SIZE_MB.get(platform.capability or 0, {}).get(tp)


def fi_allreduce_max_tokens(
    max_size_mb: float | None, hidden: int | None, itemsize: int | None
) -> int | None:
    """The size cap in tokens: cap_bytes // (hidden * itemsize); None without a cap."""
    if max_size_mb is None or not hidden or not itemsize:
        return None
    return int(max_size_mb * MiB) // (hidden * itemsize)


def sp_threshold(
    platform: Platform, hidden: int | None, tp: int | None, itemsize: int | None
) -> int | None:
    """The smallest num_tokens at which sequence parallelism pays, or None where it never
    does by default: off CUDA, on a capability without a measured threshold, or for hidden
    sizes below the minimum. It is the token count at which each GPU's share of the
    activations reaches the per-GPU size: size * tp // (hidden * itemsize)."""
    if not platform.is_cuda or not hidden or not tp or not itemsize:
        return None
    cap = platform.capability or 0
    min_hidden = SP_MIN_HIDDEN_SIZE.get(cap)
    per_gpu_mb = SP_MIN_PER_GPU_SIZE_MB.get(cap)
    if min_hidden is None or per_gpu_mb is None or hidden < min_hidden:
        return None
    return int(per_gpu_mb * MiB * tp // (hidden * itemsize))
