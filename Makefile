# Two commands: `make demo` (score real answers locally) and `make test` (lint, types, docs, tests).
# The interpreter the venv is made from: PYTHON=... if given, else the first of python3,
# python3.13, python3.12, python3.11 on PATH that is 3.11 or later.
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell for p in python3 python3.13 python3.12 python3.11; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && { echo $$p; break; }; \
	done)
endif
# The Pythons the core suite runs on (scripts/core-suite.sh; each skipped where absent).
PYTHONS ?= 3.11 3.12 3.13
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The inspect-evals whose AgentBench data the tests read (installed without its dependencies).
INSPECT_EVALS_VERSION ?= 0.26.0
# The torch the tests install (scripts/install-torch.sh): its CPU build where one is reachable.
TORCH_VERSION ?= 2.13.0
# What is installed, in two steps: the demo needs only the core and HumanEval's data; the tests
# need the rest (torch, the trainers, the service, the tooling). `make demo` on a fresh clone
# never installs torch; `make test` after it installs only what is missing.
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test
USERNS := $(if $(filter 0,$(shell id -u)),,--user --map-root-user)

.PHONY: demo test test-all lint types docs pytest pytest-others bench clean

$(VENV)/bin/python:
	@test -n "$(PYTHON)" || { echo "make: no Python 3.11 or later on PATH: set PYTHON=/path/to/python3"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[humaneval]'
	touch $@

$(TEST_STAMP): pyproject.toml $(DEMO_STAMP)
	# torch first, the CPU-only build where one is reachable (a local torch-X+cpu wheel, else the
	# PyTorch CPU index): the trainer extras need torch, and PyPI's torch for Linux is the CUDA
	# build (GBs). Where neither is reachable it installs PyPI's build and says so in one line.
	scripts/install-torch.sh $(PY) $(TORCH_VERSION)
	$(PY) -m pip install -q -e '.[humaneval,dev,latency,trl,lmeval,gym,server,verl,ray,verifiers,skyrl,atropos]'
	# AgentBench's OS tasks ship in inspect-evals (the agentbench extra). Its dependencies would
	# move versions the trainer extras depend on (s3fs pins an older fsspec than datasets has),
	# and the suite reads only its data files: the tests install the package alone.
	$(PY) -m pip install -q --no-deps 'inspect-evals==$(INSPECT_EVALS_VERSION)'
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
	# Answers in C, C++, Java, JavaScript, Rust and Go need Debian's toolchains: installed if missing.
	scripts/ensure-toolchains.sh
	# Images: Debian's mmdebstrap builds the test images, docker-registry serves them: if missing.
	scripts/ensure-image-tools.sh
	# The scientific runtime answers import numpy from (tests/built_runtimes.py): pip builds it
	# once per Python into build/runtimes (measured: 30 to 65 s from the package index, 400 MiB;
	# the other Pythons' in scripts/core-suite.sh), then it is found there, before any test's
	# time limit could wait for it.
	DEEPGYM_RUNTIMES=build/runtimes $(PY) -m deepgym runtime build scientific
	# The tests attack the sandbox: run them in their own pid namespace (pytest is not its pid 1),
	# so an answer that escapes and calls kill(-1) reaches nothing outside it.
	# Not root: a user namespace of our own first (unshare --user --map-root-user).
	unshare $(USERNS) --pid --fork --mount-proc --kill-child sh -c '$(PY) -m pytest -q -p no:cacheprovider; rc=$$?; exit $$rc'

# The core suite (all but the trainer integrations, Ray and the sweep) on each Python of PYTHONS
# other than the venv's, in build/venv-X.Y; and verifiers 0.3's entry point against verifiers
# 0.3, in build/venv-verifiers03 (the venv has verifiers 0.4, which dropped 0.3's API).
pytest-others: $(TEST_STAMP)
	mine=$$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	for v in $(PYTHONS); do [ $$v = $$mine ] || scripts/core-suite.sh $$v || exit $$?; done
	scripts/verifiers03-suite.sh $(PYTHON)

# CI (.ci/run): the full suite on the venv's Python, the core suite on the other Pythons present.
test: lint types docs pytest pytest-others

# The core suite on every Python of PYTHONS present, each in build/venv-X.Y.
test-all:
	for v in $(PYTHONS); do scripts/core-suite.sh $$v || exit $$?; done

bench: $(TEST_STAMP)
	$(PY) benchmarks/overhead.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
