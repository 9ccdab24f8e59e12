"""eliminate_noops: removes reshapes, slices and slice_scatters that do not change their input
(an IR-only rewrite, on from O1 everywhere, as vLLM's NoOpEliminationPass). Pattern:
`pattern.py`."""

from __future__ import annotations

from irfuse.fusions.declare import PLATFORM_CLASSES, Fusion, Support

FUSION = Fusion(
    flag="eliminate_noops",
    kind="utility",
    doc="remove reshapes/slices that do not change their input (the fusions match better "
    "without them).",
    fuses="removes reshapes, slices and slice_scatters that do not change their input",
    quant="independent",
    schemes=(),
    platforms={c: Support("ir", 1) for c in PLATFORM_CLASSES},
    removes_noops=True,
    vllm_pass="NoOpEliminationPass",
    patterns=("NoopPattern",),
)
