# Two commands: `make demo` (score real answers locally) and `make test` (lint, types, docs, tests).
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
# What is installed, in two steps: the demo needs only the core and HumanEval's data; the tests
# need the rest (torch, the trainers, the service, the tooling). `make demo` on a fresh clone
# never installs torch; `make test` after it installs only what is missing.
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test
USERNS := $(if $(filter 0,$(shell id -u)),,--user --map-root-user)

.PHONY: demo test lint types docs pytest bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[humaneval]'
	touch $@

$(TEST_STAMP): pyproject.toml $(DEMO_STAMP)
	# The CPU build of torch first (the trainer extras need torch; plain `torch` is a CUDA build).
	$(PY) -m pip install -q 'torch==2.13.0'
	$(PY) -m pip install -q -e '.[humaneval,dev,latency,trl,lmeval,gym,server,verl,ray]'
	touch $@

demo: $(DEMO_STAMP)
	$(VENV)/bin/deepgym demo

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check src tests benchmarks docs/hooks.py
	$(VENV)/bin/ruff format --check src tests benchmarks docs/hooks.py

types: $(TEST_STAMP)
	$(VENV)/bin/mypy

# The docs site (mkdocs.yml): --strict fails on a broken link, anchor or API reference.
docs: $(TEST_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir build/site

pytest: $(TEST_STAMP)
	# The console's browser test drives Debian's Chromium: installed here if missing.
	scripts/ensure-browser.sh
	# The tests attack the sandbox: run them in their own pid namespace (pytest is not its pid 1),
	# so an answer that escapes and calls kill(-1) reaches nothing outside it.
	# Not root: a user namespace of our own first (unshare --user --map-root-user).
	unshare $(USERNS) --pid --fork --mount-proc --kill-child sh -c '$(PY) -m pytest -q -p no:cacheprovider; rc=$$?; exit $$rc'

test: lint types docs pytest

bench: $(TEST_STAMP)
	$(PY) benchmarks/overhead.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
