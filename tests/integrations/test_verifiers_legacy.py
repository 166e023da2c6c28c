"""verifiers 0.3: ``vf.load_environment("deepgym-verifiers")`` finds deepgym's entry point, and
verifiers' own ``evaluate`` loop (against a scripted OpenAI-protocol server) scores the replies
as deepgym does; a reply without a verdict is the rollout's ``InfraError``, never the reward's 0
(0.3's ``Rubric`` would turn a raising reward function into 0.0).

Runs where verifiers 0.3 is installed: ``scripts/verifiers03-suite.sh`` (``make pytest-others``)
makes that venv; ``make test``'s own venv has verifiers 0.4, where this module skips."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

vf: Any = pytest.importorskip("verifiers")
if not hasattr(vf, "SingleTurnEnv"):
    pytest.skip(
        "verifiers 0.4 has no 0.3 API: scripts/verifiers03-suite.sh runs this with 0.3",
        allow_module_level=True,
    )

from deepgym import DeepGym  # noqa: E402
from deepgym.integrations.reward import close_shared_clients  # noqa: E402
from tests.eval.openai_server import serve as serve_model  # noqa: E402
from tests.integrations.conftest import TWO_SUM_OK  # noqa: E402

WRONG = "def two_sum(nums, target):\n    return [0, 0]\n"

pytestmark = pytest.mark.sandbox


@pytest.fixture(autouse=True, scope="module")
def shared_clients_closed() -> Any:
    yield
    close_shared_clients()


def _evaluate(env: Any, answers: list[str], rollouts: int) -> list[Any]:
    with serve_model({}, default=answers) as (url, _):
        os.environ["DEEPGYM_TEST_KEY"] = "none"
        config = vf.ClientConfig(api_base_url=url, api_key_var="DEEPGYM_TEST_KEY")
        out = env.evaluate_sync(
            client=config, model="scripted", num_examples=-1, rollouts_per_example=rollouts
        )
    return list(out["outputs"])


def test_the_rewards_equal_deepgyms_own() -> None:
    env = vf.load_environment("deepgym-verifiers", envs=["two_sum"])
    answers = [f"text:```python\n{TWO_SUM_OK}```", f"text:```python\n{WRONG}```"]
    outputs = _evaluate(env, answers, rollouts=2)
    with DeepGym() as dg:
        own = sorted(r.score for r in dg.run_batch("two_sum", [TWO_SUM_OK, WRONG]).results)
    assert sorted(o["reward"] for o in outputs) == own == [0.0, 1.0]
    assert all(o.get("error") is None for o in outputs)


def test_no_verdict_is_the_rollouts_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "verifier.py").write_text(
        "def verify(solution, test_cases):\n    raise RuntimeError('verifier bug')\n"
    )
    (broken / "task.md").write_text("Write any function.\n")
    env = vf.load_environment("deepgym-verifiers", envs=[str(broken)])
    (output,) = _evaluate(env, ["text:```python\ndef f():\n    return 1\n```"], rollouts=1)
    error = output.get("error")
    assert error is not None and "InfraError" in str(error) and "no verdict" in str(error)
