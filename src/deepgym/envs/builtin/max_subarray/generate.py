"""Builds test_cases.json for max_subarray."""

import json
import random
from pathlib import Path


def solve(nums):
    # Best difference of prefix sums: prefix[j] - min(prefix[i] for i < j).
    best = None
    prefix = 0
    lowest_before = 0
    for value in nums:
        prefix += value
        candidate = prefix - lowest_before
        best = candidate if best is None else max(best, candidate)
        lowest_before = min(lowest_before, prefix)
    return best


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    lists = [
        [-2, 1, -3, 4, -1, 2, 1, -5, 4],
        [-3, -1, -2],
        [5],
        [-7],
        [0, 0, 0],
        [1, 2, 3, 4],
        [10**9, -1, 10**9],
        [-(10**9)] * 5,
        [3, -10, 3],
        [2, -1, 2, -1, 2],
        [-1, 0, -2],
        [8, -19, 5, -4, 20],
    ]
    for size, low, high in [
        (5, -10, 10),
        (10, -10, 5),
        (20, -50, 50),
        (30, -5, 10),
        (50, -100, 20),
        (100, -(10**9), 10**9),
        (200, -30, 30),
        (500, -(10**6), 10**6),
        (1000, -100, 99),
        (3000, -(10**9), 10**9),
        (15, -20, -1),
        (8, 1, 9),
        (40, -3, 3),
        (60, -1000, 900),
    ]:
        lists.append([rng.randint(low, high) for _ in range(size)])
    return [{"args": [x], "expected": solve(x)} for x in lists]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
