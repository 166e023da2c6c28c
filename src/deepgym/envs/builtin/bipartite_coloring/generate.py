"""Builds test_cases.json for bipartite_coloring."""

import json
import random
from pathlib import Path


def solve(n, edges):
    # Union-find with parity: parity[v] is v's colour relative to its parent.
    parent = list(range(n))
    parity = [0] * n

    def find(v):
        path = []
        while parent[v] != v:
            path.append(v)
            v = parent[v]
        root = v
        # Compress the path, accumulating parity from the top down.
        for node in reversed(path):
            if parent[node] != root:
                parity[node] ^= parity[parent[node]]
            parent[node] = root
        return root

    for u, v in edges:
        ru, rv = find(u), find(v)
        if ru == rv:
            if parity[u] == parity[v]:
                return None
            continue
        # Keep the smaller vertex as the root so it ends up with colour 0.
        if rv < ru:
            ru, rv, u, v = rv, ru, v, u
        parent[rv] = ru
        parity[rv] = parity[u] ^ parity[v] ^ 1
    # Every root is the smallest vertex of its component and has colour 0, so
    # after find() each vertex's parity is its colour.
    colors = []
    for v in range(n):
        find(v)
        colors.append(parity[v])
    return colors


def random_bipartite(rng, n, m):
    side = [rng.randint(0, 1) for _ in range(n)]
    left = [v for v in range(n) if side[v] == 0]
    right = [v for v in range(n) if side[v] == 1]
    if not left or not right:
        return []
    edges = []
    for _ in range(m):
        u, v = rng.choice(left), rng.choice(right)
        edges.append([u, v] if rng.random() < 0.5 else [v, u])
    return edges


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = [
        (4, [[0, 1], [1, 2], [2, 3]]),
        (5, [[3, 4], [1, 2]]),
        (3, [[0, 1], [1, 2], [2, 0]]),
        (1, []),
        (2, [[1, 0], [0, 1], [1, 0]]),
        (3, [[1, 1]]),
        (6, [[5, 4], [4, 3], [3, 2], [2, 1], [1, 0], [0, 5]]),
        (7, [[6, 1], [6, 3], [4, 5]]),
        (4, [[3, 2], [2, 1]]),
    ]
    for n, m in [
        (5, 4),
        (8, 6),
        (10, 12),
        (12, 8),
        (15, 20),
        (20, 15),
        (30, 40),
        (40, 30),
        (60, 80),
        (80, 60),
        (100, 120),
        (150, 100),
        (200, 150),
        (25, 25),
        (50, 45),
    ]:
        edges = random_bipartite(rng, n, m)
        if edges:
            cases.append((n, edges))
    for n, m in [(30, 30), (100, 80)]:
        edges = random_bipartite(rng, n, m)
        a, b, c = rng.sample(range(n), 3)
        edges += [[a, b], [b, c], [c, a]]  # a triangle is an odd cycle
        rng.shuffle(edges)
        cases.append((n, edges))
    return [{"args": [n, e], "expected": solve(n, e)} for n, e in cases]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
