"""Builds test_cases.json for grid_paths."""

import json
import random
from pathlib import Path

MOD = 1_000_000_007


def solve(grid):
    # Count paths backwards: paths from each cell to the goal.
    rows, cols = len(grid), len(grid[0])
    count = {}
    for r in range(rows - 1, -1, -1):
        for c in range(cols - 1, -1, -1):
            if grid[r][c] == "#":
                count[r, c] = 0
            elif r == rows - 1 and c == cols - 1:
                count[r, c] = 1
            else:
                count[r, c] = (count.get((r + 1, c), 0) + count.get((r, c + 1), 0)) % MOD
    return count[0, 0]


def make_case(grid):
    stdin = f"{len(grid)} {len(grid[0])}\n" + "".join(row + "\n" for row in grid)
    return {"stdin": stdin, "expected_stdout": f"{solve(grid)}\n"}


def random_grid(rng, rows, cols, wall_share):
    grid = [
        "".join("#" if rng.random() < wall_share else "." for _ in range(cols)) for _ in range(rows)
    ]
    # Keep the corners free so most answers are non-zero.
    grid[0] = "." + grid[0][1:]
    grid[-1] = grid[-1][:-1] + "."
    return grid


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    grids = [
        ["...", ".#.", "..."],
        ["."],
        ["#"],
        ["..", ".#"],
        ["...."],
        [".", ".", "."],
        [".#", "#."],
        ["." * 200] * 200,
        ["." * 17] * 17,
        ["..#", "...", "#.."],
    ]
    for rows, cols, wall_share in [
        (2, 2, 0.0),
        (3, 4, 0.1),
        (4, 3, 0.2),
        (5, 5, 0.15),
        (8, 10, 0.1),
        (10, 8, 0.2),
        (15, 15, 0.05),
        (20, 20, 0.1),
        (30, 40, 0.05),
        (50, 50, 0.1),
        (100, 60, 0.02),
        (80, 100, 0.03),
        (60, 120, 0.01),
        (1, 200, 0.0),
        (200, 1, 0.0),
    ]:
        grids.append(random_grid(rng, rows, cols, wall_share))
    return [make_case(g) for g in grids]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
