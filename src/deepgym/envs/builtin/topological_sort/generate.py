"""Builds test_cases.json for topological_sort."""

import json
import random
from pathlib import Path


def solve(n, dependencies):
    # Repeatedly take the smallest task whose predecessors are all placed.
    preds = [set() for _ in range(n)]
    for a, b in dependencies:
        preds[b].add(a)
    placed = [False] * n
    order = []
    for _ in range(n):
        pick = next(
            (t for t in range(n) if not placed[t] and all(placed[p] for p in preds[t])),
            None,
        )
        if pick is None:
            return []
        placed[pick] = True
        order.append(pick)
    return order


def random_dag(rng, n, m):
    labels = list(range(n))
    rng.shuffle(labels)  # labels[i] is the name of the i-th task in a hidden valid order
    deps = []
    for _ in range(m):
        i, j = sorted(rng.sample(range(n), 2))
        deps.append([labels[i], labels[j]])
    return deps


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = [
        (4, [[3, 1], [2, 1]]),
        (3, []),
        (2, [[0, 1], [1, 0]]),
        (1, []),
        (1, [[0, 0]]),
        (5, [[4, 3], [3, 2], [2, 1], [1, 0]]),
        (5, [[4, 0], [4, 0], [3, 0]]),
        (6, [[5, 2], [5, 0], [4, 0], [4, 1], [2, 3], [3, 1]]),
        (4, [[1, 0], [2, 3], [3, 2]]),
    ]
    for n, m in [
        (6, 6),
        (8, 10),
        (10, 5),
        (12, 30),
        (20, 40),
        (30, 20),
        (50, 100),
        (80, 120),
        (100, 150),
        (150, 150),
        (7, 3),
        (18, 25),
        (40, 40),
        (10, 30),
        (15, 15),
        (25, 60),
    ]:
        cases.append((n, random_dag(rng, n, m)))
    for n, m in [(8, 12), (40, 80)]:
        deps = random_dag(rng, n, m)
        a, b = deps[rng.randrange(m)]
        deps.append([b, a])  # closes a cycle
        cases.append((n, deps))
    # Larger case: tasks with high numbers must come first, so a plain sort is wrong.
    n = 300
    deps = [[i + 1, i] for i in range(0, n - 1, 3)] + random_dag(rng, n, 300)
    if solve(n, deps):
        cases.append((n, deps))
    cases.append((n, [[b, a] for a, b in deps if a > b]))
    return [{"args": [n, d], "expected": solve(n, d)} for n, d in cases]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
