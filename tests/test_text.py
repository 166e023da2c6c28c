"""``deepgym.text``: the one-line, short-cause and percent helpers the command line and the service
share."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from deepgym.text import CAUSE_CHARS, one_line, percent, short_cause, utc_time


def test_one_line_joins_lines_and_drops_pydantic_links() -> None:
    message = "2 validation errors\n  name\n    Field required\n  For further information visit x"
    assert one_line(message) == "2 validation errors; name; Field required"
    assert one_line("  \n\n") == ""
    assert one_line("a\nb\nc", limit=4) == "a; b"


@given(st.floats(allow_nan=True, allow_infinity=False))
def test_percent_keeps_both_formats(x: float) -> None:
    assert percent(x) == f"{x:.2%}"  # the console's and ``deepgym runs``'
    small = f"{x:.1%}" if x >= 0.001 or x == 0 else f"{x:.3%}"  # ``deepgym price``'s
    assert percent(x, 1, small=True) == small


# A crashing verifier's cause as the judge reports it: the whole traceback, internal paths and all.
CRASH = (
    "Traceback (most recent call last):\n"
    '  File "/opt/deepgym/deepgym_judge/harness.py", line 359, in judge\n'
    "    report = drive(j)\n"
    "             ^^^^^^^^\n"
    '  File "/opt/deepgym/deepgym_judge/harness.py", line 272, in run_custom\n'
    "    return report_from_value(verify(SolutionProxy(j.session), j.cases()))\n"
    '  File "/judge/envs/432aecb8d0e5b6d30aff6eec/verifier.py", line 7, in verify\n'
    '    return helper({"got": got})\n'
    '  File "/judge/envs/432aecb8d0e5b6d30aff6eec/verifier.py", line 2, in helper\n'
    '    return x["missing"]\n'
    "           ~^^^^^^^^^^^\n"
    "KeyError: 'missing'\n"
)
LIBRARY = (
    "Traceback (most recent call last):\n"
    '  File "/judge/envs/a4ef/verifier.py", line 3, in verify\n'
    "    json.loads('{')\n"
    '  File "/usr/lib/python3.11/json/decoder.py", line 353, in raw_decode\n'
    "    obj, end = self.scan_once(s, idx)\n"
    "json.decoder.JSONDecodeError: Expecting property name: line 1 column 2 (char 1)\n"
)
ANSWER_RAISED = (
    "Traceback (most recent call last):\n"
    '  File "/judge/envs/b7/verifier.py", line 2, in verify\n'
    "    return solution.add(1, 2) == 3\n"
    '  File "/opt/deepgym/deepgym_judge/rpc.py", line 125, in _receive\n'
    "    raise SolutionError(\n"
    "deepgym_judge.errors.SolutionError: ValueError: nope\n"
)
GROUP = (
    "  + Exception Group Traceback (most recent call last):\n"
    '  |   File "/judge/envs/c3/verifier.py", line 3, in verify\n'
    "  |     raise ExceptionGroup('many', [ValueError('a'), KeyError('b')])\n"
    "  | ExceptionGroup: many (2 sub-exceptions)\n"
    "  +-+---------------- 1 ----------------\n"
    "    | ValueError: a\n"
    "    +---------------- 2 ----------------\n"
    "    | KeyError: 'b'\n"
    "    +------------------------------------\n"
)


def test_a_traceback_is_its_exception_and_the_verifiers_own_frame() -> None:
    assert short_cause(CRASH) == "KeyError: 'missing' (verifier.py:2 in helper)"
    assert short_cause(LIBRARY) == (
        "json.decoder.JSONDecodeError: Expecting property name: line 1 column 2 (char 1) "
        "(verifier.py:3 in verify)"
    )
    assert short_cause(ANSWER_RAISED) == "SolutionError: ValueError: nope (verifier.py:2 in verify)"
    assert short_cause(GROUP) == (
        "ExceptionGroup: many (2 sub-exceptions); ValueError: a; KeyError: 'b' "
        "(verifier.py:3 in verify)"
    )
    no_verifier = CRASH.replace("verifier.py", "other.py")
    assert short_cause(no_verifier) == "KeyError: 'missing'"


def test_what_leads_a_traceback_stays_and_a_cut_one_still_reads() -> None:
    memory = "the answer hit its 256 MB memory limit, then:\n" + CRASH
    assert short_cause(memory) == (
        "the answer hit its 256 MB memory limit, then: "
        "KeyError: 'missing' (verifier.py:2 in helper)"
    )
    cut = CRASH[CRASH.index("ine 272") :]  # its start cut off, header and all
    assert short_cause(cut) == short_cause(CRASH)


def test_other_causes_are_one_line_and_every_cause_is_bounded() -> None:
    assert short_cause("the call ran past its 1 s limit") == "the call ran past its 1 s limit"
    assert short_cause("a\n\nb") == "a; b"
    assert short_cause("") == ""
    long = CRASH.replace("'missing'", "'" + "x" * 1000 + "'")
    assert len(short_cause(long)) == CAUSE_CHARS and short_cause(long).endswith("…")
    assert len(short_cause(long, limit=None)) > CAUSE_CHARS


@given(st.text())
def test_a_short_cause_is_one_bounded_line(text: str) -> None:
    out = short_cause(text)
    assert len(out) <= CAUSE_CHARS
    assert "\n" not in out and "\r" not in out


def test_an_instant_reads_in_utc() -> None:
    assert utc_time(0.0) == "1970-01-01 00:00:00 UTC"
    assert utc_time(1_700_000_000.5) == "2023-11-14 22:13:20 UTC"
    assert utc_time(None) == "-"
