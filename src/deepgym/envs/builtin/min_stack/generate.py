"""Builds test_cases.json for min_stack.

Each case is {"args": [operations], "expected": [results]}, where an operation is
["push", value], ["pop"], ["top"] or ["get_min"], and the results are the return
values of every pop, top and get_min call, in order. verifier.py replays them.
"""

import json
import random
from pathlib import Path


def replay(operations):
    stack = []
    results = []
    for op in operations:
        if op[0] == "push":
            stack.append(op[1])
        elif op[0] == "pop":
            results.append(stack.pop())
        elif op[0] == "top":
            results.append(stack[-1])
        else:
            results.append(min(stack))
    return results


def random_operations(rng, count, span, push_share):
    ops = []
    size = 0
    for _ in range(count):
        if size == 0 or rng.random() < push_share:
            ops.append(["push", rng.randint(-span, span)])
            size += 1
        else:
            kind = rng.choice(["pop", "top", "get_min", "get_min"])
            ops.append([kind])
            if kind == "pop":
                size -= 1
    return ops


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    scenarios = [
        [
            ["push", 3],
            ["push", 1],
            ["push", 1],
            ["get_min"],
            ["pop"],
            ["get_min"],
            ["pop"],
            ["get_min"],
            ["top"],
        ],
        [["push", 5], ["top"], ["get_min"], ["pop"]],
        [["push", -2], ["push", 0], ["push", -3], ["get_min"], ["pop"], ["top"], ["get_min"]],
        # Decreasing pushes then pops: the minimum must climb back.
        [["push", v] for v in range(10, 0, -1)] + [["pop"], ["get_min"]] * 9,
        # Increasing pushes: the minimum stays at the bottom value.
        [["push", v] for v in range(-5, 6)] + [["get_min"], ["pop"]] * 10 + [["top"]],
        [["push", 10**9], ["push", -(10**9)], ["get_min"], ["pop"], ["get_min"]],
    ]
    for count, span, push_share in [
        (10, 5, 0.6),
        (20, 3, 0.5),
        (30, 100, 0.55),
        (50, 10, 0.5),
        (80, 1000, 0.6),
        (100, 2, 0.5),
        (150, 10**9, 0.55),
        (200, 50, 0.5),
        (300, 20, 0.7),
        (400, 10**6, 0.5),
        (500, 5, 0.6),
        (40, 1, 0.5),
        (60, 30, 0.4),
        (120, 7, 0.5),
    ]:
        scenarios.append(random_operations(rng, count, span, push_share))
    return [{"args": [ops], "expected": replay(ops)} for ops in scenarios]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
