#!/bin/sh
# The core test suite on one more Python (make pytest-others, make test-all): everything but the
# trainer integrations, Ray, the sweep's torch step, the docs' examples (they import the
# trainers), the 2-minute soak, the browser test, the task corpora (marked corpus: slow, and the
# same on every Python), and the attack suites of the sandboxes, sessions and languages, the
# CPU-time limits and the image builds: those run on the main Python (`make pytest`). The attack
# suites check what the kernel enforces (namespaces, limits, seccomp), set up by the same code on
# every Python, which the functional suites run here (every run goes through that set-up); they
# took 7 of this suite's 16 minutes. Also left to the main Python: the languages past the first
# six and MultiPL-E's sample (test_more_languages, test_multipl_e: each a toolchain's behaviour
# through the same two phases, which test_languages runs here; about 3 minutes per Python).
#
#   scripts/core-suite.sh 3.12          (or 3.13; PYTHON3_12=/path/to/python3.12 to choose it)
#
# The interpreter: $PYTHON3_<X>_<Y>, else python<X.Y> on PATH, else pyenv's newest <X.Y>.*;
# absent, the version is skipped with one line (exit 0). Its venv is build/venv-<X.Y>, made on
# first use (and again when pyproject.toml changes) with the core, dev, latency and server
# extras (no torch, no trainer), and NeMo Gym's (Python 3.12 and later only: its own floor; its
# test, tests/server/test_nemo_gym.py, skips on 3.11 and runs here).
set -eu
version=$1
var=PYTHON$(echo "$version" | tr . _)
eval "py=\${$var:-}"
if [ -n "$py" ] && ! "$py" -c 'pass' 2>/dev/null; then
    echo "core suite on Python $version: $var=$py does not run" >&2
    exit 2
fi
if [ -z "$py" ]; then
    py=$(command -v "python$version" 2>/dev/null || true)
fi
if [ -z "$py" ] || ! "$py" -c 'pass' 2>/dev/null; then
    py=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$version".* 2>/dev/null | sort -V | tail -n 1)
    py=${py:+$py/bin/python$version}
fi
if [ -z "$py" ] || ! [ -x "$py" ]; then
    echo "core suite on Python $version: skipped (no python$version on PATH or in pyenv; set $var)"
    exit 0
fi
venv=build/venv-$version
if [ ! -f "$venv/.installed" ] || [ pyproject.toml -nt "$venv/.installed" ]; then
    "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    # No torch and no trainer: the core suite leaves their tests to the main Python (a CPU torch
    # wheel may exist only for it; elsewhere pip would fetch a CUDA build of several GB).
    "$venv/bin/python" -m pip install -q -e '.[humaneval,dev,latency,server,nemo-gym]'
    touch "$venv/.installed"
fi
echo "core suite on $("$venv/bin/python" --version) ($venv)"
# The scientific runtime answers import numpy from (tests/built_runtimes.py), for this Python
# (its own pins and wheels): pip builds it once into build/runtimes (measured: 30 to 65 s from
# the package index, 400 MiB), before the tests, so no test's time limit waits for a build.
DEEPGYM_RUNTIMES=build/runtimes "$venv/bin/python" -m deepgym runtime build scientific
userns=""
[ "$(id -u)" = 0 ] || userns="--user --map-root-user"
# As `make pytest` does: a pid namespace of its own (pytest not its pid 1), so an answer that
# escapes and calls kill(-1) reaches nothing outside it.
exec unshare $userns --pid --fork --mount-proc --kill-child sh -c '"$0" -m pytest -q \
    -p no:cacheprovider -m "not browser and not corpus" --ignore=tests/integrations \
    --ignore=tests/engines/test_ray.py --ignore=tests/latency/test_sweep.py \
    --ignore=tests/test_docs.py --ignore=tests/faults/test_soak.py \
    --ignore=tests/sandbox/test_attacks.py --ignore=tests/sessions/test_attacks.py \
    --ignore=tests/languages/test_attacks.py --ignore=tests/languages/test_compile_attacks.py \
    --ignore=tests/sandbox/test_cpu_time.py --ignore=tests/faults/test_kills.py \
    --ignore=tests/images/test_build.py --ignore=tests/sandbox/test_pool_grow.py \
    --ignore=tests/languages/test_more_languages.py --ignore=tests/envs/test_multipl_e.py; \
    exit $?' \
    "$venv/bin/python"
