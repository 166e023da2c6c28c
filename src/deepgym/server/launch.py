"""Starting the service from plain settings: what ``deepgym serve`` and ``deepgym console`` do
beneath their options.

- ``is_loopback``: whether only this machine can reach an address (anywhere else, the API needs
  a token: the threat model in ``deepgym.server``).
- ``service_app`` / ``console_app``: the app; ``service_app`` makes its sandbox backend, and
  the app closes it at shutdown.
- ``listen``: bind first (so port 0 resolves to a real port), then the draining server.

Importing this module imports neither FastAPI nor uvicorn, so the address rule is checked before
anything needs them; ``require_server_extra`` says, as a ``ConfigError``, when they are missing.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from deepgym.exceptions import ConfigError
from deepgym.text import install_extra
from deepgym.validation import is_loopback

if TYPE_CHECKING:
    from fastapi import FastAPI

    from deepgym.server.inputs import Limits
    from deepgym.server.runner import DrainingServer
    from deepgym.store import RunStore

__all__ = ["console_app", "is_loopback", "listen", "require_server_extra", "service_app", "url"]


def url(host: str, port: int) -> str:
    """The service's base URL (an IPv6 address in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def require_server_extra() -> None:
    """Raise ``ConfigError`` naming the install command when FastAPI or uvicorn is missing."""
    try:
        import deepgym.server.app
        import deepgym.server.runner  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"this command needs the server extra: {install_extra('server')} ({exc})"
        ) from exc


def service_app(
    *,
    sandbox: str,
    workers: int | None,
    concurrency: int | None,
    store: RunStore | None,
    max_workers: int | None = None,
    token: str | None,
    console_token: str,
    allow_verifier_code: bool,
    limits: Limits,
    openrlhf: bool,
    ray_address: str | None = None,
    runtime: str = "stdlib",
) -> FastAPI:
    """The API and console over a new backend of the ``sandbox`` kind (closed with the app), or
    over the Ray cluster at ``ray_address`` (one pool per node, ``deepgym.engines.ray``).

    A pool's runs at once default to its ``max_workers`` (the most it grows to while runs
    wait: time limits are judged on CPU time, so runs above the core count are judged alike).
    ``runtime``: that of SandboxFusion's routes' Python answers where the URL names none.
    """
    require_server_extra()
    from deepgym.sandbox import make_backend
    from deepgym.server.app import create_app

    if ray_address is not None:
        from deepgym.engines.ray import RayEngine

        return create_app(
            store=store,
            token=token,
            console_token=console_token,
            allow_verifier_code=allow_verifier_code,
            limits=limits,
            openrlhf=openrlhf,
            engine=RayEngine(ray_address, sandbox=sandbox),
            runtime=runtime,
        )
    backend = make_backend(sandbox, workers=workers, max_workers=max_workers)
    if concurrency is None and sandbox == "pool":
        concurrency = getattr(backend, "max_workers", None)
    return create_app(
        backend,
        store=store,
        token=token,
        console_token=console_token,
        allow_verifier_code=allow_verifier_code,
        limits=limits,
        concurrency=concurrency,
        openrlhf=openrlhf,
        close_backend=True,
        runtime=runtime,
    )


def console_app(store: RunStore | None, console_token: str) -> FastAPI:
    """The console alone, over ``store``: no API, no client, nothing runs."""
    require_server_extra()
    from deepgym.server.app import create_app

    return create_app(None, store=store, console_token=console_token, api=False)


def listen(
    app: FastAPI, host: str, port: int, *, grace_s: float, log_level: str
) -> tuple[DrainingServer, socket.socket]:
    """Bind first (so port 0 resolves), then build the server; returns it and the socket.

    An address that cannot be bound is a ``ConfigError`` that names the URL.
    """
    require_server_extra()
    from deepgym.server import runner

    try:
        sock = runner.bind(host, port)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {url(host, port)}: {exc.strerror or exc}") from exc
    return runner.make_server(app, grace_s=grace_s, log_level=log_level), sock
