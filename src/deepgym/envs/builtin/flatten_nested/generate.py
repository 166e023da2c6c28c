"""Builds test_cases.json for flatten_nested."""

import json
import random
from pathlib import Path


def solve(nested):
    out = []
    for item in nested:
        if isinstance(item, list):
            out.extend(solve(item))
        else:
            out.append(item)
    return out


def random_nested(rng, budget, depth):
    items = []
    while budget[0] > 0 and rng.random() < 0.85:
        if depth > 0 and rng.random() < 0.3:
            items.append(random_nested(rng, budget, depth - 1))
        else:
            items.append(rng.randint(-1000, 1000))
            budget[0] -= 1
    return items


def deep(value, levels):
    nested = [value]
    for _ in range(levels):
        nested = [nested]
    return nested


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = [
        [1, [2, [3, 4]], 5],
        [[], [[]], [[[7]]]],
        [],
        [0],
        [[[]]],
        [[1], [2], [3]],
        [-1, [-2, [-3, [-4]]], 0],
        deep(42, 59),
        [deep(1, 10), 2, deep(3, 20), [4, [5]]],
        [[1, 2], [], [3, [], [4, []]], 5],
    ]
    for budget, depth in [
        (5, 2),
        (10, 3),
        (20, 4),
        (40, 5),
        (80, 6),
        (150, 8),
        (200, 10),
        (200, 12),
        (250, 20),
        (30, 30),
        (60, 3),
        (120, 1),
        (150, 15),
        (15, 50),
        (8, 8),
    ]:
        nested = []
        while not nested:
            nested = [random_nested(rng, [budget], depth) for _ in range(rng.randint(1, 4))]
            if not solve(nested):
                nested = []
        cases.append(nested)
    return [{"args": [x], "expected": solve(x)} for x in cases]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
