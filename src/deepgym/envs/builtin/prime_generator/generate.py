"""Builds test_cases.json for prime_generator.

Each case is {"args": [k], "expected": the first k primes}; verifier.py takes
k values from a fresh primes() generator and compares.
"""

import json
import random
from pathlib import Path


def first_primes(k):
    found = []
    candidate = 2
    while len(found) < k:
        if all(candidate % p for p in found if p * p <= candidate):
            found.append(candidate)
        candidate += 1
    return found


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    counts = [1, 2, 3, 4, 5, 6, 10, 25, 26, 100, 168, 1000]
    counts += [rng.randint(7, 60) for _ in range(6)]
    counts += [rng.randint(100, 400) for _ in range(2)]
    return [{"args": [k], "expected": first_primes(k)} for k in counts]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
