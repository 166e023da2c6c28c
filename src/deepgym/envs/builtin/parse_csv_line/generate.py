"""Builds test_cases.json for parse_csv_line.

Fields are chosen first, then written out as a line; the fields are the answer.
"""

import json
import random
from pathlib import Path


def render(fields, rng):
    parts = []
    for field in fields:
        must_quote = '"' in field or "," in field
        if must_quote or rng.random() < 0.3:
            parts.append('"' + field.replace('"', '""') + '"')
        else:
            parts.append(field)
    return ",".join(parts)


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = [
        ("a,b,c", ["a", "b", "c"]),
        ('"x, y",2,""', ["x, y", "2", ""]),
        ('"say ""hi""", ok ,', ['say "hi"', " ok ", ""]),
        ("", [""]),
        (",", ["", ""]),
        (",,,", ["", "", "", ""]),
        ('""', [""]),
        ('""""', ['"']),
        ('"a,b"', ["a,b"]),
        ("one", ["one"]),
        ('"",""', ["", ""]),
        ('  spaced  ,"  kept  "', ["  spaced  ", "  kept  "]),
        ('"""quoted"""', ['"quoted"']),
        ('1,"2,3",4,"5"', ["1", "2,3", "4", "5"]),
        ('"a""b""c",d', ['a"b"c', "d"]),
        ("tab\there,x", ["tab\there", "x"]),
    ]
    pieces = ["a", "b", "xyz", " ", ",", '"', "12", "hello", "O'Neil", ";", "é"]
    for count in [1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 30, 50, 3, 7, 9]:
        fields = [
            "".join(rng.choice(pieces) for _ in range(rng.randint(0, 5))) for _ in range(count)
        ]
        cases.append((render(fields, rng), fields))
    return [{"args": [line], "expected": fields} for line, fields in cases]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
