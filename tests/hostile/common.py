"""Hostile values for every field a client controls, and how they travel (JSON or Python).

``HOSTILE`` draws what a careless or malicious client sends: infinities and NaN, numbers past
every range, negatives and zeros, bools where ints go, None, deep nesting, megabyte strings and
odd unicode (lone surrogates, NUL, right-to-left marks, astral characters). ``TRIED`` counts the
inputs sent; the summary at the end of the run prints it (``conftest.py``).
"""

from __future__ import annotations

import errno
import json
import math
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, example, settings
from hypothesis import strategies as st

from deepgym.sandbox import cgroups, spec
from deepgym.sandbox.base import Job, RawRun
from tests.fakes import FakeBackend

C_LONG_MAX = 2**63 - 1
PID_MAX_LIMIT = 1 << 22
"""The kernel's ceiling on ``pids.max`` (``PID_MAX_LIMIT`` on 64-bit Linux)."""

TRIED: Counter[str] = Counter()
"""Hostile inputs sent, by suite (``http``, ``api``)."""

EXAMPLES = 12
"""Examples drawn per field, besides every value of ``SPECIAL``: fixed numbers, so a run is
bounded (every field x (``EXAMPLES`` + ``len(SPECIAL)``))."""
DEADLINE_S = 10.0
"""Every call answers within this, or the test fails (a hang is a failure)."""

SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,  # each call is bounded by DEADLINE_S instead (a loaded machine is slow)
    derandomize=True,  # the same inputs every run: a failure reproduces
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


@dataclass(frozen=True)
class Deep:
    """Lists (or objects) nested ``depth`` deep: built without recursion, sent as such."""

    depth: int
    kind: str = "list"

    def json(self) -> str:
        if self.kind == "list":
            return "[" * self.depth + "]" * self.depth
        return '{"a": ' * self.depth + "1" + "}" * self.depth

    def python(self) -> Any:
        out: Any = [] if self.kind == "list" else 1
        for _ in range(self.depth):
            out = [out] if self.kind == "list" else {"a": out}
        return out


MEGABYTE = "x" * 2**20
ODD = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "ok\udfff",
    "\u202eevil",
    "\U0001f600" * 1000,
    "\n\r\t",
    "../../etc/passwd",
    "/etc/passwd",
    "~root",
    "two_sum\n",
    "٣",
    "sleep",
    MEGABYTE,
    "é" * 300_000,
]
NUMBERS: list[Any] = [
    math.inf,
    -math.inf,
    math.nan,
    1e308,
    -1e308,
    5e-324,
    10**30,
    -(10**30),
    2**63,
    2**64 + 1,
    10**400,
    -1,
    0,
    -0.0,
    0.5,
    True,
    False,
]
SPECIAL: list[Any] = [*NUMBERS, *ODD, None, [], {}, Deep(5000), Deep(5000, "dict"), Deep(30)]

HOSTILE = st.one_of(
    st.sampled_from(SPECIAL),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.text(max_size=40),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def with_specials(test: Any) -> Any:
    """``test`` (a ``@given(value=...)`` test) run on every value of ``SPECIAL`` too, besides
    the examples hypothesis draws."""
    for value in SPECIAL:
        test = example(value=value)(test)
    return test


def to_json(value: Any) -> str:
    """``value`` as JSON text: an infinity as ``1e999`` (valid JSON that reads as one), NaN as
    ``NaN`` (not JSON: a parser must refuse it), deep nesting as written."""
    if isinstance(value, Deep):
        return value.json()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("1e999" if value > 0 else "-1e999")
    if isinstance(value, list):
        return "[" + ", ".join(to_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {to_json(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def to_python(value: Any) -> Any:
    """``value`` as a Python argument (deep nesting built)."""
    return value.python() if isinstance(value, Deep) else value


FAKE_WORDS = ("down", "unavailable", "flaky", "fail")
"""Answers the fake backend reads as a script (``tests/fakes.py``): not hostile, skipped."""


def scripted(answer: Any) -> bool:
    """Whether the fake backend would read ``answer`` as a script rather than an answer."""
    return isinstance(answer, str) and (answer in FAKE_WORDS or answer.startswith("sleep:"))


class HostlikeBackend(FakeBackend):
    """The fake backend (``tests/fakes.py``), doing first with each job what a real sandbox
    does with its numbers and text, with the real code where it is pure: the rlimits
    (``spec.rlimits``, ``math.ceil`` of the time limit, values a C ``long`` must hold), the cgroup
    values (the kernel's range: ``ERANGE`` past it), the staged test data (``json.dumps``) and the
    answer and code written to files (UTF-8). A value the real sandbox cannot take fails here
    as it would there."""

    async def run(self, job: Job) -> RawRun:
        env = job.env
        # a run without a memory cgroup: ``spec.rlimits`` then sets the address space
        limits = spec.rlimits(job, cgroups.RunCgroup())
        for key, value in limits.items():
            if not 0 <= value <= C_LONG_MAX:
                raise OverflowError(f"setrlimit {key}: {value} does not fit a C long")
        if env.max_processes > PID_MAX_LIMIT or env.memory_mb * 2**20 > C_LONG_MAX:
            raise OSError(errno.ERANGE, "cgroup write: Numerical result out of range")
        if not math.isfinite(time.monotonic() + 2 * job.timeout):
            raise OverflowError("a deadline past the clock's range")
        json.dumps(spec.job_spec(job, "/env", "/answer.py"), allow_nan=False)
        if env.test_cases is not None:
            json.dumps(env.test_cases)
        for text in (job.answer, env.verifier_code, env.step_verifier_code, env.setup_script):
            if text is not None:
                text.encode("utf-8")
        return await super().run(job)
