"""Builds test_cases.json for number_of_islands."""

import json
import random
from pathlib import Path


def solve(grid):
    # Union-find over land cells.
    parent = {}

    def find(cell):
        while parent[cell] != cell:
            parent[cell] = parent[parent[cell]]
            cell = parent[cell]
        return cell

    for r, row in enumerate(grid):
        for c, ch in enumerate(row):
            if ch == "1":
                parent[(r, c)] = (r, c)
    for r, c in list(parent):
        for other in ((r + 1, c), (r, c + 1)):
            if other in parent:
                parent[find(other)] = find((r, c))
    return len({find(cell) for cell in parent})


def random_grid(rng, rows, cols, land):
    return ["".join("1" if rng.random() < land else "0" for _ in range(cols)) for _ in range(rows)]


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    grids = [
        ["11000", "11000", "00100", "00011"],
        ["101", "010", "101"],
        [],
        ["0"],
        ["1"],
        ["0000", "0000"],
        ["1111", "1001", "1111"],
        ["1", "0", "1", "0", "1"],
        ["10101010101"],
        ["1" * 150] * 150,
    ]
    # A serpentine single island, which defeats naive recursion.
    snake = []
    for r in range(60):
        if r % 2 == 0:
            snake.append("1" * 60)
        elif r % 4 == 1:
            snake.append("0" * 59 + "1")
        else:
            snake.append("1" + "0" * 59)
    grids.append(snake)
    for rows, cols, land in [
        (3, 3, 0.5),
        (4, 7, 0.4),
        (5, 5, 0.6),
        (8, 8, 0.3),
        (10, 12, 0.45),
        (12, 10, 0.55),
        (15, 15, 0.4),
        (20, 20, 0.35),
        (25, 30, 0.5),
        (30, 25, 0.6),
        (40, 40, 0.45),
        (1, 30, 0.5),
        (30, 1, 0.5),
        (50, 50, 0.3),
        (60, 60, 0.55),
    ]:
        grids.append(random_grid(rng, rows, cols, land))
    return [{"args": [g], "expected": solve(g)} for g in grids]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
