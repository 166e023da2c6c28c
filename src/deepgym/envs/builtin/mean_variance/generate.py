"""Builds test_cases.json for mean_variance.

Expected values are computed exactly with fractions and rounded to float once.
"""

import json
import random
from fractions import Fraction
from pathlib import Path


def solve(values):
    exact = [Fraction(v) for v in values]
    n = len(exact)
    mean = sum(exact) / n
    variance = sum((x - mean) ** 2 for x in exact) / n
    return [float(mean), float(variance)]


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    lists = [
        [1, 2, 3, 4],
        [5.0],
        [1e9 + 1, 1e9 + 2, 1e9 + 3],
        [-3, 3],
        [0, 0, 0, 0],
        [7, 7, 7, 8],
        [-1.5, 2.25, -0.125, 4.0],
        [1e12, -1e12],
        [0.1] * 10,
        [10**12, 10**12 + 1, 10**12 + 2, 10**12 + 3],
    ]
    for size in [2, 3, 5, 10, 50, 200, 500]:
        lists.append([round(rng.uniform(-1000, 1000), 3) for _ in range(size)])
    # Large offset, small spread: the naive one-pass formula fails on these.
    for offset, spread, size in [
        (1e9, 5, 10),
        (1e9, 1, 100),
        (-1e9, 3, 50),
        (3e8, 10, 200),
        (1e11, 50, 200),
        (1e9, 2, 600),
        (5e10, 0.5, 20),
        (1e9, 100, 400),
    ]:
        lists.append([offset + round(rng.uniform(-spread, spread), 2) for _ in range(size)])
    for size in [4, 30, 300]:
        lists.append([rng.randint(-(10**6), 10**6) for _ in range(size)])
    return [{"args": [values], "expected": solve(values)} for values in lists]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
