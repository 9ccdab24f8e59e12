"""Every pass irfuse-opt and the pipeline know, by name: xDSL's clean-ups, the canonicalization
before raising, the raising passes (`irfuse.raising.raising`), every fusion and
utility rewrite (`irfuse.fusions`, their passes built from their declarations), and
select-kernels. Names are the CLI names (kebab case; a fusion's is its PassConfig flag).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import DeadCodeElimination
from xdsl.utils.arg_spec import parse_spec

from irfuse.emit import custom_ops  # noqa: F401  (registers torch.ops.irfuse.*, the kernels)
from irfuse.emit.select_kernels import SelectKernels
from irfuse.fusions import FUSIONS
from irfuse.raising.cse_pure import CsePure, DcePure
from irfuse.raising.raising import RAISINGS

PASSES: dict[str, type[ModulePass]] = {
    p.name: p
    for p in (
        CommonSubexpressionElimination, DeadCodeElimination, CsePure, DcePure,
        *(r.pass_class for r in RAISINGS),
        *(f.pass_class for f in FUSIONS),
        SelectKernels,
    )
}
"""Pass name -> its class."""


class UnknownPass(KeyError):
    def __str__(self) -> str:
        return f"unknown pass '{self.args[0]}'; known passes: {', '.join(sorted(PASSES))}"


def pass_class(name: str) -> type[ModulePass]:
    if name not in PASSES:
        raise UnknownPass(name)
    return PASSES[name]


def instantiate(spec: str) -> ModulePass:
    """A pass from its pipeline spec, `name` or `name{option=value ...}` (irfuse-opt's syntax)."""
    parsed = parse_spec(spec)
    return pass_class(parsed.name).from_spec(parsed)


def spec_name(spec: str) -> str:
    """The pass name of a pipeline spec."""
    return spec.split("{", 1)[0].strip()


def factories() -> dict[str, Callable[[], type[ModulePass]]]:
    """The form xDSL's pass pipeline parser takes."""
    return {name: (lambda n=name: PASSES[n]) for name in PASSES}
