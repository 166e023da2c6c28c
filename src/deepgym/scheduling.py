"""Scheduling decisions as pure functions: group order, time limits, retries.

- Groups are scheduled group-major (every member of group 0 before group 1), so early groups
  complete early and a trainer can start on them while stragglers run.
- An environment's time limit comes from its reference answer's measured runtime:
  ``clamp(k * reference, floor, cap)`` with the environment's ``timeout`` as the cap, so the
  barrier constant is as small as the task allows. A correct answer slower than that is the
  answer's fault (``solution_timeout``).
- A run whose environment's derived limit is not known yet starts at once under the cap; it keeps
  its result only if that result would have been the same under the derived limit
  (``holds_under``), and is otherwise run again under it, so the verdict never depends on
  whether the limit was known when the run started.
- A run that failed for a reason that is ours before the answer came into play (or whose answer
  the host starved) is retried once inside its deadline; a run that keeps failing has no verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from deepgym.exceptions import ConfigError
from deepgym.models import Environment, RunResult
from deepgym.validation import positive_int, positive_number, seconds

RETRYABLE = frozenset({"sandbox_error", "runtime_error", "timeout"})
MAX_ATTEMPTS = 2


@dataclass(frozen=True)
class TimeLimitPolicy:
    """``clamp(factor * reference_seconds, floor, cap)``; ``factor=None`` keeps the cap."""

    factor: float | None = 10.0
    floor: float = 1.0
    persist: bool = True
    """Keep measured reference runtimes in ``$DEEPGYM_HOME/limits.sqlite``
    (``deepgym.time_limits.LimitStore``), shared by every client on the machine; False: measure
    in each client."""

    def __post_init__(self) -> None:
        if self.factor is not None:
            positive_number(self.factor, "time limit factor")
        seconds(self.floor, "time limit floor")

    def limit(self, reference_seconds: float | None, cap: float) -> float:
        """The time limit for an environment whose reference ran in ``reference_seconds``."""
        if self.factor is None or reference_seconds is None:
            return cap
        return min(max(self.factor * reference_seconds, self.floor), cap)


def fixed_limit(
    policy: TimeLimitPolicy, env: Environment, time_limit: float | None = None
) -> float | None:
    """A run's time limit where no reference runtime decides it: the call's ``time_limit``, the
    environment's own, or its cap (the policy derives none, or there is no reference to run).
    The environment's ``timeout`` caps each one, as it caps a derived limit. None: the limit is
    derived from the reference's runtime (``TimeLimitPolicy.limit``)."""
    if time_limit is not None:  # an explicit choice stands, up to the cap
        return min(float(time_limit), env.timeout)
    if env.time_limit is not None:
        return min(env.time_limit, env.timeout)
    if policy.factor is None or not env.reference_solution:
        return env.timeout
    return None


def holds_under(result: RunResult, limit: float) -> bool:
    """Whether ``result``, from a run held to a longer time limit, is the result the same run
    gets under ``limit``: it took no longer than ``limit`` from the moment its sandbox took the
    job (its verifier, its solution and its report: more than the judge's own clock, which
    starts later) and its solution used no more CPU than that (the CPU rlimit, ``ceil(limit) +
    1`` seconds, follows the limit). Then no clock and no rlimit that ``limit`` sets could have
    fired, and every case's own timeout (``min(case_timeout, limit)``) was out of reach too."""
    s = result.service
    took_ms = s.total_ms - s.queue_ms - s.start_ms
    cpu_ms = result.evidence.solution_cpu_ms or 0.0
    return took_ms <= limit * 1000.0 and cpu_ms <= limit * 1000.0


def group_slices(n: int, group_size: int | None) -> list[range]:
    """Index ranges of consecutive groups (the last may be short); one group if no size."""
    if group_size is None:
        return [range(n)] if n else []
    positive_int(group_size, "group_size")
    return [range(i, min(i + group_size, n)) for i in range(0, n, group_size)]


def should_retry(result: RunResult, attempt: int, seconds_left: float | None) -> bool:
    """Retry once a failure that is ours and happened before the answer was in play."""
    if attempt >= MAX_ATTEMPTS or result.has_verdict:
        return False
    if result.error_type not in RETRYABLE:  # a starved solution's "timeout" is ours too
        return False
    if result.error_type != "timeout" and result.evidence.in_play_ms is not None:
        return False  # the answer was in play when the sandbox failed: no verdict, no retry
    limit = result.time_limit_s or 0.0
    return seconds_left is None or seconds_left >= limit


def should_resend(attempts: int, seconds_left: float) -> bool:
    """Send a chunk of work once more, elsewhere, when the worker it went to was lost (a Ray
    node's actor died): only after its first try, and only while its deadline has time left.
    Its runs come back judged or without a verdict, never lost and never scored twice."""
    return attempts < MAX_ATTEMPTS and seconds_left > 0


def broadcast_envs(envs: Sequence[object] | object, n: int) -> list[object]:
    """One environment per answer: a single one repeated, or a list of exactly ``n``."""
    if isinstance(envs, list | tuple):
        if len(envs) != n:
            raise ConfigError(f"got {len(envs)} environments for {n} answers; give one or {n}")
        return list(envs)
    return [envs] * n
