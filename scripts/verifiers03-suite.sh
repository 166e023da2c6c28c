#!/bin/sh
# verifiers 0.3's entry point (deepgym.integrations.verifiers.load_environment) against the real
# verifiers 0.3 (make pytest-others): `make test`'s venv has verifiers 0.4, which dropped 0.3's
# API, so this runs tests/integrations/test_verifiers_legacy.py in a venv of its own,
# build/venv-verifiers03 (made on first use, and again when pyproject.toml changes), on the
# Python given (default: python3).
#
#   scripts/verifiers03-suite.sh [PYTHON]
set -eu
py=${1:-python3}
venv=build/venv-verifiers03
if [ ! -f "$venv/.installed" ] || [ pyproject.toml -nt "$venv/.installed" ]; then
    "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -e '.[humaneval,dev]' 'verifiers>=0.3,<0.4' datasets
    touch "$venv/.installed"
fi
echo "verifiers 0.3 suite: verifiers $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("verifiers"))') ($venv)"
userns=""
[ "$(id -u)" = 0 ] || userns="--user --map-root-user"
# As `make pytest` does: a pid namespace of its own (pytest not its pid 1).
exec unshare $userns --pid --fork --mount-proc --kill-child sh -c '"$0" -m pytest -q \
    -p no:cacheprovider tests/integrations/test_verifiers_legacy.py; exit $?' \
    "$venv/bin/python"
