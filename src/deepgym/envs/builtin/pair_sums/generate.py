"""Builds test_cases.json for pair_sums."""

import json
import random
from pathlib import Path


def make_case(pairs, sep=" "):
    stdin = f"{len(pairs)}\n" + "".join(f"{a}{sep}{b}\n" for a, b in pairs)
    stdout = "".join(f"{a + b}\n" for a, b in pairs)
    return {"stdin": stdin, "expected_stdout": stdout}


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = [
        make_case([(1, 2), (-5, 5), (10**20, 1)]),
        make_case([]),
        make_case([(0, 0)]),
        make_case([(-1, -1)]),
        make_case([(10**99, 10**99), (-(10**99), 1)]),
        make_case([(7, 8), (9, 10)], sep="   "),
        make_case([(2**63 - 1, 1), (-(2**63), -1)]),
        make_case([(123, -456)]),
    ]
    for count, digits in [
        (1, 3),
        (2, 5),
        (5, 9),
        (10, 18),
        (20, 19),
        (50, 30),
        (30, 100),
        (200, 9),
        (300, 12),
        (5, 1),
        (30, 60),
        (1500, 4),
    ]:
        pairs = []
        for _ in range(count):
            a = rng.randint(-(10**digits) + 1, 10**digits - 1)
            b = rng.randint(-(10**digits) + 1, 10**digits - 1)
            pairs.append((a, b))
        cases.append(make_case(pairs))
    return cases


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
