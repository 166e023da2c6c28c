"""Admission by size: a bound on the bytes of requests (their answers) the service holds at once.

A service that admits every request holds every request's answers several times over (the
body, its parsed JSON, each run's job and a worker's copy); under a burst of big batches, past
its memory, the kernel's OOM killer ends it and every run in flight with it. So each request
that carries a body is admitted by size (``admit``):

- its body's bytes are held from admission until its response has been sent (a stream to its
  last line);
- a request that would take the bytes held past the limit is refused with 503 ``overloaded``
  and ``Retry-After``: nothing of it ran, so a client may send it again later;
- a request larger than the limit on its own is refused with 413 ``too_large``: it never fits;
- one no larger than the limit is always admitted when nothing else is held: the service always
  makes progress.

The default limit (``default_limit``) is ``MEMORY_FRACTION`` of the service's memory
(``deepgym.sandbox.cgroups.service_memory_bytes``: the tightest memory limit of its cgroup and
the cgroup's ancestors where one is set, else the machine's). It is read when the first request
arrives and again every ``REREAD_S``: a supervisor may place the service in its group after it
starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from deepgym.sandbox.cgroups import service_memory_bytes

__all__ = [
    "MEMORY_FRACTION",
    "RETRY_AFTER_S",
    "InFlightBytes",
    "admission",
    "default_limit",
]

MEMORY_FRACTION = 1 / 16
"""The share of the service's memory its requests' bodies may take at once. A request holds
about six times its body while it runs, and the pool's workers share the same memory
(measured, the burst of ``tests/faults/test_memory.py``: a service with two workers in a 256 MiB
group, idle at about 150 MiB, each request 12 MiB of answers; a bound of 16 MiB, this share,
admits one at a time and peaks at 167 MiB; 32 MiB admits two and peaks at 237 MiB; 64 MiB
admits them all and the OOM killer ends the service)."""
RETRY_AFTER_S = 1
"""The ``Retry-After`` of a refused request, in seconds: runs in flight end within their time
limits, and a client's backoff grows from here."""
REREAD_S = 5.0
"""How long a derived limit stands before the service's memory is read again."""
Admission = Literal["admit", "busy", "too_large"]


def admission(held: int, size: int, limit: int) -> Admission:
    """Whether a request of ``size`` bytes is admitted while ``held`` bytes are: ``too_large``
    if it alone is over ``limit``, ``busy`` if it would take the bytes held past ``limit``."""
    if size > limit:
        return "too_large"
    if held + size > limit:
        return "busy"
    return "admit"


def default_limit() -> int | None:
    """``MEMORY_FRACTION`` of ``service_memory_bytes`` (None: the memory is unknown, no bound)."""
    memory = service_memory_bytes()
    return max(int(memory * MEMORY_FRACTION), 1) if memory is not None else None


class InFlightBytes:
    """The bytes of requests admitted and not yet answered, against a limit.

    ``limit``: the bound in bytes; None: ``derive`` it (by default ``default_limit``) at the
    first request and again every ``REREAD_S``. A derived None is no bound at all.
    """

    def __init__(
        self,
        limit: int | None = None,
        *,
        derive: Callable[[], int | None] = default_limit,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fixed = limit
        self._derive = derive
        self._clock = clock
        self._derived: tuple[float, int | None] | None = None
        self.held = 0
        """The bytes of the requests admitted and not yet answered."""

    @property
    def limit(self) -> int | None:
        """The bound now: the one given, or the derived one (re-read every ``REREAD_S``)."""
        if self._fixed is not None:
            return self._fixed
        now = self._clock()
        if self._derived is None or now - self._derived[0] >= REREAD_S:
            self._derived = (now, self._derive())
        return self._derived[1]

    def admit(self, size: int) -> Admission:
        """Admit ``size`` bytes (then held until ``release``), or say why not."""
        limit = self.limit
        verdict = "admit" if limit is None else admission(self.held, size, limit)
        if verdict == "admit":
            self.held += size
        return verdict

    def release(self, size: int) -> None:
        """The bytes of an admitted request whose response has been sent."""
        self.held = max(self.held - size, 0)
