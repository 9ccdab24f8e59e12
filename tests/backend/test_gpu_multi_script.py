"""benchmarks/gpu_multi.sh, the multi-GPU run, checked without GPUs: its dry run (`DRY_RUN=1`)
prints the command of every step, and each must run: the test files exist, each benchmark's own
argument parser accepts its flags, the TP sizes beyond the GPU count are skipped."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shlex
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_multi.sh"


def _dry_run(tmp_path: pathlib.Path, gpus: int) -> list[list[str]]:
    env = {**os.environ, "DRY_RUN": "1", "GPUS": str(gpus), "OUT": str(tmp_path),
           "STAGES": "tests bench_ar bench_tp bench_gemm bench_tp_dynamic",
           "PATH": f"{pathlib.Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    return [shlex.split(line[len("RUN: "):]) for line in done.stdout.splitlines()
            if line.startswith("RUN: ")]


def _parser(script: str):
    spec = importlib.util.spec_from_file_location(pathlib.Path(script).stem, ROOT / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return getattr(module, "parse_args", None) or module._parse


def test_the_scripts_parse():
    for name in ("gpu_multi.sh", "gpu_env.sh", "gpu_batch.sh"):
        subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / name)], check=True)


@pytest.mark.parametrize("gpus, tps", [(4, [2, 4]), (2, [2])])
def test_every_step_command_is_accepted(tmp_path, gpus, tps):
    commands = _dry_run(tmp_path, gpus)
    assert all(c[:2] == ["timeout", c[1]] and c[2] == "python3" for c in commands)
    tests = [c for c in commands if c[3:5] == ["-m", "pytest"]]
    (pytest_call,) = tests
    files = [a for a in pytest_call if a.endswith(".py")]
    assert files and all((ROOT / f).is_file() for f in files)
    seen: dict[str, list[int]] = {}
    for command in commands:
        if command in tests:
            continue
        script, argv = command[3], command[4:]
        args = _parser(script)(argv)
        tp = args.world if hasattr(args, "world") else args.tp
        seen.setdefault(pathlib.Path(script).stem, []).append(tp)
        assert pathlib.Path(args.out).parent == tmp_path
        if "allreduce" in script or "gemm_comms" in script:
            assert args.group == "vllm"  # the group named as vLLM's coordinator tp:0
    # bench_tp_e2e twice per TP: compile sizes, then one dynamic range with vLLM's collectives
    assert seen == {"bench_allreduce_rms": tps, "bench_tp_e2e": tps + tps,
                    "bench_gemm_comms": tps}
