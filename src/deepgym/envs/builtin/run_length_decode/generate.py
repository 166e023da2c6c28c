"""Builds test_cases.json for run_length_decode."""

import json
import random
import re
from pathlib import Path


def solve(encoded):
    return "".join(letter * int(count) for count, letter in re.findall(r"(\d+)([A-Za-z])", encoded))


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    encodings = [
        "3a1b2c4d",
        "12x1Y",
        "",
        "1a",
        "2a3a",
        "10b",
        "1a1A1a",
        "100z",
        "5000Q",
        "1a2b3c4d5e6f7g8h9i10j11k",
    ]
    for pairs, max_count in [
        (2, 3),
        (4, 9),
        (5, 10),
        (8, 20),
        (10, 99),
        (15, 5),
        (20, 200),
        (30, 3),
        (50, 40),
        (80, 12),
        (6, 1000),
        (3, 5000),
        (12, 1),
        (25, 60),
        (40, 9),
    ]:
        letters = rng.choice(["ab", "xyz", "aAbB", "abcdefghijklmnopqrstuvwxyzABC"])
        parts = [f"{rng.randint(1, max_count)}{rng.choice(letters)}" for _ in range(pairs)]
        encodings.append("".join(parts))
    return [{"args": [e], "expected": solve(e)} for e in encodings]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
