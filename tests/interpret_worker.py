"""Run a test file's `--worker` part in a child process under Triton's interpreter.

`TRITON_INTERPRET` must be set before triton is imported, and the pytest process has imported it
already, so kernel tests that run on the CPU start the file again as a script: its `--worker`
branch runs every case and prints one JSON object, which the tests read back.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run_worker(script: str) -> dict:
    """The JSON the script's `--worker` branch printed last, run with TRITON_INTERPRET=1."""
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), str(ROOT / "tests"),
                                                       os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, script, "--worker"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def guard(fn, *args) -> dict:
    """A worker case's result, or its exception as a failed result, so one raising case fails
    only its own test."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 (reported to the test of that case)
        return {"ok": False, "detail": f"raised {type(e).__name__}: {e}"}
