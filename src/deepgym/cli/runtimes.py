"""``deepgym runtime``: the runtimes Python answers run in (``deepgym.runtimes``).

- ``build NAME``: build runtime NAME now (pip, from its pinned requirements, into
  ``$DEEPGYM_RUNTIMES``), with a line when it starts and one when it is done; a runtime already
  built is said so, and left as it is;
- ``list``: each runtime, built or not, its packages, size and folder.

Errors are the group's: one ``Error: ...`` line, exit 2.
"""

from __future__ import annotations

import json

import click

from deepgym.cli.common import json_option

__all__ = ["runtime_cmd"]


@click.group("runtime")
def runtime_cmd() -> None:
    """Build and list the runtimes Python answers run in (the standard library, or the
    scientific stack)."""


@runtime_cmd.command("build")
@click.argument("name")
def build_cmd(name: str) -> None:
    """Build runtime NAME (such as scientific) for this Python, once: later runs find it."""
    from deepgym.runtimes import RuntimeStore

    store = RuntimeStore(say=lambda text: click.echo(text, err=True))
    found = store.find(name)
    built = found or store.build(name)
    if built is None:
        click.echo(f"runtime {name}: the judge's Python, nothing to build")
    else:
        click.echo(f"runtime {name}: {'already built' if found else 'built'}: {built.describe()}")


@runtime_cmd.command("list")
@json_option
def list_cmd(as_json: bool) -> None:
    """Each runtime: built here or not, its packages, size and folder."""
    from deepgym.runtimes import RUNTIMES, RuntimeStore

    store = RuntimeStore()
    rows, lines = [], []
    for name, rt in RUNTIMES.items():
        built = store.find(name)
        rows.append(
            {
                "name": name,
                "description": rt.description,
                "built": built is not None or rt.requirements is None,
                "folder": str(built.path) if built else None,
                "packages": dict(built.manifest.get("packages", {})) if built else {},
                "bytes": int(built.manifest.get("bytes", 0)) if built else 0,
            }
        )
        if rt.requirements is None:
            lines.append(f"{name}: {rt.description}")
        elif built is not None:
            lines.append(f"{name}: built: {built.describe()}")
        else:
            lines.append(f"{name}: not built ({rt.description}): deepgym runtime build {name}")
    if as_json:
        click.echo(json.dumps({"folder": str(store.root), "runtimes": rows}, indent=2))
        return
    for text in lines:
        click.echo(text)
    click.echo(f"kept in {store.root}")
