"""A `Kernel`: one `irfuse::` custom op, declared from its typed torch reference.

The reference's signature is the op's one argument list. Its annotations give the torch schema
(`Tensor`, `Tensor | None`, `list[Tensor]`, `list[int]` (or `| None`), `float`, `int`, `bool`,
`str`, `torch.dtype`, `Written` for a tensor the kernel writes in place, and `Opaque` for an
argument of a type named when the kernel is declared: vLLM's layer name), its defaults the
schema's; its name is the op's. The CUDA implementation and the fake take one `Call` (the arguments
by name, defaults filled in), so they never restate the list; the examples are bound through it, so
a stale one fails at once; and select-kernels reads each parameter by name off the fused op
(`irfuse.fusions.kernel_call`).

Which implementation a kernel runs per platform (`Kernel.choose`): the measured choices are data,
one file per platform under `choices/` (`cuda_sm90.toml`: each entry with its reason, the card
and date that measured it and the command), with a `default` entry per platform family; a
kernel's `rules` are choices that follow from what it can do (no measurement), in code.
"""

from __future__ import annotations

import functools
import inspect
import tomllib
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Annotated, Any

import torch

from irfuse.dialects.kernel import IMPLS

CHOICES: tuple[str, ...] = (*IMPLS, "inductor")
"""What kernel choice can pick: an implementation a `kernel.call` records (IMPLS), or
`inductor`: the pass leaves the pattern to Inductor, whose code was measured faster there."""

WRITTEN = "written"
Written = Annotated[torch.Tensor, WRITTEN]
"""A tensor argument the kernel writes in place (`Tensor(a!)`: a KV cache)."""


@dataclass(frozen=True)
class Opaque:
    """Annotation metadata (`Annotated[Any, Opaque("...")]`) of a non-tensor argument whose
    schema type is `schema`: a class torch knows as an opaque type (vLLM's `LayerName`) or
    `str`, fixed when the kernel is declared. A graph passes it as an input (an operand of the
    call) or a constant string."""

    schema: str


@dataclass(frozen=True)
class Choice:
    """An implementation (one of CHOICES) and the measurement or rule that justifies it."""

    impl: str
    reason: str

    def __post_init__(self) -> None:
        if self.impl not in CHOICES:
            raise ValueError(f"irfuse: unknown implementation {self.impl!r}")


Steps = tuple[tuple[int, Choice], ...]
"""A choice per size step: ((from_tokens, choice), ...), the first from 1 token."""


# --- measured choices: data, one file per platform ---------------------------------------------

CHOICES_DIR = "choices"
DEFAULT = "default"
"""The entry of a platform file that every kernel without its own entry gets."""


def _file_of(platform: str) -> str:
    return platform.replace(":", "_") + ".toml"


def _step(kernel: str, entry: Mapping[str, Any]) -> tuple[int, Choice]:
    unknown = set(entry) - {"from", "impl", "reason", "measured", "command"}
    if unknown:
        raise ValueError(f"irfuse: choice of {kernel}: unknown keys {sorted(unknown)}")
    reason = entry["reason"]
    if "measured" in entry:
        reason = f"{reason} ({entry['measured']}; docs/benchmarks.md)"
    return int(entry.get("from", 1)), Choice(entry["impl"], reason)


@functools.cache
def measured(platform: str) -> dict[str, Steps]:
    """Kernel name (or DEFAULT) -> its steps on `platform` (`cuda:sm90`) or family (`cuda`),
    read off `choices/<platform>.toml`; {} where there is no such file. An entry is a table (one
    choice from 1 token) or an array of tables with `from` (a choice per size step)."""
    path = resources.files(__package__).joinpath(CHOICES_DIR, _file_of(platform))
    if not path.is_file():
        return {}
    data = tomllib.loads(path.read_text())
    out: dict[str, Steps] = {}
    for kernel, entry in data.items():
        entries = entry if isinstance(entry, list) else [entry]
        steps = tuple(sorted((_step(kernel, e) for e in entries), key=lambda s: s[0]))
        if steps[0][0] != 1:
            raise ValueError(f"irfuse: {_file_of(platform)}: {kernel}'s first step must be from "
                             "1 token")
        out[kernel] = steps
    return out


# --- the typed signature -----------------------------------------------------------------------

_SCALARS: dict[Any, str] = {float: "float", int: "int", bool: "bool", str: "str",
                            torch.dtype: "ScalarType", torch.Tensor: "Tensor"}


def _optional_of(hint: Any) -> Any:
    """T for `T | None`, else None."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, type(int | None)) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0] if len(rest) == 1 else None
    return None


def _schema_type(hint: Any, where: str) -> tuple[str, bool]:
    """The schema type of an annotation, and whether it is `Written`."""
    if typing.get_origin(hint) is Annotated:
        base, *meta = typing.get_args(hint)
        if WRITTEN in meta and base is torch.Tensor:
            return "Tensor", True
        opaque = [m for m in meta if isinstance(m, Opaque)]
        if opaque:
            return opaque[0].schema, False
        hint = base
    if hint in _SCALARS:
        return _SCALARS[hint], False
    inner = _optional_of(hint)
    if inner in (torch.Tensor, torch.dtype):
        return _SCALARS[inner] + "?", False
    if typing.get_origin(hint) is list and typing.get_args(hint) == (torch.Tensor,):
        return "Tensor[]", False
    if _int_list(hint):
        return "int[]", False
    if _int_list(inner):
        return "int[]?", False
    raise TypeError(f"irfuse: {where}: no schema type for the annotation {hint!r}")


def _int_list(hint: Any) -> bool:
    return typing.get_origin(hint) is list and typing.get_args(hint) == (int,)


def _is_opaque(hint: Any) -> bool:
    return typing.get_origin(hint) is Annotated and any(
        isinstance(m, Opaque) for m in typing.get_args(hint)[1:])


def _default_text(value: Any) -> str:
    if value is None or isinstance(value, bool | int | float):
        return str(value)
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, str):
        return f'"{value}"'
    raise TypeError(f"irfuse: no schema default for {value!r}")


def _returns(hint: Any, where: str) -> tuple[str, bool]:
    """The schema's returns, and whether the op returns one tensor."""
    if hint is torch.Tensor:
        return "Tensor", True
    if typing.get_origin(hint) is list and typing.get_args(hint) == (torch.Tensor,):
        return "Tensor[]", False
    if typing.get_origin(hint) is tuple and all(a is torch.Tensor for a in typing.get_args(hint)):
        return "(" + ", ".join("Tensor" for _ in typing.get_args(hint)) + ")", False
    raise TypeError(f"irfuse: {where}: returns {hint!r}; a kernel returns Tensor, "
                    "list[Tensor] or tuple[Tensor, ...]")


@dataclass(frozen=True)
class Param:
    """One argument of a kernel: its name, schema type, default (`inspect.Parameter.empty`:
    none), whether the kernel writes it in place, and whether it is `Opaque`."""

    name: str
    type: str
    default: Any = inspect.Parameter.empty
    written: bool = False
    opaque: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not inspect.Parameter.empty


class Call(dict):
    """A kernel call's arguments by name, every default filled in: `call.x` or `call["x"]`
    (an argument wins over a dict method of its name: `call.values`); `fn(**call)` calls a
    function with the kernel's signature (its reference)."""

    def __getattribute__(self, name: str) -> Any:
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        return super().__getattribute__(name)


@dataclass(frozen=True)
class Kernel:
    """One `irfuse::` custom op, from its typed torch `reference` (named as the op; the CPU
    implementation and what the others must match).

    `fake(call)`: the outputs' shapes, dtypes and strides, checking what the real op checks.
    `cuda(call)`: the CUDA implementation (what the choice selects, normally the Triton kernel);
    None: the reference runs there too. `rules`: choices by platform (`cuda:sm90`) or family
    (`cuda`) that follow from the kernel itself; measured choices are data (`measured`).
    `flashinfer`: its CUDA implementation has a FlashInfer launcher (the choice may select it).
    `examples(shape)`: calls (argument tuples, or mappings by name) for an input x of `shape`,
    that the custom-op tests run through `torch.library.opcheck` and compare with the fake.
    `variants`: run-time paths of the CUDA implementation that only a measured entry turns on
    (`runs_variant`)."""

    reference: Callable[..., Any]
    fake: Callable[[Call], Any]
    cuda: Callable[[Call], Any] | None = None
    rules: Mapping[str, Steps] = field(default_factory=dict, hash=False)
    flashinfer: bool = False
    examples: Callable[[tuple[int, ...]], Sequence[tuple | Mapping[str, Any]]] | None = None
    variants: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.reference.__name__

    @functools.cached_property
    def signature(self) -> inspect.Signature:
        return inspect.signature(self.reference)

    @functools.cached_property
    def params(self) -> tuple[Param, ...]:
        hints = typing.get_type_hints(self.reference, include_extras=True)
        out = []
        for p in self.signature.parameters.values():
            if p.name not in hints:
                raise TypeError(f"irfuse: {self.name}: argument {p.name} has no annotation")
            kind, written = _schema_type(hints[p.name], f"{self.name}({p.name})")
            out.append(Param(p.name, kind, p.default, written, _is_opaque(hints[p.name])))
        return tuple(out)

    @functools.cached_property
    def _result(self) -> tuple[str, bool]:
        hints = typing.get_type_hints(self.reference)
        return _returns(hints.get("return"), self.name)

    @property
    def single_tensor(self) -> bool:
        """It returns one tensor (else a tuple or list, which emit unpacks)."""
        return self._result[1]

    @property
    def written(self) -> tuple[str, ...]:
        """The arguments it writes in place."""
        return tuple(p.name for p in self.params if p.written)

    @functools.cached_property
    def schema(self) -> str:
        """The torch schema, e.g. `(Tensor x, float eps, bool divide=False) -> Tensor`."""
        aliases = iter("abcdefgh")
        args = []
        for p in self.params:
            kind = f"Tensor({next(aliases)}!)" if p.written else p.type
            default = f"={_default_text(p.default)}" if p.has_default else ""
            args.append(f"{kind} {p.name}{default}")
        return f"({', '.join(args)}) -> {self._result[0]}"

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None) -> Call:
        """The call of the op with these arguments, by name, defaults filled in."""
        bound = self.signature.bind(*args, **(kwargs or {}))
        bound.apply_defaults()
        return Call(bound.arguments)

    def run_cuda(self, *args: Any, **kwargs: Any) -> Any:
        """The op's CUDA implementation, as torch.library calls it."""
        call = self.bind(args, kwargs)
        return self.reference(**call) if self.cuda is None else self.cuda(call)

    def run_fake(self, *args: Any, **kwargs: Any) -> Any:
        """The op's fake implementation, as torch.library calls it."""
        return self.fake(self.bind(args, kwargs))

    def example_calls(self, shape: tuple[int, ...]) -> list[tuple]:
        """`examples(shape)` as positional argument tuples, each bound through the signature."""
        if self.examples is None:
            return []
        return [(self.signature.bind(**example) if isinstance(example, Mapping)
                 else self.signature.bind(*example)).args for example in self.examples(shape)]

    # -- kernel choice

    def steps(self, platform: str) -> Steps | None:
        """The choice steps on `platform`: its own entry (rule or measurement) for the exact
        platform, else for its family, else the family's default; None off every family."""
        family = platform.split(":", 1)[0]
        for key in dict.fromkeys((platform, family)):
            rule, data = self.rules.get(key), measured(key).get(self.name)
            if rule is not None and data is not None:
                raise ValueError(f"irfuse: {self.name} on {key}: a rule and a measured choice "
                                 f"({_file_of(key)}); keep one")
            if rule is not None or data is not None:
                return rule or data
        return measured(family).get(DEFAULT)

    def runs_variant(self, variant: str, platform: str) -> bool:
        """Whether the CUDA implementation takes its run-time path `variant` on `platform`: where
        the measured entry `<name>.<variant>` (of the exact platform, else of its family) chose
        irfuse's kernel; unmeasured, the path stays off."""
        if variant not in self.variants:
            raise ValueError(f"irfuse: {self.name} has no variant {variant!r}")
        family = platform.split(":", 1)[0]
        for key in dict.fromkeys((platform, family)):
            steps = measured(key).get(f"{self.name}.{variant}")
            if steps is not None:
                return steps[0][1].impl not in ("inductor", "reference")
        return False

    def variants_note(self, platform: str) -> str:
        """The report's words on the run-time variants on `platform` ('' without any)."""
        return "".join(
            f"; run-time path {v}: "
            + ("on" if self.runs_variant(v, platform) else f"off (not measured on {platform})")
            for v in self.variants)

    def choose(self, platform: str, num_tokens: int | None = None) -> Choice:
        """The implementation on `platform`; where it splits by size, `num_tokens` (the top of
        the compile range) picks the step, and without it the choice for few tokens is given,
        its reason naming the split."""
        steps = self.steps(platform)
        if steps is None:
            return Choice("reference", f"platform {platform!r} has no kernels; the reference runs")
        if num_tokens is None:
            first = steps[0][1]
            if len(steps) == 1:
                return first
            split = "; ".join(f"from {t} tokens: {c.impl}" for t, c in steps[1:])
            return Choice(first.impl, f"{first.reason} [{split}]")
        chosen = steps[0][1]
        for min_tokens, choice in steps:
            if num_tokens >= min_tokens:
                chosen = choice
        return chosen
