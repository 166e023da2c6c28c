"""Checker for any_pair, in testlib's convention: ``checker.py INPUT EXPECTED OUTPUT``.

Several pairs may qualify, so the answer is judged on its own merits, not against the expected
output: two indices ``i < j`` whose values sum to the target are accepted, and so is ``-1``
where no pair exists (found here, not taken from the expected output). The expected output is
read only to catch a test whose stored answer disagrees with the input: that is a fault of the
test, the checker's failure (exit 3), never the answer's.

Exit codes: 0 accepted, 1 wrong answer, 2 presentation error (not ``-1`` nor two integers),
3 the checker failed (unreadable input, or an expected output that contradicts it).
"""

from __future__ import annotations

import sys
from typing import NoReturn

ACCEPTED, WRONG_ANSWER, PRESENTATION_ERROR, CHECKER_FAILED = 0, 1, 2, 3


def _verdict(code: int, message: str) -> NoReturn:
    """Say why, then exit with testlib's code."""
    print(message)
    sys.exit(code)


def read_input(text: str) -> tuple[list[int], int]:
    """The values and the target from the case's input; ``ValueError`` if it is malformed."""
    words = text.split()
    if len(words) < 2:
        raise ValueError("the input has no 'n target' line")
    n, target = int(words[0]), int(words[1])
    if len(words) != 2 + n:
        raise ValueError(f"the input says n={n} but holds {len(words) - 2} values")
    return [int(w) for w in words[2:]], target


def some_pair(values: list[int], target: int) -> tuple[int, int] | None:
    """A valid pair of 1-based indices, if there is one."""
    seen: dict[int, int] = {}
    for j, v in enumerate(values, 1):
        i = seen.get(target - v)
        if i is not None:
            return i, j
        seen.setdefault(v, j)
    return None


def judge(values: list[int], target: int, expected: str, output: str) -> tuple[int, str]:
    """(exit code, message) for ``output``, an answer to the case (``values``, ``target``)."""
    pair = some_pair(values, target)
    if (expected.split() == ["-1"]) != (pair is None):
        found = "no pair" if pair is None else f"the pair {pair[0]} {pair[1]}"
        return CHECKER_FAILED, f"the expected output {expected.strip()!r} contradicts {found}"
    words = output.split()
    if words == ["-1"]:
        if pair is None:
            return ACCEPTED, "no pair, rightly"
        return WRONG_ANSWER, f"answered -1, but {pair[0]} {pair[1]} is a pair"
    try:
        i, j = (int(w) for w in words)
    except ValueError:
        shown = " ".join(words)[:80]
        return PRESENTATION_ERROR, f"expected two indices or -1, got {shown!r}"
    n = len(values)
    if not 1 <= i < j <= n:
        return WRONG_ANSWER, f"indices {i} {j}: need 1 <= i < j <= {n}"
    if values[i - 1] + values[j - 1] != target:
        got = values[i - 1] + values[j - 1]
        return WRONG_ANSWER, f"a_{i} + a_{j} = {got}, not {target}"
    return ACCEPTED, f"{i} {j}"


def main(argv: list[str]) -> None:
    """Read the three files testlib names and exit with the verdict."""
    if len(argv) != 3:
        _verdict(CHECKER_FAILED, "usage: checker.py INPUT EXPECTED OUTPUT")
    input_path, expected_path, output_path = argv
    try:
        with open(input_path, encoding="utf-8") as f:
            values, target = read_input(f.read())
        with open(expected_path, encoding="utf-8") as f:
            expected = f.read()
    except (OSError, ValueError) as exc:
        _verdict(CHECKER_FAILED, f"cannot read the test: {exc}")
    # The answer's output may be anything, bytes that are not UTF-8 included.
    with open(output_path, encoding="utf-8", errors="replace") as f:
        output = f.read()
    code, message = judge(values, target, expected, output)
    _verdict(code, message)


if __name__ == "__main__":
    main(sys.argv[1:])
