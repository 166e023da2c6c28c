"""``deepgym serve`` (the HTTP API and its console) and ``deepgym console`` (the console alone).

The server itself is built in ``deepgym.server.launch``; FastAPI and uvicorn load only when a
command runs, so ``import deepgym.cli`` stays light. Serving off loopback without a token is
refused before anything starts (the threat model in ``deepgym.server``).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import get_args

import click

from deepgym.cli.common import no_store_option, store_option
from deepgym.client import SANDBOXES
from deepgym.exceptions import ConfigError
from deepgym.models import RuntimeName
from deepgym.server import launch
from deepgym.store import RunStore, default_store_path
from deepgym.validation import MAX_SECONDS, number, seconds

__all__ = ["console_cmd", "serve_cmd"]

_serve_host_option = click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind. Anything but loopback needs --token.",
)
_console_host_option = click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind. On any address, the console answers only a client that "
    "brings the token of the URL it prints.",
)


def _open_store(path: Path | None, no_store: bool) -> RunStore | None:
    return None if no_store else RunStore(path if path is not None else default_store_path())


def _refuse_ignored_with_ray(ray_address: str | None, **pool: int | None) -> None:
    """Under ``--ray`` the cluster's pools run the answers (one per node, sized by its CPUs):
    the options that size this host's pool would be ignored, so they are refused."""
    given = [f"--{name.replace('_', '-')}" for name, value in pool.items() if value is not None]
    if ray_address is not None and given:
        raise ConfigError(
            f"--ray would ignore {', '.join(given)} (the cluster's pools run the answers, one "
            f"per node, sized by its CPUs): drop {'it' if len(given) == 1 else 'them'}, or --ray"
        )


@click.command("serve")
@_serve_host_option
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
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Pool workers kept warm (default: two per core; not with --ray).",
)
@click.option(
    "--max-workers",
    type=click.IntRange(min=1),
    default=None,
    help="The most pool workers while runs wait for one (default: three per core, at most one "
    "per 256 MiB of memory; not with --ray).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=None,
    help="Runs at once across all requests (default: the pool's --max-workers; not with --ray).",
)
@click.option("--max-body-mb", type=click.FloatRange(min=0.001), default=32.0, show_default=True)
@click.option(
    "--max-inflight-mb",
    type=click.FloatRange(min=0.001),
    default=None,
    help="Request bodies (the answers) held at once, in MiB; one more is refused with a 503 "
    "and Retry-After (default: 1/16 of the service's cgroup memory limit, else of the "
    "machine's memory).",
)
@click.option("--max-answers", type=click.IntRange(min=1), default=10_000, show_default=True)
@click.option(
    "--max-time-limit",
    type=click.FloatRange(min=0, min_open=True, max=MAX_SECONDS),
    default=600.0,
    show_default=True,
    help="The longest time a client may ask for, in seconds (a run's time_limit, an inline "
    "environment's timeout or lifetime, a command's timeout); more is refused with a 400.",
)
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
    "--runtime",
    type=click.Choice(get_args(RuntimeName)),
    default="stdlib",
    show_default=True,
    help="The runtime SandboxFusion's routes run Python answers in where the URL names none "
    "(/runtime/NAME/run_code does): 'scientific' has numpy, pandas, scipy, scikit-learn and "
    "sympy, and is built before serving if it is not yet.",
)
@click.option(
    "--ray",
    "ray_address",
    default=None,
    metavar="ADDRESS",
    help="Run answers on this Ray cluster ('auto', 'ray://HOST:PORT'), one pool per node.",
)
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
    max_workers: int | None,
    concurrency: int | None,
    max_body_mb: float,
    max_inflight_mb: float | None,
    max_answers: int,
    max_time_limit: float,
    grace_s: float,
    openrlhf: bool,
    runtime: str,
    ray_address: str | None,
    log_level: str,
) -> None:
    """Serve the API (and the console) over HTTP."""
    if not launch.is_loopback(host) and not token:
        raise ConfigError(
            f"--host {host} is reachable from other machines: give --token (or DEEPGYM_TOKEN)"
        )
    _refuse_ignored_with_ray(
        ray_address, workers=workers, max_workers=max_workers, concurrency=concurrency
    )
    # click's ranges let "nan" through (it compares false with every bound): check here.
    max_body_bytes = int(number(max_body_mb, "--max-body-mb", 0.001, 2**20) * 2**20)
    max_inflight_bytes = None
    if max_inflight_mb is not None:
        mib = number(max_inflight_mb, "--max-inflight-mb", 0.001, 2**30)
        max_inflight_bytes = int(mib * 2**20)
    max_time_limit = seconds(max_time_limit, "--max-time-limit")
    grace_s = seconds(grace_s, "--grace", allow_zero=True)
    launch.require_server_extra()
    from deepgym.server.inputs import Limits

    if ray_address is None:  # (a cluster's nodes build it at its first use there)
        from deepgym.runtimes import RuntimeStore

        RuntimeStore(say=lambda text: click.echo(text, err=True)).build(runtime)
    store = _open_store(store_path, no_store)
    console_token = secrets.token_urlsafe(24)
    try:
        app = launch.service_app(
            sandbox=sandbox,
            workers=workers,
            max_workers=max_workers,
            concurrency=concurrency,
            store=store,
            token=token,
            console_token=console_token,
            allow_verifier_code=allow_verifier_code,
            limits=Limits(
                max_body_bytes=max_body_bytes,
                max_inflight_bytes=max_inflight_bytes,
                max_answers=max_answers,
                max_time_limit=max_time_limit,
            ),
            openrlhf=openrlhf,
            ray_address=ray_address,
            runtime=runtime,
        )
        server, sock = launch.listen(app, host, port, grace_s=grace_s, log_level=log_level)
        url = launch.url(host, sock.getsockname()[1])
        click.echo(f"deepgym serve: {url} (store: {store.path if store else 'none'})")
        click.echo(f"console: {url}/console?token={console_token}", nl=True)
        server.run(sockets=[sock])
    finally:
        if store is not None:
            store.close()


@click.command("console")
@_console_host_option
@click.option("--port", type=click.IntRange(0, 65535), default=8766, show_default=True)
@store_option
def console_cmd(host: str, port: int, store_path: Path | None) -> None:
    """Browse the run store in a web page.

    Each launch makes a new token and prints the console's URL with it
    (http://HOST:PORT/console?token=...). Open that URL, in a browser or with curl:
    the console answers only a client that brought the token (kept in a cookie
    after the first visit).
    The token is not an option: a new one is made at every launch.
    """
    launch.require_server_extra()
    store = _open_store(store_path, False)
    token = secrets.token_urlsafe(24)
    try:
        app = launch.console_app(store, token)
        server, sock = launch.listen(app, host, port, grace_s=5.0, log_level="warning")
        url = launch.url(host, sock.getsockname()[1])
        click.echo(f"deepgym console: {url}/console?token={token}")
        server.run(sockets=[sock])
    finally:
        assert store is not None
        store.close()
