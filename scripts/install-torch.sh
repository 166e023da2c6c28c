#!/bin/sh
# Installs torch VERSION into the virtualenv of PYTHON, the CPU-only build where one is reachable.
# PyPI's torch for Linux is the CUDA build (several GB of CUDA libraries), and an extra that
# needs torch (trl, sweep) pulls it unless a torch is installed first; this tries, in order:
#   1. nothing: a torch VERSION (any build) is installed already;
#   2. a torch-VERSION+cpu wheel wherever pip already looks (a local wheel folder given by
#      PIP_FIND_LINKS or pip's config, a mirror);
#   3. the PyTorch CPU index (TORCH_CPU_INDEX, default https://download.pytorch.org/whl/cpu),
#      one try with a short timeout, so an offline machine falls through at once;
#   4. PyPI's build, which on Linux is the CUDA one: said in one line, with why.
# On macOS and Windows PyPI's build is the CPU one: step 4 at once.
# Usage: scripts/install-torch.sh PYTHON VERSION
set -eu

if [ $# -ne 2 ]; then
    echo "usage: scripts/install-torch.sh PYTHON VERSION" >&2
    exit 2
fi
PY=$1
VERSION=$2
CPU_INDEX=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
ERR=$(mktemp)
trap 'rm -f "$ERR"' EXIT

installed() {
    "$PY" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true
}

have=$(installed)
case $have in
"$VERSION" | "$VERSION"+*)
    echo "install-torch: torch $have is installed already"
    exit 0
    ;;
esac

if [ "$(uname -s)" = Linux ]; then
    # 2. A +cpu wheel where pip looks already (torch's own dependencies come from the index).
    if "$PY" -m pip install -q "torch==$VERSION+cpu" 2>"$ERR"; then
        echo "install-torch: installed torch $(installed), the CPU-only build (a wheel pip found locally)"
        exit 0
    fi
    # Not there: "No matching distribution", or under a pip constraint on torch (a constraints
    # file) "ResolutionImpossible". Any other failure is shown, not passed over.
    if ! grep -qE "No matching distribution|ResolutionImpossible" "$ERR"; then
        cat "$ERR" >&2
        exit 1
    fi
    # 3. The PyTorch CPU index for torch alone, then its dependencies from the usual index.
    if "$PY" -m pip install -q --no-deps --timeout 10 --retries 0 --index-url "$CPU_INDEX" \
        "torch==$VERSION+cpu" 2>"$ERR"; then
        "$PY" -m pip install -q "torch==$VERSION+cpu"
        echo "install-torch: installed torch $(installed), the CPU-only build (from $CPU_INDEX)"
        exit 0
    fi
fi

# 4. PyPI's build.
"$PY" -m pip install -q "torch==$VERSION"
case $(uname -s) in
Linux)
    echo "install-torch: installed torch $(installed), PyPI's default build, which bundles CUDA" \
        "(several GB): no torch-$VERSION+cpu wheel where pip looks, and $CPU_INDEX not" \
        "reachable (a folder with that wheel in PIP_FIND_LINKS gives the CPU build)"
    ;;
*)
    echo "install-torch: installed torch $(installed) from PyPI (its build for $(uname -s) is CPU-only)"
    ;;
esac
