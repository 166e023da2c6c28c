#!/bin/sh
# Installs Debian's Chromium for the console's browser test (tests/server/test_browser.py), if it
# is missing; quiet when it is already there. Playwright drives this browser: never run
# `playwright install`, which downloads one of its own.
set -eu

if [ -n "${CHROMIUM:-}" ] && [ -x "${CHROMIUM}" ]; then
    exit 0
fi
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-browser: no Chromium and no apt-get here; install Chromium and set CHROMIUM=/path/to/it" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "ensure-browser: installing Chromium needs root (apt-get); run as root or install sudo" >&2
        exit 1
    fi
fi
echo "ensure-browser: installing Debian's chromium package" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null
$SUDO apt-get install -y -q chromium >/dev/null
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]
