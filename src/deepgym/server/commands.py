"""The ``serve``, ``console`` and ``runs`` commands (``deepgym.cli`` adds them to its group).

FastAPI and uvicorn load inside the commands, so ``import deepgym.cli`` stays light. Errors are
raised as ``ConfigError``: the CLI's group prints them as one ``error: ...`` line, exit 2.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import socket
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from deepgym.client import SANDBOXES
from deepgym.exceptions import ConfigError
from deepgym.store import RunStore, default_store_path

__all__ = [
    "console_cmd",
    "is_loopback",
    "no_store_option",
    "runs_cmd",
    "serve_cmd",
    "store_option",
]


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _server_modules() -> tuple[Any, Any]:
    try:
        from deepgym.server import app, runner
    except ImportError as exc:
        raise ConfigError(
            f"this command needs the server extra: pip install 'deepgym[server]' ({exc})"
        ) from exc
    return app, runner


def _open_store(path: Path | None, no_store: bool) -> RunStore | None:
    return None if no_store else RunStore(path if path is not None else default_store_path())


store_option = click.option(
    "--store",
    "store_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The run store (default: $DEEPGYM_HOME/runs.sqlite, ~/.deepgym when unset).",
)
no_store_option = click.option("--no-store", is_flag=True, help="Record nothing.")
_host_option = click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind. Anything but loopback needs --token.",
)


def _run_server(
    app: Any, runner: Any, host: str, port: int, grace_s: float, log_level: str
) -> tuple[Any, socket.socket]:
    """Bind first (so port 0 resolves), then build the server; returns it and the socket."""
    try:
        sock = runner.bind(host, port)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {_url(host, port)}: {exc.strerror or exc}") from exc
    return (runner.make_server(app, grace_s=grace_s, log_level=log_level), sock)


@click.command("serve")
@_host_option
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option(
    "--token",
    envvar="DEEPGYM_TOKEN",
    default=None,
    help="Bearer token clients must send (env DEEPGYM_TOKEN). Required off loopback.",
)
@click.option(
    "--allow-verifier-code",
    is_flag=True,
    help="Run verifier code that clients send (it runs with the verifier's access).",
)
@store_option
@no_store_option
@click.option("--sandbox", type=click.Choice(SANDBOXES), default="pool", show_default=True)
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Pool workers.")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=None,
    help="Runs at once across all requests (default: the worker count).",
)
@click.option("--max-body-mb", type=click.FloatRange(min=0.001), default=32.0, show_default=True)
@click.option("--max-answers", type=click.IntRange(min=1), default=10_000, show_default=True)
@click.option(
    "--grace",
    "grace_s",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds in-flight runs get to finish at shutdown; the rest come back without a verdict.",
)
@click.option("--openrlhf", is_flag=True, help="Also serve OpenRLHF's reward endpoint.")
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="warning",
    show_default=True,
)
def serve_cmd(
    host: str,
    port: int,
    token: str | None,
    allow_verifier_code: bool,
    store_path: Path | None,
    no_store: bool,
    sandbox: str,
    workers: int | None,
    concurrency: int | None,
    max_body_mb: float,
    max_answers: int,
    grace_s: float,
    openrlhf: bool,
    log_level: str,
) -> None:
    """Serve the API (and the console) over HTTP."""
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"--host {host} is reachable from other machines: give --token (or DEEPGYM_TOKEN)"
        )
    app_mod, runner = _server_modules()
    from deepgym.client import AsyncDeepGym
    from deepgym.server.service import Limits

    store = _open_store(store_path, no_store)
    client = AsyncDeepGym(sandbox=sandbox, workers=workers)
    if concurrency is None and sandbox == "pool":
        concurrency = workers or os.cpu_count() or 2
    console_token = secrets.token_urlsafe(24)
    try:
        app = app_mod.create_app(
            client,
            store=store,
            token=token,
            console_token=console_token,
            allow_verifier_code=allow_verifier_code,
            limits=Limits(max_body_bytes=int(max_body_mb * 2**20), max_answers=max_answers),
            concurrency=concurrency,
            openrlhf=openrlhf,
            close_client=True,
        )
        server, sock = _run_server(app, runner, host, port, grace_s, log_level)
        url = _url(host, sock.getsockname()[1])
        click.echo(f"deepgym serve: {url} (store: {store.path if store else 'none'})")
        click.echo(f"console: {url}/console?token={console_token}", nl=True)
        server.run(sockets=[sock])
    finally:
        if store is not None:
            store.close()


@click.command("console")
@_host_option
@click.option("--port", type=click.IntRange(0, 65535), default=8766, show_default=True)
@store_option
def console_cmd(host: str, port: int, store_path: Path | None) -> None:
    """Browse the run store in a web page (a per-launch token guards it)."""
    app_mod, runner = _server_modules()
    store = _open_store(store_path, False)
    token = secrets.token_urlsafe(24)
    try:
        app = app_mod.create_app(None, store=store, console_token=token, api=False)
        server, sock = _run_server(app, runner, host, port, 5.0, "warning")
        url = _url(host, sock.getsockname()[1])
        click.echo(f"deepgym console: {url}/console?token={token}")
        server.run(sockets=[sock])
    finally:
        assert store is not None
        store.close()


@click.command("runs")
@store_option
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
def runs_cmd(store_path: Path | None, limit: int, as_json: bool) -> None:
    """List the stored evals and batches, newest first, with their totals."""
    path = store_path if store_path is not None else default_store_path()
    if not path.exists():
        if as_json:
            click.echo("[]")
        else:
            click.echo(f"no runs yet (no store at {path})")
        return
    with RunStore(path) as store:
        runs = store.runs(limit=limit)
    if as_json:
        rows = [
            {
                "id": r.id,
                "kind": r.kind,
                "source": r.source,
                "created": r.created,
                "status": r.status,
                "total": r.total,
                "recorded": r.recorded,
                "totals": r.totals.model_dump(),
            }
            for r in runs
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=f"runs in {path}", title_justify="left")
    for column in ("run", "kind", "source", "started", "status", "runs"):
        table.add_column(column, overflow="fold")
    for column in ("pass rate", "no verdict", "judged pass rate", "judged mean"):
        table.add_column(column, justify="right")
    for r in runs:
        t = r.totals
        status = "complete" if r.complete else f"{r.status} {r.recorded}/{r.total}"
        table.add_row(
            r.id,
            r.kind,
            Text(r.source),
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created)),
            status,
            str(r.total),
            f"{t.pass_rate:.2%}",
            str(t.no_verdict_count),
            f"{t.judged_pass_rate:.2%}",
            f"{t.judged_mean_score:.3f}",
        )
    Console(highlight=False).print(table)
