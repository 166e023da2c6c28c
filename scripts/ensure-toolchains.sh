#!/bin/sh
# Installs Debian's toolchains for answers in compiled languages (tests/languages/), where any is
# missing; quiet when all are there. deepgym finds a toolchain in /usr/bin only (every sandbox
# mounts it read-only), so each is checked there, by its tool; the missing packages are installed
# in one apt-get call. Where they cannot be, it says so and exits 0: the tests of a language
# whose toolchain is absent are skipped, never failed.
set -eu

missing() {
    out=""
    for pair in gcc:gcc g++:g++ javac:default-jdk-headless node:nodejs rustc:rustc go:golang-go; do
        [ -x "/usr/bin/${pair%%:*}" ] || out="$out ${pair#*:}"
    done
    echo "$out"
}
give_up() {
    echo "ensure-toolchains: $1; the tests of those languages are skipped" >&2
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
echo "ensure-toolchains: installing Debian's$packages" >&2
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # one word per package
if ! { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q $packages >/dev/null; }; then
    give_up "apt-get could not install$packages"
fi
packages=$(missing)
[ -z "$packages" ] || give_up "still missing after apt-get:$packages"
