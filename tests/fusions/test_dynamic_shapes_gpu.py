"""dynamic=True with irfuse's Triton kernels on CUDA (marked `gpu`; the GPU batch runs them):
vLLM's fusion test model (custom ops and native spellings, static and per-token FP8) and the
built-in FP8 Llama fuse the same sites in static, mark_dynamic and dynamic=True, the fused calls
run the Triton kernels, and the outputs stay within `irfuse.testing.assert_fp8_model_close` of
eager (the kernels' sums of squares differ from torch's by a few ulps, which moves some FP8
codes a step, and the FP8 GEMMs after them spread that; the helper's docstring gives the
figures)."""

from __future__ import annotations

import pytest
import torch
import vllm_ops as V

import irfuse.models as M
from irfuse import support_matrix
from irfuse.emit import kernel_choice
from irfuse.kernels import dispatch
from irfuse.testing import assert_fp8_model_close, compile_and_run

pytestmark = [pytest.mark.gpu,
              pytest.mark.filterwarnings("ignore:irfuse.*eliminate_noops off")]

LAYERS = 4
OPTIONS = {"optimization_level": 2,
           "pass_config": {f: f == "fuse_norm_quant" for f in support_matrix.FLAGS}}
MODES = {"static": {"dynamic": False}, "mark_dynamic": {"dynamic_dims": ((0, 0),)},
         "dynamic_true": {"dynamic": True}}


@pytest.mark.parametrize("per_token", [False, True], ids=["static", "per_token"])
@pytest.mark.parametrize("custom_ops", [True, False], ids=["custom_ops", "native"])
def test_fusion_model_on_cuda_in_every_shape_mode(custom_ops: bool, per_token: bool) -> None:
    model = V.FusionTestModel(layers=LAYERS, custom_ops=custom_ops, per_token=per_token).cuda()
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(3)).bfloat16().cuda()
    platform = dispatch.platform_of("cuda")
    kernel = "rms_norm_quant_fp8_per_token" if per_token else "rms_norm_quant_fp8_static"
    assert kernel_choice.choose(kernel, platform).impl == "triton"
    for mode, kw in MODES.items():
        compiled = compile_and_run(model, [x], options=OPTIONS, **kw)
        (report,) = compiled.reports
        assert report.error is None, mode
        assert report.fused("fuse-norm-quant") == LAYERS - 1, mode
        for got, want in zip(compiled.outputs[0], compiled.eager[0], strict=True):
            assert_fp8_model_close(got, want, mode)


@pytest.mark.parametrize("name", ["llama-fp8", "llama-fp8-per-token"])
def test_builtin_fp8_llama_dynamic_true_on_cuda(name: str) -> None:
    built = M.build(name, size="tiny", num_layers=2, device="cuda")
    marked = compile_and_run(built.model, built.clone_inputs(), options={"optimization_level": 2},
                             dynamic_dims=tuple(built.dynamic_dims.items()))
    dynamic = compile_and_run(built.model, built.clone_inputs(),
                              options={"optimization_level": 2}, dynamic=True)
    (m_report,), (d_report,) = marked.reports, dynamic.reports
    assert d_report.error is None
    assert d_report.fused("fuse-norm-quant") == m_report.fused("fuse-norm-quant") == 4
    assert_fp8_model_close(dynamic.outputs[0], dynamic.eager[0])
