#!/bin/sh
# Installs Debian's tools for the image tests (tests/images/), where any is missing; quiet when all
# are there: mmdebstrap (builds a small root from Debian's packages), docker-registry (a real OCI
# registry served on 127.0.0.1), uidmap (newuidmap/newgidmap, for rootless unpacking and
# mmdebstrap's unshare mode) and slirp4netns (a build step's own network: outbound only, never
# the host's loopback). Where they cannot be installed it says so and exits 0: the tests
# that need a missing tool are skipped, never failed.
exec "$(dirname "$0")/ensure-debian-packages.sh" ensure-image-tools "the image tests that need them are skipped" \
    mmdebstrap:mmdebstrap docker-registry:docker-registry newuidmap:uidmap slirp4netns:slirp4netns
