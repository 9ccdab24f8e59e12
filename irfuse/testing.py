"""Helpers for tests of irfuse on whole models: compile, run, compare, read the reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from irfuse import backend, support_matrix
from irfuse.fusions.candidates import SILENT
from irfuse.report import Report

EVERY_PASS = {"optimization_level": 2, "strict": False,
              "pass_config": {**{f: True for f in support_matrix.FUSION_FLAGS},
                              "sp_min_token_num": 1}}
"""Options that turn every pass on (O2 and every fusion flag), for the no-silent-miss checks."""


@dataclass
class Compiled:
    """A model compiled with irfuse, what it returned and the reports of its graphs."""

    outputs: Any
    eager: Any
    reports: list[Report]
    module: Any = None
    """The compiled callable, to run again on other inputs."""

    def raised(self) -> dict[str, int]:
        """Raised-op counts summed over the compiled graphs (one range each)."""
        total: dict[str, int] = {}
        for report in _one_report_per_graph(self.reports):
            for kind, n in report.raised.items():
                total[kind] = total.get(kind, 0) + n
        return total

    def fused(self, pass_name: str) -> int:
        return sum(r.fused(pass_name) for r in _one_report_per_graph(self.reports))


def assert_nothing_silent(compiled: Compiled) -> None:
    """Every graph compiled without error, and every candidate a pass left unfused has a reason
    and a location in the report, none of them the `SILENT` remark."""
    assert compiled.reports, "nothing compiled"
    for report in compiled.reports:
        assert report.error is None, report.error
        for record in report.passes:
            for remark in record.missed:
                assert remark.reason and remark.location, (record.name, remark)
                assert remark.reason != SILENT, (
                    f"{record.name} left a candidate at {remark.location} unfused and unexplained")


def _one_report_per_graph(reports: list[Report]) -> list[Report]:
    seen: dict[str, Report] = {}
    for report in reports:
        seen.setdefault(report.graph, report)
    return list(seen.values())


def compile_and_run(
    model: torch.nn.Module,
    inputs: Sequence[Any],
    *,
    dynamic_dims: Sequence[tuple[int, int]] = ((0, 0),),
    options: dict[str, Any] | None = None,
    dynamic: bool | None = None,
) -> Compiled:
    """Compile `model` with irfuse (Inductor off and O0 unless `options` say otherwise), run it
    on `inputs` (cloned, so in-place updates do not leak) and run eager on other clones.
    `dynamic` is torch.compile's (`True`: every size symbolic, Python floats lifted to inputs);
    `dynamic_dims` are marked with `mark_dynamic` unless `dynamic` is `False`."""
    torch._dynamo.reset()
    backend.clear_reports()
    opts = {"inductor": False, "optimization_level": 0, "strict": True, "debug": True}
    opts.update(options or {})
    compiled_inputs = [_clone(x) for x in inputs]
    eager_inputs = [_clone(x) for x in inputs]
    for index, dim in dynamic_dims if dynamic is not False else ():
        if index < len(compiled_inputs) and isinstance(compiled_inputs[index], torch.Tensor):
            torch._dynamo.mark_dynamic(compiled_inputs[index], dim)
    compiled = torch.compile(model, backend="irfuse", options=opts, dynamic=dynamic)
    with torch.no_grad():
        outputs = compiled(*compiled_inputs)
        eager = model(*eager_inputs)
    return Compiled(
        (outputs, compiled_inputs), (eager, eager_inputs), backend.reports(), compiled
    )


def _clone(x: Any) -> Any:
    return x.clone() if isinstance(x, torch.Tensor) else x


def assert_bit_exact(actual: Any, expected: Any, path: str = "output") -> None:
    """Every tensor in `actual` equals the one in `expected` bit for bit (NaNs included)."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: expected a tensor, got {type(actual)}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        same = torch.equal(actual.view(torch.uint8) if actual.dtype.itemsize == 1 else actual,
                           expected.view(torch.uint8) if expected.dtype.itemsize == 1 else expected)
        if not same and actual.is_floating_point():
            same = bool(((actual == expected) | (actual.isnan() & expected.isnan())).all())
        assert same, f"{path}: values differ (max abs diff {(actual.float() - expected.float()).abs().max()})"
    elif isinstance(expected, list | tuple):
        assert len(actual) == len(expected), f"{path}: {len(actual)} items != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_bit_exact(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert actual.keys() == expected.keys(), f"{path}: keys differ"
        for k in expected:
            assert_bit_exact(actual[k], expected[k], f"{path}[{k!r}]")
    elif hasattr(expected, "to_tuple"):
        assert_bit_exact(actual.to_tuple(), expected.to_tuple(), path)
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


# Bounds of `assert_fp8_model_close`, relative to the largest and the mean |want|.
FP8_MODEL_MAX_REL = 2.0 ** -3
FP8_MODEL_MEAN_REL = 2.0 ** -4


def fp8_model_error(got: torch.Tensor, want: torch.Tensor) -> tuple[float, float]:
    """(max |got - want| / max |want|, mean |got - want| / mean |want|), in float32."""
    got, want = got.float(), want.float()
    diff = (got - want).abs()
    return ((diff.max() / want.abs().max().clamp_min(1e-30)).item(),
            (diff.mean() / want.abs().mean().clamp_min(1e-30)).item())


def assert_fp8_model_close(got: torch.Tensor, want: torch.Tensor, what: str = "output") -> None:
    """A model with FP8 GEMMs (or FP8 caches) compiled by irfuse against eager: the largest
    error at most 2^-3 of the largest |want| (one e4m3 step at the bottom of the largest value's
    binade: e4m3 has 3 mantissa bits), and the mean error at most 2^-4 of the mean |want|.

    Why so loose: fused kernels round their float32 sums differently from torch by an ulp, which
    moves a few FP8 codes by one step, and a moved code changes every output the following FP8
    GEMMs and attention mix it into. Such a model is that sensitive by itself: on the CPU, eager
    tiny 2-layer `llama-fp8`, `llama-fp8-per-token` and paged fp8 models, with 0.3% to 10% of
    their RMSNorm weights moved by one bf16 ulp, moved their outputs by a largest error of
    0.02-0.05 of the largest value (0.068 once in 72 draws) and a mean error of 0.01-0.048 of
    the mean value (when any code moved at all). On an H100 the compiled tiny FP8 Llamas measure
    largest errors of 0.033 and 0.025. A bug moves whole rows or heads instead: on the tiny `llama-fp8`, a zeroed
    row, two heads swapped and a dropped causal mask give largest errors of 0.88, 0.34 and 0.70
    of the largest value (means 0.07, 0.34 and 0.54); tests/backend/test_fp8_model_close.py
    checks that this helper accepts the first kind and rejects the second.
    """
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert bool(torch.isfinite(got.float()).all()), f"{what}: non-finite values"
    max_rel, mean_rel = fp8_model_error(got, want)
    assert max_rel <= FP8_MODEL_MAX_REL and mean_rel <= FP8_MODEL_MEAN_REL, (
        f"{what}: largest error {max_rel:.4f} of the largest value (bound {FP8_MODEL_MAX_REL}),"
        f" mean error {mean_rel:.4f} of the mean value (bound {FP8_MODEL_MEAN_REL})")
