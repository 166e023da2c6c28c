"""A deepgym session verifier inside an exported Harbor task: ``tests/deepgym_verify.py``.

``python3 deepgym_verify.py VERIFIER WORK TESTS REWARD_TXT`` loads ``VERIFIER`` (the
environment's ``verifier.py``), calls its ``verify(work, tests)`` and writes the score to
``REWARD_TXT`` (Harbor's ``/logs/verifier/reward.txt``), with each case on stdout. The result is
read as deepgym's session verifier reads it: a bool, a number, or a dict with ``score`` (and
``passed``, ``cases``).

A verifier that raises, or returns a score that is not a finite number in [0, 1], writes no
reward and exits 1: Harbor then reports the trial's error (no reward file), never a 0 made up
here. Standard library only: it runs in the task's container, without deepgym.
"""

from __future__ import annotations

import math
import sys
import traceback
from pathlib import Path
from typing import Any


def score_of(value: Any) -> float:
    """The score a ``verify`` result stands for; ``ValueError`` where it has none."""
    if isinstance(value, dict):
        value = value.get("score")
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"verify returned the score {value!r}, not a number in [0, 1]")
    return float(value)


def main(argv: list[str]) -> int:
    """Run the verifier once; 0 when the reward was written."""
    verifier, work, tests, reward = (Path(a) for a in argv)
    try:
        namespace: dict[str, Any] = {"__name__": "verifier"}
        exec(compile(verifier.read_text(), "verifier.py", "exec"), namespace)
        result = namespace["verify"](work, tests)
        score = score_of(result)
    except Exception:
        traceback.print_exc()
        return 1
    for case in result.get("cases", []) if isinstance(result, dict) else []:
        if isinstance(case, dict):
            print(f"{'ok  ' if case.get('passed') else 'FAIL'} {case.get('name')}")
    print(f"score {score}")
    reward.parent.mkdir(parents=True, exist_ok=True)
    reward.write_text(f"{score}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
