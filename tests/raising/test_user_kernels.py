"""A user Triton kernel in the graph (Dynamo's `triton_kernel_wrapper_functional`, as vLLM's CUDA
MRoPE reaches vLLM's post-grad passes): its dict arguments and dict result are imported, printed,
parsed and emitted back as they were, the rest of the graph still fuses, and vLLM's MRoPE kernel
is named in the report. Before, such a graph failed to import and nothing in it fused."""

from __future__ import annotations

import json
import operator
import sys

import pytest
import torch
import triton
import triton.language as tl
from torch._higher_order_ops.triton_kernel_wrap import (
    kernel_side_table,
    triton_kernel_wrapper_functional,
)
from torch._inductor.decomposition import select_decomp_table
from torch.fx.experimental.proxy_tensor import make_fx
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

from irfuse.context import make_context
from irfuse.pipeline import PipelineOptions, run
from irfuse.raising.aten_ops import VLLM_TRITON_MROPE
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


def test_vllm_cuda_mrope_kernel_is_named_in_the_report():
    module, qualname = VLLM_TRITON_MROPE.rsplit(".", 1)
    _, report = _run(_graph(_kernel(module, qualname)))
    (record,) = [p for p in report.raise_passes if p.name == "raise-vllm-ops"]
    (remark,) = record.missed
    assert remark.reason.startswith("_triton_mrope_forward: vLLM's multimodal RoPE (CUDA's "
                                    "MRotaryEmbedding, a Triton kernel launched from Python) is "
                                    "not raised")
    assert report.fused("fuse-norm-quant") == 1


def _worker() -> None:
    """The emitted graph against the traced one, the kernel run by Triton's interpreter."""
    gm = _graph(_kernel())
    emitted, _ = _run(gm)
    want, got = gm(*_inputs()), emitted(*_inputs())
    print(json.dumps({"equal": [bool(torch.equal(a.float(), b.float()))
                                for a, b in zip(want, got, strict=True)]}))


def test_emitted_graph_runs_the_kernel_as_traced():
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    from interpret_worker import run_worker

    assert run_worker(__file__) == {"equal": [True, True]}


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker()
