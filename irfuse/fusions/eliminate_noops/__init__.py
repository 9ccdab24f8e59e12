"""eliminate_noops: removes reshapes, slices and slice_scatters that do not change their input
(an IR-only rewrite, on from O1 everywhere, as vLLM's NoOpEliminationPass)."""

from __future__ import annotations

from irfuse.fusions.declare import PLATFORM_CLASSES, Fusion, Support
from irfuse.fusions.eliminate_noops.pattern import NoopPattern

FUSION = Fusion(
    name="eliminate-noops",
    flag="eliminate_noops",
    kind="utility",
    fuses="removes reshapes, slices and slice_scatters that do not change their input",
    quant="independent",
    schemes=(),
    range_rule="all",
    platforms={c: Support("ir", 1) for c in PLATFORM_CLASSES},
    vllm_pass="NoOpEliminationPass",
    patterns=(NoopPattern(),),
)
