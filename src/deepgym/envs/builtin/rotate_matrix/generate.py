"""Builds test_cases.json for rotate_matrix."""

import json
import random
from pathlib import Path


def solve(matrix):
    if not matrix:
        return []
    rows, cols = len(matrix), len(matrix[0])
    # Cell (r, c) moves to (c, rows - 1 - r).
    out = [[0] * rows for _ in range(cols)]
    for r in range(rows):
        for c in range(cols):
            out[c][rows - 1 - r] = matrix[r][c]
    return out


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    matrices = [
        [[1, 2], [3, 4]],
        [[1, 2, 3], [4, 5, 6]],
        [[1, 2, 3]],
        [],
        [[5]],
        [[1], [2], [3], [4]],
        [[1, 2, 3], [4, 5, 6], [7, 8, 9]],
        [[0, 0], [0, 1]],
    ]
    for rows, cols in [
        (2, 3),
        (3, 2),
        (4, 4),
        (5, 5),
        (1, 8),
        (8, 1),
        (3, 7),
        (7, 3),
        (6, 6),
        (10, 4),
        (4, 10),
        (12, 12),
        (20, 15),
        (2, 2),
        (9, 9),
        (30, 30),
    ]:
        matrices.append([[rng.randint(-1000, 1000) for _ in range(cols)] for _ in range(rows)])
    return [{"args": [m], "expected": solve(m)} for m in matrices]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
