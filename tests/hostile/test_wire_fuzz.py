"""Bytes from the sandbox side: what an answer or a verifier can emit never crashes the host,
hangs it, or becomes a reward.

Three readers meet bytes the other side chose: the wire codec (``deepgym.judge.wire.decode``:
the verifier reads the solution process's replies, which the answer can write itself), the host's
reading of the verifier's result channel (``evidence.parse_event`` line by line, then
``evidence.read_run`` and ``results.build_result``), and, end to end, a real pool sandbox whose
verifier and answer spray random bytes on their own output. Each property has a fixed number of
examples, derandomized; each call is timed.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from deepgym import DeepGym, Environment
from deepgym.exceptions import DeepGymError, SandboxUnavailableError
from deepgym.judge import wire
from deepgym.models import RunResult
from deepgym.results import build_result
from deepgym.sandbox import make_backend
from deepgym.sandbox.base import Backend
from deepgym.sandbox.evidence import parse_event, read_run
from deepgym.scheduling import TimeLimitPolicy
from deepgym.verdict import checked_score
from tests.hostile.common import TRIED
from tests.sandbox.conftest import ADD, ADD_OK, HostGuard

CALL_S = 2.0
"""Every decode or channel read finishes within this (a measured call takes milliseconds)."""


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,  # each call is timed against CALL_S instead (a loaded machine is slow)
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
    )


# -- (a) the wire codec ---------------------------------------------------------------------

PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)
"""Values that cross the wire: their encodings are the seeds the mutations start from."""

NASTY_LINES: list[bytes | str] = [
    b"",
    b"\n",
    b"\xff\xfe\xfd",
    b'"\xed\xa0\x80"',  # an encoded lone surrogate: invalid UTF-8
    "\ud800",
    b"NaN",
    b"[NaN, Infinity, -Infinity]",
    b"1" * 5000,  # past Python's 4,300-digit limit on int()
    b"1e999999",
    b"-" + b"9" * 4000,
    b"[" * 100_000,
    b"[" * 150 + b"]" * 150,
    b"[" * 250 + b"]" * 250,  # past MAX_DEPTH
    b'{"a":' * 100_000,
    b'{"__tuple__":' * 300 + b"[]" + b"}" * 300,
    b"a" * 2**23,  # a very long line
    b"[" + b"1," * 2**20 + b"1]",
    b'{"__int__": "' + b"f" * 2**20 + b'"}',
    b'{"__int__": "zz"}',
    b'{"__int__": 5}',
    b'{"__float__": "nan"}',
    b'{"__float__": "1e999"}',
    b'{"__float__": []}',
    b'{"__bytes__": "!!!"}',
    b'{"__bytes__": 7}',
    b'{"__set__": [[1], 2]}',
    b'{"__set__": 5}',
    b'{"__frozenset__": {"a": 1}}',
    b'{"__dict__": [[[1], 2]]}',
    b'{"__dict__": [1, 2, 3]}',
    b'{"__dict__": [[1, 2, 3]]}',
    b'{"__ref__": "x"}',
    b'{"__ref__": 99999999999999999999999}',
    b'{"__tuple__": null}',
    b'{"ok": 1, "ok": 2}',
    b'{"ok": 1}\n{"ok": 2}',
    b'{"ok": 1} garbage',
    b"\x00" * 1000,
]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid message, then cut, spliced or flipped."""
    data = bytearray(wire.encode(draw(PLAIN)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["cut", "flip", "insert", "repeat"]))
        at = draw(st.integers(0, len(data)))
        if op == "cut":
            del data[at:]
        elif op == "flip" and at < len(data):
            data[at] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "repeat":
            data += data[:at]
    return bytes(data)


LINES = st.one_of(st.binary(max_size=200), st.text(max_size=100), mutated())


def _timed(fn: Any, *args: Any) -> Any:
    t0 = time.monotonic()
    try:
        return fn(*args)
    finally:
        took = time.monotonic() - t0
        assert took < CALL_S, f"{took:.2f} s for one call on {str(args[0])[:200]!r}"


@pytest.mark.parametrize("deref", [None, lambda ref: ("ref", ref)], ids=["no-refs", "refs"])
def test_decode_returns_a_value_or_raises_wire_error(deref: Any) -> None:
    @_settings(300)
    @given(line=LINES)
    def one(line: bytes | str) -> None:
        TRIED["wire"] += 1
        with contextlib.suppress(wire.WireError):
            _timed(wire.decode, line, deref)

    for line in NASTY_LINES:
        one = example(line=line)(one)
    one()


@_settings(300)
@given(value=PLAIN)
def test_a_valid_message_still_round_trips(value: Any) -> None:
    """The mutations start from real encodings: what is not mutated decodes to itself."""
    TRIED["wire"] += 1
    assert wire.decode(wire.encode(value)) == value


# -- (b) the verifier's result channel ------------------------------------------------------

SCORES = st.one_of(
    st.sampled_from([1, 1.0, 0.5, 0, True, False, 1.0000001, 2, -1, 10**400, "1", "0.5", None]),
    st.sampled_from([[], {}, [1], {"score": 1}, math.nan, math.inf, -math.inf, -0.0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(),
)
ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
)
CASES = st.one_of(
    ODD,
    st.lists(
        st.one_of(ODD, st.fixed_dictionaries({"name": ODD, "passed": ODD, "score": SCORES})),
        max_size=3,
    ),
)
SOLUTION = st.one_of(
    ODD,
    st.fixed_dictionaries(
        {},
        optional={"stdout": ODD, "stderr": ODD, "cpu_ms": SCORES, "limit": ODD},
    ),
)
STATUSES = st.sampled_from(
    [
        *("ok", "verifier_error", "solution_error", "solution_timeout", "invalid_score"),
        *("timeout", "sandbox_error", "invalid_patch", "OK", "", "passed"),
    ]
) | st.one_of(ODD)


@st.composite
def report(draw: st.DrawFn) -> dict[str, Any]:
    """A report as a verifier could forge it: any status, score, passed, cases, solution."""
    out: dict[str, Any] = {"event": draw(st.sampled_from(["report", "report", "Report", 1]))}
    for key, values in [
        ("status", STATUSES),
        ("score", SCORES),
        ("passed", ODD),
        ("cases", CASES),
        ("solution", SOLUTION),
        ("message", ODD),
        ("reward_components", st.dictionaries(st.text(max_size=3), SCORES, max_size=2) | ODD),
    ]:
        if draw(st.booleans()):
            out[key] = draw(values)
    return out


def _line(msg: Any) -> bytes:
    return json.dumps(msg, allow_nan=True).encode()


@st.composite
def channel(draw: st.DrawFn) -> bytes:
    """What a result channel could carry: an in-play mark or not, reports (valid-looking,
    truncated, with a forged duplicate key, followed by garbage), or bytes at random."""
    if draw(st.integers(0, 5)) == 0:
        return draw(st.binary(max_size=300))
    lines: list[bytes] = []
    if draw(st.booleans()):
        by = draw(st.sampled_from(["solution_started", 5, None, ["x"]]))
        lines.append(_line({"event": "in_play", "in_play_ms": draw(SCORES), "by": by}))
    body = _line(draw(report()))
    how = draw(st.sampled_from(["as is", "cut", "dup", "garbage", "next", "deep", "flip"]))
    if how == "cut":
        body = body[: draw(st.integers(0, len(body)))]
    elif how == "dup":  # a key twice: the reader keeps the last one, as JSON parsers do
        body = body[:-1] + b', "score": ' + _line(draw(SCORES)) + b"}"
    elif how == "garbage":
        body += draw(st.binary(max_size=40))
    elif how == "next":
        body += b"\n" + draw(st.binary(max_size=40))
    elif how == "deep":
        body = b'{"event": "report", "status": "ok", "score": 1, "x": ' + b"[" * 100_000
    elif how == "flip" and body:
        at = draw(st.integers(0, len(body) - 1))
        body = body[:at] + bytes([body[at] ^ draw(st.integers(1, 255))]) + body[at + 1 :]
    lines.append(body)
    if draw(st.booleans()):
        lines.append(_line({"event": "done", "exit_code": draw(ODD)}))
    return b"\n".join(lines) + draw(st.sampled_from([b"", b"\n"]))


def read_channel(data: bytes, code: int | None, timed_out: bool) -> RunResult:
    """The host's reading of a result channel that carried ``data``, as the pool reads it."""
    events = [e for line in data.split(b"\n") if (e := parse_event(line)) is not None]
    raw = read_run(events, code, b"", b"verifier stderr", timed_out, "pool")
    raw.total_ms = 10.0
    result, _ = build_result(raw, "fuzz", 5.0, scoring="partial")
    return result


def _first_report(data: bytes) -> dict[str, Any] | None:
    """What the bytes say, read independently: the first line that is a JSON object whose
    ``event`` is ``report``."""
    for line in data.split(b"\n"):
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(msg, dict) and msg.get("event") == "report":
            return msg
    return None


def _valid_score(report: dict[str, Any]) -> float | None:
    try:
        return checked_score(report.get("score"))
    except DeepGymError:
        return None


@_settings(600)
@given(
    data=channel(),
    code=st.sampled_from([0, 0, 1, 2, -9, 137, None]),
    timed_out=st.booleans(),
)
@example(data=b'{"event": "report", "status": "ok", "score": 1}', code=0, timed_out=False)
def test_no_bytes_on_the_result_channel_become_a_reward_they_do_not_justify(
    data: bytes, code: int | None, timed_out: bool
) -> None:
    TRIED["channel"] += 1
    result = _timed(read_channel, data, code, timed_out)
    assert 0.0 <= result.score <= 1.0 and math.isfinite(result.score)
    assert not result.passed or result.has_verdict
    report = _first_report(data)
    if report is None:  # nothing well formed: never a score
        assert result.score == 0.0 and not result.passed and result.error_type is not None
        return
    score = _valid_score(report)
    if result.score > 0 or result.passed:  # a reward: only the report's own, valid score
        assert report.get("status") == "ok" and score is not None, report
        assert result.score == score and result.error_type is None and result.has_verdict
    if score is None:  # a forged score (outside [0, 1], NaN, a string, none): never a reward
        assert result.score == 0.0 and not result.passed


def test_a_well_formed_report_is_read_as_sent() -> None:
    """The property above is not vacuous: a valid report does score."""
    data = _line({"event": "report", "status": "ok", "score": 0.75, "passed": False})
    result = read_channel(data + b"\n" + b"\xff garbage", 0, False)
    assert (result.score, result.passed, result.has_verdict) == (0.75, False, True)


# -- (c) end to end: a real pool sandbox ------------------------------------------------------

GARBAGE_RETURNS = [
    "float('nan')",
    "float('inf')",
    "2.0",
    "-0.5",
    "'1.0'",
    "None",
    "[1]",
    "{'score': 1.5, 'passed': True}",
    "{'score': float('nan')}",
    "{'score': '1', 'cases': 5}",
    "object()",
    "b'\\x00\\xff'",
]
SPRAY = r"""
import os
import sys

BLOB = {blob!r}


def verify(solution, test_cases):
    solution.add(1, 2)
    sys.stdout.buffer.write(BLOB)
    sys.stdout.flush()
    sys.stderr.buffer.write(BLOB)
    sys.stderr.flush()
    os.write(1, BLOB)
    os.write(2, BLOB)
    print(BLOB.decode("utf-8", "replace"))
    if {channel!r}:  # the judge's own result channel, found through the harness module
        harness = next(m for n, m in sys.modules.items() if n.endswith("harness"))
        fd = harness._CURRENT.result_fd
        os.write(fd, BLOB + b"\n[1]\n5\n" + b"[" * 100000 + b"\n")
        os.write(fd, b'{{"event": "done", "exit_code": "x"}}\n' + BLOB + b"\n")
    return {returns}
"""
ANSWER = """
import os
import sys

os.write(1, {blob!r})
sys.stdout.buffer.write({blob!r})


def add(a, b):
    os.write(1, {blob!r})
    return a + b
"""


@pytest.fixture(scope="module")
def pool() -> Iterator[tuple[DeepGym, Backend]]:
    """A warm one-worker pool and its client."""
    backend = make_backend("pool", workers=1)
    dg = DeepGym(backend=backend, time_limits=TimeLimitPolicy(factor=None))
    try:
        try:
            assert dg.run(ADD, ADD_OK).score == 1.0
        except SandboxUnavailableError as exc:
            pytest.skip(f"the pool sandbox cannot run on this host: {exc}")
        yield dg, backend
    finally:
        dg.close()


@pytest.mark.sandbox
@pytest.mark.parametrize("channel", [False, True], ids=["output", "result-channel"])
@pytest.mark.parametrize("returns", GARBAGE_RETURNS)
def test_random_bytes_from_a_verifier_and_an_answer_are_never_a_reward(
    pool: tuple[DeepGym, Backend], returns: str, channel: bool
) -> None:
    """The verifier sprays ``blob`` on its stdout and stderr (Python's streams and fds 1 and 2)
    and, with ``channel``, on the judge's result channel too, then returns garbage; the answer
    sprays it on its own stdout."""
    dg, backend = pool

    @_settings(2)
    @given(blob=st.binary(min_size=1, max_size=4096))
    @example(blob=bytes(range(256)) * 4 + b"\n" * 64)
    def one(blob: bytes) -> None:
        TRIED["sandbox"] += 1
        env = Environment(
            name="spray",
            verifier_code=SPRAY.format(blob=blob, returns=returns, channel=channel),
            timeout=20.0,
            case_timeout=10.0,
        )
        guard = HostGuard.take(backend)
        t0 = time.monotonic()
        try:
            result = dg.run(env, ANSWER.format(blob=blob))
        except DeepGymError as exc:  # a run without a verdict, raised as the contract says
            result = exc.result  # type: ignore[attr-defined]
            assert result is not None and not result.has_verdict, exc
        assert time.monotonic() - t0 < env.timeout + 10.0
        assert result.score == 0.0 and not result.passed, result
        # the garbage it returned is a bad score, met after the answer came into play
        assert result.error_type == "solution_error", result
        assert result.evidence.in_play_ms is not None, result.error  # the verifier ran
        guard.check()

    one()
