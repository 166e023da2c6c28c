"""Builds test_cases.json for longest_increasing_subsequence."""

import json
import random
from pathlib import Path


def solve(nums):
    # Quadratic DP for small inputs; for long inputs a Fenwick tree over value ranks.
    if len(nums) <= 400:
        best = []
        for i, value in enumerate(nums):
            best.append(1 + max((best[j] for j in range(i) if nums[j] < value), default=0))
        return max(best, default=0)
    ranks = {v: r + 1 for r, v in enumerate(sorted(set(nums)))}
    tree = [0] * (len(ranks) + 1)
    answer = 0
    for value in nums:
        r = ranks[value] - 1
        best_before = 0
        while r > 0:
            best_before = max(best_before, tree[r])
            r -= r & -r
        here = best_before + 1
        answer = max(answer, here)
        r = ranks[value]
        while r < len(tree):
            tree[r] = max(tree[r], here)
            r += r & -r
    return answer


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    lists = [
        [10, 9, 2, 5, 3, 7, 101, 18],
        [7, 7, 7],
        [],
        [42],
        [1, 2, 3, 4, 5, 6],
        [6, 5, 4, 3, 2, 1, 0],
        [0, 1, 0, 3, 2, 3],
        [-5, -10, -3, -3, 0, -1, 4],
        [3, 10, 2, 1, 20, 4, 6, 7, 1, 2, 3, 4, 5],
        [10**9, -(10**9), 0, 10**9 - 1],
        [2, 2, 3, 3, 4, 4, 1, 1],
    ]
    for size in [5, 8, 12, 20, 30, 50, 80, 120, 200, 300, 400, 1000]:
        span = rng.choice([5, 50, 10**9])
        lists.append([rng.randint(-span, span) for _ in range(size)])
    # Mostly sorted inputs with noise give long answers.
    for size in [50, 500, 1200]:
        base = sorted(rng.randint(-(10**6), 10**6) for _ in range(size))
        for _ in range(size // 10):
            base[rng.randrange(size)] = rng.randint(-(10**6), 10**6)
        lists.append(base)
    return [{"args": [nums], "expected": solve(nums)} for nums in lists]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
