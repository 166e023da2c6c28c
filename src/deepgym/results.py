"""Turn a backend's raw run into a ``RunResult`` (pure: the classification lives in ``verdict``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from deepgym.exceptions import DeepGymTimeoutError, SandboxDiedError, SandboxError, VerifierError
from deepgym.judge.codes import KILLED_BY
from deepgym.judge.report import MAX_CASES, ends
from deepgym.models import CaseOutput, CaseResult, Evidence, RunResult, Scoring, ServiceTime
from deepgym.sandbox.base import RawRun
from deepgym.verdict import Classification, classify

MAX_ERROR_CHARS = 4000
"""The longest ``RunResult.error`` kept (the judge sends a traceback of at most 3000)."""


def _cases(raw: Any) -> list[CaseResult]:
    out = []
    for i, c in enumerate(raw[:MAX_CASES] if isinstance(raw, list) else []):
        if not isinstance(c, dict):
            continue
        score = c.get("score")
        out.append(
            CaseResult(
                name=str(c.get("name") or f"test_{i}"),
                passed=bool(c.get("passed")),
                score=float(score) if isinstance(score, int | float) and 0 <= score <= 1 else None,
                message=str(c.get("message") or "")[:500],
                output=_output(c.get("output")),
            )
        )
    return out


def _output(raw: Any) -> CaseOutput | None:
    """A case's kept output, as the judge reported it (None where it kept none)."""
    if not isinstance(raw, dict):
        return None

    def number(key: str) -> int | None:
        v = raw.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    ms = raw.get("time_ms")
    files, left = raw.get("files"), raw.get("files_left_out")
    return CaseOutput(  # each stream as the judge kept it (the environment's kept_output_kb)
        stdout=str(raw.get("stdout") or ""),
        stderr=str(raw.get("stderr") or ""),
        exit_code=number("exit_code"),
        signal=number("signal"),
        time_ms=float(ms) if isinstance(ms, int | float) and ms == ms and ms >= 0 else 0.0,
        timed_out=raw.get("timed_out") is True,
        files={str(k): v for k, v in files.items() if isinstance(v, str)}
        if isinstance(files, dict)
        else {},
        files_left_out=[n for n in left if isinstance(n, str)] if isinstance(left, list) else [],
    )


def _components(raw: Any) -> dict[str, float]:
    if not isinstance(raw, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in raw.items()
        if isinstance(v, int | float)
        and not isinstance(v, bool)
        and v == v
        and abs(v) != float("inf")
    }


_CLOCK_ERRORS = frozenset({"solution_timeout", "timeout"})


def memory_cause(message: str, memory_mb: int | None, error_type: str | None) -> str:
    """The cause of a run that reached its memory limit: the limit named first, then what the
    judge saw (a clock running out, a crash), which the limit brought about."""
    hit = f"the answer hit its {f'{memory_mb} MB ' if memory_mb else ''}memory limit"
    said = message.strip()
    if not said:
        return hit
    if "\n" in said:  # a traceback: it stays whole below the line that names the limit
        return f"{hit}, then:\n{said}"
    return f"{hit} (then {said})" if error_type in _CLOCK_ERRORS else f"{hit} ({said})"


KILLED = f"{KILLED_BY} 9"
"""A solution process ended by ``SIGKILL``, as the judge says it: at the memory limit, the
kernel's OOM killer's."""


def memory_cases(cases: list[CaseResult], memory_mb: int | None) -> list[CaseResult]:
    """A run that reached its memory limit: each failed case whose process was killed
    (``KILLED``) names the limit, as the run's cause does (``memory_cause``)."""
    return [
        c.model_copy(update={"message": memory_cause(c.message, memory_mb, None)[:500]})
        if not c.passed and KILLED in c.message
        else c
        for c in cases
    ]


def scored(c: Classification, scoring: Scoring) -> Classification:
    """``c`` under an environment's ``scoring``: ``"all"`` scores a judged answer that did not
    pass 0.0 (its cases still say which held); ``"partial"`` keeps the verifier's score."""
    if scoring == "all" and c.has_verdict and not c.passed and c.score != 0.0:
        return dataclasses.replace(c, score=0.0)
    return c


def build_result(
    raw: RawRun,
    env_name: str,
    time_limit_s: float,
    queue_ms: float = 0.0,
    attempts: int = 1,
    memory_mb: int | None = None,
    *,
    scoring: Scoring,
) -> tuple[RunResult, Classification]:
    """The contract's result for one raw run, and the classification behind it (``memory_mb``:
    the run's memory limit, named in the cause when the evidence says it was reached;
    ``scoring``: the environment's, applied by ``scored``)."""
    c = scored(classify(raw.outcome), scoring)
    report = raw.report or {}
    judged_ok = c.has_verdict and c.error_type is None
    solution_ms = raw.solution_cpu_ms or 0.0
    error = ends(c.message, MAX_ERROR_CHARS)
    cases = _cases(report.get("cases"))
    if raw.limit_fired == "memory" and not c.passed and not raw.in_compile:
        error = memory_cause(error, memory_mb, c.error_type)  # (a compiler's names its own)
        cases = memory_cases(cases, memory_mb)
    result = RunResult(
        score=c.score,
        passed=c.passed,
        has_verdict=c.has_verdict,
        error_type=c.error_type,
        error=error,
        exit_code=raw.exit_code,
        reward_components=_components(report.get("reward_components")) if judged_ok else {},
        cases=cases,
        stdout=raw.stdout,  # as the judge kept it: at most the environment's kept_output_kb
        stderr=raw.stderr,
        execution_time_ms=raw.total_ms,
        isolation=raw.isolation,
        env_name=env_name,
        time_limit_s=time_limit_s,
        attempts=attempts,
        evidence=Evidence(
            limit_fired=raw.limit_fired,
            limit_mechanism=raw.limit_mechanism,
            solution_cpu_ms=raw.solution_cpu_ms,
            peak_memory_mb=raw.peak_memory_mb,
            in_play_ms=raw.in_play_ms,
            in_play_by=raw.in_play_by,
            signal=raw.signal,
            compile_ms=raw.compile_ms,
        ),
        service=ServiceTime(
            queue_ms=queue_ms + raw.queue_ms,
            start_ms=max(raw.start_ms - raw.queue_ms, 0.0),
            verifier_ms=max(raw.total_ms - raw.start_ms - solution_ms, 0.0),
            solution_ms=solution_ms,
            total_ms=raw.total_ms + queue_ms,
        ),
    )
    return result, c


def raise_for(result: RunResult, c: Classification) -> None:
    """``dg.run``'s rule: raise on the no-verdict failures the contract lists."""
    if c.raise_as == "sandbox":
        cls = SandboxDiedError if result.exit_code not in (None, 0, 1) else SandboxError
        raise cls(result.error or "the sandbox failed", result=result)
    if c.raise_as == "timeout":
        raise DeepGymTimeoutError(result.error or "the time limit ran out", result=result)
    if c.raise_as == "verifier":
        raise VerifierError(result.error or "the verifier printed no result", result=result)
