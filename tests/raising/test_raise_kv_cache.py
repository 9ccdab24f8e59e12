"""raise-kv-cache-write on real traced graphs: every spelling of the paged-cache update (index_put,
index_copy, the block-size-1 slice, the 4-D block/offset index), k and v in one op, the caches
updated bit-exactly in place, the paged built-in models, and the reasons near misses give."""

from __future__ import annotations

import pytest
import torch
from xdsl.parser import Parser

from irfuse import remarks
from irfuse.context import make_context
from irfuse.models import build
from irfuse.raising.raise_kv_cache_write import RaiseKvCacheWrite
from irfuse.testing import assert_bit_exact, compile_and_run

BF16 = torch.bfloat16
BLOCKS, BLOCK, HEADS, DIM, TOKENS = 9, 4, 2, 16, 6


class Step(torch.nn.Module):
    """New k and v rows from one projection, written into the caches, then read back."""

    def __init__(self, style: str, check_slots: bool = False):
        super().__init__()
        self.style, self.check_slots = style, check_slots

    def write(self, cache: torch.Tensor, new: torch.Tensor, slots: torch.Tensor) -> None:
        if self.style == "block_offset":
            cache[slots // cache.shape[1], slots % cache.shape[1]] = new
            return
        flat = cache.view(-1, cache.shape[-2], cache.shape[-1])
        if self.style == "index_put":
            flat.index_put_((slots,), new)
        elif self.style == "index_copy":
            flat.index_copy_(0, slots, new)
        else:
            flat[2:2 + new.shape[0]] = new

    def forward(self, kv, slots, k_cache, v_cache):
        if self.check_slots:
            torch._check(slots.shape[0] == kv.shape[0])
        k, v = (x.reshape(-1, HEADS, DIM) for x in kv.chunk(2, dim=-1))
        self.write(k_cache, k * 2, slots)
        self.write(v_cache, v, slots)
        return k_cache.sum(dim=(1, 2)) + v_cache.sum(dim=(1, 2))


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    kv = torch.randn(TOKENS, 2 * HEADS * DIM, generator=g).to(BF16)
    slots = torch.randperm(BLOCKS * BLOCK, generator=g)[:TOKENS]
    caches = [torch.randn(BLOCKS, BLOCK, HEADS, DIM, generator=g).to(BF16) for _ in range(2)]
    return [kv, slots, *caches]


def _reasons(report) -> list[str]:
    for record in report.raise_passes:
        if record.name == "raise-kv-cache-write":
            return [m.reason for m in record.missed]
    raise AssertionError("raise-kv-cache-write did not run")


def _check(result, writes: int) -> None:
    (out, inputs), (eager, eager_inputs) = result.outputs, result.eager
    assert_bit_exact(out, eager)
    assert_bit_exact(inputs, eager_inputs, "caches")  # written in place, the same bits
    assert result.raised()["kv_cache_write"] == writes


@pytest.mark.parametrize("style", ["index_put", "index_copy", "slice", "block_offset"])
def test_every_write_spelling_raises_one_op_for_k_and_v(style):
    result = compile_and_run(Step(style), _inputs(), dynamic_dims=())
    _check(result, 1)
    assert _reasons(result.reports[0]) == []


def test_dynamic_tokens_with_the_slot_count_tied_to_them():
    result = compile_and_run(Step("index_put", check_slots=True), _inputs(),
                             dynamic_dims=((0, 0), (1, 0)))
    _check(result, 1)


def test_slots_of_another_symbolic_length_are_the_current_tokens():
    # kv and slots marked dynamic separately (as vLLM marks them): two symbols. A symbolic size
    # is at least 2 (Dynamo specializes 0 and 1), so index_put cannot broadcast the rows: the
    # write runs only when the lengths agree, one slot per new token. It is raised.
    result = compile_and_run(Step("index_put"), _inputs(), dynamic_dims=((0, 0), (1, 0)))
    _check(result, 1)
    assert _reasons(result.reports[0]) == []


def test_slots_of_another_static_length_are_not_the_current_tokens():
    inputs = _inputs()
    inputs[0] = inputs[0][:1]  # one new row written to every slot: index_put broadcasts it
    result = compile_and_run(Step("index_put"), inputs, dynamic_dims=())
    reasons = _reasons(result.reports[0])
    assert result.raised()["kv_cache_write"] == 0
    assert reasons and all("(not the slot mapping of the current tokens)" in r
                           for r in reasons), reasons


@pytest.mark.parametrize("name, dynamic", [
    # The paged step marks slot_mapping's length dynamic apart from num_tokens and ties the two
    # with torch._check, so they share one symbol, dynamic or not.
    ("paged", True),
    ("paged", False),
    ("paged-index-copy", True),
    ("paged-slice", True),  # the slice write uses no slot mapping
])
def test_paged_models(name, dynamic):
    built = build(name, num_layers=2)
    result = compile_and_run(built.model, built.example_inputs,
                             dynamic_dims=tuple(built.dynamic_dims.items()) if dynamic else ())
    _check(result, built.expected["kv_cache_write"])
    assert _reasons(result.reports[0]) == []


# --- IR ----------------------------------------------------------------------------------------

C = "!irfuse.tensor<[81, 16, 2, 64], bf16>"
F = "!irfuse.tensor<[1296, 2, 64], bf16>"
K = "!irfuse.tensor<[s0, 2, 64], bf16>"
Q = "!irfuse.tensor<[s0, 4, 64], bf16>"
S = "!irfuse.tensor<[s0], i64>"
CS = "!irfuse.tensor<[s0, 32], bf16>"


def _run_pass_on(text: str) -> tuple[str, list[str]]:
    ctx = make_context()
    module = Parser(ctx, text).parse_module()
    with remarks.collecting() as sink:
        RaiseKvCacheWrite().apply(ctx, module)
    module.verify()
    return str(module), [m.reason for m in sink.missed]


def _write(new: str, cache: str, n: int, call: str = "index_put") -> str:
    if call == "index_put":
        update = f'aten.call "aten::index_put.default"(%f{n}, [%slots], %{new}) : ({F}, {S}, {K})'
    else:
        update = f'aten.call "aten::index_copy.default"(%f{n}, 1, %slots, %{new}) : ({F}, {S}, {K})'
    return f"""
      %f{n} = aten.call "aten::view.default"(%{cache}, [-1, 2, 64]) : ({C}) -> {F}
      %u{n} = {update} -> {F}
      %n{n} = aten.call "aten::view.default"(%u{n}, [81, 16, 2, 64]) : ({F}) -> {C}"""


def test_the_rotated_key_is_k_whatever_the_order():
    text = f"""
    func.func @f(%q: {Q}, %k: {K}, %v: {K}, %cos: {CS}, %sin: {CS}, %slots: {S}, %kc: {C}, %vc: {C}) -> ({Q}, {C}, {C}) {{
      %qr, %kr = attn.rope %q, k %k, cos %cos, sin %sin {{is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64}} : ({Q}, {K}, {CS}, {CS}) -> ({Q}, k_out {K})
      {_write("v", "vc", 0)}
      {_write("kr", "kc", 1)}
      %c0 = aten.call "aten::copy_.default"(%vc, %n0) : ({C}, {C}) -> {C}
      %c1 = aten.call "aten::copy_.default"(%kc, %n1) : ({C}, {C}) -> {C}
      func.return %qr, %n1, %n0 : {Q}, {C}, {C}
    }}
    """
    printed, reasons = _run_pass_on(text)
    assert reasons == []
    assert "%n1, %n0 = attn.kv_cache_write %kr, %v, %kc, %vc, %slots" in printed


def test_near_misses_say_why():
    text = f"""
    func.func @f(%k: {K}, %v: {K}, %slots: {S}, %kc: {C}, %vc: {C}, %kc2: {C}) -> ({C}, {C}, {C}) {{
      {_write("k", "kc", 0, call="index_copy")}
      {_write("v", "vc", 1)}
      {_write("k", "kc2", 2)}
      %c0 = aten.call "aten::copy_.default"(%kc, %n0) : ({C}, {C}) -> {C}
      %c1 = aten.call "aten::copy_.default"(%vc, %n1) : ({C}, {C}) -> {C}
      func.return %n0, %n1, %n2 : {C}, {C}, {C}
    }}
    """
    printed, reasons = _run_pass_on(text)
    assert "attn.kv_cache_write" not in printed
    assert reasons == [
        "not a KV-cache write: index_copy along dim 1, not along the slots",
        "not a KV-cache write: the updated cache is not copied back into the cache input",
        "not a KV-cache write: no write of the matching k or v cache at the same slots (one "
        "kv_cache_write takes both)",
    ]
