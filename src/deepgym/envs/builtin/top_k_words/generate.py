"""Builds test_cases.json for top_k_words."""

import json
import random
from pathlib import Path


def solve(k, text):
    counts = {}
    word = ""
    for ch in text + " ":
        if ("a" <= ch <= "z") or ("A" <= ch <= "Z"):
            word += ch.lower()
        elif word:
            counts[word] = counts.get(word, 0) + 1
            word = ""
    ranked = sorted(counts, key=lambda w: (-counts[w], w))[:k]
    return "".join(f"{w} {counts[w]}\n" for w in ranked)


VOCABULARY = [
    "apple",
    "banana",
    "cherry",
    "delta",
    "echo",
    "Echo",
    "fox",
    "Gamma",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "nov",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
    "a",
    "I",
    "THE",
]
SEPARATORS = [" ", " ", " ", "  ", "\n", ", ", ". ", "! ", "\t", " - ", "'", "123", "; ", " é "]


def random_text(rng, words, vocab_size):
    vocab = rng.sample(VOCABULARY, vocab_size)
    weights = [rng.randint(1, 6) for _ in vocab]
    parts = []
    for _ in range(words):
        parts.append(rng.choices(vocab, weights)[0])
        parts.append(rng.choice(SEPARATORS))
    return "".join(parts)


def make_case(k, text):
    return {"stdin": f"{k}\n{text}", "expected_stdout": solve(k, text)}


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = [
        make_case(2, "The cat and the hat. THE END, and...\n"),
        make_case(3, "\n"),
        make_case(1, "hello\n"),
        make_case(5, "b a c b a c\n"),
        make_case(2, "don't won't can't\n"),
        make_case(10, "abc123def ABC def\n"),
        make_case(1, "zebra zebra apple apple\n"),
        make_case(3, "caf\u00e9 na\u00efve r\u00e9sum\u00e9\n"),
        make_case(4, "one\ntwo two\nthree three three\nfour four four four\n"),
    ]
    for k, words, vocab_size in [
        (1, 10, 3),
        (2, 20, 5),
        (3, 50, 8),
        (5, 100, 10),
        (5, 30, 30),
        (10, 200, 20),
        (10, 500, 25),
        (50, 300, 30),
        (4, 1000, 12),
        (7, 40, 6),
        (1000, 150, 30),
        (3, 2000, 30),
    ]:
        cases.append(make_case(k, random_text(rng, words, vocab_size) + "\n"))
    return cases


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
