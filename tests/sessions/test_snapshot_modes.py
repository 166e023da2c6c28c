"""The final verifier sees the work dir's modes as the agent left them: a script it made
executable runs, a mode a task asks for (0660) is kept, and a set-uid bit never leaves the
agent's sandbox."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from deepgym import DeepGym
from deepgym.models import Environment

VERIFY = """
import os, stat, subprocess

def verify(work, tests):
    run = subprocess.run([str(work / "tool.sh")], capture_output=True, text=True)
    modes = {n: stat.S_IMODE(os.stat(work / n).st_mode) for n in ("tool.sh", "data", "suid")}
    ok = run.stdout == "ran\\n" and modes == {"tool.sh": 0o750, "data": 0o660, "suid": 0o755}
    return {"score": 1.0 if ok else 0.0, "message": f"{run.stdout!r} {modes}"}
"""


@pytest.mark.sandbox
@pytest.mark.timeout(120)
def test_modes_reach_the_verifier_but_never_a_setuid_bit(
    dg: DeepGym, make_env: Callable[..., Environment]
) -> None:
    env = make_env(VERIFY)
    with dg.session(env) as s:
        made = s.exec(
            "printf '#!/bin/sh\\necho ran\\n' > tool.sh && chmod 750 tool.sh && "
            "echo x > data && chmod 660 data && cp tool.sh suid && chmod 4755 suid && "
            "stat -c %a suid"
        )
        assert made.stdout.strip() == "4755", made
        result = s.score()
    assert (result.has_verdict, result.score) == (True, 1.0), result.cases
