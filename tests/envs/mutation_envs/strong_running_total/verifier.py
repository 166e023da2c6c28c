"""Compares the answer with each case's expected list, item by item."""


def verify(solution, test_cases):
    cases = []
    for i, case in enumerate(test_cases):
        try:
            got = solution.running_total(*case["args"])
            ok = isinstance(got, list) and got == case["expected"]
        except Exception:
            ok = False
        cases.append({"name": f"test_{i}", "passed": ok})
    good = sum(c["passed"] for c in cases)
    return {"score": good / len(cases), "passed": good == len(cases), "cases": cases}
