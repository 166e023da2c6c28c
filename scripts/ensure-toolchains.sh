#!/bin/sh
# Installs Debian's toolchains for answers in compiled languages (tests/languages/), where any is
# missing; quiet when all are there. deepgym finds a toolchain in /usr/bin only (every sandbox
# mounts it read-only), so each is checked there, by its tool; the missing packages are installed
# in one apt-get call. Where they cannot be, it says so and exits 0: the tests of a language
# whose toolchain is absent are skipped, never failed. OpenSSL's headers (libssl-dev): C++ on the
# SandboxFusion routes links it, as SandboxFusion does.
exec "$(dirname "$0")/ensure-debian-packages.sh" ensure-toolchains "the tests of those languages are skipped" \
    gcc:gcc g++:g++ javac:default-jdk-headless node:nodejs rustc:rustc go:golang-go \
    /usr/include/openssl/md5.h:libssl-dev
