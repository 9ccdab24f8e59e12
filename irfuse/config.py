"""PassConfig, CompilationConfig, optimization levels, and vLLM's command-line syntax.

irfuse takes vLLM's configuration, so that a vLLM user's knowledge and flags carry over:
`PassConfig` has vLLM's field names, types and meanings, and `CompilationConfig` holds it with
the fields irfuse's backend needs. A field left None is *unset*: `resolve` fills it from the
optimization level for a platform and a model; a field the user set always wins over the level.
The config comes from Python objects, `torch.compile(options=...)` (`from_options`), JSON
(`from_json`) or vLLM's command-line syntax (`from_cli`, `parse_cli`); a wrong key or value raises
`ConfigError`, naming the key, the value and what is allowed.

PassConfig's fields are the fusions' declarations (`irfuse.fusions`), so this module names no
pass: its rules read what a declaration says (the flag it implies, whether reshapes hide its
pattern, its thresholds and how the platform fills them). O0 turns every pass off; O1 and O2 turn
on what the support matrix (`irfuse.support_matrix`, the one place where irfuse's defaults
differ from vLLM's) lists at that level for the platform, where the model allows it; O3 is O2.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any

from irfuse import support_matrix, thresholds
from irfuse.fusions import FUSIONS
from irfuse.fusions.declare import Fusion, Threshold
from irfuse.platform import Platform, detect

LEVELS: tuple[int, ...] = (0, 1, 2, 3)
DEFAULT_LEVEL = 2  # vLLM's default


class ConfigError(ValueError):
    """A configuration key or value that irfuse does not accept."""


# ---------------------------------------------------------------------------- value checks

_BOOL_WORDS = {"true": True, "false": False}
_INT_RE = re.compile(r"^[+-]?\d+$")


class CliText(str):
    """A value the command line gave as text that is not JSON (`-cc.strict=False`, `-O2`,
    `-cc.compile_sizes=8,16`): the field's check reads it as a bool, a number or a list, as
    vLLM's flags do. A plain `str` (from `options=`, JSON or Python) is taken as the string it
    is: a string where a bool, a number or a list belongs is an error naming it."""


def _text(value: Any) -> bool:
    return isinstance(value, CliText)


def _bad(key: str, value: Any, allowed: str) -> ConfigError:
    shown = str(value) if _text(value) else value
    return ConfigError(f"bad value for {key!r}: {shown!r}; allowed: {allowed}")


def _as_bool(key: str, value: Any, nullable: bool) -> bool | None:
    if isinstance(value, bool):
        return value
    if value is None and nullable:
        return None
    if _text(value):
        if value in ("True", "False", "true", "false"):
            return _BOOL_WORDS[value.lower()]
        if nullable and value in ("None", "null"):
            return None
    allowed = "true, false" + (" (on the command line also True/False)") + (
        ", or null (unset)" if nullable else "")
    raise _bad(key, value, allowed)


def _as_int(key: str, value: Any, nullable: bool, minimum: int) -> int | None:
    if value is None and nullable:
        return None
    if nullable and _text(value) and value in ("None", "null"):
        return None
    out: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        out = value
    elif _text(value) and _INT_RE.match(value.strip()):
        out = int(value)
    if out is None or out < minimum:
        raise _bad(key, value, f"an integer >= {minimum}" + (", or null" if nullable else ""))
    return out


def _as_float(key: str, value: Any, nullable: bool) -> float | None:
    if value is None and nullable:
        return None
    if nullable and _text(value) and value in ("None", "null"):
        return None
    out: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out = float(value)
    elif _text(value):
        try:
            out = float(value)
        except ValueError:
            out = None
    if out is None or not out >= 0 or out == float("inf"):
        raise _bad(key, value, "a number of MB >= 0" + (", or null" if nullable else ""))
    return out


def _as_int_list(key: str, value: Any, minimum: int) -> list[int] | None:
    if value is None or _text(value) and value in ("None", "null"):
        return None
    items: Sequence[Any] | None = None
    if isinstance(value, (list, tuple)):
        items = value
    elif _text(value) and value.strip():
        items = [CliText(v.strip()) for v in value.split(",")]
    if items is None:
        raise _bad(key, value, f"a list of integers >= {minimum} (a JSON list; on the command "
                   "line also 'a,b,c'), or null")
    out = []
    for item in items:
        try:
            out.append(_as_int(key, item, False, minimum))
        except ConfigError:
            raise _bad(key, value, f"a list of integers >= {minimum}") from None
    return out  # type: ignore[return-value]


def _as_str(key: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, str):
        return value
    raise _bad(key, value, "a string (a directory path), or null")


def _as_level(key: str, value: Any) -> int:
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str) and re.fullmatch(r"[Oo]?\d", text):
        text = int(text[-1])
    if isinstance(text, int) and not isinstance(text, bool) and text in LEVELS:
        return text
    raise _bad(key, value, "0, 1, 2 or 3 (also 'O0'..'O3')")


def _as_platform(key: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, Platform):
        return str(value)
    try:
        return str(Platform.parse(value))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"bad value for {key!r}: {value!r}; {e}") from None


# ---------------------------------------------------------------------------- PassConfig


def _from_mapping(cls: type, options: Any, what: str, prefix: str) -> Any:
    """A config dataclass from a mapping of its fields (or a copy of one); an unknown key is a
    ConfigError that names it, its value and every known field."""
    if options is None:
        return cls()
    if isinstance(options, cls):
        return copy.deepcopy(options)
    if not isinstance(options, Mapping):
        raise _bad(what, options, f"an object (dict) of {cls.__name__} fields")
    known = [f.name for f in fields(cls)]
    for key, value in options.items():
        if key not in known:
            raise ConfigError(
                f"unknown key '{prefix}{key}' (value {value!r}); known {cls.__name__} fields: "
                f"{', '.join(known)}")
    return cls(**dict(options))


def _pass_config_doc() -> str:
    lines = ["vLLM's PassConfig: which fusion passes run, and their thresholds.", "",
             "A None field is unset and filled by `resolve` from the optimization level. Its "
             "fields come from the", "fusions' declarations (`irfuse.fusions`), in pipeline "
             "order: each pass's flag, then its thresholds.", ""]
    for f in FUSIONS:
        lines.append(f"- {f.flag}: {f.doc}")
        lines += [f"- {t.name}: {t.doc}" for t in f.thresholds]
    lines += ["", "vLLM versions differ in fields: enable_sp, fuse_gemm_comms and sp_min_token_num "
              "exist up to vLLM 0.2x", "and not in 0.32; the flags marked (vLLM 0.32) exist from "
              "there on. irfuse takes them all", "(docs/configuration.md has the table)."]
    return "\n".join(lines)


class _PassConfigMethods:
    """PassConfig's behaviour; its fields are the fusions' (see `_pass_config_fields`)."""

    def __post_init__(self) -> None:
        for f in FUSIONS:
            setattr(self, f.flag, _as_bool(f"pass_config.{f.flag}", getattr(self, f.flag),
                                           nullable=True))
            for t in f.thresholds:
                setattr(self, t.name, _as_threshold(t, getattr(self, t.name)))

    @classmethod
    def from_dict(cls, options: Mapping[str, Any] | PassConfig | None) -> PassConfig:
        """From a dict of PassConfig fields; an unknown field is a ConfigError."""
        return _from_mapping(cls, options, "pass_config", "pass_config.")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    def is_resolved(self) -> bool:
        return all(getattr(self, f) is not None for f in support_matrix.FLAGS)


def _as_threshold(t: Threshold, value: Any) -> int | float | None:
    key = f"pass_config.{t.name}"
    if t.type is float:
        return _as_float(key, value, nullable=t.nullable)
    return _as_int(key, value, nullable=t.nullable, minimum=1)


def _pass_config_fields() -> list[tuple[str, Any, Any]]:
    out: list[tuple[str, Any, Any]] = []
    for f in FUSIONS:
        out.append((f.flag, bool | None, field(default=None)))
        out += [(t.name, t.type | None if t.nullable else t.type, field(default=t.default))
                for t in f.thresholds]
    return out


PassConfig = make_dataclass("PassConfig", _pass_config_fields(), bases=(_PassConfigMethods,),
                            namespace={"__module__": __name__, "__doc__": _pass_config_doc()})
"""vLLM's PassConfig (see its docstring): a dataclass whose fields are the fusions' flags and
thresholds, with vLLM's names."""


# ---------------------------------------------------------------------------- CompilationConfig


@dataclass
class CompilationConfig:
    """irfuse's compilation config: vLLM's fields irfuse uses, plus the backend's own.

    vLLM fields: optimization_level (on vLLM's VllmConfig; here so that one object carries
    everything), pass_config, compile_ranges_split_points (extra range split points),
    compile_sizes (num_tokens values compiled as single-size ranges; integers only),
    max_num_batched_tokens (the top of the compile ranges).

    irfuse fields: dump_dir (write every stage; IRFUSE_DUMP_DIR when unset), inductor (hand
    the emitted graph to Inductor, else run it as it is), strict (a pipeline failure, or a
    pass the user turned on that cannot apply, raises instead of warning), debug (verify the
    IR after the import and after every pass that changed it), platform (compile for this
    platform instead of the detected one, e.g. 'cuda:sm90'; for tests and `irfuse config`),
    tp_size (TP size instead of the one read from the graph), piecewise (the host compiles a
    model in pieces split at attention, as vLLM does with `splitting_ops` and no Inductor
    partition: sequence parallelism and async TP then keep vLLM's rule of single sizes TP
    divides; irfuse's own backend compiles whole graphs).
    """

    optimization_level: int = DEFAULT_LEVEL
    pass_config: PassConfig = field(default_factory=PassConfig)
    compile_ranges_split_points: list[int] | None = None
    compile_sizes: list[int] | None = None
    max_num_batched_tokens: int = 8192
    dump_dir: str | None = None
    inductor: bool = True
    strict: bool = False
    debug: bool = False
    platform: str | None = None
    tp_size: int | None = None
    piecewise: bool = False

    def __post_init__(self) -> None:
        self.optimization_level = _as_level("optimization_level", self.optimization_level)
        self.pass_config = PassConfig.from_dict(self.pass_config)
        self.compile_ranges_split_points = _as_int_list(
            "compile_ranges_split_points", self.compile_ranges_split_points, minimum=1)
        self.compile_sizes = _as_int_list("compile_sizes", self.compile_sizes, minimum=1)
        self.max_num_batched_tokens = _as_int(  # type: ignore[assignment]
            "max_num_batched_tokens", self.max_num_batched_tokens, nullable=False, minimum=1)
        past = [p for p in self.compile_ranges_split_points or ()
                if p > self.max_num_batched_tokens]
        if past:
            raise _bad("compile_ranges_split_points", self.compile_ranges_split_points,
                       f"split points up to max_num_batched_tokens ({self.max_num_batched_tokens})"
                       f"; {', '.join(map(str, past))} lie past it")
        self.dump_dir = _as_str("dump_dir", self.dump_dir)
        for name in ("inductor", "strict", "debug", "piecewise"):
            setattr(self, name, _as_bool(name, getattr(self, name), nullable=False))
        self.platform = _as_platform("platform", self.platform)
        self.tp_size = _as_int("tp_size", self.tp_size, nullable=True, minimum=1)

    # -- constructors

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any] | CompilationConfig | None
    ) -> CompilationConfig:
        """From what `torch.compile(options=...)` gives: CompilationConfig fields, with
        `pass_config` a dict or a PassConfig. An unknown key is a ConfigError."""
        return _from_mapping(cls, options, "options", "")

    @classmethod
    def from_json(cls, text: str) -> CompilationConfig:
        """From a JSON object of CompilationConfig fields."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"bad JSON for the compilation config: {e}: {text!r}") from None
        if not isinstance(data, dict):
            raise _bad("compilation config", data, "a JSON object of CompilationConfig fields")
        return cls.from_options(data)

    @classmethod
    def from_cli(cls, argv: Sequence[str]) -> CompilationConfig:
        """From vLLM's command-line syntax (see `parse_cli`)."""
        return cls.from_options(parse_cli(argv))

    # -- output

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, PassConfig):
                value = value.to_dict()
            elif isinstance(value, list):
                value = list(value)
            out[f.name] = value
        return out

    def to_json(self, indent: int | None = 2) -> str:
        """JSON in field order (stable); `from_json` reads it back to an equal config."""
        return json.dumps(self.to_dict(), indent=indent)

    def is_resolved(self) -> bool:
        return self.pass_config.is_resolved() and self.platform is not None

    def resolve(self, **facts: Any) -> CompilationConfig:
        """`resolve(self, **facts)`."""
        return resolve(self, **facts)


# ---------------------------------------------------------------------------- CLI syntax

_CC_HEADS = ("cc", "compilation-config", "compilation_config")
_LEVEL_FLAGS = ("-O", "--optimization-level", "--optimization_level")
_CC_FLAGS = ("-cc", "--cc", "--compilation-config", "--compilation_config")
_CLI_FORMS = ("-O<level>, -O <level>, -O=<level>, --optimization-level <level>, "
              "-cc.<key>[.<key>...]=<value>, -cc.<key>+=a,b, --compilation-config '<json>', "
              "-cc '<json>'")


def _json_or_str(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return CliText(text)


def _merge(into: dict[str, Any], new: Mapping[str, Any], path: str = "") -> None:
    """Merge `new` into `into`: objects recursively, lists by concatenation; for anything
    else the later value wins (with a warning)."""
    for key, value in new.items():
        if key not in into:
            into[key] = copy.deepcopy(value)
            continue
        old = into[key]
        if isinstance(old, dict) and isinstance(value, Mapping):
            _merge(old, value, f"{path}{key}.")
        elif isinstance(old, list) and isinstance(value, list):
            into[key] = old + list(value)
        else:
            if old != value:
                warnings.warn(f"{path}{key} given twice ({old!r}, then {value!r}); "
                              f"the last one wins", stacklevel=3)
            into[key] = copy.deepcopy(value)


def parse_cli(argv: Sequence[str]) -> dict[str, Any]:
    """vLLM's compilation flags -> a dict for `CompilationConfig.from_options`.

    - `-O2`, `-O 2`, `-O=2`, `--optimization-level 2` (or `=2`): the optimization level.
    - `--compilation-config '<json>'` / `-cc '<json>'` (or `=<json>`): a JSON object.
    - `-cc.a.b=v` (or `-cc.a.b v`, or `--compilation-config.a.b=v`): a dotted key; the value
      is JSON if it parses, else the plain string (so `False` stays "False" and the field's
      check turns it into a bool). Dashes in keys become underscores.
    - `-cc.a.b+=x,y`: split the value on commas into a list, appended to what is there.
    Everything merges into one dict, objects recursively and lists by concatenation.
    """
    merged: dict[str, Any] = {}
    args = list(argv)
    i = 0

    def value_after(flag: str) -> str:
        nonlocal i
        if i + 1 >= len(args):
            raise ConfigError(f"{flag} needs a value")
        i += 1
        return args[i]

    while i < len(args):
        tok = args[i]
        if not isinstance(tok, str):
            raise ConfigError(f"command-line arguments must be strings, got {tok!r}")
        name, eq, inline = tok.partition("=")
        if name in _LEVEL_FLAGS:
            level = inline if eq else value_after(name)
            _merge(merged, {"optimization_level": CliText(level)})
        elif re.fullmatch(r"-O\S+", tok) and not tok.startswith("-O."):
            _merge(merged, {"optimization_level": CliText(tok[2:])})
        elif name in _CC_FLAGS:
            text = inline if eq else value_after(name)
            data = _json_or_str(text)
            if not isinstance(data, dict):
                raise ConfigError(
                    f"bad value for {name!r}: {text!r}; allowed: a JSON object such as "
                    f"'{{\"pass_config\": {{\"{FUSIONS[-1].flag}\": false}}}}'")
            _merge(merged, data)
        elif tok.startswith("-") and "." in name:
            parts = name.lstrip("-").split(".")
            if parts[0] not in _CC_HEADS:
                raise ConfigError(f"unknown argument {tok!r}; irfuse takes {_CLI_FORMS}")
            keys = [p.replace("-", "_") for p in parts[1:]]
            append = keys[-1].endswith("+")
            if append:
                keys[-1] = keys[-1][:-1]
            if not all(keys):
                raise ConfigError(f"bad dotted key in {tok!r}: empty key segment")
            text = inline if eq else value_after(name)
            value = [_json_or_str(v) for v in text.split(",")] if append else _json_or_str(text)
            nested: dict[str, Any] = {keys[-1]: value}
            for key in reversed(keys[:-1]):
                nested = {key: nested}
            _merge(merged, nested)
        else:
            raise ConfigError(f"unknown argument {tok!r}; irfuse takes {_CLI_FORMS}")
        i += 1
    return merged


# ---------------------------------------------------------------------------- resolution


def itemsize_of(dtype: Any) -> int:
    """Bytes per element of a torch dtype or a name (bf16, bfloat16, fp16, half, fp32, ...)."""
    if hasattr(dtype, "itemsize"):
        return int(dtype.itemsize)
    names = {"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "half": 2, "fp32": 4,
             "float32": 4, "float": 4, "fp8": 1, "float8_e4m3fn": 1, "float8_e4m3fnuz": 1}
    key = str(dtype).removeprefix("torch.").lower()
    if key not in names:
        raise ConfigError(f"bad value for 'dtype': {dtype!r}; allowed: {', '.join(names)}")
    return names[key]


@dataclass
class Resolution:
    """A resolved config, the facts it was resolved for, and why each pass flag has its value.

    `notes[field]` says where the value came from; `warnings` lists what the user asked for
    and did not get (the backend logs them).
    """

    config: CompilationConfig
    platform: Platform
    facts: dict[str, Any]
    notes: dict[str, str]
    warnings: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "platform": str(self.platform),
                "facts": dict(self.facts), "notes": dict(self.notes),
                "warnings": list(self.warnings)}


def _level_default(
    row: Fusion,
    level: int,
    platform: Platform,
    tp: int | None,
    scheme: tuple[str, ...] | None,
    flashinfer: bool,
    facts: tuple[int | None, int | None],
    pc: Any,
) -> tuple[bool, str]:
    """What optimization level `level` fills into an unset flag, and why."""
    tag = f"O{level} default"
    if level == 0:
        return False, f"{tag}: O0 runs no pass"
    sup = support_matrix.support(row.name, platform)
    if sup is None:
        return False, f"{tag}: {row.name} is not available on {platform}"
    if sup.default_level is None:
        why = f": {row.note}" if row.note else ""
        return False, f"{tag}: {row.name} is off at every level on {platform}{why}"
    if level < sup.default_level:
        return False, f"{tag}: {row.name} is on from O{sup.default_level} on {platform}"
    ok, why = _can_apply(row.name, platform, scheme)
    if not ok:
        return False, f"{tag}: {why}"
    if row.needs_tp and (tp is None or tp <= 1):
        return False, f"{tag}: {row.name} needs TP > 1 (TP is {tp or 'unknown'})"
    if sup.backend == "flashinfer":
        problem = _flashinfer_problem(row, platform, tp, *facts, flashinfer, pc)
        if problem:
            return False, f"{tag}: {problem}"
    return True, f"{tag}: {row.name} is on from O{sup.default_level} on {platform}"


def _schemes(quant_scheme: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """The model's quant schemes as a tuple (None: unknown), each checked against the known
    names."""
    if quant_scheme is None:
        return None
    names = (quant_scheme,) if isinstance(quant_scheme, str) else tuple(quant_scheme)
    if not names:
        return None
    for name in names:
        if not isinstance(name, str) or name not in support_matrix.SCHEMES:
            raise _bad("quant_scheme", name, ", ".join(support_matrix.SCHEMES))
    return names


def _can_apply(name: str, platform: Platform,
               schemes: tuple[str, ...] | None) -> tuple[bool, str]:
    """`support_matrix.can_apply` for a model with several quant schemes: the pass can apply
    when it can to one of them (each site is then judged by its own scheme, and the report
    names the ones left out); (False, the reasons) when it can to none."""
    if schemes is None:
        return support_matrix.can_apply(name, platform, None)
    answers = [support_matrix.can_apply(name, platform, s) for s in schemes]
    if any(ok for ok, _ in answers):
        return True, next((why for ok, why in answers if ok and why), "")
    return False, "; ".join(dict.fromkeys(why for _, why in answers))


def _flashinfer_problem(
    row: Fusion, platform: Platform, tp: int | None, itemsize: int | None,
    hidden: int | None, available: bool, pc: Any,
) -> str | None:
    """Why a FlashInfer-served pass cannot run here, or None (an unknown TP is no problem):
    FlashInfer missing, a TP size its fused all-reduce workspace does not take, or no value
    for one of the pass's thresholds left unset (its cap)."""
    name = row.name
    if not available:
        return f"{name} needs FlashInfer on {platform}; it is not installed"
    if tp is None:
        return None
    if tp not in thresholds.FI_ALLREDUCE_WORLD_SIZES:
        sizes = ", ".join(map(str, thresholds.FI_ALLREDUCE_WORLD_SIZES))
        return f"{name}: FlashInfer's fused all-reduce supports TP {sizes}, not {tp}"
    for t in row.thresholds:
        if t.fill is not None and getattr(pc, t.name) is None \
                and t.fill(platform, hidden, tp, itemsize) is None:
            return f"{name}: no {t.source} for TP {tp} on {platform}; set pass_config.{t.name}"
    return None


def _why_idle(row: Fusion, tp: int | None) -> str | None:
    """Why a pass the user turned on, which the platform and model allow, still runs nowhere:
    it needs TP > 1 and the TP size is unknown. None if it runs."""
    if row.needs_tp and tp is None:
        return (f"{row.name} needs TP > 1 and the TP size is unknown (set tp_size; the backend "
                "reads it from the graph's collectives)")
    return None


def resolve_explained(
    config: CompilationConfig | Mapping[str, Any] | None = None,
    *,
    platform: Platform | str | None = None,
    tp_size: int | None = None,
    hidden_size: int | None = None,
    itemsize: int | None = None,
    quant_scheme: str | Sequence[str] | None = None,
    flashinfer_available: bool | None = None,
) -> Resolution:
    """Fill every unset field for a platform and a model, and say why (see `resolve`)."""
    cfg = CompilationConfig.from_options(config)  # a copy: the caller's config is untouched
    # The config's platform and tp_size are the user's overrides: they win over the facts.
    if cfg.platform is not None:
        plat = Platform.parse(cfg.platform)
    elif platform is None:
        plat = detect()
    elif isinstance(platform, Platform):
        plat = platform
    else:
        plat = Platform.parse(platform)
    if cfg.tp_size is not None:
        tp: int | None = cfg.tp_size
    else:
        tp = None if tp_size is None else _as_int("tp_size", tp_size, False, 1)
    schemes = _schemes(quant_scheme)
    if flashinfer_available is None:
        flashinfer_available = importlib.util.find_spec("flashinfer") is not None
    pc = cfg.pass_config
    level = cfg.optimization_level
    user_set = {f.flag for f in FUSIONS if getattr(pc, f.flag) is not None}
    notes: dict[str, str] = {}
    warns: list[str] = []

    facts_of_model = (itemsize, hidden_size)

    # 1. The level fills what the user left unset.
    for row in FUSIONS:
        if row.flag in user_set:
            notes[row.flag] = "set by the user"
            continue
        value, why = _level_default(row, level, plat, tp, schemes, flashinfer_available,
                                    facts_of_model, pc)
        setattr(pc, row.flag, value)
        notes[row.flag] = why

    def turn_off(flag: str, why: str) -> None:
        if flag in user_set and cfg.strict:
            raise ConfigError(f"pass_config.{flag}=True cannot apply: {why}")
        setattr(pc, flag, False)
        notes[flag] = f"off: {why}"
        warns.append(f"pass_config.{flag} turned off: {why}")

    # 2. A pass that rewrites another's output turns that one on (vLLM: async TP consumes the
    #    collectives that sequence parallelism creates).
    for row in FUSIONS:
        if row.implies and getattr(pc, row.flag) and not getattr(pc, row.implies):
            if row.implies in user_set:
                warns.append(f"pass_config.{row.implies}=False overridden: {row.flag} implies "
                             "it")
            setattr(pc, row.implies, True)
            notes[row.implies] = f"on: implied by {row.flag}"

    # 3. A pass that is on must be able to apply here (platform, scheme, TP, FlashInfer).
    for row in FUSIONS:
        if not getattr(pc, row.flag):
            continue
        ok, why = _can_apply(row.name, plat, schemes)
        if ok and row.needs_tp and tp is not None and tp <= 1:
            ok, why = False, f"{row.name} needs tensor parallelism (TP > 1); TP is {tp}"
        sup = support_matrix.support(row.name, plat)
        if ok and sup is not None and sup.backend == "flashinfer":
            problem = _flashinfer_problem(row, plat, tp, *facts_of_model, flashinfer_available,
                                          pc)
            if problem:
                ok, why = False, problem
        if not ok:
            turn_off(row.flag, why)
        elif row.flag in user_set and (idle := _why_idle(row, tp)):
            if cfg.strict:
                raise ConfigError(f"pass_config.{row.flag}=True cannot apply: {idle}")
            warns.append(f"pass_config.{row.flag}=True has no effect: {idle}")
    for row in FUSIONS:
        if row.implies and getattr(pc, row.flag) and not getattr(pc, row.implies):
            turn_off(row.flag, f"it needs {row.implies}, which is off")

    # 4. Thresholds the passes that are on need, where the user left them unset.
    where = f"{plat}, hidden {hidden_size}, TP {tp}, itemsize {itemsize}"
    for row in FUSIONS:
        for t in row.thresholds:
            if not getattr(pc, row.flag) or t.fill is None or getattr(pc, t.name) is not None:
                continue
            value = t.fill(plat, hidden_size, tp, itemsize)
            if value is not None:
                setattr(pc, t.name, t.type(value))
                notes[t.name] = f"{t.source} for {where}"
            elif not t.required:
                notes[t.name] = f"no {t.source} for {where}: unbounded"
            else:
                why = f"no {t.source} for {where}; set pass_config.{t.name}"
                turn_off(row.flag, why)
                for other in FUSIONS:
                    if other.implies == row.flag and getattr(pc, other.flag):
                        turn_off(other.flag, f"it needs {row.flag}: {why}")

    # 5. vLLM warns when fusions run without no-op elimination (reshapes hide patterns).
    for remover in FUSIONS:
        if not remover.removes_noops or getattr(pc, remover.flag):
            continue
        hidden_by = [f.flag for f in FUSIONS if f.noops_hide_matches and getattr(pc, f.flag)]
        if hidden_by:
            warns.append(f"{', '.join(hidden_by)} on with {remover.flag} off: reshapes "
                         f"left in the graph may hide patterns")

    # 6. Backend fields.
    if cfg.dump_dir is None and os.environ.get("IRFUSE_DUMP_DIR"):
        cfg.dump_dir = os.environ["IRFUSE_DUMP_DIR"]
        notes["dump_dir"] = "from IRFUSE_DUMP_DIR"
    cfg.platform = str(plat)
    cfg.tp_size = tp
    facts = {"tp_size": tp, "hidden_size": hidden_size, "itemsize": itemsize,
             "quant_scheme": schemes[0] if schemes and len(schemes) == 1 else schemes,
             "flashinfer_available": flashinfer_available}
    return Resolution(cfg, plat, facts, notes, warns)


def resolve(
    config: CompilationConfig | Mapping[str, Any] | None = None,
    *,
    platform: Platform | str | None = None,
    tp_size: int | None = None,
    hidden_size: int | None = None,
    itemsize: int | None = None,
    quant_scheme: str | Sequence[str] | None = None,
    flashinfer_available: bool | None = None,
) -> CompilationConfig:
    """A copy of `config` with every pass flag set, for a platform and a model.

    Facts (each may be None = unknown): platform (default: detected) and tp_size (read from
    the graph by the backend), which config.platform and config.tp_size override when set;
    hidden_size and itemsize (for the thresholds the platform fills, and size caps in tokens);
    quant_scheme (a name from `support_matrix.SCHEMES`, or the names of all the schemes the
    model's quants use; None means unknown and is not checked); flashinfer_available (default:
    whether `flashinfer` can be imported).

    Rules, in order:
    1. A flag the user set is kept; an unset flag gets the level's default: O0 turns every
       pass off (no-op elimination included, as vLLM); O1/O2/O3 turn a pass on where the
       support matrix says so for this platform and the pass can apply to the model (its
       quant scheme; TP > 1 for collective fusions; FlashInfer installed, with a size cap for
       this TP, where FlashInfer serves it). O3 is O2.
    2. A pass that declares `implies` turns that pass on (vLLM's rule for async TP and
       sequence parallelism), even over the user's False.
    3. A pass that is on but cannot apply (platform, quant scheme, TP 1, FlashInfer missing
       or TP not in {2, 4, 8}) is turned off with a warning, or with strict=True raises
       ConfigError; so is a pass whose implied pass ended up off. A pass the user turned on
       that needs TP > 1 while the TP size is unknown stays on but runs nowhere: a warning,
       or with strict=True a ConfigError. vLLM forces passes off on a few platforms only;
       irfuse generalises that to its support matrix (its CPU references let more passes run
       on the CPU).
    4. A threshold a pass that is on declares with a platform value (`Threshold.fill`), if
       unset, gets it (FlashInfer's size cap for the capability and TP size; vLLM's
       sequence-parallelism threshold); where there is none, a `required` threshold turns the
       pass (and the passes implying it) off with a warning, as vLLM does, and another leaves
       the pass unbounded.
    5. With the pass that `removes_noops` off while passes whose matches reshapes hide are
       on, a warning (vLLM's), nothing more.
    6. dump_dir comes from IRFUSE_DUMP_DIR when unset; platform and tp_size are recorded.
    vLLM rules that do not carry over: cudagraph modes, custom_ops, splitting_ops (irfuse
    compiles whole graphs), DP/PP gating of the all-reduce fusion (irfuse sees one TP group).
    """
    return resolve_explained(
        config, platform=platform, tp_size=tp_size, hidden_size=hidden_size,
        itemsize=itemsize, quant_scheme=quant_scheme,
        flashinfer_available=flashinfer_available).config
