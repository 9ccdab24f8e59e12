"""`benchmarks/profile_op.py`: the `--config` fields it replaces in a default launch shape."""

from __future__ import annotations

import pathlib
import sys

import pytest

from irfuse.kernels import norm_quant, nvfp4

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import profile_op  # noqa: E402 (a script beside the benchmarks, by path)


def test_config_fields_are_replaced_with_their_types() -> None:
    cfg = norm_quant.GroupConfig(8, fast_div=True, pdl=True)
    out = profile_op.parse_fields("num_warps=16,vec=8,pdl=0,evict=True", cfg)
    assert out == norm_quant.GroupConfig(16, fast_div=True, vec=8, pdl=False, evict=True)
    assert profile_op.parse_fields("", cfg) is cfg
    assert profile_op.parse_fields("split=1", nvfp4.Nvfp4Config(128, 2)).split is True


@pytest.mark.parametrize("text, message", [("warps=16", "not field=value"),
                                           ("num_warps", "not field=value"),
                                           ("pdl=yes", "takes True/False")])
def test_bad_config_fields_are_refused(text: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        profile_op.parse_fields(text, norm_quant.GroupConfig(8))
