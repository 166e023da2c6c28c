"""Builds test_cases.json for lru_cache.

Each case is {"args": [capacity, operations], "expected": [results of the gets]},
where an operation is ["put", key, value] or ["get", key]. verifier.py replays
the operations against the answer's LRUCache.
"""

import json
import random
from pathlib import Path


def replay(capacity, operations):
    # Keys ordered from least to most recently used; a plain list is slow but obvious.
    order = []
    values = {}
    results = []
    for op in operations:
        key = op[1]
        if op[0] == "get":
            if key in values:
                order.remove(key)
                order.append(key)
                results.append(values[key])
            else:
                results.append(-1)
        else:
            if key in values:
                order.remove(key)
            order.append(key)
            values[key] = op[2]
            if len(order) > capacity:
                del values[order.pop(0)]
    return results


def random_operations(rng, count, key_space, get_share):
    ops = []
    for _ in range(count):
        key = rng.randint(0, key_space)
        if rng.random() < get_share:
            ops.append(["get", key])
        else:
            ops.append(["put", key, rng.randint(0, 10**9 if rng.random() < 0.2 else 100)])
    return ops


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    scenarios = [
        (
            2,
            [
                ["put", 1, 10],
                ["put", 2, 20],
                ["get", 1],
                ["put", 3, 30],
                ["get", 2],
                ["put", 1, 11],
                ["put", 4, 40],
                ["get", 3],
                ["get", 1],
                ["get", 4],
            ],
        ),
        (1, [["put", 5, 1], ["get", 5], ["put", 6, 2], ["get", 5], ["get", 6]]),
        # An update must refresh recency: key 1 survives, key 2 is evicted.
        (
            2,
            [
                ["put", 1, 1],
                ["put", 2, 2],
                ["put", 1, 100],
                ["put", 3, 3],
                ["get", 2],
                ["get", 1],
                ["get", 3],
            ],
        ),
        # A get must refresh recency too.
        (
            3,
            [
                ["put", 1, 1],
                ["put", 2, 2],
                ["put", 3, 3],
                ["get", 1],
                ["put", 4, 4],
                ["get", 2],
                ["get", 1],
                ["get", 3],
                ["get", 4],
            ],
        ),
        # Value 0 is a real value, not a miss.
        (2, [["put", 0, 0], ["get", 0], ["put", 7, 0], ["get", 7], ["get", 0]]),
        # Re-putting the same key at capacity must not evict anything.
        (2, [["put", 1, 1], ["put", 2, 2], ["put", 2, 3], ["put", 2, 4], ["get", 1], ["get", 2]]),
    ]
    for capacity, count, key_space, get_share in [
        (1, 20, 3, 0.5),
        (2, 30, 5, 0.5),
        (3, 50, 8, 0.5),
        (4, 60, 6, 0.4),
        (5, 80, 12, 0.5),
        (8, 100, 20, 0.6),
        (10, 120, 25, 0.5),
        (16, 150, 40, 0.5),
        (3, 120, 6, 0.7),
        (30, 180, 60, 0.5),
        (60, 220, 90, 0.5),
        (300, 400, 350, 0.4),
        (7, 100, 10, 0.3),
        (20, 150, 30, 0.6),
    ]:
        scenarios.append((capacity, random_operations(rng, count, key_space, get_share)))
    return [
        {"args": [capacity, ops], "expected": replay(capacity, ops)} for capacity, ops in scenarios
    ]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
