"""Builds test_cases.json for spiral_order."""

import json
import random
from pathlib import Path


def solve(matrix):
    # Walk and turn right whenever the next cell is outside or already visited.
    if not matrix or not matrix[0]:
        return []
    rows, cols = len(matrix), len(matrix[0])
    seen = [[False] * cols for _ in range(rows)]
    moves = [(0, 1), (1, 0), (0, -1), (-1, 0)]
    r = c = heading = 0
    out = []
    for _ in range(rows * cols):
        out.append(matrix[r][c])
        seen[r][c] = True
        dr, dc = moves[heading]
        if not (0 <= r + dr < rows and 0 <= c + dc < cols) or seen[r + dr][c + dc]:
            heading = (heading + 1) % 4
            dr, dc = moves[heading]
        r, c = r + dr, c + dc
    return out


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    matrices = [
        [[1, 2, 3], [4, 5, 6], [7, 8, 9]],
        [[1, 2, 3, 4], [5, 6, 7, 8]],
        [[1], [2], [3]],
        [],
        [[]],
        [[7]],
        [[1, 2]],
        [[1], [2]],
        [[1, 2], [3, 4]],
        [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]],
        [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]],
    ]
    for rows, cols in [
        (1, 5),
        (5, 1),
        (2, 7),
        (7, 2),
        (3, 3),
        (4, 4),
        (4, 6),
        (6, 4),
        (5, 9),
        (9, 5),
        (10, 10),
        (13, 7),
        (20, 30),
        (1, 40),
        (25, 25),
    ]:
        matrices.append([[rng.randint(-99, 99) for _ in range(cols)] for _ in range(rows)])
    return [{"args": [m], "expected": solve(m)} for m in matrices]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
