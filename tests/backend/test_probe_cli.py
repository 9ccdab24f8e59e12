"""Every public option, config flag and CLI argument with a wrong value: one line naming it, no
traceback; the report CLI on corrupt files; strict on passes that cannot run; platforms."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import typing
import warnings

import pytest
import torch

from irfuse import backend, cli
from irfuse.config import CompilationConfig, ConfigError, PassConfig
from irfuse.platform import Platform

# ---------------------------------------------------------------------------- options / flags


def _bad_values(name: str, annotation: typing.Any) -> list[typing.Any]:
    if name == "platform":
        return ["tpu", "cuda:sm999", 5]
    if name == "optimization_level":
        return [7, "O9", 1.5]
    if name == "pass_config":
        return [5, "fuse_norm_quant"]
    args = set(typing.get_args(annotation)) or {annotation}
    if bool in args:
        return ["maybe", 2]
    if int in args:
        return ["abc", 1.5, -3, 0]
    if float in args:
        return ["abc", -1.0, float("inf")]
    if str in args:
        return [5, ["a"]]
    if any(typing.get_origin(a) is list for a in args):
        return ["a,b", [0], 5]
    raise AssertionError(f"no bad values for {name}: {annotation}")


def _cases() -> list[tuple[str, typing.Any]]:
    cases = []
    for cls, prefix in ((CompilationConfig, ""), (PassConfig, "pass_config.")):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            for value in _bad_values(f.name, hints[f.name]):
                cases.append((prefix + f.name, value))
    return cases


CASES = _cases()


def _nested(key: str, value: typing.Any) -> dict:
    head, _, rest = key.partition(".")
    return {head: _nested(rest, value)} if rest else {head: value}


def test_the_walk_covers_every_field() -> None:
    keys = {key for key, _ in CASES}
    assert keys == ({f.name for f in dataclasses.fields(CompilationConfig)}
                    | {f"pass_config.{f.name}" for f in dataclasses.fields(PassConfig)})


@pytest.mark.parametrize(("key", "value"), CASES, ids=[f"{k}={v!r}" for k, v in CASES])
def test_a_bad_option_is_one_line_naming_it(key: str, value: typing.Any) -> None:
    with pytest.raises(ConfigError) as err:
        CompilationConfig.from_options(_nested(key, value))
    message = str(err.value)
    assert "\n" not in message
    assert f"'{key}'" in message or f"'{key.split('.')[0]}'" in message, message


@pytest.mark.parametrize(("key", "value"), CASES, ids=[f"{k}={v!r}" for k, v in CASES])
def test_a_bad_cli_flag_is_one_line_naming_it(key: str, value: typing.Any,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    text = value if isinstance(value, str) else json.dumps(value)
    status = cli.main(["config", "--platform", "cpu", f"-cc.{key}={text}"])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and key.split(".")[-1] in lines[0], err


def test_unknown_keys_are_named() -> None:
    with pytest.raises(ConfigError, match="unknown key 'bogus'"):
        CompilationConfig.from_options({"bogus": 1})
    with pytest.raises(ConfigError, match="unknown key 'pass_config.bogus'"):
        CompilationConfig.from_options({"pass_config": {"bogus": 1}})


@pytest.mark.parametrize("key", sorted({k for k, _ in CASES}))
def test_a_bad_torch_compile_option_names_it(key: str) -> None:
    value = next(v for k, v in CASES if k == key)
    torch._dynamo.reset()
    compiled = torch.compile(torch.nn.Linear(4, 4), backend="irfuse",
                             options=_nested(key, value))
    with pytest.raises(Exception) as err:
        compiled(torch.randn(2, 4))
    message = str(err.value)
    line = next(line for line in message.splitlines() if line.startswith("ConfigError:"))
    assert key.split(".")[-1] in line, message


@pytest.mark.parametrize(
    ("argv", "status", "needle"),
    [
        (["nope"], 2, "unknown command 'nope'"),
        (["config", "--tp", "0"], 2, "argument --tp: '0' is below 1"),
        (["config", "--tp", "two"], 2, "argument --tp: 'two' is not an integer"),
        (["config", "--hidden", "-1"], 2, "argument --hidden: '-1' is below 1"),
        (["config", "--dtype", "int3"], 2, "bad value for 'dtype': 'int3'"),
        (["config", "--scheme", "fp3"], 2, "argument --scheme: invalid choice: 'fp3'"),
        (["config", "--platform", "tpu"], 2, "bad platform 'tpu'"),
        (["config", "--platform", "cuda:sm999"], 2, "sm999 is not a CUDA compute capability"),
        (["config", "--bogus"], 2, "unknown argument '--bogus'"),
        (["config", "-O9"], 2, "bad value for 'optimization_level'"),
        (["passes", "--platform", "cuda:sm999"], 2, "sm999 is not a CUDA compute capability"),
        (["passes", "--scheme", "fp3"], 2, "argument --scheme: invalid choice"),
        (["passes", "--markdown", "--json"], 2, "not allowed with argument"),
        (["passes", "--bogus"], 2, "unrecognized arguments: --bogus"),
        (["demo", "--size", "huge"], 2, "--size huge: model 'llama-fp8' comes in tiny, small"),
        (["demo", "--layers", "0"], 2, "argument --layers: '0' is below 1"),
        (["demo", "--tokens", "-1"], 2, "argument --tokens: '-1' is below 1"),
        (["demo", "--tokens", "x"], 2, "argument --tokens: 'x' is not an integer"),
        (["demo", "--size", "tiny", "--tokens", "1025"], 2,
         "--tokens 1025: llama-fp8 (tiny) has positions (its RoPE cache) up to 1024"),
        (["demo", "--model", "nope"], 2, "unknown model 'nope'"),
        (["demo", "--model", "llama-tp"], 2, "a tensor-parallel model needs a process group"),
        (["demo", "--bogus"], 2, "unknown argument '--bogus'"),
        (["demo", "-cc.platform=tpu"], 2, "bad platform 'tpu'"),
        (["demo", "-cc.platform=rocm:gfx000"], 2, "gfx000 is not a ROCm architecture"),
        (["demo", "--model", "paged", "--tokens", "100000"], 2,
         "--tokens 100000: the inputs of paged (small) would take"),
        (["config", "--platform", "rocm:gfx000"], 2, "gfx000 is not a ROCm architecture"),
        (["config", "--compilation-config", '{"compile_sizes": "8"}'], 2,
         "bad value for 'compile_sizes': '8'"),
        (["config", "--compilation-config", '{"strict": "false"}'], 2,
         "bad value for 'strict': 'false'"),
        (["config", "-cc.max_num_batched_tokens=1024", "-cc.compile_ranges_split_points=[4096]"],
         2, "4096 lie past it"),
        (["report"], 2, "the following arguments are required: path"),
        (["report", "/nonexistent/dumps"], 1, "/nonexistent/dumps does not exist"),
    ],
)
def test_a_bad_cli_argument_is_one_line_naming_it(argv: list[str], status: int, needle: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    try:
        got = cli.main(argv)
    except SystemExit as exit_:
        got = exit_.code
    out, err = capsys.readouterr()
    assert got == status, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in out + err


def test_platform_parse_refuses_unknown_capabilities() -> None:
    with pytest.raises(ValueError, match=r"sm999 is not a CUDA compute capability \(known: sm50"):
        Platform.parse("cuda:sm999")
    assert Platform.parse("cuda:sm120") == Platform("cuda", capability=120)
    assert str(Platform("cuda", capability=130)) == "cuda:sm130"  # what detect() may report


# ---------------------------------------------------------------------------- strict


def _compile_linear(options: dict) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch._dynamo.reset()
        compiled = torch.compile(torch.nn.Linear(8, 8), backend="irfuse",
                                 options={"inductor": False, "platform": "cpu", **options})
        compiled(torch.randn(4, 8))
    return [str(w.message) for w in caught if str(w.message).startswith("irfuse")]


@pytest.mark.parametrize(
    ("flag", "why"),
    [
        ("enable_sp", "enable-sp needs TP > 1 and the TP size is unknown"),
        ("fuse_allreduce_rms", "fuse-allreduce-rms needs TP > 1 and the TP size is unknown"),
    ],
)
def test_strict_refuses_a_pass_that_cannot_run(flag: str, why: str) -> None:
    with pytest.raises(Exception, match=f"pass_config.{flag}=True cannot apply: .*{why}"):
        _compile_linear({"strict": True, "pass_config": {flag: True}})


def test_the_default_warns_once_about_a_pass_that_cannot_run() -> None:
    backend._WARNED.clear()
    first = _compile_linear({"pass_config": {"enable_sp": True}})
    second = _compile_linear({"pass_config": {"enable_sp": True}})
    assert ("irfuse: pass_config.enable_sp=True has no effect: enable-sp needs TP > 1 and the "
            "TP size is unknown (set tp_size; the backend reads it from the graph's "
            "collectives)") in first
    assert not [m for m in second if "enable_sp" in m]


def test_config_explain_lists_the_warning_and_plain_config_prints_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["config", "--platform", "cpu", "-cc.pass_config.enable_sp=True"]
    assert cli.main([*flags, "--explain"]) == 0
    out, _ = capsys.readouterr()
    assert any("enable-sp needs TP > 1 and the TP size is unknown" in w
               for w in json.loads(out)["warnings"])
    assert cli.main(flags) == 0
    _, err = capsys.readouterr()
    assert "irfuse config: warning: pass_config.enable_sp=True has no effect" in err
    assert cli.main([*flags, "-cc.strict=true"]) == 2
    _, err = capsys.readouterr()
    assert "pass_config.enable_sp=True cannot apply" in err


# ---------------------------------------------------------------------------- irfuse report


GOOD = {"graph": "graph_000", "range": [1, None], "platform": "cpu", "config": {},
        "raised": {"rms_norm": 1}, "raise": [],
        "passes": [{"name": "fuse-norm-quant", "fused": 2,
                    "not_fused": [{"reason": "why", "location": "m.py:3"}], "ms": 1.0}],
        "stages": [{"name": "import", "ms": 2.0, "ops": 10}], "error": None}


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"graph": 3}, "'graph' is int 3, not str"),
        ({"range": "all"}, "'range' is str 'all', not list"),
        ({"range": [1, 2, 3]}, "'range' is [1, 2, 3], not [lo, hi]"),
        ({"raised": {"rms_norm": "one"}}, "'raised'['rms_norm'] is str 'one', not int"),
        ({"passes": [{"name": "p", "fused": "2", "not_fused": [], "ms": 1}]},
         "passes[0].'fused' is str '2', not int"),
        ({"passes": [{"name": "p", "fused": 2, "not_fused": [5], "ms": 1}]},
         "passes[0].not_fused[0] is int, not an object"),
        ({"passes": "none"}, "'passes' is str 'none', not list"),
        ({"stages": [{"name": "import", "ms": "fast", "ops": 1}]},
         "stages[0].'ms' is str 'fast', not int or float"),
        ({"kernels": [{"op": "k", "impl": "triton", "reason": "r", "calls": "1"}]},
         "kernels[0].'calls' is str '1', not int"),
        ({"error": 7}, "'error' is int 7, not str"),
        ({"platform": None}, "'platform' is NoneType None, not str"),
    ],
)
def test_report_names_a_wrongly_typed_field(change: dict, needle: str, tmp_path: pathlib.Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps({**GOOD, **change}))
    assert cli.main(["report", str(path)]) == 1
    out, err = capsys.readouterr()
    assert needle in err and str(path) in err and "Traceback" not in err, err


def test_report_reads_every_good_file_and_names_the_bad(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, text in (("a", json.dumps(GOOD)), ("b", "{not json"), ("c", "[1, 2]"),
                       ("d", json.dumps({**GOOD, "graph": "graph_003"}))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(text)
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "report.json").write_bytes(b"\xff\xfe")
    assert cli.main(["report", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "graph graph_000" in out and "graph graph_003" in out  # after the bad ones too
    for bad in ("b", "c", "e"):
        assert f"{tmp_path / bad / 'report.json'}: not a compile report" in err
    assert "3 of 5 reports could not be read" in err and "Traceback" not in err
