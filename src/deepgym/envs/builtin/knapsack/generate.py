"""Builds test_cases.json for knapsack."""

import json
import random
from pathlib import Path


def solve(weights, values, capacity):
    # Keep the Pareto frontier of (weight, value) pairs reachable so far.
    frontier = {0: 0}
    for weight, value in zip(weights, values):
        grown = dict(frontier)
        for used, total in frontier.items():
            if used + weight <= capacity and grown.get(used + weight, -1) < total + value:
                grown[used + weight] = total + value
        frontier = grown
    return max(frontier.values())


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = [
        ([1, 3, 4, 5], [1, 4, 5, 7], 7),
        ([5], [10], 4),
        ([], [], 10),
        ([2, 3], [4, 5], 0),
        ([10, 20, 30], [60, 100, 120], 50),
        ([1, 1, 1], [10, 20, 30], 2),
        ([4, 4, 4, 4], [5, 5, 5, 5], 15),
        ([3, 4, 5], [0, 0, 7], 9),
        ([1000] * 3, [10**6, 10**6 - 1, 3], 2000),
        ([7], [7], 7),
    ]
    for n in [3, 5, 8, 10, 12, 15, 20, 25, 30, 35, 40, 40, 6, 18, 22]:
        weights = [rng.randint(1, rng.choice([20, 100, 1000])) for _ in range(n)]
        values = [rng.randint(0, rng.choice([50, 10**6])) for _ in range(n)]
        capacity = rng.randint(1, min(2000, max(1, sum(weights))))
        cases.append((weights, values, capacity))
    return [{"args": [w, v, c], "expected": solve(w, v, c)} for w, v, c in cases]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
