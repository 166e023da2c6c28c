"""Builds test_cases.json for run_length_encode."""

import json
import random
from pathlib import Path


def solve(s):
    parts = []
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        parts.append(str(j - i) + s[i])
        i = j
    return "".join(parts)


def runs_string(rng, letters, runs, max_len):
    out = []
    previous = None
    for _ in range(runs):
        letter = rng.choice([c for c in letters if c != previous] or letters)
        out.append(letter * rng.randint(1, max_len))
        previous = letter
    return "".join(out)


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    strings = [
        "aaabccdddd",
        "",
        "aaaaaaaaaaaaB",
        "a",
        "abc",
        "aA",
        "AAaa",
        "z" * 10_000,
        "abababab",
        "b" * 9 + "c" * 10 + "d" * 11,
        "xYYzzzYYx",
    ]
    for runs, max_len in [
        (3, 3),
        (5, 2),
        (8, 12),
        (10, 1),
        (15, 5),
        (20, 30),
        (40, 120),
        (60, 4),
        (100, 15),
        (4, 1000),
        (25, 9),
        (12, 100),
        (7, 7),
        (30, 2),
        (2, 5000),
    ]:
        letters = rng.choice(["ab", "abc", "aAbB", "xyzXYZ", "abcdefghijklmnopqrstuvwxyz"])
        strings.append(runs_string(rng, letters, runs, max_len))
    return [{"args": [s], "expected": solve(s)} for s in strings]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
