"""irfuse-opt on bad input: one message with a location, a non-zero status, never a traceback.

The fuzz cases mutate the valid IR of filecheck/ (truncate, delete a character, swap or
duplicate tokens) with a fixed seed and run irfuse-opt in-process on each (with the file's own
pass where it has one): the result is either IR (exit 0) or one error naming file:line:col.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import random
import re

import pytest

from irfuse import opt

ROOT = pathlib.Path(__file__).resolve().parents[2] / "filecheck"
FUSE_NORM = ROOT / "rewrites" / "fuse-norm-quant.mlir"
BAD_WEIGHT = """\
func.func @weight_size(%x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[2048], bf16>) {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[2048], bf16>) -> !irfuse.tensor<[s0, 4096], bf16>
  func.return
}
"""


def run_opt(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = opt.main(args)
    return status, out.getvalue(), err.getvalue()


def assert_one_error(status: int, err: str, expected_status: int, *needles: str) -> None:
    assert status == expected_status, err
    assert "Traceback" not in err
    assert err.count("irfuse-opt:") == 1, err
    for needle in needles:
        assert needle in err, err


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ("max_tokens=abc", "bad value for option 'max_tokens' of pass 'fuse-norm-quant': abc"),
        ("max_tokens=1.5", "bad value for option 'max_tokens' of pass 'fuse-norm-quant': 1.5"),
        ("max_tokens=-5", "bad value for option 'max_tokens' of pass 'fuse-norm-quant': -5"),
        ("max_tokens=0", "allowed: an integer >= 1"),
        ("max_tokens", "'max_tokens' of pass 'fuse-norm-quant': (nothing)"),
        ("max_tokens=1,2", "'max_tokens' of pass 'fuse-norm-quant': 1,2"),
        ("bogus=1", "unknown option 'bogus' for pass 'fuse-norm-quant'; its options: max_tokens"),
    ],
)
def test_malformed_pass_options_name_the_option(options: str, needle: str) -> None:
    status, out, err = run_opt([str(FUSE_NORM), "-p", f"fuse-norm-quant{{{options}}}"])
    assert_one_error(status, err, 2, needle)
    assert out == ""


def test_pass_options_that_are_fine_still_run() -> None:
    status, out, err = run_opt([str(FUSE_NORM), "-p", "fuse-norm-quant{max_tokens=4096}"])
    assert status == 0, err
    assert "fused.rms_norm_quant" in out


@pytest.mark.parametrize(
    ("pipeline", "needle"),
    [
        ("cse-pure{x=1}", "unknown option 'x' for pass 'cse-pure'; it takes no options"),
        ("nope", "unknown pass 'nope'; known passes:"),
        ("fuse-norm-quant{", "error in the pass pipeline"),
        ("fuse-act-quant{max_tokens=big}", "'max_tokens' of pass 'fuse-act-quant': big"),
    ],
)
def test_bad_pipelines(pipeline: str, needle: str) -> None:
    status, _, err = run_opt([str(FUSE_NORM), "-p", pipeline])
    assert_one_error(status, err, 2, needle)


def test_verifier_error_names_the_op_and_its_position(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bad.mlir"
    path.write_text(BAD_WEIGHT)
    expected = (f"{path}:2:3: error: 'norm.rms_norm' op: weight has shape [2048] but x's last "
                "dim is 4096")
    for args in ([str(path)], [str(path), "-p", "fuse-norm-quant"]):
        status, _, err = run_opt(args)
        assert_one_error(status, err, 1, expected)


def test_verifier_error_in_a_later_chunk_counts_its_lines(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "split.mlir"
    path.write_text(FUSE_NORM.read_text().split("// -----")[0] + "\n// -----\n" + BAD_WEIGHT)
    lines = path.read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "norm.rms_norm %x, weight %w" in text
                and "2048" in text)
    status, _, err = run_opt([str(path), "--split-input-file"])
    assert_one_error(status, err, 1, f"{path}:{line}:3: error: 'norm.rms_norm' op")


def test_verify_diagnostics_mode_is_unchanged(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bad.mlir"
    path.write_text(BAD_WEIGHT)
    status, out, _ = run_opt([str(path), "--verify-diagnostics"])
    assert status == 0 and "weight has shape [2048] but x's last dim is 4096" in out


def test_binary_input(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "blob.mlir"
    path.write_bytes(b"func.func @f() {\n  \xd0\xff\x00 }\n")
    status, _, err = run_opt([str(path)])
    assert_one_error(status, err, 1, f"{path}:2:3: error: not UTF-8 text (byte 0xd0)")


def test_a_directory_and_a_missing_file(tmp_path: pathlib.Path) -> None:
    status, _, err = run_opt([str(tmp_path)])
    assert_one_error(status, err, 1, f"{tmp_path} is a directory, not an IR file")
    status, _, err = run_opt([str(tmp_path / "none.mlir")])
    assert_one_error(status, err, 1, "cannot open", "none.mlir", "No such file")


def test_any_file_name_is_read_as_mlir(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "ir.txt"
    path.write_text(FUSE_NORM.read_text())
    status, out, err = run_opt([str(path), "-p", "fuse-norm-quant"])
    assert status == 0, err
    assert "fused.rms_norm_quant" in out


@pytest.mark.parametrize(
    "text",
    [
        "func.func @f() attributes {a = " + "[" * 5000 + "]" * 5000 + "} { func.return }\n",
        "builtin.module {\n" * 3000 + "}\n" * 3000,
    ],
    ids=["nested-attributes", "nested-modules"],
)
def test_deep_nesting_is_an_error_with_a_position(tmp_path: pathlib.Path, text: str) -> None:
    path = tmp_path / "deep.mlir"
    path.write_text(text)
    status, _, err = run_opt([str(path)])
    assert_one_error(status, err, 1, "error: the IR nests too deeply to parse")
    assert re.search(re.escape(str(path)) + r":\d+:\d+: error", err), err


def test_an_unterminated_string_is_a_parse_error_not_a_hang(tmp_path: pathlib.Path) -> None:
    """xDSL's string pattern backtracks exponentially without its closing quote; a 70-character
    line used to hang the lexer."""
    path = tmp_path / "open.mlir"
    path.write_text('%r = aten.call "f.default"(%x, "sum", "0)) : (!irfuse.tensor<[s0, 256], '
                    'bf16>) -> !irfuse.tensor<[s0, 256], bf16>\n')
    status, _, err = run_opt([str(path)])
    assert_one_error(status, err, 1, "End of file reached before closing string literal")


# ---------------------------------------------------------------------------- fuzz

_TOKEN = re.compile(r"%[\w.#]+|@\w+|[\w.]+|\S")
_FUZZ_FILES = sorted(p for p in ROOT.rglob("*.mlir")
                     if "invalid" not in p.name and "parse-errors" not in p.name)


def _mutate(text: str, rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:  # truncate
        return text[: rng.randrange(len(text))]
    if kind == 1:  # delete one character
        i = rng.randrange(len(text))
        return text[:i] + text[i + 1:]
    (a0, a1), (b0, b1) = sorted(rng.sample([m.span() for m in _TOKEN.finditer(text)], 2))
    if kind == 2:  # swap two tokens
        return text[:a0] + text[b0:b1] + text[a1:b0] + text[a0:a1] + text[b1:]
    return text[:a0] + text[b0:b1] + text[a1:]  # replace a token by another


@pytest.mark.parametrize("seed", range(4))
def test_fuzz_mutated_ir_gives_a_located_error_or_ir(seed: int, tmp_path: pathlib.Path) -> None:
    rng = random.Random(seed)
    path = tmp_path / "case.mlir"
    errors = 0
    for case in range(75):
        source = rng.choice(_FUZZ_FILES)
        text = "\n".join(line for line in source.read_text().splitlines()
                         if not line.lstrip().startswith("//"))
        mutated = _mutate(text, rng)
        path.write_text(mutated)
        args = [str(path)]
        if source.parent.name in ("raise", "rewrites"):
            run = re.search(r"-p\s+'?([\w-]+)", source.read_text())  # the file's own pass
            args += ["-p", run.group(1) if run else source.stem]
        status, _, err = run_opt(args)
        where = f"case {case} (from {source.name}):\n{mutated}\n{err}"
        if status == 0:
            continue
        errors += 1
        assert status == 1, where
        assert "Traceback" not in err and err.count("irfuse-opt:") == 1, where
        assert re.search(re.escape(str(path)) + r":\d+:\d+", err), where
    assert errors > 50  # the mutations do break the IR
