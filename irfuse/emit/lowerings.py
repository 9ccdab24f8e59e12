"""Lowerings of fused ops to kernel calls (registered into `select_kernels.LOWERINGS`)."""

from __future__ import annotations
