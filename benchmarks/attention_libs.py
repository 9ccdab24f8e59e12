"""Library attention baselines over irfuse's operands, for `bench_attention_quant.py`.

- `flashinfer_decode`: FlashInfer's `BatchDecodeWithPagedKVCacheWrapper` (CUDA-core, or
  tensor-core with `tensor_cores`) over the paged cache `[num_blocks, page, Hk, D]` (FlashInfer's
  NHD layout, so the very same tensors) and the block table, which becomes FlashInfer's page list
  (indptr, indices, last page lengths); planned once with `use_cuda_graph=True`, as serving
  engines run it, so the returned call can be captured and replayed.
- `flashinfer_prefill`: `BatchPrefillWithPagedKVCacheWrapper` (backend `fa2`, `fa3` or `auto`),
  causal, one sequence whose keys and values sit in a paged cache.
- `sdpa_cudnn`: `F.scaled_dot_product_attention` restricted to the cuDNN backend.

Each builder returns `(call, note)` (the call returns the attention output in the model dtype,
token-major for FlashInfer: `[tokens, Hq, D]`) or raises `Unavailable` with the reason, which the
benchmark prints in place of the row's library columns.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

WORKSPACE_BYTES = 512 << 20
_workspaces: dict[torch.device, torch.Tensor] = {}


class Unavailable(RuntimeError):
    """A library baseline that cannot run here, with the reason."""


def _flashinfer():
    try:
        import flashinfer
    except Exception as e:  # noqa: BLE001 (any import failure is a reason to print)
        raise Unavailable(f"flashinfer not importable: {type(e).__name__}: {e}") from None
    return flashinfer


def workspace(device: torch.device) -> torch.Tensor:
    """One zeroed float workspace per device, shared by the wrappers (they run one at a time)."""
    if device not in _workspaces:
        _workspaces[device] = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    return _workspaces[device]


def page_list(table: torch.Tensor, lens: torch.Tensor, page: int
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashInfer's description of the same pages: (indptr [B + 1], indices (each sequence's
    used table entries, concatenated), last_page_len [B]), int32, on the table's device; lengths
    clamped to the table row's capacity as irfuse's kernel does. Every length must be >= 1."""
    lens = lens.long().clamp(max=table.shape[1] * page)
    if bool((lens < 1).any()):
        raise Unavailable("FlashInfer's page list needs every sequence length >= 1")
    npages = (lens + page - 1) // page
    indptr = torch.zeros(lens.numel() + 1, dtype=torch.int32, device=table.device)
    indptr[1:] = torch.cumsum(npages, 0).to(torch.int32)
    used = torch.arange(table.shape[1], device=table.device)[None, :] < npages[:, None]
    indices = table[used].to(torch.int32).contiguous()
    last = (lens - (npages - 1) * page).to(torch.int32)
    return indptr, indices, last


def flashinfer_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                      table: torch.Tensor, lens: torch.Tensor, softmax_scale: float,
                      tensor_cores: bool, k_scale: float | None = None,
                      v_scale: float | None = None) -> tuple[Callable[[], torch.Tensor], str]:
    """FlashInfer's paged decode of q [B, Hq, D] over the caches (FP8 ones with `k_scale` and
    `v_scale`, as vLLM's FlashInfer backend passes them); returns (call -> [B, Hq, D], the
    backend it planned)."""
    fi = _flashinfer()
    b, hq, d = q.shape
    page, hk = k_cache.shape[1], k_cache.shape[2]
    indptr, indices, last = page_list(table, lens, page)
    try:
        w = fi.BatchDecodeWithPagedKVCacheWrapper(
            workspace(q.device), "NHD", use_cuda_graph=True, use_tensor_cores=tensor_cores,
            paged_kv_indptr_buffer=indptr, paged_kv_indices_buffer=indices,
            paged_kv_last_page_len_buffer=last)
        w.plan(indptr, indices, last, hq, hk, d, page, q_data_type=q.dtype,
               kv_data_type=k_cache.dtype, sm_scale=softmax_scale)
        out = torch.empty_like(q)

        def call() -> torch.Tensor:
            return w.run(q, (k_cache, v_cache), out=out, k_scale=k_scale, v_scale=v_scale)

        call()
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        raise Unavailable(f"FlashInfer decode ({'tensor' if tensor_cores else 'CUDA'} cores): "
                          f"{type(e).__name__}: {str(e)[:200]}") from None
    return call, getattr(w, "_backend", "?")


def flashinfer_prefill(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                       table: torch.Tensor, length: int, softmax_scale: float, backend: str
                       ) -> tuple[Callable[[], torch.Tensor], str]:
    """FlashInfer's causal paged prefill of one sequence, q [T, Hq, D] token-major over its
    first `length` cached tokens (table [1, blocks]); returns (call -> [T, Hq, D], backend)."""
    fi = _flashinfer()
    t, hq, d = q.shape
    page, hk = k_cache.shape[1], k_cache.shape[2]
    lens = torch.tensor([length], device=q.device)
    indptr, indices, last = page_list(table, lens, page)
    qo_indptr = torch.tensor([0, t], dtype=torch.int32, device=q.device)
    try:
        w = fi.BatchPrefillWithPagedKVCacheWrapper(workspace(q.device), "NHD", backend=backend)
        w.plan(qo_indptr, indptr, indices, last, hq, hk, d, page, causal=True,
               sm_scale=softmax_scale, q_data_type=q.dtype, kv_data_type=k_cache.dtype)
        out = torch.empty_like(q)

        def call() -> torch.Tensor:
            return w.run(q, (k_cache, v_cache), out=out)

        call()
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        raise Unavailable(f"FlashInfer prefill ({backend}): {type(e).__name__}: "
                          f"{str(e)[:200]}") from None
    return call, getattr(w, "_backend", backend)


def sdpa_cudnn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float
               ) -> tuple[Callable[[], torch.Tensor], str]:
    """Causal SDPA on q/k/v [B, H, T, D] through the cuDNN backend only; with GQA it first
    tries `enable_gqa`, then K and V expanded to the query heads beforehand (not timed; noted)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def make(kk: torch.Tensor, vv: torch.Tensor, gqa: bool) -> Callable[[], torch.Tensor]:
        def call() -> torch.Tensor:
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(q, kk, vv, is_causal=True,
                                                      scale=softmax_scale, enable_gqa=gqa)
        return call

    group = q.shape[1] // k.shape[1]
    tries = [(make(k, v, group > 1), "enable_gqa")]
    if group > 1:
        tries.append((make(k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), False),
                      "K/V expanded to Hq beforehand"))
    reasons = []
    for call, note in tries:
        try:
            call()
            torch.cuda.synchronize()
            return call, note
        except Exception as e:  # noqa: BLE001
            reasons.append(f"{note}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
    raise Unavailable("SDPA cuDNN: " + "; ".join(reasons))


def warm(head_dim: int = 128) -> list[str]:
    """Build FlashInfer's decode (CUDA-core, tensor-core) and paged prefill (fa2, fa3) modules
    for bf16 and `head_dim` once (nvcc, tens of seconds each), so that timing never waits on a
    build; returns one line per module."""
    out = []
    dev = torch.device("cuda")
    kc = torch.randn(4, 16, 1, head_dim, device=dev, dtype=torch.bfloat16)
    table = torch.arange(4, device=dev, dtype=torch.int32).reshape(1, 4)
    lens = torch.tensor([50], device=dev, dtype=torch.int32)
    q = torch.randn(1, 4, head_dim, device=dev, dtype=torch.bfloat16)
    for tc in (False, True):
        try:
            _, backend = flashinfer_decode(q, kc, kc, table, lens, 0.1, tc)
            out.append(f"decode tensor_cores={tc}: built ({backend})")
        except Unavailable as e:
            out.append(str(e))
    qp = torch.randn(50, 4, head_dim, device=dev, dtype=torch.bfloat16)
    for backend in ("fa2", "fa3"):
        try:
            _, got = flashinfer_prefill(qp, kc, kc, table, 50, 0.1, backend)
            out.append(f"prefill {backend}: built ({got})")
        except Unavailable as e:
            out.append(str(e))
    return out


if __name__ == "__main__":
    for line in warm():
        print(line, flush=True)
