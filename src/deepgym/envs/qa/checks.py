"""What an environment's checks report, for every kind (``deepgym.envs.qa.check`` for answers,
``deepgym.envs.qa.session_check`` for sessions): named checks, and the bound on a wrong score."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MAX_WRONG_SCORE", "Check", "CheckReport"]

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
