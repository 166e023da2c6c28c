"""Builds test_cases.json for edit_distance."""

import json
import random
from functools import lru_cache
from pathlib import Path


def solve(a, b):
    @lru_cache(maxsize=None)
    def dist(i, j):
        # Distance between the suffixes a[i:] and b[j:].
        if i == len(a):
            return len(b) - j
        if j == len(b):
            return len(a) - i
        if a[i] == b[j]:
            return dist(i + 1, j + 1)
        return 1 + min(dist(i + 1, j), dist(i, j + 1), dist(i + 1, j + 1))

    # Fill the table from the end so the recursion stays shallow.
    for i in range(len(a), -1, -1):
        for j in range(len(b), -1, -1):
            dist(i, j)
    return dist(0, 0)


def mutate(rng, word, alphabet, edits):
    chars = list(word)
    for _ in range(edits):
        op = rng.choice("idr")
        if op == "i" or not chars:
            chars.insert(rng.randint(0, len(chars)), rng.choice(alphabet))
        elif op == "d":
            del chars[rng.randrange(len(chars))]
        else:
            chars[rng.randrange(len(chars))] = rng.choice(alphabet)
    return "".join(chars)


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    pairs = [
        ("kitten", "sitting"),
        ("", "abc"),
        ("flaw", "flaw"),
        ("", ""),
        ("abc", ""),
        ("a", "b"),
        ("intention", "execution"),
        ("Sunday", "sunday"),
        ("abcdef", "fedcba"),
        ("aaaa", "aa"),
        ("horse", "ros"),
        ("x" * 80, "y" * 80),
    ]
    for _ in range(10):
        alphabet = rng.choice(["ab", "abc", "acgt", "abcdefghij"])
        word = "".join(rng.choice(alphabet) for _ in range(rng.randint(5, 60)))
        pairs.append((word, mutate(rng, word, alphabet, rng.randint(1, 12))))
    for _ in range(6):
        alphabet = rng.choice(["ab", "xyz", "hello world"])
        first = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        second = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        pairs.append((first, second))
    return [{"args": [a, b], "expected": solve(a, b)} for a, b in pairs]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
