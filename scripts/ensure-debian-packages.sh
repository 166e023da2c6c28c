#!/bin/sh
# ensure-debian-packages.sh NAME SKIPPED TOOL:PACKAGE...
# Installs the Debian PACKAGE of each TOOL missing from /usr/bin (a TOOL that is an absolute path:
# that file, a header, say; "-": the package itself, a library whose files' names carry its
# version), in one apt-get call; quiet when every tool is there. Where they cannot be installed it
# says so (NAME: ...; SKIPPED) and exits 0:
# the tests that need a missing tool are skipped, never failed. Shared by ensure-toolchains.sh and
# ensure-image-tools.sh.
set -eu

name=$1
skipped=$2
shift 2

missing() {
    out=""
    for pair in "$@"; do
        tool=${pair%%:*}
        case $tool in
            /*) [ -e "$tool" ] || out="$out ${pair#*:}" ;;
            -) dpkg-query -W -f='${Status}' "${pair#*:}" 2>/dev/null | grep -q "ok installed" \
                || out="$out ${pair#*:}" ;;
            *) [ -x "/usr/bin/$tool" ] || out="$out ${pair#*:}" ;;
        esac
    done
    echo "$out"
}
give_up() {
    echo "$name: $1; $skipped" >&2
    exit 0
}

packages=$(missing "$@")
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
echo "$name: installing Debian's$packages" >&2
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # one word per package
if ! { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q $packages >/dev/null; }; then
    give_up "apt-get could not install$packages"
fi
packages=$(missing "$@")
[ -z "$packages" ] || give_up "still missing after apt-get:$packages"
