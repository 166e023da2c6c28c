"""lm-eval: tasks that score generations in deepgym's sandbox (HumanEval and the built-ins).

The tasks live in ``TASKS_DIR`` (pass it as lm-eval's ``--include_path``): ``deepgym_humaneval``
(a base model continues each HumanEval prompt; the answer is the prompt plus the completion, or
the completion's last fenced code block when it has one) and ``deepgym_builtin`` (deepgym's own
environments, answered with a code block). Their YAML reaches the functions here by module path.

Metrics per sample: ``deepgym_score`` and ``deepgym_pass`` (NaN without a verdict, aggregated with
``nanmean``: judged samples only) and ``deepgym_verdict`` (1.0 judged, 0.0 not; its mean is the
share judged). lm-eval itself is never imported here; ``datasets`` (an lm-eval dependency) is,
when a task loads its documents.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deepgym import DeepGym, Environment, load_environment, load_suite
from deepgym.completions import answer_of
from deepgym.integrations.reward import warn_unscored

__all__ = [
    "TASKS_DIR",
    "builtin_dataset",
    "close",
    "humaneval_dataset",
    "process_results",
    "suite_dataset",
]

TASKS_DIR = Path(__file__).resolve().parent / "lm_eval_tasks"
"""lm-eval's ``--include_path`` for the deepgym tasks."""

CODE_BLOCK_INSTRUCTION = "\n\nAnswer with the complete solution in one ```python code block."

_lock = threading.Lock()
_client: DeepGym | None = None


def _get_client() -> DeepGym:
    global _client
    with _lock:
        if _client is None:
            _client = DeepGym()
        return _client


def close() -> None:
    """Release the sandbox client the tasks share (it is also released at exit)."""
    global _client
    with _lock:
        client, _client = _client, None
    if client is not None:
        client.close()


def _doc(env: Environment, ident: str, continuation: bool) -> dict[str, str]:
    if continuation:
        return {"env": ident, "prompt": env.task, "prefix": env.task}
    return {"env": ident, "prompt": env.task + CODE_BLOCK_INSTRUCTION, "prefix": ""}


def suite_dataset(
    suite: str | None = None,
    envs: Sequence[str] | None = None,
    continuation: bool = False,
    **_: Any,
) -> Any:
    """lm-eval ``custom_dataset``: one document per environment of ``suite`` (or of ``envs``,
    names or folder paths), in a ``test`` split. ``continuation``: the model continues the task
    text (HumanEval) instead of answering it with a code block."""
    from datasets import Dataset, DatasetDict

    if envs:
        pairs = [(load_environment(name), str(name)) for name in envs]
    else:
        pairs = [(e, e.name) for e in load_suite(suite or "builtin")]
    docs = [_doc(env, ident, continuation) for env, ident in pairs]
    return DatasetDict({"test": Dataset.from_list(docs)})


def humaneval_dataset(**kwargs: Any) -> Any:
    """The ``deepgym_humaneval`` documents (HumanEval's 164 problems, prompts continued)."""
    return suite_dataset("humaneval", continuation=True)


def builtin_dataset(**kwargs: Any) -> Any:
    """The ``deepgym_builtin`` documents (deepgym's built-in environments)."""
    return suite_dataset("builtin")


def process_results(doc: dict[str, Any], results: Sequence[str]) -> dict[str, float]:
    """Score one generation; a sample without a verdict is NaN in the judged metrics."""
    nan = math.nan
    try:
        env = load_environment(doc["env"])
        code = answer_of(results[0], str(doc.get("prefix") or ""))
        result = _get_client().run_one(env, code)
    except Exception as exc:  # ours, not the model's: no verdict (never a 0)
        warn_unscored("lm-eval", doc.get("env") if isinstance(doc, dict) else None, exc)
        return {"deepgym_score": nan, "deepgym_pass": nan, "deepgym_verdict": 0.0}
    if not result.has_verdict:
        return {"deepgym_score": nan, "deepgym_pass": nan, "deepgym_verdict": 0.0}
    return {
        "deepgym_score": result.score,
        "deepgym_pass": 1.0 if result.passed else 0.0,
        "deepgym_verdict": 1.0,
    }
