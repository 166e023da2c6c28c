#!/bin/sh
# Installs Debian's tools for the image tests (tests/images/), where any is missing; quiet when all
# are there: mmdebstrap (builds a small root from Debian's packages), docker-registry (a real OCI
# registry served on 127.0.0.1) and uidmap (newuidmap/newgidmap, for rootless unpacking and
# mmdebstrap's unshare mode). Where they cannot be installed it says so and exits 0: the tests
# that need a missing tool are skipped, never failed.
set -eu

missing() {
    out=""
    for pair in mmdebstrap:mmdebstrap docker-registry:docker-registry newuidmap:uidmap; do
        [ -x "/usr/bin/${pair%%:*}" ] || out="$out ${pair#*:}"
    done
    echo "$out"
}
give_up() {
    echo "ensure-image-tools: $1; the image tests that need them are skipped" >&2
    exit 0
}

packages=$(missing)
if [ -z "$packages" ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    give_up "missing Debian packages:$packages, and no apt-get here to install them"
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        give_up "installing$packages needs root (apt-get): run as root or install sudo"
    fi
fi
echo "ensure-image-tools: installing Debian's$packages" >&2
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # one word per package
if ! { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q $packages >/dev/null; }; then
    give_up "apt-get could not install$packages"
fi
packages=$(missing)
[ -z "$packages" ] || give_up "still missing after apt-get:$packages"
