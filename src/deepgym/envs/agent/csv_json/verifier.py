"""Final verifier: people.json holds the expected rows, each with exactly the schema's keys and
types (an age as an integer, an empty email as null), in the CSV's order."""

import json


def _typed(row):
    return (
        isinstance(row, dict)
        and set(row) == {"name", "age", "email", "city"}
        and isinstance(row["name"], str)
        and isinstance(row["age"], int)
        and not isinstance(row["age"], bool)
        and (row["email"] is None or isinstance(row["email"], str))
        and isinstance(row["city"], str)
    )


def verify(work, tests):
    expected = json.loads((tests / "expected.json").read_text())
    try:
        got = json.loads((work / "people.json").read_text())
    except (OSError, ValueError):
        got = None
    if not isinstance(got, list):
        got = []
    cases = []
    for i, want in enumerate(expected):
        row = got[i] if i < len(got) else None
        cases.append({"name": f"row_{i}", "passed": _typed(row) and row == want})
    cases.append({"name": "no_extra_rows", "passed": len(got) == len(expected)})
    passed = sum(c["passed"] for c in cases)
    ok = passed == len(cases)
    return {"score": passed / len(cases) if got else 0.0, "passed": ok, "cases": cases}
