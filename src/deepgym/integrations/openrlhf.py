"""OpenRLHF: the remote reward endpoint (``create_app``) and the ``reward_func`` file form.

OpenRLHF POSTs ``{"query": [...], "prompts": [...], "labels": [...]}`` to ``--remote_rm_url`` and
reads ``{"rewards": [...], "scores": [...], "extra_logs": {...}}`` (one value per query; every
``extra_logs`` entry is a list of the same length). Each query is the decoded prompt plus the
response, special tokens included, so the prompt is cut off and special tokens at either end of
the response are dropped before the answer (the last fenced code block) is taken. A
``--remote_rm_url`` ending in ``.py`` is loaded as a file whose
``reward_func(queries, prompts, labels)`` returns the same dict: ``write_reward_func_file`` writes
one.

The environment is ``env`` when given, else each sample's label: an environment name, or an object
(or its JSON) with ``env`` / ``env_name``. Each sample is the client's ``run_one``: a failure of
its run is a result without a verdict, never a failed request, and an infrastructure failure was
already retried once within the run's deadline by the engine (``scheduling.should_retry``), the
one retry rule; a failure of every run alike (a host that cannot sandbox, a service that refuses
the token) fails the request rather than train on a batch of no verdicts. A sample without a
verdict (a label that names no environment included) gets ``infra_failure_score`` (a number
OpenRLHF can train on), is counted by ``MaskedRate``, and is flagged in
``extra_logs["deepgym_no_verdict"]``.

A label is the trainer's own data when the endpoint runs beside the trainer: a name or a folder
path on this host. Mounted on ``deepgym serve --openrlhf``, the endpoint serves clients of the
service, so its labels are loaded as the service loads a client's environment (``load_env``):
never a path on the service's host, never verifier code unless ``--allow-verifier-code``; a
label it refuses refuses the whole request with a 400, as any client's bad input.

FastAPI is imported only by ``create_app``.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepgym import (
    AsyncDeepGym,
    DeepGym,
    Environment,
    RunResult,
    load_environment,
)
from deepgym.completions import extract_code
from deepgym.exceptions import ConfigError
from deepgym.integrations.reward import MaskedRate, label_env
from deepgym.types import EnvLike
from deepgym.validation import positive_int, text

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = [
    "ROUTE",
    "create_app",
    "make_reward_func",
    "response_text",
    "reward_body",
    "write_reward_func_file",
]

ROUTE = "/get_reward"

_SPECIAL = re.compile(
    r"(?:<\|[^<>|\s]{1,40}\|>|<｜[^<>｜]{1,40}｜>|</?s>|<(?:bos|eos|pad|unk)>"
    r"|<(?:start|end)_of_turn>)"
)
_EDGE_SPECIALS = re.compile(rf"^(?:\s*{_SPECIAL.pattern})+|(?:{_SPECIAL.pattern}\s*)+$")


def response_text(query: str, prompt: str) -> str:
    """The response inside ``query``: what follows the prompt, less special tokens at its ends."""
    text = query
    if prompt:
        at = query.find(prompt)
        if at >= 0:
            text = query[at + len(prompt) :]
    return _EDGE_SPECIALS.sub("", text).strip("\n")


class _Grader:
    """What both forms share: environments, the answers, and the response body (pure parts)."""

    def __init__(
        self,
        env: EnvLike | None,
        environments: Mapping[str, EnvLike] | None,
        infra_failure_score: float,
        masked_rate: MaskedRate | None,
        load_env: Callable[[str], Environment] | None = None,
    ) -> None:
        if not isinstance(infra_failure_score, int | float) or isinstance(
            infra_failure_score, bool
        ):
            raise ConfigError(f"infra_failure_score must be a number, got {infra_failure_score!r}")
        self.env = env
        self.environments = dict(environments or {})
        self.infra_failure_score = float(infra_failure_score)
        self.masked_rate = masked_rate if masked_rate is not None else MaskedRate("openrlhf")
        self.load_env = load_env
        """How a label's name is loaded for a client of a service (None: ``load_environment``,
        a name or a path on this host, the trainer's own)."""

    def environment(self, label: Any) -> Environment:
        target = self.env if self.env is not None else label_env(label)
        if target is None:
            raise ConfigError(
                f"no environment: pass env=..., or a label naming one (got {label!r})"
            )
        if isinstance(target, Environment):
            return target
        if isinstance(target, str) and target in self.environments:
            target = self.environments[target]
            if isinstance(target, Environment):
                return target
        if self.load_env is not None:
            return self.load_env(str(target))
        return load_environment(target)

    def jobs(self, body: Mapping[str, Any]) -> list[tuple[Environment | Exception, str]]:
        queries = body.get("query")
        if not isinstance(queries, list):
            raise ConfigError("the body needs 'query': a list of strings")
        prompts = body.get("prompts")
        labels = body.get("labels")
        prompts = [""] * len(queries) if prompts is None else prompts
        labels = [None] * len(queries) if labels is None else labels
        if not isinstance(prompts, list) or not isinstance(labels, list):
            raise ConfigError("'prompts' and 'labels' must be lists")
        if len(prompts) != len(queries) or len(labels) != len(queries):
            raise ConfigError("'query', 'prompts' and 'labels' must have the same length")
        out: list[tuple[Environment | Exception, str]] = []
        for i, (query, prompt, label) in enumerate(zip(queries, prompts, labels, strict=True)):
            code = extract_code(response_text(str(query), str(prompt or "")))
            try:
                found = self.environment(label)
            except ConfigError as exc:
                if self.load_env is not None:  # a client's bad label: refused, never run
                    raise ConfigError(f"labels[{i}]: {exc}") from exc
                out.append((exc, code))  # the trainer's own: no verdict, never a failed request
                continue
            except Exception as exc:  # one bad sample: no verdict, never a failed request
                out.append((exc, code))
                continue
            try:  # an answer the client refuses (too long, not unicode) is this sample's alone
                out.append((found, text(code, f"query[{i}]'s answer")))
            except ConfigError as exc:
                out.append((exc, code))
        return out

    def body(self, results: Sequence[RunResult]) -> dict[str, Any]:
        rewards = []
        for r in results:
            self.masked_rate.add(not r.has_verdict)
            rewards.append(r.score if r.has_verdict else self.infra_failure_score)
        return reward_body(rewards, results)


def reward_body(rewards: Sequence[float], results: Sequence[RunResult]) -> dict[str, Any]:
    """OpenRLHF's response: ``rewards`` and ``scores`` (the same values) and per-sample logs."""
    return {
        "rewards": list(rewards),
        "scores": list(rewards),
        "extra_logs": {
            "deepgym_no_verdict": [0.0 if r.has_verdict else 1.0 for r in results],
            "deepgym_pass": [1.0 if r.passed else 0.0 for r in results],
        },
    }


def _unscored(exc: Exception) -> RunResult:
    """A sample that cannot run (its label names no environment, its answer is not text the
    client takes): no verdict, never a failed request."""
    return RunResult.no_verdict("runtime_error", f"{type(exc).__name__}: {exc}")


async def _grade(client: AsyncDeepGym, env: Environment | Exception, code: str) -> RunResult:
    """One sample's result: the client's ``run_one``, where a failure of the run is a result
    without a verdict and the engine has retried what it retries."""
    if isinstance(env, Exception):
        return _unscored(env)
    return await client.run_one(env, code)


def _grade_sync(client: DeepGym, env: Environment | Exception, code: str) -> RunResult:
    """``_grade`` for the blocking client."""
    if isinstance(env, Exception):
        return _unscored(env)
    return client.run_one(env, code)


def create_app(
    client: AsyncDeepGym | None = None,
    *,
    env: EnvLike | None = None,
    environments: Mapping[str, EnvLike] | None = None,
    infra_failure_score: float = 0.0,
    max_parallel: int = 8,
    masked_rate: MaskedRate | None = None,
    load_env: Callable[[str], Environment] | None = None,
) -> FastAPI:
    """The OpenRLHF reward endpoint: ``POST /get_reward`` (and ``GET /health``).

    ``client`` runs the answers (one made here, and closed at shutdown, when None). Serve it with
    uvicorn and pass ``http://HOST:PORT/get_reward`` as OpenRLHF's ``--remote_rm_url``.
    ``load_env``: how a label's environment name is loaded when the endpoint serves clients
    other than its own trainer (``deepgym serve --openrlhf`` passes the service's, which refuses
    paths and verifier code); a label it refuses refuses the request with a 400.
    """
    from contextlib import asynccontextmanager

    from fastapi import Body, FastAPI
    from fastapi.responses import JSONResponse

    positive_int(max_parallel, "max_parallel")
    grader = _Grader(env, environments, infra_failure_score, masked_rate, load_env)
    owned = client is None
    state: dict[str, Any] = {"client": client, "sem": None}

    def get_client() -> AsyncDeepGym:
        if state["client"] is None:
            state["client"] = AsyncDeepGym()
        return state["client"]  # type: ignore[no-any-return]

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        yield
        if owned and state["client"] is not None:
            await state["client"].close()

    app = FastAPI(title="deepgym OpenRLHF reward", lifespan=lifespan)
    app.state.masked_rate = grader.masked_rate

    # Route annotations are resolved against this module's globals (FastAPI imports lazily).
    @app.post(ROUTE)
    async def get_reward(body: dict[str, Any] = Body(...)) -> Any:  # noqa: B008
        try:
            jobs = grader.jobs(body)
        except (ConfigError, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        if state["sem"] is None:
            state["sem"] = asyncio.Semaphore(max_parallel)
        sem: asyncio.Semaphore = state["sem"]

        async def one(job: tuple[Environment | Exception, str]) -> RunResult:
            async with sem:
                return await _grade(get_client(), *job)

        results = await asyncio.gather(*(one(j) for j in jobs))
        return JSONResponse(grader.body(results))

    @app.get("/health")
    async def health() -> Any:
        rate = grader.masked_rate
        return {"status": "ok", "samples": rate.total, "no_verdict": rate.masked}

    return app


def make_reward_func(
    env: EnvLike | None = None,
    *,
    environments: Mapping[str, EnvLike] | None = None,
    infra_failure_score: float = 0.0,
    max_parallel: int = 8,
    sandbox: str = "pool",
    client: DeepGym | None = None,
) -> Callable[[list[str], list[str], list[Any]], dict[str, Any]]:
    """OpenRLHF's file form: ``reward_func(queries, prompts, labels)`` -> the endpoint's dict."""
    grader = _Grader(env, environments, infra_failure_score, None)
    holder: dict[str, DeepGym] = {}
    pool = ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="deepgym-openrlhf")

    def reward_func(queries: list[str], prompts: list[str], labels: list[Any]) -> dict[str, Any]:
        dg = client if client is not None else holder.setdefault("dg", DeepGym(sandbox=sandbox))
        jobs = grader.jobs({"query": list(queries), "prompts": prompts, "labels": labels})
        results = list(pool.map(lambda job: _grade_sync(dg, *job), jobs))
        return grader.body(results)

    def close() -> None:
        """Release the sandbox client this function made (it is also released at exit)."""
        pool.shutdown(wait=True)
        dg = holder.pop("dg", None)
        if dg is not None:
            dg.close()

    reward_func.masked_rate = grader.masked_rate  # type: ignore[attr-defined]
    reward_func.close = close  # type: ignore[attr-defined]
    return reward_func


_SHIM = '''"""OpenRLHF reward function file written by deepgym: pass its path as --remote_rm_url."""

from deepgym.integrations.openrlhf import make_reward_func

reward_func = make_reward_func(**{config})
'''


def write_reward_func_file(
    path: str | Path,
    env: str | None = None,
    *,
    infra_failure_score: float = 0.0,
    max_parallel: int = 8,
    sandbox: str = "pool",
) -> Path:
    """Write the ``.py`` file OpenRLHF loads for ``--remote_rm_url path/to/file.py``."""
    config = {
        "env": env,
        "infra_failure_score": float(infra_failure_score),
        "max_parallel": int(max_parallel),
        "sandbox": str(sandbox),
    }
    out = Path(path)
    if out.suffix != ".py":
        raise ConfigError(f"OpenRLHF loads a reward function file ending in .py, got {out}")
    out.write_text(_SHIM.replace("{config}", repr(config)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m deepgym.integrations.openrlhf PATH [--env E] [--infra-failure-score S]``."""
    import argparse

    parser = argparse.ArgumentParser(description="Write OpenRLHF's reward_func file for deepgym.")
    parser.add_argument("path", help="where to write the .py file")
    parser.add_argument("--env", default=None, help="environment (default: each sample's label)")
    parser.add_argument("--infra-failure-score", type=float, default=0.0)
    parser.add_argument("--max-parallel", type=int, default=8)
    parser.add_argument("--sandbox", default="pool")
    args = parser.parse_args(argv)
    out = write_reward_func_file(
        args.path,
        args.env,
        infra_failure_score=args.infra_failure_score,
        max_parallel=args.max_parallel,
        sandbox=args.sandbox,
    )
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
