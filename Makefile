# Two entry points: `make test` and `make demo`. Each creates .venv on first use.
# torch comes first and pinned (the CPU build on this machine's disk), so nothing later pulls
# a CUDA build through an unpinned requirement.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.irfuse-installed
# vLLM's CPU build gets a venv of its own (its requirements are not irfuse's), for tests/in_vllm.
# Its torchvision / torchaudio / torchcodec are built against another torch: removed.
VVENV  := .venv-vllm
VPY    := $(VVENV)/bin/python
VSTAMP := $(VVENV)/.irfuse-installed

# torch's custom-op aliasing check (AOTAutograd) raises where CI is set and only warns elsewhere:
# raise here too, so a local run fails where CI would.
export TORCHINDUCTOR_ERROR_ON_CUSTOM_OP_ALIASING := 1

.PHONY: test demo pytest pytest-vllm lit lint

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

$(VSTAMP): pyproject.toml
	test -x $(VPY) || python3 -m venv $(VVENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q torch==2.13.0
	$(VPY) -m pip install -q -e '.[test,vllm]'
	$(VPY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $(VSTAMP)

test: $(STAMP) lint pytest lit pytest-vllm

pytest: $(STAMP)
	$(PY) -m pytest -q -n 2 tests

# Real vLLM engines on the CPU (tests/in_vllm; skipped in the run above, which has no vLLM). One
# module per worker: each module's fixture starts its engines or ranks once. Three workers for
# the three such fixtures (2-3 minutes each), so none waits behind another.
pytest-vllm: $(VSTAMP)
	$(VPY) -m pytest -q -n 3 --dist loadfile tests/in_vllm

lit: $(STAMP)
	PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/lit -q filecheck

lint: $(STAMP)
	$(VENV)/bin/ruff check irfuse tests benchmarks

demo: $(STAMP)
	$(VENV)/bin/irfuse demo
