"""Builds test_cases.json for add_duration_format (checks call into the patched repo).

A case expects a value (``expected``) or an exception (``raises``); verifier.py makes the calls.
"""

import json
import random
from pathlib import Path

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text):
    total, number = 0, ""
    for ch in text.strip():
        if ch.isdigit():
            number += ch
        else:
            total += int(number) * UNITS[ch]
            number = ""
    return total


def format_duration(seconds):
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in UNITS.items():
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    parse = "durations.parse:parse_duration"
    fmt = "durations.format:format_duration"
    cases = []
    for text in ["2d", "1d12h", "3d4h5m6s", " 10d ", "1h30m", "45s", "0d1s"]:
        cases.append({"call": parse, "args": [text], "expected": parse_duration(text)})
    for seconds in [0, 59, 60, 3600, 3661, 86400, 90061, 172805, 7 * 86400 + 59]:
        cases.append({"call": fmt, "args": [seconds], "expected": format_duration(seconds)})
    cases.append({"call": "durations:format_duration", "args": [93784], "expected": "1d2h3m4s"})
    cases.append({"call": "durations:parse_duration", "args": ["1d2h3m4s"], "expected": 93784})
    for _ in range(4):
        seconds = rng.randint(1, 40 * 86400)
        cases.append({"call": fmt, "args": [seconds], "expected": format_duration(seconds)})
    for _ in range(4):
        units = sorted(rng.sample(list(UNITS), rng.randint(1, 4)), key=lambda u: -UNITS[u])
        text = "".join(f"{rng.randint(1, 99)}{u}" for u in units)
        cases.append({"call": parse, "args": [text], "expected": parse_duration(text)})
    # A negative duration is an error (-1 is the nearest to 0), and so is text that misuses
    # the new unit.
    for seconds in [-1, -86400]:
        cases.append({"call": fmt, "args": [seconds], "raises": "ValueError"})
    for text in ["d", "2d5", "1d 2h", "2D"]:
        cases.append({"call": parse, "args": [text], "raises": "ValueError"})
    return cases


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
