"""Builds test_cases.json for two_sum."""

import json
import random
from collections import Counter
from pathlib import Path


def pairs_with_sum(nums, target):
    counts = Counter(nums)
    total = 0
    for value, count in counts.items():
        other = target - value
        if other == value:
            total += count * (count - 1) // 2
        elif other > value and other in counts:
            total += count * counts[other]
    return total


def solve(nums, target):
    where = {}
    for i, value in enumerate(nums):
        where.setdefault(value, []).append(i)
    for i, value in enumerate(nums):
        for j in where.get(target - value, []):
            if j > i:
                return [i, j]
    return None


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    fixed = [
        ([2, 7, 11, 15], 9),
        ([3, 3], 6),
        ([-4, 9, 1, 5], -3),
        ([0, 4, 3, 0], 0),
        ([1, 2], 3),
        ([5, 75, 25], 100),
        ([-1, -2, -3, -4, -5], -8),
        ([10**9, -(10**9), 7], 10**9 + 7),
        ([1, 5, 8], 9),
        ([4, 6, 5], 10),
    ]
    cases = []
    for nums, target in fixed:
        if pairs_with_sum(nums, target) == 1:
            cases.append({"args": [nums, target], "expected": solve(nums, target)})
    sizes = [2, 3, 4, 5, 8, 10, 20, 50, 100, 300, 1500, 6, 7, 15, 30, 60, 200, 12, 40, 9]
    for size in sizes:
        span = rng.choice([10, 1000, 10**9]) if size <= 10 else rng.choice([1000, 10**9])
        if size > 100:
            span = 10**9
        while True:
            nums = [rng.randint(-span, span) for _ in range(size)]
            i, j = sorted(rng.sample(range(size), 2))
            target = nums[i] + nums[j]
            if pairs_with_sum(nums, target) == 1:
                break
        cases.append({"args": [nums, target], "expected": [i, j]})
    return cases


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
