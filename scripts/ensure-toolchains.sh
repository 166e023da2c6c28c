#!/bin/sh
# Installs Debian's toolchains for answers in languages besides Python (tests/languages/), and the
# libraries MultiPL-E's tests use, where any is missing; quiet when all are there. deepgym finds a
# toolchain in /usr only (every sandbox mounts it read-only), so each is checked there, by its
# tool (or a file of its package's); the missing packages are installed in one apt-get call.
# Where they cannot be, it says so and exits 0: the tests of a language whose toolchain is absent
# are skipped, never failed. (Measured from nothing on 2 cores: the packages past the first six
# languages are 303 MB, about 3 minutes to download and install.) OpenSSL's headers (libssl-dev):
# C++ on the SandboxFusion routes links it, as SandboxFusion does.
exec "$(dirname "$0")/ensure-debian-packages.sh" ensure-toolchains "the tests of those languages are skipped" \
    gcc:gcc g++:g++ javac:default-jdk-headless node:nodejs rustc:rustc go:golang-go \
    bash:bash php:php-cli ruby:ruby lua5.4:lua5.4 perl:perl Rscript:r-base-core racket:racket \
    mcs:mono-mcs mono:mono-runtime scalac:scala kotlinc:kotlin gdc:gdc iverilog:iverilog \
    sqlite3:sqlite3 tsc:node-typescript pytest-3:python3-pytest \
    /usr/share/java/junit-platform-console-standalone.jar:junit5 \
    /usr/share/java/javatuples.jar:libjavatuples-java \
    /usr/share/perl5/Test/Deep.pm:libtest-deep-perl /usr/share/lua/5.4/luaunit.lua:lua-unit \
    -:ruby-test-unit /usr/include/openssl/md5.h:libssl-dev
