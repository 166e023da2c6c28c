"""Running the app under uvicorn, with a graceful drain at shutdown.

On SIGINT or SIGTERM (or ``should_exit``) the service first stops taking work (503, ``/health``
too, on a socket that stays open while runs are in flight), then uvicorn stops accepting
connections and waits for the open ones. Runs still going after ``grace_s`` are
cancelled and their answers come back without a verdict, so no answer of an accepted request is
lost. ``ThreadedServer`` runs the same server in a thread, on loopback, for tests and benchmarks.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import uvicorn
from fastapi import FastAPI

from deepgym.server.logs import log_config
from deepgym.server.service import Service

__all__ = ["DrainingServer", "ThreadedServer", "bind", "make_server"]

DEFAULT_GRACE_S = 30.0
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: an ephemeral one; read it from ``getsockname``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and
    # without it every small write waits on a delayed ACK (about 40 ms a request).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class DrainingServer(uvicorn.Server):
    """uvicorn's server, with the service's drain first at shutdown."""

    def __init__(self, config: uvicorn.Config, service: Service, grace_s: float) -> None:
        super().__init__(config)
        self.service = service
        self.grace_s = grace_s

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Refuse new requests (503) and give runs in flight the grace period, then stop.

        The listening socket stays open while runs are in flight: a new request, ``/health``
        included, gets a 503 that says the service is draining (what a load balancer needs to
        see), not a refused connection. uvicorn closes the socket once none is left.
        """
        self.service.begin_drain(self.grace_s)
        with contextlib.suppress(TimeoutError):
            # The grace ends every request (abandon_all); a little more lets them answer.
            await asyncio.wait_for(self.service.wait_idle(), self.grace_s + 5.0)
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM start the drain (uvicorn's handler). Unlike uvicorn, the signal is
        not raised again afterwards: a drained stop is the stop that was asked for (exit 0), and
        the caller's cleanup still runs."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in _SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def make_server(
    app: FastAPI, *, grace_s: float = DEFAULT_GRACE_S, log_level: str = "warning"
) -> DrainingServer:
    """A uvicorn server for ``app`` that drains its service on shutdown."""
    service: Service = app.state.service
    config = uvicorn.Config(
        app,
        log_config=log_config(),  # no token in any line (deepgym.server.logs)
        log_level=log_level,
        lifespan="on",
        # asyncio's loop, whatever else is installed: uvicorn's "auto" picks uvloop where it is
        # (atroposlib's and NeMo Gym's uvicorn[standard] bring it), and under uvloop a write to
        # the pipe of a killed session sandbox raises RuntimeError, which answered 500
        # (tests/server/test_sessions_remote.py); the service is tested on asyncio's loop.
        loop="asyncio",
        timeout_graceful_shutdown=int(grace_s) + 10,
        timeout_keep_alive=30,
    )
    return DrainingServer(config, service, grace_s)


class ThreadedServer:
    """The app served from a thread on 127.0.0.1 and an ephemeral port (tests, benchmarks)."""

    def __init__(self, app: FastAPI, *, grace_s: float = DEFAULT_GRACE_S) -> None:
        self.app = app
        self.server = make_server(app, grace_s=grace_s)
        self.sock = bind("127.0.0.1", 0)
        self.port: int = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="deepgym-serve", daemon=True)

    def _run(self) -> None:
        try:
            self.server.run(sockets=[self.sock])
        except BaseException as exc:  # reported by start() / stop()
            self.error = exc

    def start(self, timeout: float = 30.0) -> ThreadedServer:
        """Start serving in the background thread; return once it listens."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server did not start: {self.error!r}")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Shut down as a signal would (drain first) and wait for the thread."""
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.sock.close()

    def __enter__(self) -> ThreadedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ThreadedServer({self.url!r})"

    @property
    def service(self) -> Any:
        """The app's ``Service``."""
        return self.app.state.service
