"""The verdict contract as pure functions: error types, score checking, dating a failure.

Invariants (property-tested):

- ``has_verdict(error_type, verifier_exit_code)`` is total: every closed error type and exit code
  gives an answer, and only ``MODEL_FAULT_ERRORS`` (or no error) carry a verdict.
- ``checked_score`` never lets NaN, an infinity or a value outside [0, 1] through as reward.
- ``classify`` dates a failure by the instant the policy's output came into play: before it, the
  failure is ours (no verdict); after it, the failure came from handling the answer (a judged 0),
  and a score printed before the crash is never kept. Blame for a timeout also needs evidence that
  the solution itself used its time; otherwise the run has no verdict.
- A compiled language's compile phase is dated the same way (``compile_outcome``): the
  compiler starting on the answer's source is the instant the answer comes into play, so a
  compile that fails after it, in any way, is the answer's judged 0 (``compile_error``, or
  ``solution_timeout`` for its time), and one that fails before it, or whose failure the host
  or a broken toolchain explains, has no verdict.
- A judge's own process that no answer can reach, ended from outside, is ours whatever the
  instant: a pool worker that died, or a verifier out of the answer's reach (``strict``) ended
  by a stop signal (``STOP_SIGNALS``: a kill, the OOM killer, a stop). A verifier ended by a
  fault of its own (SIGSEGV, SIGABRT, ...) after the answer came into play may have met the
  answer's output, so it stays the answer's 0; and where the answer can signal the verifier
  (``unsafe``), no signal is ours for certain.
"""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from deepgym.exceptions import InvalidScoreError
from deepgym.judge import codes
from deepgym.judge.codes import MODEL_FAULT_STATUSES, VERIFIER_BROKEN

__all__ = [
    "ALL_ERROR_TYPES",
    "COMPILER_STARTED",
    "MODEL_FAULT_ERRORS",
    "NO_VERDICT_ERRORS",
    "STOP_SIGNALS",
    "Classification",
    "ErrorType",
    "Outcome",
    "checked_score",
    "classify",
    "compile_outcome",
    "has_verdict",
    "killed_from_outside",
]


class ErrorType(StrEnum):
    """The closed set of error types. A verifier cannot invent another."""

    INVALID_PATCH = "invalid_patch"
    PATCH_APPLY_FAILED = "patch_apply_failed"
    TEST_INFRA_TAMPERING = "test_infra_tampering"
    SOLUTION_ERROR = "solution_error"
    SOLUTION_TIMEOUT = "solution_timeout"
    POLICY_SANDBOX_FAILURE = "policy_sandbox_failure"
    COMPILE_ERROR = "compile_error"
    SANDBOX_ERROR = "sandbox_error"
    RUNTIME_ERROR = "runtime_error"
    VERIFIER_ERROR = "verifier_error"
    TIMEOUT = "timeout"
    INVALID_SCORE = "invalid_score"
    GENERATION_ERROR = "generation_error"
    """The model server did not give the answer, or gave a text that can be no answer
    (``deepgym.eval.model``, ``deepgym.eval.evaluate``): nothing was judged."""


MODEL_FAULT_ERRORS: frozenset[str] = frozenset(ErrorType(s) for s in MODEL_FAULT_STATUSES)
"""The answer's failures: a judged 0. The judge reads the same names (``judge.codes``), so a
verifier's returned value may report these and no other failure."""
ALL_ERROR_TYPES: frozenset[str] = frozenset(e.value for e in ErrorType)
NO_VERDICT_ERRORS: frozenset[str] = ALL_ERROR_TYPES - MODEL_FAULT_ERRORS

VERIFIER_ERROR_EXIT = VERIFIER_BROKEN
"""A verifier that exits with this code reports its own failure: never a verdict (the judge's
own number, which it also exits with when a verifier misuses calls sent ahead)."""


STOP_SIGNALS: frozenset[int] = frozenset(signal.Signals(n) for n in codes.STOP_SIGNALS)
"""Signals that end a process only when another process (or the kernel's OOM killer) sends
them. A process's own faults end it with others (SIGSEGV, SIGBUS, SIGABRT, SIGXCPU, ...)."""


def has_verdict(error_type: str | None, verifier_exit_code: int | None = None) -> bool:
    """The contract's rule: no verdict for a non-model-fault error type or a verifier exit of 2."""
    if verifier_exit_code == VERIFIER_ERROR_EXIT:
        return False
    if error_type is None:
        return True
    if error_type not in ALL_ERROR_TYPES:
        raise ValueError(f"error_type {error_type!r} is not one of {sorted(ALL_ERROR_TYPES)}")
    return error_type in MODEL_FAULT_ERRORS


def checked_score(value: Any) -> float:
    """Return ``value`` as a float in [0, 1], or raise ``InvalidScoreError``.

    Booleans map to 1.0 / 0.0. NaN, infinities, values outside [0, 1] and non-numbers raise.
    """
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if not isinstance(value, int | float):
        raise InvalidScoreError(f"score must be a number in [0, 1], got {type(value).__name__}")
    try:
        score = float(value)
    except OverflowError as exc:
        raise InvalidScoreError(f"score {value!r} is outside [0, 1]") from exc
    if math.isnan(score) or math.isinf(score):
        raise InvalidScoreError(f"score {score!r} is not finite")
    if not 0.0 <= score <= 1.0:
        raise InvalidScoreError(f"score {score!r} is outside [0, 1]")
    return score


@dataclass(frozen=True)
class Outcome:
    """What a sandbox run produced, before classification (all fields are evidence).

    ``report`` is the verifier's result on the private channel, or None if it sent none. Its
    ``status`` is ``"ok"`` (with ``score``), ``"verifier_error"`` (the verifier raised or set up
    badly), ``"solution_error"`` (a call into the answer failed in a way the verifier did not
    handle), ``"solution_timeout"`` (a call into the answer ran past its own time budget, which
    the solution process used), or a model-fault status a driver decided (``invalid_patch``, ...).
    """

    report: dict[str, Any] | None
    in_play: bool
    verifier_exit_code: int | None = None
    sandbox_died: bool = False
    wall_timeout: bool = False
    solution_busy: bool = False
    start_failed: bool = False
    worker_died: bool = False
    """A pool worker (the judge's own process) died: ours, whatever the instant."""
    verifier_signal: int | None = None
    """The signal that ended the verifier's process, where one did."""
    verifier_out_of_reach: bool = False
    """No answer can signal the verifier's process (``strict``: other pid and user namespaces,
    outside the run's cgroups), so a stop signal that ended it came from outside: ours."""
    detail: str = ""


@dataclass(frozen=True)
class Classification:
    """The contract's answer for one outcome."""

    score: float
    passed: bool
    error_type: str | None
    has_verdict: bool
    message: str = ""
    raise_as: str | None = None
    """For ``dg.run``: ``"sandbox"``, ``"timeout"`` or ``"verifier"`` when it must raise."""
    extras: dict[str, Any] = field(default_factory=dict)


_PASS_EPS = 1e-9
ANSWER_READ_STATUSES = frozenset(
    {"invalid_patch", "patch_apply_failed", "test_infra_tampering", "compile_error"}
)
"""Model faults found by reading the answer (a diff checked, a source compiled) rather than
running it: they stand whether or not the answer's process ever started."""


COMPILER_STARTED = "compiler_started"
"""``Evidence.in_play_by`` of a run that ended in its compile phase once the compiler had
started on the answer's source (no program ran)."""


def compile_outcome(
    detail: str,
    *,
    started: bool,
    toolchain_ok: bool = True,
    timed_out: bool = False,
    starved: bool = False,
    outside: bool = False,
) -> Outcome:
    """The outcome of a compile that left no program, from the facts the host saw.

    ``started``: the compiler had started on the answer's source (the instant the answer came
    into play). ``timed_out``: the compile's time limit was the answer's (the compiler used its
    CPU time, or waited of its own past the limit); ``starved``: the host held a compiler that
    could run back past the clock's backstop; ``outside``: a stop signal no limit of the
    build's sent ended the compiler. ``toolchain_ok``: the language's known-good program built
    at that moment. Before the start, ended from outside, or where the toolchain is broken,
    ours (``sandbox_error``); starved, no verdict (``timeout``); otherwise the answer's judged
    0, whatever stopped the compiler: ``solution_timeout`` for its time, else
    ``compile_error``."""
    if not started or outside or not toolchain_ok:
        return Outcome(report=None, in_play=False, start_failed=True, detail=detail)
    if starved:
        return Outcome(report={"status": "timeout", "message": detail, "cases": []}, in_play=True)
    status = ErrorType.SOLUTION_TIMEOUT if timed_out else ErrorType.COMPILE_ERROR
    report: dict[str, Any] = {"status": status.value, "message": detail, "cases": []}
    return Outcome(report=report, in_play=True, verifier_exit_code=0)


def _judged(score: float, passed: bool | None) -> Classification:
    ok = passed if passed is not None else score >= 1.0 - _PASS_EPS
    return Classification(score=score, passed=bool(ok), error_type=None, has_verdict=True)


def _fail(error_type: ErrorType, message: str, raise_as: str | None = None) -> Classification:
    return Classification(
        score=0.0,
        passed=False,
        error_type=error_type.value,
        has_verdict=has_verdict(error_type.value),
        message=message,
        raise_as=raise_as,
    )


def killed_from_outside(o: Outcome) -> bool:
    """Whether the verifier's process, out of the answer's reach, was ended by a stop signal
    (and not by the host's own wall limit, which ``wall_timeout`` dates)."""
    return o.verifier_out_of_reach and o.verifier_signal in STOP_SIGNALS and not o.wall_timeout


def classify(o: Outcome) -> Classification:
    """Turn an outcome into score, passed, error type and verdict, following the contract."""
    if o.start_failed:
        return _fail(ErrorType.SANDBOX_ERROR, o.detail or "the sandbox could not start", "sandbox")
    if o.worker_died and not o.wall_timeout:
        return _fail(ErrorType.SANDBOX_ERROR, o.detail or "the pool worker died", "sandbox")
    if killed_from_outside(o):
        name = signal.Signals(o.verifier_signal or 0).name
        return _fail(
            ErrorType.SANDBOX_ERROR, f"the verifier was ended from outside ({name})", "sandbox"
        )
    if o.verifier_exit_code == VERIFIER_ERROR_EXIT:
        said = (o.report or {}).get("message")  # the judge's word on why, where it gave one
        return _fail(ErrorType.VERIFIER_ERROR, o.detail or str(said or "the verifier exited 2"))
    if o.wall_timeout:
        if o.in_play and o.solution_busy:
            return _fail(ErrorType.SOLUTION_TIMEOUT, o.detail or "the solution ran past the limit")
        where = "after" if o.in_play else "before"
        msg = f"the time limit ran out {where} the answer came into play"
        if o.in_play:  # the verifier, not the solution, used the time: not the policy's fault
            return _fail(ErrorType.TIMEOUT, f"{msg}, while the solution was idle")
        return _fail(ErrorType.TIMEOUT, o.detail or msg, "timeout")
    report = o.report
    if report is None:
        if o.sandbox_died or (o.verifier_exit_code not in (0, None)):
            if o.in_play:
                return _fail(ErrorType.POLICY_SANDBOX_FAILURE, o.detail or "sandbox died in play")
            return _fail(ErrorType.SANDBOX_ERROR, o.detail or "the sandbox died", "sandbox")
        return _fail(
            ErrorType.VERIFIER_ERROR, o.detail or "the verifier printed no result", "verifier"
        )
    status = report.get("status")
    if not isinstance(status, str):  # a malformed report is ours: never the policy's 0
        return _fail(ErrorType.VERIFIER_ERROR, f"verifier reported an unknown status {status!r}")
    message = str(report.get("message") or o.detail or "")
    if status == "ok":
        try:
            score = checked_score(report.get("score"))
        except Exception as exc:  # InvalidScoreError; a bad type from a driver alike
            if o.in_play:
                return _fail(ErrorType.SOLUTION_ERROR, f"verifier returned a bad score: {exc}")
            return _fail(ErrorType.INVALID_SCORE, str(exc))
        passed = report.get("passed")
        return _judged(score, passed if isinstance(passed, bool) else None)
    if status in MODEL_FAULT_ERRORS:
        # A driver's model-fault status only stands once the answer is in play (patch checks
        # count: reading the diff is using it).
        if o.in_play or status in ANSWER_READ_STATUSES:
            return _fail(ErrorType(status), message)
        return _fail(ErrorType.VERIFIER_ERROR, message or "verifier failed before play")
    if status == "sandbox_error":  # the judge could not start the solution: ours
        return _fail(ErrorType.SANDBOX_ERROR, message or "the solution could not start", "sandbox")
    if status == "timeout":  # the judge found the solution starved, not busy: not its fault
        return _fail(ErrorType.TIMEOUT, message or "timed out while the solution was starved")
    if status in ("verifier_error", "invalid_score"):
        if o.in_play:
            return _fail(ErrorType.SOLUTION_ERROR, message or "verifier failed handling the answer")
        return _fail(ErrorType(status), message)
    return _fail(ErrorType.VERIFIER_ERROR, f"verifier reported an unknown status {status!r}")
