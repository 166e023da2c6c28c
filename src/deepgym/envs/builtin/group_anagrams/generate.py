"""Builds test_cases.json for group_anagrams."""

import json
import random
from collections import Counter
from pathlib import Path


def solve(words):
    ordered = sorted(words)
    groups = []
    placed = [False] * len(ordered)
    for i, word in enumerate(ordered):
        if placed[i]:
            continue
        signature = Counter(word)
        group = []
        for j in range(i, len(ordered)):
            if not placed[j] and len(ordered[j]) == len(word) and Counter(ordered[j]) == signature:
                placed[j] = True
                group.append(ordered[j])
        groups.append(group)
    return groups


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    lists = [
        ["eat", "tea", "tan", "ate", "nat", "bat"],
        ["", "b", ""],
        [],
        ["a"],
        ["abc", "cba", "bca", "cab", "bac", "acb"],
        ["ab", "Ab", "ba", "bA"],
        ["listen", "silent", "enlist", "google", "gooegl", "inlets", "banana"],
        ["aab", "aba", "abb", "bab"],
        ["zz", "z", "zz", "z", "zzz"],
    ]
    for size in [5, 10, 20, 30, 50, 80, 120, 200, 300, 15, 40, 60]:
        bases = [
            "".join(rng.choice("abcdeAB") for _ in range(rng.randint(0, 6)))
            for _ in range(max(1, size // 4))
        ]
        words = []
        for _ in range(size):
            letters = list(rng.choice(bases))
            rng.shuffle(letters)
            words.append("".join(letters))
        lists.append(words)
    return [{"args": [w], "expected": solve(w)} for w in lists]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
