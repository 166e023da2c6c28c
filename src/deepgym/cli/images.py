"""``deepgym image``: the images sessions and tasks run on (``deepgym.images``).

- ``pull REF``: from its OCI registry (``--registry`` or ``$DEEPGYM_REGISTRY`` for a name
  without a host), every blob verified, with a progress bar of bytes;
- ``build DOCKERFILE_OR_DIR [-t REF] [--network none] [--base FROM=LOCAL]``: without a daemon
  (``deepgym.images.build``), one line a step, cached steps said so; each ``RUN`` step in a
  network namespace of its own (``deepgym.images.network``);
- ``load PATH [-t REF]``: an OCI image layout folder or a ``docker save`` tarball;
- ``list``: each image, its digest, its size on disk, unpacked or not, the stand-in it was
  built on (``FROM -> LOCAL``, where ``build --base`` gave one), and the store's size;
- ``rm REF`` and ``prune``: forget an image; free what no image reaches.

Errors are the group's: one ``Error: ...`` line, exit 2.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from deepgym.images.network import NETWORKS

__all__ = ["image_cmd"]


def _size(n: int) -> str:
    """``n`` bytes in B, KiB, MiB or GiB."""
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


@click.group("image")
def image_cmd() -> None:
    """Pull, build, load and list the container images sessions run on (rootless, no
    daemon)."""


@image_cmd.command("pull")
@click.argument("ref")
@click.option("--registry", default=None, help="The registry of a name without a host.")
@click.option("--platform", default="linux/amd64", show_default=True)
def pull_cmd(ref: str, registry: str | None, platform: str) -> None:
    """Pull REF (such as debian:bookworm or 127.0.0.1:5000/team/task:1) into the store."""
    from deepgym.images.distribution import pull
    from deepgym.images.reference import parse_reference
    from deepgym.images.store import ImageStore

    parsed = parse_reference(ref, default_registry=registry)
    full = f"{parsed.registry}/{parsed.repository}:{parsed.tag}" if registry else ref
    store = ImageStore()
    err = Console(stderr=True)
    bar = Progress(
        TextColumn(f"pull {ref}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task = bar.add_task("pull", total=None)
    with bar, store.writing():
        pulled = pull(
            full,
            store.blobs_dir,
            platform=platform,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    digest = store.add_blobs_manifest(pulled.digest, ref)
    click.echo(f"{ref}: {digest} ({_size(pulled.fetched_bytes)} fetched)")


@image_cmd.command("build")
@click.argument("path", type=click.Path(path_type=Path, exists=True))
@click.option("-t", "--tag", "ref", default=None, help="The image's name (default: DIR:latest).")
@click.option(
    "--step-timeout", type=float, default=1800.0, show_default=True, help="Seconds a RUN may take."
)
@click.option(
    "--network",
    type=click.Choice(NETWORKS),
    default="outbound",
    show_default=True,
    help="RUN steps reach other machines through slirp4netns (never the host's loopback), or "
    "have no network at all.",
)
@click.option(
    "--base",
    "bases",
    multiple=True,
    metavar="FROM=LOCAL",
    help="Build on LOCAL, an image in the store, where the Dockerfile says FROM (a base this "
    "host cannot pull: buildpack-deps:jammy=local/buildpack-deps:jammy). Repeatable.",
)
def build_cmd(
    path: Path, ref: str | None, step_timeout: float, network: str, bases: tuple[str, ...]
) -> None:
    """Build the Dockerfile PATH (or DIR/Dockerfile, with DIR as the build context)."""
    from deepgym.images.build import build, parse_bases

    dockerfile = path / "Dockerfile" if path.is_dir() else path
    result = build(
        dockerfile,
        ref=ref,
        step_timeout=step_timeout,
        progress=click.echo,
        network=network,
        bases=parse_bases(bases),
    )
    cached = sum(1 for s in result.steps if s.cached)
    click.echo(f"built {result.ref}: {result.digest} ({len(result.steps)} steps, {cached} cached)")


@image_cmd.command("load")
@click.argument("path", type=click.Path(path_type=Path, exists=True))
@click.option("-t", "--tag", "ref", default=None, help="The name to store it as.")
def load_cmd(path: Path, ref: str | None) -> None:
    """Load an OCI image layout folder or a docker save tarball at PATH."""
    from deepgym.images.store import ImageStore

    store = ImageStore()
    digest = store.import_layout(path, ref) if path.is_dir() else store.import_tarball(path, ref)
    click.echo(f"loaded {path}{f' as {ref}' if ref else ''}: {digest}")


@image_cmd.command("list")
def list_cmd() -> None:
    """The images in the store, and its size."""
    from deepgym.images.store import ImageStore

    store = ImageStore()
    entries = store.list()
    for e in entries:
        state = "unpacked" if e.unpacked else "packed"
        base = f"  on {e.base}" if e.base else ""
        click.echo(f"{e.ref or '(no name)'}  {e.digest[:19]}  {_size(e.size)}  {state}{base}")
    click.echo(f"{len(entries)} images, {_size(store.size())} in {store.path}")


@image_cmd.command("rm")
@click.argument("ref")
def rm_cmd(ref: str) -> None:
    """Forget the image REF (``prune`` frees its files)."""
    from deepgym.images.store import ImageStore

    ImageStore().remove(ref)
    click.echo(f"removed {ref}")


@image_cmd.command("prune")
def prune_cmd() -> None:
    """Free the blobs, roots and build layers no named image reaches."""
    from deepgym.images.store import ImageStore

    freed = ImageStore().prune()
    click.echo(f"freed {_size(freed)}")
