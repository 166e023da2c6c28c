"""Builds test_cases.json for reverse_bits."""

import json
import random
from pathlib import Path


def solve(n):
    return int(format(n, "032b")[::-1], 2)


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    numbers = [
        1,
        6,
        2**32 - 1,
        0,
        2,
        2**31,
        43261596,
        4294967293,
        0x0000FFFF,
        0xFFFF0000,
        0x80000001,
        0x55555555,
        0xAAAAAAAA,
        0x12345678,
        3,
        2**16,
        255,
    ]
    numbers += [rng.randrange(2**32) for _ in range(14)]
    numbers += [rng.randrange(2**8) for _ in range(3)]
    return [{"args": [n], "expected": solve(n)} for n in numbers]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
