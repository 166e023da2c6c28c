"""A model eval run in its own process, for the resume-after-SIGKILL test: ``python -m
tests.eval.child_eval URL STORE`` evaluates ``PROBLEMS`` x ``SAMPLES`` on a fake backend."""

from __future__ import annotations

import sys

from deepgym.client import DeepGym
from deepgym.eval.model import ChatModel
from deepgym.models import Environment
from deepgym.scheduling import TimeLimitPolicy
from deepgym.store import RunStore
from tests.fakes import TOY, FakeBackend

SAMPLES = 4
PROBLEMS: list[Environment] = [
    TOY.model_copy(update={"name": f"p{i}", "task": f"P{i}"}) for i in range(4)
]


def client(backend: FakeBackend | None = None) -> DeepGym:
    return DeepGym(time_limits=TimeLimitPolicy(factor=None), backend=backend or FakeBackend())


def main(url: str, store_path: str) -> None:
    with RunStore(store_path) as store, client() as dg:
        dg.eval_model(PROBLEMS, ChatModel(url, "m", concurrency=2), samples=SAMPLES, store=store)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
