"""Builds test_cases.json for merge_intervals."""

import json
import random
from pathlib import Path


def solve(intervals):
    # Sweep over endpoints: +1 at each start, -1 after each end. Starts sort before
    # ends at the same coordinate, so touching intervals stay joined.
    events = []
    for start, end in intervals:
        events.append((start, 0))
        events.append((end, 1))
    events.sort()
    merged = []
    depth = 0
    for x, kind in events:
        if kind == 0:
            if depth == 0:
                open_start = x
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                merged.append([open_start, x])
    return merged


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    lists = [
        [[1, 3], [8, 10], [2, 6], [15, 18]],
        [[4, 5], [1, 4]],
        [[1, 2], [3, 4]],
        [],
        [[5, 5]],
        [[1, 10], [2, 3], [4, 5]],
        [[3, 3], [3, 3], [3, 3]],
        [[-10, -5], [-6, 0], [1, 1], [0, 0]],
        [[10**9, 10**9], [-(10**9), 10**9]],
        [[6, 7], [0, 1], [2, 3], [4, 5]],
        [[1, 4], [0, 0]],
        [[2, 3], [1, 2], [3, 4], [0, 1]],
    ]
    for size, span, width in [
        (3, 10, 3),
        (5, 20, 4),
        (8, 50, 5),
        (10, 100, 10),
        (20, 100, 3),
        (30, 1000, 50),
        (50, 200, 5),
        (80, 10**6, 10**4),
        (100, 1000, 8),
        (200, 10**9, 10**6),
        (400, 5000, 10),
        (6, 4, 1),
        (15, 30, 0),
        (40, 60, 2),
        (60, 10**4, 300),
    ]:
        intervals = []
        for _ in range(size):
            start = rng.randint(-span, span)
            intervals.append([start, start + rng.randint(0, width)])
        lists.append(intervals)
    return [{"args": [x], "expected": solve(x)} for x in lists]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
