"""Deliberately weak: checks only that the answer has as many items as the expected list."""


def verify(solution, test_cases):
    cases = []
    for i, case in enumerate(test_cases):
        try:
            ok = len(solution.running_total(*case["args"])) == len(case["expected"])
        except Exception:
            ok = False
        cases.append({"name": f"test_{i}", "passed": ok})
    good = sum(c["passed"] for c in cases)
    return {"score": good / len(cases), "passed": good == len(cases), "cases": cases}
