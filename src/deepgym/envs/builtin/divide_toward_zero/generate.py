"""Builds test_cases.json for divide_toward_zero."""

import json
import random
from pathlib import Path


def solve(a, b):
    q, r = divmod(a, b)  # floor division
    if r != 0 and (a < 0) != (b < 0):
        q += 1
    return q


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    pairs = [
        (7, 2),
        (-7, 2),
        (7, -2),
        (-8, -2),
        (10**30 + 1, 3),
        (0, 5),
        (0, -5),
        (1, 2),
        (-1, 2),
        (5, 1),
        (-5, 1),
        (5, -1),
        (-(2**63), -1),
        (2**63 - 1, 2),
        (10**80, 7),
        (-(10**80), 7),
        (10**80 - 1, -(10**80)),
        (2**53 + 1, 1),
        (-(2**53 + 1), 3),
        (9, 9),
        (-9, 10),
        (123456789123456789123, -1000),
    ]
    while len(pairs) < 36:
        a = rng.randint(-(10 ** rng.randint(1, 80)), 10 ** rng.randint(1, 80))
        b = rng.randint(1, 10 ** rng.randint(1, 40)) * rng.choice([1, -1])
        if solve(a, b) not in (-1, 0, 1):
            pairs.append((a, b))
    # |a| == |b| == 1: the quotient is 1 in size, so only the sign rule decides it (a == -1 is
    # negative, b == -1 is negative).
    pairs += [(-1, 1), (-1, -1), (1, -1)]
    return [{"args": [a, b], "expected": solve(a, b)} for a, b in pairs]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
