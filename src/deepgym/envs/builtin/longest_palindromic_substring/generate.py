"""Builds test_cases.json for longest_palindromic_substring."""

import json
import random
from pathlib import Path


def solve(s):
    # Table over lengths: s[i:i+L] is a palindrome iff its ends match and
    # s[i+1:i+L-1] is one. The last length with any palindrome wins, and for that
    # length the first start found is the leftmost.
    n = len(s)
    pal_prev2 = [True] * (n + 1)  # length 0 at every start
    pal_prev1 = [True] * n  # length 1
    best = (1, 0) if n else (0, 0)
    for length in range(2, n + 1):
        current = [s[i] == s[i + length - 1] and pal_prev2[i + 1] for i in range(n - length + 1)]
        for i, ok in enumerate(current):
            if ok:
                best = (length, i)
                break
        pal_prev2, pal_prev1 = pal_prev1, current
    length, start = best
    return s[start : start + length]


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    strings = [
        "babad",
        "cbbd",
        "abc",
        "",
        "a",
        "aa",
        "ab",
        "racecar",
        "abacdfgdcaba",
        "forgeeksskeegfor",
        "Aa",
        "noon level",
        "xyzzyx abba",
        "abcdcbaXabcba",
        "a" * 1000,
    ]
    for size in [5, 10, 20, 40, 80, 150, 300, 600, 1000, 12, 25, 50]:
        alphabet = rng.choice(["ab", "abc", "abcd", "abcdefghijklmnopqrstuvwxyz"])
        strings.append("".join(rng.choice(alphabet) for _ in range(size)))
    # Plant a long palindrome inside random noise.
    for size in [60, 400]:
        half = "".join(rng.choice("xyz") for _ in range(size // 4))
        core = half + rng.choice(["", "q"]) + half[::-1]
        noise = "".join(rng.choice("xyz") for _ in range(size // 2))
        cut = rng.randint(0, len(noise))
        strings.append(noise[:cut] + core + noise[cut:])
    return [{"args": [s], "expected": solve(s)} for s in strings]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
