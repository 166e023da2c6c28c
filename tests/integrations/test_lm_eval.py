"""lm-eval: ``simple_evaluate`` over the shipped tasks with a stub LM (an ``lm_eval.api.model.LM``
subclass that answers from a table), scored in the real sandbox."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lm_eval import simple_evaluate
from lm_eval.api.model import LM
from lm_eval.tasks import TaskManager

from deepgym import load_environment
from deepgym.integrations import lm_eval as dg_lm_eval
from tests.integrations.conftest import TWO_SUM_OK


@pytest.fixture(autouse=True, scope="module")
def release_client() -> Iterator[None]:
    yield
    dg_lm_eval.close()


class TableLM(LM):
    """Answers a prompt with the first ``(needle, answer)`` whose needle it contains."""

    def __init__(self, table: list[tuple[str, str]]) -> None:
        super().__init__()
        self.table = table
        self.prompts: list[str] = []

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        out = []
        for req in requests:
            context = req.args[0]
            self.prompts.append(context)
            out.append(next((a for n, a in self.table if n in context), "pass"))
        return out

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
        raise NotImplementedError

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
        raise NotImplementedError


def _metrics(results: dict[str, Any], task: str) -> dict[str, float]:
    row = results["results"][task]
    return {k.split(",")[0]: v for k, v in row.items() if k.startswith("deepgym_")}


def test_humaneval_task_scores_generations() -> None:
    he = [load_environment(f"humaneval/{i}") for i in range(3)]
    canonical = [e.reference_solution[len(e.task) :] for e in he]  # type: ignore[index]
    lm = TableLM(
        [
            (he[0].task, canonical[0]),  # the prompt's continuation: right
            (he[1].task, "    return []\n"),  # wrong
            (he[2].task, f"```python\n{he[2].reference_solution}```"),  # a full code block
        ]
    )
    manager = TaskManager(include_path=str(dg_lm_eval.TASKS_DIR), include_defaults=False)
    results = simple_evaluate(model=lm, tasks=["deepgym_humaneval"], task_manager=manager, limit=3)
    assert results is not None
    m = _metrics(results, "deepgym_humaneval")
    assert len(lm.prompts) == 3
    assert m["deepgym_verdict"] == 1.0
    assert m["deepgym_pass"] == pytest.approx(2 / 3)
    assert 2 / 3 <= m["deepgym_score"] < 1.0


def test_a_sample_without_a_verdict_is_left_out(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "task.md").write_text("Write anything.")
    (broken / "verifier.py").write_text(
        "def verify(solution, test_cases):\n    raise RuntimeError('the verifier broke')\n"
    )
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    spec = (dg_lm_eval.TASKS_DIR / "deepgym_builtin.yaml").read_text()
    spec = spec.replace("task: deepgym_builtin", "task: deepgym_mixed").replace(
        "custom_dataset: !function deepgym.integrations.lm_eval.builtin_dataset",
        "custom_dataset: !function deepgym.integrations.lm_eval.suite_dataset\n"
        f"dataset_kwargs:\n  envs: [two_sum, fizzbuzz, '{broken}']",
    )
    (tasks / "deepgym_mixed.yaml").write_text(spec)
    lm = TableLM([("two_sum", f"```python\n{TWO_SUM_OK}```"), ("", "no code at all")])
    manager = TaskManager(include_path=str(tasks), include_defaults=False)
    results = simple_evaluate(model=lm, tasks=["deepgym_mixed"], task_manager=manager)
    assert results is not None
    m = _metrics(results, "deepgym_mixed")
    assert m["deepgym_verdict"] == pytest.approx(2 / 3)
    assert m["deepgym_score"] == pytest.approx(0.5)  # (1.0 + 0.0) / 2: the unjudged one left out
    assert m["deepgym_pass"] == pytest.approx(0.5)


def test_process_results_reports_nan_without_a_verdict() -> None:
    out = dg_lm_eval.process_results({"env": "no_such_env", "prefix": ""}, ["x"])
    assert math.isnan(out["deepgym_score"]) and math.isnan(out["deepgym_pass"])
    assert out["deepgym_verdict"] == 0.0
