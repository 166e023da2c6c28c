"""What an environment's checks report, for every kind (``deepgym.envs.qa.check`` for answers,
``deepgym.envs.qa.session_check`` for sessions): named checks, and the bound on a wrong score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from deepgym.scheduling import RETRYABLE
from deepgym.text import short_cause

if TYPE_CHECKING:
    from deepgym.models import RunResult

__all__ = ["MAX_WRONG_SCORE", "Check", "CheckReport", "describe", "deterministic"]

MAX_WRONG_SCORE = 0.0
"""The most a wrong answer (empty, stub, raising stub, constant, echo), or an agent that does not
solve the task (no-op, busy, random), may score: nothing. A reward that pays for a wrong answer
teaches the policy to produce it."""


@dataclass(frozen=True)
class Check:
    """One named check and what it found."""

    name: str
    ok: bool
    message: str = ""


@dataclass
class CheckReport:
    """Every check of one environment; ``ok`` when all passed."""

    env_name: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when there were checks and every one passed."""
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        """The checks that failed."""
        return [c for c in self.checks if not c.ok]

    def summary(self) -> str:
        """``name: ok (12 checks)`` or ``name: FAILED reference: ...; empty: ...``."""
        if self.ok:
            return f"{self.env_name}: ok ({len(self.checks)} checks)"
        return f"{self.env_name}: FAILED " + "; ".join(
            f"{c.name}: {c.message}" for c in self.failures
        )


def describe(r: RunResult) -> str:
    """A run's result in words that follow "the reference": ``scored 0.50 (test_1: ...)``, or
    ``no verdict (timeout: ...)``."""
    if not r.has_verdict:
        return f"no verdict ({r.error_type}: {short_cause(r.error)})"
    what = f"scored {r.score:.2f}" + (" and passed" if r.passed else "")
    if r.error_type:
        what += f" ({r.error_type}: {short_cause(r.error)})"
    else:
        failed = next((c for c in r.cases if not c.passed), None)
        if failed is not None and r.score < 1.0:
            what += f" ({failed.name}: {failed.message[:200]})"
    return what


def deterministic(refs: Sequence[RunResult]) -> Check:
    """``deterministic`` over every run of the reference (answer or agent): the judged runs
    agree, case for case, and at least one has a verdict. A run the host failed (held back past
    the backstop, a sandbox that broke: the error types a run is retried on,
    ``scheduling.RETRYABLE``) says nothing about the verifier and is left out, as a trainer
    leaves it out; at least two runs must be left. A verifier's own failure (``verifier_error``,
    ``invalid_score``) is the environment's, and counts."""
    if not refs:
        return Check("deterministic", False, "the reference was not run")
    if not any(r.has_verdict for r in refs):  # runs that agree on no verdict prove nothing
        return Check(
            "deterministic",
            False,
            f"no run of the reference had a verdict ({len(refs)} runs; the first "
            f"{describe(refs[0])})",
        )
    judged = [
        (i, r) for i, r in enumerate(refs, 1) if r.has_verdict or r.error_type not in RETRYABLE
    ]
    if len(judged) < 2:
        return Check(
            "deterministic",
            False,
            f"only {len(judged)} of {len(refs)} runs of the reference were judged (the host "
            f"failed the rest, the last {describe(refs[-1])}); run the check again",
        )
    first_i, first = judged[0]
    for i, r in judged[1:]:
        if _fingerprint(r) != _fingerprint(first):
            return Check(
                "deterministic",
                False,
                f"run {i} of the reference {describe(r)}; run {first_i} {describe(first)}",
            )
    said = f"{len(judged)} runs agree"
    if len(judged) < len(refs):
        said += f" ({len(refs) - len(judged)} the host failed left out)"
    return Check("deterministic", True, said)


def _fingerprint(r: RunResult) -> tuple[object, ...]:
    cases = tuple((c.name, c.passed) for c in r.cases)
    return (r.has_verdict, r.score, r.passed, r.error_type, cases)
