"""Fused-op kernels and their torch references.

`*_ref.py` modules are the numerics (torch only, cheap to import, the CPU path); the other
modules are Triton kernels with their launchers (importing them imports triton).
"""
