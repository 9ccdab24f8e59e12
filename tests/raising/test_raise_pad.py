"""raise-pad on real graphs: every spelling of a last-dim constant pad raised once, bit-exact.

Small modules go through `torch.compile(backend="irfuse")` (Inductor off, `irfuse.testing`), so
the pass sees what aot_autograd emits for `F.pad`, `new_zeros` + a slice assignment,
`torch.slice_scatter`, `full` + `copy_`, and `cat` with zeros; the report must count exactly one
raised pad and no miss, and the outputs must equal eager's bit for bit. The GPT-OSS chain
(residual add + RMSNorm -> pad of hidden 2880 to a multiple of 128 or 256) raises to the
`norm.add_rms_norm` + `act.pad` pair that fuse_act_padding fuses. Near misses leave the remark
that says why; an assembly of pieces (MLA's key) leaves none from raise-pad.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from irfuse.testing import Compiled, assert_bit_exact, compile_and_run

H = 40  # padded to 64


def _run(fn, *inputs: torch.Tensor, dynamic=((0, 0),)) -> Compiled:
    class Wrap(nn.Module):
        def forward(self, *args):
            return fn(*args)

    compiled = compile_and_run(Wrap(), inputs, dynamic_dims=dynamic)
    assert_bit_exact(compiled.outputs, compiled.eager)
    return compiled


def _records(compiled: Compiled, pass_name: str) -> list:
    reports = {report.graph: report for report in reversed(compiled.reports)}.values()
    return [record for report in reports for record in report.raise_passes
            if record.name == pass_name]


def _missed(compiled: Compiled) -> list[str]:
    return [m.reason for record in _records(compiled, "raise-pad") for m in record.missed]


def _x(width: int = H, rows: int = 8, dtype=torch.bfloat16) -> torch.Tensor:
    return torch.randn(rows, width, generator=torch.Generator().manual_seed(0)).to(dtype)


def _assign(x: torch.Tensor) -> torch.Tensor:
    buf = x.new_zeros(*x.shape[:-1], 64)
    buf[..., : x.shape[-1]] = x
    return buf


def _copy_into_full(x: torch.Tensor) -> torch.Tensor:
    buf = torch.full((x.shape[0], 64), 0.0, dtype=x.dtype)
    buf[:, : x.shape[-1]].copy_(x)
    return buf


def _narrow_3d(x: torch.Tensor) -> torch.Tensor:
    x3 = x.view(2, 4, -1)
    buf = x3.new_zeros(2, 4, 64)
    buf[:, :, 8:8 + x3.shape[-1]] = x3
    return buf


SPELLINGS = {
    "f_pad": lambda x: F.pad(x, (0, 64 - H)),
    "constant_pad_nd": lambda x: torch.ops.aten.constant_pad_nd(x, [0, 64 - H]),
    "new_zeros_assign": _assign,
    "slice_scatter": lambda x: torch.slice_scatter(x.new_zeros(x.shape[0], 64), x, dim=-1,
                                                   start=0, end=H),
    "full_copy": _copy_into_full,
    "low_offset_3d": _narrow_3d,
    "cat_new_zeros": lambda x: torch.cat([x, x.new_zeros(x.shape[0], 64 - H)], dim=-1),
    "cat_zeros": lambda x: torch.cat([x, torch.zeros(x.shape[0], 64 - H, dtype=x.dtype)], -1),
    "cat_both_sides": lambda x: torch.cat([x.new_zeros(x.shape[0], 3), x,
                                           x.new_zeros(x.shape[0], 64 - H - 3)], dim=1),
    "cat_full_value": lambda x: torch.cat([x, torch.full((x.shape[0], 24), -2.5,
                                                          dtype=x.dtype)], -1),
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_each_spelling_raises_one_pad(spelling):
    compiled = _run(SPELLINGS[spelling], _x(),
                    dynamic=() if spelling == "low_offset_3d" else ((0, 0),))
    assert compiled.raised()["pad"] == 1
    assert sum(r.count for r in _records(compiled, "raise-pad")) == 1
    assert _missed(compiled) == []


@pytest.mark.parametrize(("hidden", "multiple"), [(2880, 128), (2880, 256), (3000, 128)])
@pytest.mark.parametrize("pad_style", ["f_pad", "new_zeros_assign", "cat"])
def test_gpt_oss_router_input_raises_norm_and_pad(hidden, multiple, pad_style):
    """hidden = residual + h; normed = RMSNorm(hidden); padded for the router GEMM."""
    pad = -hidden % multiple
    w = (torch.rand(hidden, generator=torch.Generator().manual_seed(1)) + 0.5).to(torch.bfloat16)

    def block(h, residual):
        s = h + residual
        v = s.float()
        v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-5)
        y = (w * v).to(s.dtype)
        if pad_style == "f_pad":
            return F.pad(y, (0, pad)), s
        if pad_style == "cat":
            return torch.cat([y, y.new_zeros(y.shape[0], pad)], dim=-1), s
        buf = y.new_zeros(y.shape[0], hidden + pad)
        buf[:, :hidden] = y
        return buf, s

    compiled = _run(block, _x(hidden, 4), _x(hidden, 4) * 0.5, dynamic=((0, 0), (1, 0)))
    raised = compiled.raised()
    assert raised["pad"] == 1 and raised["add_rms_norm"] == 1
    assert _missed(compiled) == []


MISSES = {
    "other_dim": (lambda x: torch.cat([x, x.new_zeros(2, H)], dim=0),
                  "not a last-dim pad: concatenates along dim 0, not the last dim"),
    "two_constants": (lambda x: torch.cat([x.new_zeros(x.shape[0], 2), x,
                                           torch.full((x.shape[0], 2), 1.0, dtype=x.dtype)], -1),
                      "not a last-dim pad: the constant pieces hold different values [0.0, 1.0]"),
    "casting_write": (lambda x: (lambda b: (b.__setitem__((Ellipsis, slice(0, H)), x), b)[1])(
        torch.zeros(x.shape[0], 64, dtype=torch.float32)),
        "not a last-dim pad: the write casts or broadcasts x"),
    "rows_written": (lambda x: (lambda b: (b.__setitem__(slice(0, 8), x), b)[1])(
        x.new_zeros(10, H)),
        "not a last-dim pad: x is not written along the buffer's last dim (step 1)"),
}


@pytest.mark.parametrize("case", sorted(MISSES))
def test_near_misses_are_not_raised_and_say_why(case):
    fn, reason = MISSES[case]
    compiled = _run(fn, _x(), dynamic=())
    assert compiled.raised().get("pad", 0) == 0
    assert _missed(compiled) == [reason]


def test_pieces_assembled_into_zeros_are_no_pad():
    """MLA's key written as [k_nope | k_pe] into a new zero tensor: no pad; the remark says so,
    and the second write (into no constant tensor) leaves none."""
    def key(k_nope, k_pe):
        k = k_nope.new_zeros(*k_nope.shape[:-1], 24)
        k[..., :16] = k_nope
        k[..., 16:] = k_pe
        return k

    compiled = _run(key, torch.randn(4, 2, 16), torch.randn(4, 2, 8), dynamic=())
    assert compiled.raised().get("pad", 0) == 0
    assert _missed(compiled) == [
        "not a last-dim pad: the buffer is written again after x (pieces assembled into it)"]


def test_cat_of_values_leaves_no_remark():
    compiled = _run(lambda a, b: torch.cat([a, b], -1), _x(), _x(), dynamic=())
    assert compiled.raised().get("pad", 0) == 0
    assert _missed(compiled) == []
