"""Builds test_cases.json for shortest_path."""

import json
import random
from pathlib import Path


def solve(n, edges, source, target):
    # Bellman-Ford style relaxation until nothing changes (weights are non-negative).
    inf = float("inf")
    dist = [inf] * n
    dist[source] = 0
    changed = True
    while changed:
        changed = False
        for u, v, w in edges:
            if dist[u] + w < dist[v]:
                dist[v] = dist[u] + w
                changed = True
    return -1 if dist[target] == inf else dist[target]


def random_graph(rng, n, m, max_w):
    return [[rng.randrange(n), rng.randrange(n), rng.randint(0, max_w)] for _ in range(m)]


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = [
        (4, [[0, 1, 4], [0, 2, 1], [2, 1, 2], [1, 3, 5]], 0, 3),
        (3, [[0, 1, 1]], 1, 0),
        (2, [], 1, 1),
        (2, [[0, 1, 5], [0, 1, 3], [0, 1, 9]], 0, 1),
        (3, [[0, 0, 1], [0, 1, 0], [1, 2, 0]], 0, 2),
        (5, [[0, 1, 1], [1, 2, 1], [2, 3, 1], [3, 4, 1], [0, 4, 10]], 0, 4),
        (5, [[0, 1, 1], [1, 2, 1], [2, 3, 1], [3, 4, 1], [0, 4, 3]], 0, 4),
        (3, [[0, 1, 10**6], [1, 2, 10**6]], 0, 2),
        (4, [[0, 1, 1], [2, 3, 1]], 0, 3),
    ]
    # A long chain where greedy choices are wrong: cheap first hops lead to expensive tails.
    chain = []
    for i in range(0, 40, 2):
        chain += [[i, i + 1, 1], [i + 1, i + 2, 50], [i, i + 2, 30]]
    cases.append((41, chain, 0, 40))
    while len(cases) < 30:
        n = rng.choice([5, 8, 12, 20, 30, 50])
        m = rng.randint(n, 2 * n)
        edges = random_graph(rng, n, m, rng.choice([1, 10, 1000, 10**6]))
        source, target = rng.randrange(n), rng.randrange(n)
        expected = solve(n, edges, source, target)
        if expected <= 0:
            continue
        cases.append((n, edges, source, target))
    # One larger sparse graph.
    n = 200
    edges = [[i, i + 1, rng.randint(1, 100)] for i in range(n - 1)]
    edges += random_graph(rng, n, 250, 10**4)
    cases.append((n, edges, 0, n - 1))
    return [{"args": [n, e, s, t], "expected": solve(n, e, s, t)} for n, e, s, t in cases]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
