"""NeMo Gym's resources-server routes on ``deepgym serve``: their shapes, the 504 of a run without
a verdict, the aggregate metrics; and one rollout through NeMo Gym's own code (its simple agent,
its vLLM model server over a scripted OpenAI-protocol server, its server client), on the Pythons
NeMo Gym supports (3.12 and later)."""

from __future__ import annotations

import asyncio
import statistics
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from deepgym.server.nemo_gym import aggregate_metrics, output_text, rows
from deepgym.server.runner import ThreadedServer, bind
from tests.eval.openai_server import serve as serve_model
from tests.server.conftest import TOY, call, fake_app


def _response(text: str) -> dict[str, Any]:
    """A Responses API object whose one assistant message says ``text``."""
    return {
        "id": "resp_1",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            },
        ],
    }


def _row(env: Any = "toy", text: str = "pass") -> dict[str, Any]:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "solve"}]},
        "verifier_metadata": {"env": env},
        "response": _response(text),
    }


def test_output_text_reads_the_assistant_messages_only() -> None:
    body = _response("```python\npass\n```")
    body["output"].append({"type": "function_call", "name": "x", "arguments": "{}"})
    assert output_text(body) == "```python\npass\n```"


def test_verify_scores_the_last_code_block_and_echoes_the_request() -> None:
    app, fake = fake_app()
    row = _row(TOY, "I think:\n```python\npass\n```")
    r = call(app, "POST", "/verify", token=None, json=row)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["reward"] == 1.0 and body["passed"] is True
    assert body["extracted_model_code"] == "pass\n"
    assert body["verifier_metadata"] == row["verifier_metadata"]  # the request, echoed
    assert body["deepgym"] == {"env": "toy", "error_type": None, "has_verdict": True}
    assert dict(fake.calls) == {"pass\n": 1}
    r = call(app, "POST", "/verify", token=None, json=_row(TOY, "fail"))
    assert r.status_code == 200 and r.json()["reward"] == 0.0  # a judged 0


def test_no_verdict_is_a_504_never_a_reward() -> None:
    app, _ = fake_app()
    r = call(app, "POST", "/verify", token=None, json=_row(TOY, "down"))
    assert r.status_code == 504
    body = r.json()
    assert "reward" not in body and body["error"]["code"] == "sandbox_error"
    assert body["deepgym"]["has_verdict"] is False and "no verdict" in body["error"]["message"]


def test_seed_session_checks_the_environment_before_any_run() -> None:
    app, fake = fake_app()
    assert call(app, "POST", "/seed_session", token=None, json=_row(TOY)).json() == {}
    r = call(app, "POST", "/seed_session", token=None, json=_row("no_such_env"))
    assert r.status_code == 404 and "no_such_env" in r.text
    r = call(app, "POST", "/seed_session", token=None, json={"responses_create_params": {}})
    assert r.status_code == 400 and "verifier_metadata.env" in r.text
    r = call(app, "POST", "/verify", token=None, json=_row("agent/fix_add"))
    assert r.status_code == 400 and "session" in r.text
    assert not fake.calls


def test_the_routes_need_the_services_token_when_it_has_one() -> None:
    app, _ = fake_app(token="secret-token-1")
    assert call(app, "POST", "/verify", token=None, json=_row(TOY)).status_code == 401
    r = call(app, "POST", "/verify", token="secret-token-1", json=_row(TOY))
    assert r.status_code == 200


def test_aggregate_metrics_per_task_and_overall() -> None:
    responses = [
        {"_ng_task_index": 0, "reward": 1.0, "passed": True},
        {"_ng_task_index": 0, "reward": 0.0, "passed": False},
        {"_ng_task_index": 1, "reward": 0.5, "passed": False},
    ]
    out = aggregate_metrics(responses)
    assert [g["_ng_task_index"] for g in out["group_level_metrics"]] == [0, 1]
    assert out["group_level_metrics"][1]["std/reward"] == 0.0
    assert out["agent_metrics"]["mean/reward"] == 0.5
    assert out["agent_metrics"]["std/reward"] == statistics.stdev([1.0, 0.0, 0.5])
    assert out["key_metrics"] == {"mean/reward": 0.5, "mean/passed": 1 / 3}
    app, _ = fake_app()
    r = call(app, "POST", "/aggregate_metrics", token=None, json={"verify_responses": responses})
    assert r.json() == out
    r = call(app, "POST", "/aggregate_metrics", token=None, json={"verify_responses": 3})
    assert r.status_code == 400


def test_aggregate_metrics_match_nemo_gyms_own() -> None:
    if sys.version_info < (3, 12):
        pytest.skip("NeMo Gym needs Python 3.12 or later; the 3.12 and 3.13 suites run this")
    from nemo_gym.reward_profile import compute_aggregate_metrics

    responses = [
        {"_ng_task_index": t, "_ng_rollout_index": i, "reward": r, "passed": r == 1.0}
        for t, i, r in [(0, 0, 1.0), (0, 1, 0.0), (0, 2, 1.0), (1, 0, 0.5), (1, 1, 0.0)]
    ]
    theirs = compute_aggregate_metrics(responses).model_dump()
    ours = aggregate_metrics(responses)
    for key, value in ours["agent_metrics"].items():
        assert theirs["agent_metrics"][key] == pytest.approx(value), key
    assert ours["key_metrics"] == pytest.approx(theirs["key_metrics"])
    for mine, their in zip(ours["group_level_metrics"], theirs["group_level_metrics"], strict=True):
        for key in ("mean/reward", "std/reward", "median/passed"):
            assert their[key] == pytest.approx(mine[key]), key


class _Loop:
    """One event loop in a thread serving NeMo Gym's apps on 127.0.0.1: they share NeMo Gym's
    one aiohttp session, bound to the loop it was made in, as in NeMo Gym's own processes."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.servers: list[Any] = []
        self.tasks: list[Any] = []

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=120)

    def serve(self, app: Any, sock: Any) -> None:
        import uvicorn

        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.servers.append(server)

        async def start() -> None:
            self.tasks.append(asyncio.ensure_future(server.serve(sockets=[sock])))
            while not server.started:
                await asyncio.sleep(0.01)

        self.run(start())

    def close(self) -> None:
        async def stop() -> None:
            for server in self.servers:
                server.should_exit = True
            await asyncio.gather(*self.tasks)
            from nemo_gym import server_utils

            if server_utils._GLOBAL_AIOHTTP_CLIENT is not None:
                await server_utils._GLOBAL_AIOHTTP_CLIENT.close()
                server_utils._GLOBAL_AIOHTTP_CLIENT = None

        self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def nemo_stack() -> Iterator[dict[str, Any]]:
    """deepgym serve (the fake backend), NeMo Gym's vLLM model server over a scripted
    OpenAI-protocol server, and NeMo Gym's simple agent, each on 127.0.0.1."""
    if sys.version_info < (3, 12):
        pytest.skip("NeMo Gym needs Python 3.12 or later; the 3.12 and 3.13 suites run this")
    from nemo_gym.config_types import BaseServerConfig, ModelServerRef, ResourcesServerRef
    from nemo_gym.server_utils import (
        GlobalAIOHTTPAsyncClientConfig,
        ServerClient,
        set_global_aiohttp_client,
    )
    from omegaconf import OmegaConf
    from responses_api_agents.simple_agent.app import SimpleAgent, SimpleAgentConfig
    from responses_api_models.vllm_model.app import VLLMModel, VLLMModelConfig

    answers = ["text:Here it is:\n```python\npass\n```", "text:fail"]
    app, fake = fake_app()
    with serve_model({}, default=answers) as (model_url, script), ThreadedServer(app) as deepgym:
        model_sock, agent_sock = bind("127.0.0.1", 0), bind("127.0.0.1", 0)
        ports = {
            "deepgym": deepgym.port,
            "policy_model": model_sock.getsockname()[1],
            "deepgym_simple_agent": agent_sock.getsockname()[1],
        }
        kinds = {
            "deepgym": "resources_servers",
            "policy_model": "responses_api_models",
            "deepgym_simple_agent": "responses_api_agents",
        }
        config = {
            name: {kind: {name: {"host": "127.0.0.1", "port": ports[name]}}}
            for name, kind in kinds.items()
        }
        client = ServerClient(
            head_server_config=BaseServerConfig(host="127.0.0.1", port=0),
            global_config_dict=OmegaConf.create(config),
        )
        model = VLLMModel(
            config=VLLMModelConfig(
                name="policy_model",
                host="127.0.0.1",
                port=ports["policy_model"],
                entrypoint="app.py",
                base_url=model_url,
                api_key="none",
                model="scripted",
                return_token_id_information=False,
                uses_reasoning_parser=False,
            ),
            server_client=client,
        )
        agent = SimpleAgent(
            config=SimpleAgentConfig(
                name="deepgym_simple_agent",
                host="127.0.0.1",
                port=ports["deepgym_simple_agent"],
                entrypoint="app.py",
                resources_server=ResourcesServerRef(type="resources_servers", name="deepgym"),
                model_server=ModelServerRef(type="responses_api_models", name="policy_model"),
            ),
            server_client=client,
        )
        loop = _Loop()
        try:

            async def session() -> None:  # NeMo Gym's one aiohttp session, made in this loop
                set_global_aiohttp_client(GlobalAIOHTTPAsyncClientConfig())

            loop.run(session())
            loop.serve(model.setup_webserver(), model_sock)
            loop.serve(agent.setup_webserver(), agent_sock)
            yield {"client": client, "fake": fake, "script": script, "loop": loop}
        finally:
            loop.close()


def test_a_rollout_through_nemo_gyms_simple_agent(nemo_stack: dict[str, Any]) -> None:
    from nemo_gym.server_utils import get_response_json, raise_for_status

    (row,) = rows([_toy()])
    row["verifier_metadata"]["env"] = TOY
    row["responses_create_params"]["input"][0]["content"] = "solve toy"
    client = nemo_stack["client"]

    async def rollout() -> dict[str, Any]:
        # As NeMo Gym's rollout collection posts each row to its agent.
        res = await client.post(server_name="deepgym_simple_agent", url_path="/run", json=row)
        await raise_for_status(res)
        return await get_response_json(res)  # type: ignore[no-any-return]

    first = nemo_stack["loop"].run(rollout())
    second = nemo_stack["loop"].run(rollout())
    assert (first["reward"], second["reward"]) == (1.0, 0.0)
    assert first["extracted_model_code"] == "pass\n" and first["deepgym"]["has_verdict"]
    assert dict(nemo_stack["fake"].calls) == {"pass\n": 1, "fail": 1}


def _toy() -> Any:
    from deepgym.models import Environment

    return Environment(**TOY)
