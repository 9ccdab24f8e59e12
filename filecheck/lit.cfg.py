"""lit configuration for irfuse's FileCheck tests (`lit filecheck`; `make lit`)."""

import os

import lit.formats

config.name = "irfuse"  # noqa: F821 (lit injects `config`)
config.test_format = lit.formats.ShTest(preamble_commands=[])  # noqa: F821
config.suffixes = [".mlir"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.excludes = ["lit.cfg.py"]  # noqa: F821
config.environment["PATH"] = os.environ.get("PATH", "")  # noqa: F821
if "PYTHONPATH" in os.environ:  # a checkout other than the installed one (a git worktree)
    config.environment["PYTHONPATH"] = os.environ["PYTHONPATH"]  # noqa: F821
