"""Final verifier: run the agent's count.sh on hidden logs and compare its output exactly."""

import json
import subprocess
import tempfile
from pathlib import Path


def verify(work, tests):
    cases = json.loads((tests / "cases.json").read_text())
    script = Path(work) / "count.sh"
    results = []
    for i, case in enumerate(cases):
        ok = False
        if script.is_file():
            with tempfile.TemporaryDirectory() as d:
                log = Path(d) / f"hidden_{i}.log"
                log.write_text(case["log"])
                try:
                    done = subprocess.run(
                        ["bash", str(script), str(log)],
                        capture_output=True,
                        text=True,
                        cwd=d,
                        timeout=10,
                    )
                    ok = done.returncode == 0 and done.stdout == case["want"]
                except subprocess.TimeoutExpired:
                    ok = False
        results.append({"name": f"log_{i}", "passed": ok})
    passed = sum(r["passed"] for r in results)
    return {"score": passed / len(cases), "passed": passed == len(cases), "cases": results}
