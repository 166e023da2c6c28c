"""The retry policy of every client of a remote server deepgym talks to (a model server, an image
registry), as pure functions; the clients only sleep and ask again.

- A request is tried at most ``RetryPolicy.attempts`` times in all.
- A status is worth another try when the server is busy or briefly broken: 408 (it timed out
  waiting for us), 429 (rate limited) and every 5xx (``retryable_status``). Any other status is
  final at once.
- The wait before the n-th retry is the server's ``Retry-After`` when it gives a finite number of
  seconds (its HTTP-date form is not read), else ``base_s * 2**(n - 1)``; never more than
  ``max_s`` either way, so no server can park a client (``retry_delay``).

Invariants (property-tested): every delay is in ``[0, max_s]``; without a ``Retry-After`` the
delays never shrink. Ray's rule for a lost chunk of work is ``scheduling.should_resend``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from deepgym.validation import number, positive_int

__all__ = ["RetryPolicy", "retry_delay", "retryable_status"]


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``attempts`` tries in all; the n-th retry waits ``base_s * 2**(n - 1)`` seconds,
    at most ``max_s``."""

    attempts: int = 5
    base_s: float = 0.5
    max_s: float = 8.0

    def __post_init__(self) -> None:
        positive_int(self.attempts, "retry.attempts", 100)
        number(self.base_s, "retry.base_s", 0.0, 3600.0)
        number(self.max_s, "retry.max_s", 0.0, 3600.0)


def retryable_status(status: int) -> bool:
    """A status worth another try: 408, 429 or a 5xx (see the module)."""
    return status in (408, 429) or 500 <= status <= 599


def retry_delay(policy: RetryPolicy, retry: int, retry_after: str | None = None) -> float:
    """Seconds to wait before the ``retry``-th retry (1-based): the server's ``Retry-After``
    seconds if it gave a finite number, else exponential backoff; capped at ``policy.max_s``."""
    if retry_after is not None:
        try:
            seconds = float(retry_after)
        except ValueError:
            seconds = math.nan
        if math.isfinite(seconds):
            return min(max(seconds, 0.0), policy.max_s)
    return float(min(policy.base_s * 2.0 ** min(max(retry - 1, 0), 64), policy.max_s))
