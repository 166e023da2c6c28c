"""Builds test_cases.json for coin_change."""

import json
import random
from collections import deque
from pathlib import Path


def solve(coins, amount):
    # Breadth-first search over amounts still to pay: the first time we reach 0
    # we have used the fewest coins.
    seen = {amount}
    queue = deque([(amount, 0)])
    while queue:
        rest, used = queue.popleft()
        if rest == 0:
            return used
        for coin in sorted(set(coins)):
            nxt = rest - coin
            if nxt >= 0 and nxt not in seen:
                seen.add(nxt)
                queue.append((nxt, used + 1))
    return -1


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    fixed = [
        ([1, 2, 5], 11),
        ([2], 3),
        ([7], 0),
        ([3, 7], 11),
        ([2, 5, 10, 1], 27),
        ([186, 419, 83, 408], 5000),
        ([1], 4999),
        ([25, 10, 1], 30),
        ([9, 6, 5, 1], 11),
        ([4, 4, 4], 16),
        ([10_000], 5_000),
        ([3], 9),
    ]
    cases = [{"args": [list(c), a], "expected": solve(c, a)} for c, a in fixed]
    while len(cases) < 30:
        coins = [rng.randint(1, 60) for _ in range(rng.randint(1, 6))]
        if rng.random() < 0.3:
            coins = [rng.randint(2, 400) for _ in range(rng.randint(2, 8))]
        amount = rng.randint(1, 2000)
        expected = solve(coins, amount)
        if expected in (-1, 0, 1):
            continue
        cases.append({"args": [coins, amount], "expected": expected})
    return cases


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
