"""The QA report: what ``deepgym qa --json`` (and ``check --json``) prints, one entry per
environment, checked before it is kept and summarised for the console. Pure: no I/O.

An entry is ``{"env", "ok", "kind", "checks": [{"name", "ok", "message"}], "mutation"}``;
``mutation`` is ``null`` when the run made no mutants, else the mutation report (``Mutation``):
counts (``mutants``, ``killed``, ``equivalent``, ``survived``, ``undecided``, ``no_verdict``),
``score``, ``seconds``, ``threshold``, ``ok``, and the ``survivors`` (each with its ``diff`` and
the ``killing_input`` found for it, or ``null``), the ``undecided`` mutants (``undecideds``,
each with ``why``) and the ``equivalents`` (each with ``why``). ``kind`` and ``mutation`` may
be absent (a check run of a deepgym that printed neither); ``undecided``, ``undecideds`` and an
``agreed`` count are absent from a report kept before they existed, and read as 0, empty and
``null``.

Invariants: ``validate_entries`` accepts exactly the documents of that shape (a field of another
type, a bool where a count goes, a score outside [0, 1] or not finite is a ``ConfigError`` that
names the field: ``entries[2].mutation.score: ...``); fields it does not know are kept, not
refused, so a newer report still reads. ``summarize`` is computed from the entries alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from deepgym.exceptions import ConfigError

__all__ = [
    "CheckGroup",
    "Equivalent",
    "MetaValue",
    "Mutation",
    "QaCheck",
    "QaEntry",
    "QaReport",
    "QaSummary",
    "Survivor",
    "Undecided",
    "check_group",
    "summarize",
    "validate_entries",
    "validate_meta",
]

CheckGroup = Literal["reference", "wrong", "probe"]
"""What a check is about: the reference (it scores 1.0, reruns agree, its time limits fit), a
wrong answer that must score nothing (empty, stub, constant, echo, a patch that changes nothing,
an agent that does nothing), or an exploit probe that must be judged a failure."""

MetaValue = str | int | float | bool | None
"""A value of a report's ``meta``: plain JSON, no nesting."""

_REFERENCE_CHECKS = frozenset({"reference", "deterministic", "time_limits"})


def check_group(name: str) -> CheckGroup:
    """The group of the check ``name`` (``exploit[...]`` is a probe)."""
    if name.startswith("exploit["):
        return "probe"
    if name in _REFERENCE_CHECKS or name.startswith("rerun_"):
        return "reference"
    return "wrong"


class _Model(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


class QaCheck(_Model):
    """One check of an environment and what it found."""

    name: str
    ok: bool
    message: str


class Survivor(_Model):
    """A mutant no test failed: the change as a diff, and an input that tells it apart from
    the reference, where one was found."""

    id: str
    operator: str
    line: int
    description: str
    diff: str
    killing_input: str | None


class _Untold(_Model):
    """A mutant no test failed and no input told apart from the reference: why it stands as it
    does, and ``agreed``, the distinct in-domain inputs it agreed on, where that is the
    evidence."""

    id: str
    operator: str
    line: int
    description: str
    diff: str
    why: str
    agreed: int | None = Field(default=None, ge=0)


class Equivalent(_Untold):
    """A mutant left out of the score: it behaves as the reference, and why we think so."""


class Undecided(_Untold):
    """A mutant on too little evidence to call it equivalent. It counts as a survivor in the
    score."""


class Mutation(_Model):
    """One environment's mutation testing: the one shape of a mutation report
    (``deepgym.envs.qa.mutants.MutationReport.to_json`` makes it). ``score`` is killed /
    (mutants - equivalent - no_verdict), None when that is 0: a survivor and an undecided
    mutant count alike, against it."""

    env: str
    kind: str
    mutants: int = Field(ge=0)
    killed: int = Field(ge=0)
    equivalent: int = Field(ge=0)
    survived: int = Field(ge=0)
    undecided: int = Field(default=0, ge=0)
    no_verdict: int = Field(ge=0)
    score: float | None = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    seconds: float = Field(ge=0.0, allow_inf_nan=False)
    threshold: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    ok: bool
    gated: bool = True
    """Whether the threshold decides the exit: every kind now (a report kept before sessions'
    scores were gated says false for a session's, reported as it was)."""
    survivors: list[Survivor]
    undecideds: list[Undecided] = Field(default_factory=list)
    equivalents: list[Equivalent]


class QaEntry(_Model):
    """One environment's line of the report."""

    env: str
    ok: bool
    kind: str | None = None
    checks: list[QaCheck]
    mutation: Mutation | None = None


_ENTRIES: TypeAdapter[list[QaEntry]] = TypeAdapter(list[QaEntry])


def _where(what: str, loc: Sequence[int | str]) -> str:
    out = what
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _refused(what: str, exc: ValidationError) -> ConfigError:
    """The first error of ``exc`` as one line that names the field (and how many more)."""
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return ConfigError(f"QA report: {_where(what, first['loc'])}: {first['msg']}{more}")


def validate_entries(entries: Any) -> list[QaEntry]:
    """``entries`` as a report's entries; ``ConfigError`` naming the first bad field."""
    if not isinstance(entries, list):
        raise ConfigError(f"QA report: entries: a list of environments, not {type(entries)!r}")
    if not entries:
        raise ConfigError("QA report: entries: no environment in the report")
    try:
        return _ENTRIES.validate_python(entries)
    except ValidationError as exc:
        raise _refused("entries", exc) from None


def validate_meta(meta: Any) -> dict[str, MetaValue]:
    """A report's ``meta`` (the command, its options): names to plain JSON values."""
    if not isinstance(meta, dict):
        raise ConfigError(f"QA report: meta: a mapping of names to values, not {type(meta)!r}")
    for key, value in meta.items():
        if not isinstance(key, str):
            raise ConfigError(f"QA report: meta: names are strings, not {key!r}")
        if value is not None and not isinstance(value, str | int | float | bool):
            raise ConfigError(
                f"QA report: meta.{key}: a string, a number, a bool or null, "
                f"not {type(value).__name__}"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"QA report: meta.{key}: a finite number, not {value}")
    return dict(meta)


@dataclass(frozen=True)
class QaSummary:
    """A report at a glance: how many environments, how many passed every check, and their
    mutation scores (``None`` where no environment has one)."""

    environments: int
    passed: int
    scored: int
    mean_score: float | None
    min_score: float | None


def summarize(entries: Sequence[QaEntry]) -> QaSummary:
    """The summary of validated entries; a mutation without a score is not averaged."""
    scores = [
        e.mutation.score for e in entries if e.mutation is not None and e.mutation.score is not None
    ]
    return QaSummary(
        environments=len(entries),
        passed=sum(e.ok for e in entries),
        scored=len(scores),
        mean_score=math.fsum(scores) / len(scores) if scores else None,
        min_score=min(scores) if scores else None,
    )


@dataclass(frozen=True)
class QaReport:
    """A kept report: its id, when it was saved, how it was made (``meta``: the command and
    its options), its summary, and its entries (``entries`` is ``None`` in a listing)."""

    id: str
    created: float
    meta: dict[str, MetaValue]
    summary: QaSummary
    entries: list[QaEntry] | None = None
