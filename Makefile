# Two entry points: `make test` and `make demo`. Each creates .venv on first use.
# torch comes first and pinned (the CPU build on this machine's disk), so nothing later pulls
# a CUDA build through an unpinned requirement.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.irfuse-installed

.PHONY: test demo pytest lit lint

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

test: $(STAMP) lint pytest lit

pytest: $(STAMP)
	$(PY) -m pytest -q -n 2 tests

lit: $(STAMP)
	PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/lit -q filecheck

lint: $(STAMP)
	$(VENV)/bin/ruff check irfuse tests benchmarks

demo: $(STAMP)
	$(VENV)/bin/irfuse demo
