"""The verifier's RPC with the solution process, and the objects a verifier sees (not an agent
session: that is ``deepgym.session``).

``SolutionProxy`` is what a ``verify(solution, test_cases)`` function receives: attribute access
names a function of the answer's module, calling it is an RPC with its own time limit, and a
returned object (a class instance, a generator) comes back as a ``RemoteObject`` whose methods
and iteration are RPCs too. ``Session`` holds the run's serving solution process (started at
first use through a ``launch.Launcher``, restarted after a death) and turns its replies into
values or the exceptions of ``errors``:

- ``SolutionError`` (an ``Exception``): the answer raised, or returned something that cannot cross;
- ``SolutionDied`` (an ``Exception``): the solution process ended (crash, kill, memory limit);
- ``SolutionTimeout`` (a ``BaseException``): a call ran past its limit (judged on the answer's
  CPU time: ``launch.Launcher.wait``), or the host held it back past the backstop. It derives
  from ``BaseException`` so that a verifier's ``except Exception`` cannot swallow it;
- ``AheadError`` (a ``BaseException``): calls sent ahead (``Ahead``) were misused by the verifier.
"""

from __future__ import annotations

import os
import time

from . import wire
from .blame import BACKSTOP
from .codes import KILLED_BY
from .errors import AheadError, SolutionDied, SolutionError, SolutionTimeout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from .launch import Launcher, Process

# Linux signal numbers, without importing ``signal`` (and ``enum``) at sandbox start-up.
SIGXCPU = 24
SIGXFSZ = 25


class Session:
    """The run's serving solution process: started at first use, restarted after a death.

    ``mode`` is ``module`` (import the answer) or ``repo`` (a patch task: import nothing);
    ``prelude``, when set, is the request every fresh process gets first (a patch task's
    ``write_files``), so a restart after a death serves the same files.
    """

    def __init__(self, launcher: Launcher, case_timeout: float) -> None:
        self.launcher = launcher
        self.case_timeout = case_timeout
        self.proc: Process | None = None
        self.timed_out = False
        self.last_death: SolutionDied | None = None
        self.mode = "module"
        self.prelude: dict[str, Any] | None = None
        self.unanswered = 0
        """Requests sent ahead whose replies are still to be taken (``Ahead``)."""

    def _ensure(self) -> Process:
        if self.proc is None or self.proc.status is not None:
            self.proc = self.launcher.start(self.mode)
            # its set-up is ours, not the answer's: waited for as long as a call's backstop
            ready_by = time.monotonic() + BACKSTOP * self.case_timeout
            self.launcher.await_ready(self.proc, ready_by)
            self.launcher.on_start()  # the answer loads with the next request
            if self.prelude is not None:
                self._exchange(self.proc, self.prelude, None)
        return self.proc

    def request(self, req: dict[str, Any]) -> Any:
        """Send ``req`` and return its reply's value (or raise what the reply says)."""
        if self.unanswered:
            raise AheadError("a request while replies sent ahead are still to be taken")
        return self._exchange(self._ensure(), req, self.deref)

    def deref(self, ref: int) -> RemoteObject:
        """A reference in a reply: the object it names, in the solution process."""
        return RemoteObject(self, ref)

    def ahead(self, reqs: list[dict[str, Any]]) -> Ahead:
        """``reqs`` sent ahead of their replies, which ``Ahead.take`` returns one by one."""
        return Ahead(self, reqs)

    def _send(self, proc: Process, data: bytes) -> None:
        try:
            os.write(proc.fds["req"], data)
        except (BrokenPipeError, KeyError):
            pass  # it died; pump reports how

    def _exchange(
        self, proc: Process, req: dict[str, Any], deref: Callable[[int], Any] | None
    ) -> Any:
        cpu0 = self.launcher.cpu_ms(proc)
        since = time.monotonic()
        self._send(proc, wire.encode(req))
        return self._receive(proc, deref, since, cpu0)

    def _receive(
        self, proc: Process, deref: Callable[[int], Any] | None, since: float, cpu0: float
    ) -> Any:
        """The reply to the request the process serves next, which it began at ``since`` at
        the latest, when the answer's CPU counter read ``cpu0``: its time limit counts from
        there (``Launcher.wait``)."""
        try:
            line = self.launcher.wait(proc, self.case_timeout, since, cpu0, want_line=True)
        except SolutionTimeout as exc:
            self.launcher.kill(proc)
            proc.limit = "case_time"
            self.timed_out = self.timed_out or exc.blame_solution
            raise SolutionTimeout(f"the call {exc}", exc.blame_solution, exc.whole_run) from None
        if line is None:  # it ended (``wait`` reaped it)
            self.last_death = self._death(proc)
            raise self.last_death
        try:
            reply = wire.decode(line, deref)
        except wire.WireError as exc:
            raise SolutionError(f"malformed reply from the solution: {exc}") from None
        if not isinstance(reply, dict):
            raise SolutionError("malformed reply from the solution")
        if "err" in reply:
            err = reply["err"] if isinstance(reply["err"], dict) else {}
            raise SolutionError(
                f"{err.get('type', 'Error')}: {err.get('message', '')}",
                str(err.get("type", "")),
                str(err.get("traceback", "")),
            )
        if reply.get("stop"):
            raise StopIteration
        return reply.get("ok")

    def _death(self, proc: Process) -> SolutionDied:
        """The end of a serving process, which said it was ready (``READY``) before any of the
        answer ran: whatever its exit code, ``SETUP_FAILED``'s number included, the answer's."""
        status = proc.status or 0
        limit = proc.limit
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            limit = limit or {SIGXCPU: "cpu_time", SIGXFSZ: "file_size"}.get(sig)
            return SolutionDied(f"solution process {KILLED_BY} {sig}", limit)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
        return SolutionDied(f"solution process exited with code {code}", limit)

    def close(self) -> None:
        """Kill the serving process, if any (the run is over)."""
        if self.proc is not None:
            self.launcher.kill(self.proc)


def call_request(name: str, args: Any, kwargs: Any) -> dict[str, Any]:
    """The request that calls the answer's ``name`` with ``args`` and ``kwargs``, as a call
    through ``solution.<name>`` checks it: no dunder name, keywords that are strings."""
    if name.startswith("__"):
        raise AttributeError(name)
    return {"op": "call", "name": name, "args": [*args], "kwargs": dict(**kwargs)}


AHEAD_BYTES = 4096
"""Requests sent ahead go in writes of at most this size (``PIPE_BUF``): each fits an empty
pipe of any size, so the verifier never blocks writing while the solution blocks replying."""


class Ahead:
    """Requests whose arguments are known before any reply (a task's test cases), sent ahead:
    the solution process serves them in order, exactly as it would one at a time, but without
    a round trip between them. ``take`` returns each reply in turn, or raises what a request
    made alone would, with the same time limit (counted from when the call could start: the
    previous reply, or the write). If the process dies or times out, the requests it had not
    served are void: each is then made alone, of the process that replaces it, as it would
    have been. Every request must be taken, in order, before any other request."""

    def __init__(self, session: Session, reqs: list[dict[str, Any]]) -> None:
        self.session = session
        self.reqs = reqs
        self.taken = 0
        self.sent = 0
        self.proc: Process | None = None
        self.since = 0.0
        self.cpu0 = 0.0

    def take(self) -> Any:
        """The next request's reply (sending it, and what fits after it, if not yet sent)."""
        s = self.session
        i = self.taken
        if i >= len(self.reqs):
            raise AheadError("more replies taken than requests sent ahead")
        proc = self.proc
        if proc is None or proc is not s.proc or proc.status is not None:
            s.unanswered -= self.sent - i  # sent to a process that has ended: void
            self.sent = i
        if self.sent == i:
            self._send_from(i)
            proc = self.proc
        assert proc is not None
        self.taken = i + 1
        s.unanswered -= 1
        try:
            return s._receive(proc, s.deref, self.since, self.cpu0)
        finally:
            self.since, self.cpu0 = proc.read_at  # the next call began by then, at the latest

    def _send_from(self, i: int) -> None:
        s = self.session
        if s.unanswered:
            raise AheadError("requests sent ahead of others not yet taken")
        proc = self.proc = s._ensure()
        data = [wire.encode(self.reqs[i])]
        size, j = len(data[0]), i + 1
        while j < len(self.reqs):
            more = wire.encode(self.reqs[j])
            if size + len(more) > AHEAD_BYTES:
                break
            data.append(more)
            size += len(more)
            j += 1
        self.cpu0 = s.launcher.cpu_ms(proc)
        self.since = time.monotonic()
        s._send(proc, b"".join(data))
        s.unanswered += j - i
        self.sent = j


class RemoteObject:
    """An object that lives in the solution process; methods and iteration are RPCs."""

    def __init__(self, session: Session, ref: int) -> None:
        self._session = session
        self._ref = ref

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)

        def method(*args: Any, **kwargs: Any) -> Any:
            req = {
                "op": "method",
                "ref": self._ref,
                "name": name,
                "args": list(args),
                "kwargs": kwargs,
            }
            return self._session.request(req)

        return method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the remote object in the solution process."""
        req = {"op": "call_ref", "ref": self._ref, "args": list(args), "kwargs": kwargs}
        return self._session.request(req)

    def __iter__(self) -> Iterator[Any]:
        it = self._session.request({"op": "iter", "ref": self._ref})
        return it if isinstance(it, RemoteObject) else iter(it)

    def __next__(self) -> Any:
        return self._session.request({"op": "next", "ref": self._ref})

    def __repr__(self) -> str:
        return f"<remote object {self._ref}>"


class SolutionProxy:
    """The answer's module, seen from the verifier: ``solution.add(1, 2)`` is an RPC."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._session.request(call_request(name, args, kwargs))

        return call

    def __getitem__(self, name: str) -> Callable[..., Any]:
        """``solution["package.module:function"](...)``: a call by import path (patch tasks)."""
        return self.__getattr__(name)

    def ahead(self, name: str, calls: list[tuple[list[Any], dict[str, Any]]]) -> Callable[..., Any]:
        """``name`` to be called with each ``(args, kwargs)`` of ``calls``, in that order, all
        sent at once (``Ahead``): the function returned makes those calls, each returning its
        reply or raising what a plain call would. A call other than the next one planned is the
        verifier's error (``AheadError``), as is any other call into the answer before the
        last planned one. For calls whose arguments do not depend on earlier replies."""
        reqs = [call_request(name, a, k) for a, k in calls]
        pending = self._session.ahead(reqs)

        def call(*args: Any, **kwargs: Any) -> Any:
            i = pending.taken
            if i >= len(reqs) or [*args] != reqs[i]["args"] or kwargs != reqs[i]["kwargs"]:
                raise AheadError(f"call {i} of {name!r} is not the one sent ahead")
            return pending.take()

        return call

    def get(self, name: str) -> Any:
        """The value of a module attribute (a constant, or a reference to a class or function)."""
        return self._session.request({"op": "getattr", "name": name})
