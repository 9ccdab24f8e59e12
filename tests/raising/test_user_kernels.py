"""A user Triton kernel in the graph (Dynamo's `triton_kernel_wrapper_functional`, as vLLM's CUDA
MRoPE reaches vLLM's post-grad passes): its dict arguments and dict result are imported, printed,
parsed and emitted back as they were, the rest of the graph still fuses, and vLLM's MRoPE kernel
is raised (`vllm_triton_mrope.py`'s stand-in: vLLM's parameter list and name). Before, such a
graph failed to import and nothing in it fused."""

from __future__ import annotations

import json
import operator
import sys

import pytest
import torch
import triton
import triton.language as tl
import vllm_ops as V
import vllm_triton_mrope as MROPE
from interpret_worker import run_worker
from torch._higher_order_ops.triton_kernel_wrap import (
    kernel_side_table,
    triton_kernel_wrapper_functional,
)
from torch._inductor.decomposition import select_decomp_table
from torch.fx.experimental.proxy_tensor import make_fx
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

from irfuse.context import make_context
from irfuse.passes import instantiate
from irfuse.pipeline import PipelineOptions, run
from irfuse.raising.fx_import import import_graph

H = 64


def _double(q_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(q_ptr + offs, tl.load(q_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


def _kernel(module: str = __name__, qualname: str = "_double"):
    """A JIT kernel whose function is named `module.qualname` (vLLM's, for the MRoPE case)."""
    fn = type(_double)(_double.__code__, _double.__globals__, qualname.rsplit(".", 1)[-1])
    fn.__module__, fn.__qualname__ = module, qualname
    return triton.jit(fn)


def _graph(kernel) -> torch.fx.GraphModule:
    """An RMSNorm + static FP8 quant of x, and the kernel launched on a clone of x (its own
    output), traced as aot_autograd hands the backend a functionalized user kernel."""
    kidx = kernel_side_table.add_kernel(kernel)
    cidx = kernel_side_table.add_constant_args({"n": 4 * H, "BLOCK": 4 * H})

    def f(x, w, s):
        xf = x.float()
        y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w
        q = (y.float() / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        out = triton_kernel_wrapper_functional(
            kernel_idx=kidx, constant_args_idx=cidx, grid=[(1, 1, 1)],
            tma_descriptor_metadata={}, kwargs={"q_ptr": x}, tensors_to_clone=["q_ptr"])
        return q, out["q_ptr"] + 1

    return make_fx(f, decomposition_table=select_decomp_table(), tracing_mode="fake")(*_inputs())


def _inputs() -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, H, generator=g).to(torch.bfloat16)
    w = (torch.rand(H, generator=g) + 0.5).to(torch.bfloat16)
    return x, w, torch.tensor([0.01])


def _run(gm: torch.fx.GraphModule):
    return run(gm, PipelineOptions(platform="cpu", fusion_passes=("fuse-norm-quant",),
                                   debug=True))


def test_import_keeps_dict_arguments_and_results_and_names_the_kernel():
    module = import_graph(_graph(_kernel())).module
    text = str(module)
    assert 'aten.call dict ["q_ptr"] "hop:triton_kernel_wrapper_functional"(' in text
    assert 'tma_descriptor_metadata = {}, kwargs = {"q_ptr": %' in text
    assert f'{{kernel = "{__name__}._double"}}' in text
    again = Parser(make_context(), text).parse_module()
    again.verify()
    assert str(again) == text


def test_a_dict_argument_needs_string_keys():
    text = ('func.func @f(%x: !irfuse.tensor<[4], f32>) {\n'
            '  %y = aten.call dict ["a"] "hop:triton_kernel_wrapper_functional"(kwargs = {1: %x})'
            ' : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>\n  func.return\n}')
    with pytest.raises(ParseError, match="expected a string key in a dict argument"):
        Parser(make_context(), text).parse_module()


def test_emit_rebuilds_the_call_and_the_rest_fuses():
    gm = _graph(_kernel())
    (source,) = gm.graph.find_nodes(op="call_function", target=triton_kernel_wrapper_functional)
    emitted, report = _run(gm)
    assert report.error is None
    assert report.fused("fuse-norm-quant") == 1
    (call,) = emitted.graph.find_nodes(op="call_function",
                                       target=triton_kernel_wrapper_functional)
    kw = dict(call.kwargs)
    assert {k: v for k, v in kw.items() if k != "kwargs"} == \
        {k: v for k, v in source.kwargs.items() if k != "kwargs"}
    assert [n.op for n in kw["kwargs"].values()] == ["placeholder"]
    (item,) = call.users
    assert item.target is operator.getitem and item.args[1] == "q_ptr"


HQ, HK, D = 4, 2, 16


def _mrope_graph(norms: bool, sections=(4, 2, 2), interleaved=False, is_neox=True,
                 tokens: int = 5) -> torch.fx.GraphModule:
    """Qwen2/3-VL's attention on CUDA in vLLM: q, k, v split from qkv, (Qwen3-VL) per-head
    RMSNorms of q and k, and the MRoPE kernel on them with the tables gathered at `[3, T]`
    positions, as aot_autograd records it."""
    def f(positions, qkv, cache, qw, kw):
        q, k, v = (qkv * 2).split([HQ * D, HK * D, HK * D], -1)
        if norms:
            q = _norm(q.view(-1, HQ, D), qw).view(q.shape)
            k = _norm(k.view(-1, HK, D), kw).view(k.shape)
        cos, sin = cache[positions].chunk(2, dim=-1)
        q, k = MROPE.functional_call(q, k, cos, sin, sections, D, D, interleaved, is_neox)
        return q * 1, k * 1, v * 1

    return make_fx(f, decomposition_table=select_decomp_table(), tracing_mode="fake")(
        *_mrope_inputs(tokens))


def _norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def _mrope_inputs(tokens: int = 5) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, 64, (3, tokens), generator=g),
            torch.randn(tokens, (HQ + 2 * HK) * D, generator=g).to(torch.bfloat16),
            V.rope_cache(D), (torch.rand(D, generator=g) + 0.5).to(torch.bfloat16),
            (torch.rand(D, generator=g) + 0.5).to(torch.bfloat16))


def _mrope_run(gm: torch.fx.GraphModule, fuse: bool):
    passes = ("enable-qk-norm-rope-fusion",) if fuse else ()
    return run(gm, PipelineOptions(platform="cpu", fusion_passes=passes, debug=True))


MROPE_FORMS = pytest.mark.parametrize(("sections", "interleaved", "is_neox"), [
    ((4, 2, 2), False, True), ((4, 2, 2), True, True), ((2, 3, 3), True, False),
], ids=["sections", "interleaved", "interleaved-gptj"])


@MROPE_FORMS
def test_vllm_cuda_mrope_is_raised_and_the_norms_fuse_into_it(sections, interleaved, is_neox):
    emitted, report = _mrope_run(_mrope_graph(True, sections, interleaved, is_neox), fuse=True)
    assert report.error is None
    assert report.raised["rope"] == 1 and report.raised["rms_norm"] == 2
    assert report.fused("enable-qk-norm-rope-fusion") == 1
    assert not emitted.graph.find_nodes(op="call_function",
                                        target=triton_kernel_wrapper_functional)


def test_the_kernels_read_the_cache_at_the_positions():
    """vLLM's CUDA path gathers the cache at the three position rows and hands the kernel the
    two halves: the raise reads back through that gather, so each layer's fused kernel reads
    the cache by position itself, by section (two layers sharing one rotary)."""
    def f(positions, qkv, cache, qw, kw):
        outs = []
        for scale in (2, 3):
            q, k, _ = (qkv * scale).split([HQ * D, HK * D, HK * D], -1)
            q = _norm(q.view(-1, HQ, D), qw).view(q.shape)
            k = _norm(k.view(-1, HK, D), kw).view(k.shape)
            cos, sin = cache[positions].chunk(2, dim=-1)
            outs += MROPE.functional_call(q, k, cos, sin, (4, 2, 2), D, D, True, True)
        return tuple(o * 1 for o in outs)

    gm = make_fx(f, decomposition_table=select_decomp_table(), tracing_mode="fake")(
        *_mrope_inputs())
    emitted, report = _mrope_run(gm, fuse=True)
    assert report.raised["rope"] == 2
    assert report.fused("enable-qk-norm-rope-fusion") == 2
    # The model's gather and its halves, unread once the kernels read the cache, are gone.
    assert not emitted.graph.find_nodes(op="call_function", target=torch.ops.aten.index.Tensor)
    kernels = emitted.graph.find_nodes(op="call_function",
                                       target=torch.ops.irfuse.qk_norm_rope.default)
    assert len(kernels) == 2
    for k in kernels:  # (q, k, q_weight, k_weight, positions, cos_sin_cache, cos, sin, ...)
        assert [a.target for a in k.args[4:6]] == ["positions_1", "cache_1"], k.args
        assert k.args[6:8] == (None, None)
        assert list(k.kwargs["mrope_section"]) == [4, 2, 2] and k.kwargs["mrope_interleaved"]


def test_tables_not_gathered_from_a_cache_are_read_as_given():
    """cos and sin made otherwise than as halves of one gather (here: computed in the graph) are
    the kernel's `[3, T, rotary_dim / 2]` tables, read by section."""
    def f(positions, qkv, cache, qw, kw):
        q, k, _ = (qkv * 2).split([HQ * D, HK * D, HK * D], -1)
        cos, sin = cache[positions].chunk(2, dim=-1)
        return MROPE.functional_call(q, k, cos * 1, sin, (4, 2, 2), D, D, False, True)

    gm = make_fx(f, decomposition_table=select_decomp_table(), tracing_mode="fake")(
        *_mrope_inputs())
    module = import_graph(gm).module
    instantiate("raise-vllm-ops").apply(make_context(), module)
    (rope,) = [op for op in module.walk() if op.name == "attn.rope"]
    assert rope.positions is None and rope.cos is not None
    assert rope.cos.type.dims[0] == 3 and list(rope.mrope_section.get_values()) == [4, 2, 2]


def test_vllm_cuda_mrope_from_another_process_is_a_remark():
    """A dumped graph read elsewhere names constants torch's side table no longer holds."""
    gm = _mrope_graph(False)
    (node,) = gm.graph.find_nodes(op="call_function", target=triton_kernel_wrapper_functional)
    node.kwargs = {**node.kwargs, "constant_args_idx": 10**9}
    _, report = _mrope_run(gm, fuse=False)
    (record,) = [p for p in report.raise_passes if p.name == "raise-vllm-ops"]
    assert [m.reason for m in record.missed] == [
        "not a multimodal RoPE (_triton_mrope_forward): its constant arguments are not in this "
        "process's side table"]
    assert report.raised["rope"] == 0


class _Qwen3VLAttention(torch.nn.Module):
    """Qwen3-VL's attention as vLLM runs it on CUDA (`MRotaryEmbedding.forward_cuda`): per-head
    norms of q and k split from qkv, then the MRoPE kernel launched in place on them."""

    def __init__(self, sections=(4, 2, 2), interleaved=True, is_neox=True):
        super().__init__()
        _, _, cache, qw, kw = (t.cuda() for t in _mrope_inputs())
        self.register_buffer("cache", cache)
        self.register_buffer("qw", qw)
        self.register_buffer("kw", kw)
        self.sections, self.interleaved, self.is_neox = sections, interleaved, is_neox

    def forward(self, positions, qkv):
        q, k, v = qkv.split([HQ * D, HK * D, HK * D], -1)
        q = _norm(q.view(-1, HQ, D), self.qw).view(q.shape)
        k = _norm(k.view(-1, HK, D), self.kw).view(k.shape)
        cos, sin = self.cache[positions].chunk(2, dim=-1)
        q, k = MROPE.triton_mrope(q, k, cos, sin, self.sections, D, D, self.interleaved,
                                  self.is_neox)
        return q.reshape(q.shape), k, v


@pytest.mark.gpu
@pytest.mark.parametrize("fuse", [False, True], ids=["raised", "fused"])
@MROPE_FORMS
def test_vllm_cuda_mrope_under_dynamo_on_the_gpu(fuse, sections, interleaved, is_neox):
    """Dynamo's own trace of the kernel launch (not a hand-made call), on CUDA: raised at O0
    (vLLM's kernel runs), fused with the norms at O2; bit for bit eager either way."""
    from irfuse.testing import assert_bit_exact, compile_and_run

    positions, qkv, *_ = _mrope_inputs(tokens=37)
    options = {"optimization_level": 2 if fuse else 0,
               "pass_config": {"enable_qk_norm_rope_fusion": fuse}}
    compiled = compile_and_run(_Qwen3VLAttention(sections, interleaved, is_neox),
                               [positions.cuda(), qkv.cuda()], dynamic_dims=((0, 1), (1, 0)),
                               options=options)
    (report,) = {r.graph: r for r in compiled.reports}.values()
    assert report.error is None, report.error
    assert report.raised["rope"] == 1, [m.reason for p in report.raise_passes for m in p.missed]
    assert report.fused("enable-qk-norm-rope-fusion") == int(fuse)
    assert_bit_exact(compiled.outputs, compiled.eager)


@triton.jit
def _rotate_bf16(x1_ptr, x2_ptr, c_ptr, s_ptr, o1_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x1, x2 = tl.load(x1_ptr + offs), tl.load(x2_ptr + offs)
    c, s = tl.load(c_ptr + offs), tl.load(s_ptr + offs)
    tl.store(o1_ptr + offs, x1 * c - x2 * s)


@pytest.mark.gpu
def test_triton_bf16_rotation_contracts_into_an_fma_on_the_gpu():
    """vLLM's CUDA MRoPE kernel writes the rotation as `x1 * cos - x2 * sin` on bf16 tiles.
    Compiled, Triton rounds `x2 * sin` to bf16 and contracts the rest into one FMA rounded once,
    where eager (and the raised rope's reading) rounds each product and the difference: on an
    H100 (Triton 3.6) a quarter of 2^20 values differ by an ulp from eager's, none from this
    form (`docs/numerics.md`)."""
    g = torch.Generator().manual_seed(0)
    x1, x2, c, s = (torch.randn(1 << 20, generator=g).to(torch.bfloat16).cuda() for _ in range(4))
    out = torch.empty_like(x1)
    _rotate_bf16[(x1.numel() // 1024,)](x1, x2, c, s, out, BLOCK=1024)
    fma = torch.addcmul(-(x2 * s).float(), x1.float(), c.float()).to(torch.bfloat16)
    assert torch.equal(out, fma)
    assert (out != x1 * c - x2 * s).float().mean().item() > 0.1


def _worker() -> None:
    """The emitted graphs against the traced ones, the kernels run by Triton's interpreter:
    the plain user kernel; vLLM's MRoPE raised and left unfused (its kernel runs); and fused with
    the norms (irfuse's reference runs)."""
    gm = _graph(_kernel())
    want, got = gm(*_inputs()), _run(gm)[0](*_inputs())
    out = {"kernel": [bool(torch.equal(a.float(), b.float()))
                      for a, b in zip(want, got, strict=True)]}
    for sections, interleaved, is_neox in ((4, 2, 2), False, True), ((2, 3, 3), True, False):
        for fuse in (False, True):
            gm = _mrope_graph(True, sections, interleaved, is_neox)
            emitted, _ = _mrope_run(gm, fuse)
            want, got = gm(*_mrope_inputs()), emitted(*_mrope_inputs())
            out[f"mrope-{interleaved}-{fuse}"] = [bool(torch.equal(a, b))
                                                  for a, b in zip(want, got, strict=True)]
    print(json.dumps(out))


def test_emitted_graph_runs_the_kernel_as_traced():
    assert run_worker(__file__) == {
        "kernel": [True, True], **{f"mrope-{i}-{f}": [True] * 3 for i in (False, True)
                                   for f in (False, True)}}


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker()
