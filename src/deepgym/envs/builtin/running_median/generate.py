"""Builds test_cases.json for running_median."""

import bisect
import json
import random
from pathlib import Path


def solve(numbers):
    seen = []
    medians = []
    for value in numbers:
        bisect.insort(seen, value)
        medians.append(seen[(len(seen) - 1) // 2])
    return medians


def make_case(numbers, per_line=None):
    if per_line:
        rows = [numbers[i : i + per_line] for i in range(0, len(numbers), per_line)]
        body = "".join(" ".join(map(str, row)) + "\n" for row in rows)
    else:
        body = " ".join(map(str, numbers)) + "\n"
    expected = " ".join(map(str, solve(numbers))) + "\n"
    return {"stdin": f"{len(numbers)}\n{body}", "expected_stdout": expected}


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = [
        make_case([5, 2, 8, 1, 9]),
        make_case([7]),
        make_case([3, 3, 3, 3]),
        make_case([1, 2, 3, 4, 5, 6]),
        make_case([6, 5, 4, 3, 2, 1]),
        make_case([-1, -5, 10**9, -(10**9), 0]),
        make_case([4, 1], per_line=1),
        make_case([0, 0, 1, -1, 2, -2]),
    ]
    for size, span, per_line in [
        (10, 10, None),
        (20, 100, 3),
        (50, 5, None),
        (100, 10**9, 7),
        (300, 1000, None),
        (600, 10**6, 10),
        (800, 50, 1),
        (1500, 10**9, None),
        (30, 2, 4),
        (200, 10**9, None),
        (1000, 100, 25),
        (60, 1, None),
    ]:
        cases.append(make_case([rng.randint(-span, span) for _ in range(size)], per_line))
    return cases


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
