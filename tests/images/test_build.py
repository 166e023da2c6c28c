"""Building an image from a Dockerfile without a daemon (``deepgym.images.build``): real RUN
steps in bwrap on the image's root, layers, the cache, and a Debian base from mmdebstrap."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from pathlib import Path

import pytest

from deepgym.exceptions import ConfigError, ImageError
from deepgym.images import network
from deepgym.images.build import build
from deepgym.images.store import ImageStore
from tests.images.registry_fixtures import (
    free_port,
    layer_from_rootfs,
    rootfs_tar,  # noqa: F401 (a fixture)
    write_image,
)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="build steps map ids directly only as root"),
    pytest.mark.timeout(300),
]

PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ImageStore:
    monkeypatch.setenv("DEEPGYM_HOME", str(tmp_path / "home"))
    # a name without a host is pulled from here: nothing listens, so the pull fails at once
    monkeypatch.setenv("DEEPGYM_REGISTRY", f"127.0.0.1:{free_port()}")
    return ImageStore(tmp_path / "home")


@pytest.fixture
def busybox(store: ImageStore, rootfs_tar: Path, tmp_path: Path) -> str:  # noqa: F811
    """The busybox root of the registry tests, loaded into the store as busybox:test."""
    layout = tmp_path / "layout"
    desc = write_image(layout, layer_from_rootfs(rootfs_tar))
    top = {k: desc[k] for k in ("mediaType", "digest", "size")}
    top["annotations"] = {"org.opencontainers.image.ref.name": "busybox:test"}
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [top]}))
    store.import_layout(layout, "busybox:test")
    return "busybox:test"


def _context(tmp_path: Path, dockerfile: str, **files: str) -> Path:
    ctx = tmp_path / "ctx"
    ctx.mkdir(exist_ok=True)
    (ctx / "Dockerfile").write_text(dockerfile)
    for name, text in files.items():
        (ctx / name).write_text(text)
    return ctx


def test_steps_make_layers_and_the_cache_skips_them(
    store: ImageStore, busybox: str, tmp_path: Path
) -> None:
    ctx = _context(
        tmp_path,
        f"FROM {busybox}\n"
        "COPY passwd /etc/passwd\n"
        "WORKDIR /app\n"
        "COPY data.txt ./\n"
        "ENV GREETING=hello\n"
        'RUN echo "$GREETING $(busybox cat data.txt)" > out.txt && busybox rm /bin/busybox.orig'
        " 2>/dev/null; busybox rm -f /usr/share/doc/busybox-static/copyright\n"
        "USER nobody\n"
        "RUN busybox id -u > /tmp/uid && busybox test $(busybox cat /tmp/uid) = 65534\n"
        'CMD ["/bin/sh"]\n',
        passwd=PASSWD,
        **{"data.txt": "world"},
    )
    lines: list[str] = []
    first = build(ctx / "Dockerfile", store=store, ref="task:1", progress=lines.append)
    assert [s.cached for s in first.steps] == [False] * 5, lines
    image = store.resolve("task:1")
    root = image.rootfs
    assert (root / "app/out.txt").read_text() == "hello world\n"
    assert (root / "etc/passwd").read_text() == PASSWD
    assert not (root / "usr/share/doc/busybox-static/copyright").exists()  # a whiteout
    assert (root / "bin/busybox").exists()
    assert image.config.working_dir == "/app" and image.config.user == "nobody"
    assert "GREETING=hello" in image.config.env and image.config.cmd == ("/bin/sh",)
    t0 = time.monotonic()
    again = build(ctx / "Dockerfile", store=store, ref="task:1")
    assert [s.cached for s in again.steps] == [True] * 5
    assert again.digest == first.digest == store.resolve("task:1").digest
    assert time.monotonic() - t0 < 5
    (ctx / "data.txt").write_text("there")  # a copied file changed: that step and the rest
    third = build(ctx / "Dockerfile", store=store, ref="task:1")
    assert [s.cached for s in third.steps] == [True, True, False, False, False]
    assert (store.resolve("task:1").rootfs / "app/out.txt").read_text() == "hello there\n"


def test_a_failing_step_names_its_line_and_output(
    store: ImageStore, busybox: str, tmp_path: Path
) -> None:
    ctx = _context(tmp_path, f"FROM {busybox}\nRUN echo broken-on-purpose; exit 7\n")
    with pytest.raises(ConfigError, match=r"(?s)line 2: RUN .* exited 7:.*broken-on-purpose"):
        build(ctx / "Dockerfile", store=store)


def test_a_step_that_runs_too_long_is_stopped(
    store: ImageStore, busybox: str, tmp_path: Path
) -> None:
    ctx = _context(tmp_path, f"FROM {busybox}\nRUN busybox sleep 60\n")
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="ran past 1 s"):
        build(ctx / "Dockerfile", store=store, step_timeout=1.0)
    assert time.monotonic() - t0 < 15


def test_a_copy_from_outside_the_context_is_refused(
    store: ImageStore, busybox: str, tmp_path: Path
) -> None:
    (tmp_path / "secret").write_text("not in the context")
    ctx = _context(tmp_path, f"FROM {busybox}\nCOPY ../secret /x\n")
    with pytest.raises(ConfigError, match="outside the build context"):
        build(ctx / "Dockerfile", store=store)
    link = _context(tmp_path, f"FROM {busybox}\nCOPY leak /x\n")
    (link / "leak").symlink_to(tmp_path / "secret")
    with pytest.raises(ConfigError, match="leaves the build context"):
        build(link / "Dockerfile", store=store)


needs_slirp = pytest.mark.skipif(
    shutil.which(network.TOOL) is None, reason="slirp4netns is absent (ensure-image-tools.sh)"
)


@needs_slirp
def test_a_step_cannot_reach_the_hosts_loopback(
    store: ImageStore, busybox: str, tmp_path: Path
) -> None:
    """A RUN step reached a ``deepgym serve`` on the host's 127.0.0.1. Now a listener there sees
    nothing of a step that tries it, nor slirp4netns's gateway and resolver addresses (by
    default the gateway leads to the host's loopback), while the step has a network of its own
    with a way out."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        tries = "".join(
            f"busybox nc -w 2 {a} {port} -e /bin/busybox true && echo reached {a} >> /tried; "
            for a in ("127.0.0.1", "localhost", network.GATEWAY, network.DNS)
        )
        ctx = _context(tmp_path, f"FROM {busybox}\nRUN {tries}busybox ip -o -4 addr > /addresses\n")
        build(ctx / "Dockerfile", store=store, ref="net:1")
        listener.setblocking(False)  # a connection made would wait in the backlog
        with pytest.raises(BlockingIOError):
            listener.accept()
    root = store.resolve("net:1").rootfs
    assert not (root / "tried").exists(), (root / "tried").read_text()
    addresses = (root / "addresses").read_text()
    assert "tap0" in addresses and "10.0.2.100/24" in addresses, addresses


def test_a_step_without_a_network_has_only_its_loopback(
    store: ImageStore, busybox: str, tmp_path: Path
) -> None:
    ctx = _context(tmp_path, f"FROM {busybox}\nRUN busybox ip -o addr > /addresses\n")
    build(ctx / "Dockerfile", store=store, ref="offline:1", network="none")
    lines = (store.resolve("offline:1").rootfs / "addresses").read_text().splitlines()
    links = {line.split()[1] for line in lines}
    assert links == {"lo"}


def test_a_step_is_never_run_on_the_hosts_network(
    store: ImageStore, busybox: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without slirp4netns an outbound step is refused, saying how to get it or do without."""
    ctx = _context(tmp_path, f"FROM {busybox}\nRUN busybox true\n")
    with pytest.raises(ConfigError, match="network must be one of outbound, none, not 'host'"):
        build(ctx / "Dockerfile", store=store, network="host")
    monkeypatch.setattr(network, "TOOL", "slirp4netns-not-installed")
    with pytest.raises(ImageError, match=r"apt-get install slirp4netns-not-installed\); or build"):
        build(ctx / "Dockerfile", store=store)
    assert build(ctx / "Dockerfile", store=store, network="none").steps[0].cached is False


@pytest.mark.skipif(shutil.which("mmdebstrap") is None, reason="mmdebstrap is absent")
@needs_slirp
def test_a_debian_base_is_built_from_debian_packages_and_apt_installs(
    store: ImageStore, tmp_path: Path
) -> None:
    """The real thing: FROM debian:bookworm with no registry (mmdebstrap builds it), then
    apt-get installs a package whose files belong to several users: the step reaches Debian's
    mirror through its own network namespace."""
    ctx = _context(
        tmp_path,
        "FROM debian:bookworm\n"
        "RUN apt-get update -q && apt-get install -y -q --no-install-recommends jq"
        " && rm -rf /var/lib/apt/lists/*\n"
        'RUN echo \'{"name": "deepgym"}\' | jq -r .name > /name && rm /etc/issue\n',
    )
    lines: list[str] = []
    result = build(ctx / "Dockerfile", store=store, ref="jq:1", progress=lines.append)
    assert any("mmdebstrap" in line for line in lines), lines
    root = store.resolve("jq:1").rootfs
    assert (root / "usr/bin/jq").is_file() and (root / "name").read_text() == "deepgym\n"
    assert not (root / "etc/issue").exists() and (root / "etc/hostname").is_file()
    assert not any(s.cached for s in result.steps)


def test_a_base_the_host_cannot_pull_is_built_on_its_stand_in(
    store: ImageStore, busybox: str, tmp_path: Path
) -> None:
    """``bases``: ``FROM buildpack-deps:jammy`` on the store's busybox:test, named in the
    image's labels and in ``deepgym image list``; steps on one stand-in are shared."""
    from click.testing import CliRunner

    from deepgym.cli import cli
    from deepgym.images.build import BASE_LABEL, STAND_IN_LABEL, parse_bases

    ctx = _context(tmp_path, "FROM buildpack-deps:jammy\nRUN echo one > /one\n")
    bases = parse_bases(["docker.io/library/buildpack-deps:jammy=busybox:test"])
    lines: list[str] = []
    first = build(ctx / "Dockerfile", store=store, ref="t:1", bases=bases, progress=lines.append)
    assert any("the stand-in busybox:test" in line for line in lines), lines
    image = store.resolve("t:1")
    assert (image.rootfs / "one").read_text() == "one\n"
    assert (image.rootfs / "bin/busybox").exists()  # the stand-in's files
    labels = dict(image.config.labels)
    assert labels[BASE_LABEL] == "buildpack-deps:jammy"
    assert labels[STAND_IN_LABEL].startswith("busybox:test@sha256:")
    again = build(ctx / "Dockerfile", store=store, ref="t:2", bases=bases)
    assert again.digest == first.digest and all(s.cached for s in again.steps)
    listed = CliRunner().invoke(cli, ["image", "list"])
    assert listed.exit_code == 0, listed.output
    line = next(x for x in listed.output.splitlines() if x.startswith("t:1 "))
    assert line.endswith("on buildpack-deps:jammy -> " + labels[STAND_IN_LABEL]), line
    with pytest.raises(ImageError, match="its stand-in nowhere:1 is not in the image store"):
        build(ctx / "Dockerfile", store=store, bases={"buildpack-deps:jammy": "nowhere:1"})
    with pytest.raises(ConfigError, match="FROM=LOCAL"):
        parse_bases(["buildpack-deps:jammy"])


def test_a_build_on_an_unpacked_root_never_writes_the_stores_files(
    store: ImageStore, busybox: str, tmp_path: Path
) -> None:
    """The working root's files are hard links to the store's unpacked root (overlay steps):
    a step that appends to a file, replaces one by a copy or removes one changes its own
    copy only, and the built image has every change."""
    from tests.sandbox.image_fixtures import tree_state

    ctx = _context(
        tmp_path,
        f"FROM {busybox}\n"
        "RUN echo appended >> /etc/hostname && busybox rm /bin/busybox.orig 2>/dev/null; "
        "echo new > /made\n"
        "COPY passwd /etc/group\n"
        "RUN busybox chmod 600 /etc/group\n",
        passwd=PASSWD,
    )
    base = store.resolve(busybox).rootfs
    before = tree_state(base)
    version = (base / "etc/hostname").read_text()
    build(ctx / "Dockerfile", store=store, ref="t:3")
    assert tree_state(base) == before and (base / "etc/hostname").read_text() == version
    root = store.resolve("t:3").rootfs
    assert (root / "etc/hostname").read_text() == version + "appended\n"
    assert (root / "etc/group").read_text() == PASSWD and (root / "made").read_text() == "new\n"
    assert (root / "etc/group").stat().st_mode & 0o777 == 0o600
