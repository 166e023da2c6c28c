"""The chat-endpoint agent against a small local server that speaks the OpenAI chat protocol with
scripted replies: tool calls and fenced blocks become actions, observations go back as tool and
user messages, the budget holds, and an endpoint that fails ends the episode without a verdict."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from click.testing import CliRunner

from deepgym import DeepGym, load_environment
from deepgym.chat_agent import ChatAgent, parse_reply
from deepgym.cli import cli
from deepgym.session import Action, Budget


def _call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


FIX = "sed -i 's/a - b/a + b/' calc.py"
SCRIPT: list[dict[str, Any]] = [
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [_call("bash", {"command": "cat calc.py"}, "c1")],
    },
    {"role": "assistant", "content": f"The bug is in add.\n```bash\n{FIX}\n```\n"},
    {"role": "assistant", "content": "", "tool_calls": [_call("done", {}, "c3")]},
]


class _Server:
    def __init__(self, replies: list[dict[str, Any]], status: int = 200) -> None:
        self.replies = list(replies)
        self.status = status
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), **body}
                )
                if owner.status != 200:
                    self.send_response(owner.status)
                    self.end_headers()
                    return
                message = (
                    owner.replies.pop(0)
                    if owner.replies
                    else {"role": "assistant", "content": "ok"}
                )
                data = json.dumps({"choices": [{"index": 0, "message": message}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server(SCRIPT)
    yield s
    s.close()


def test_parse_reply_reads_tool_calls_then_fenced_blocks() -> None:
    assert parse_reply({"tool_calls": [_call("bash", {"command": "ls"}, "x")]}) == (
        Action("bash", command="ls"),
        "x",
    )
    write = _call("write_file", {"path": "a.txt", "content": "hi"}, "w")
    assert parse_reply({"tool_calls": [write]})[0] == Action(
        "write_file", path="a.txt", content="hi"
    )
    text = "first\n```sh\nls\n```\nthen\n```bash\npwd\n```"
    assert parse_reply({"content": text}) == (Action("bash", command="pwd"), None)
    assert parse_reply({"content": "all done"}) == (Action("done"), None)
    bad = {"tool_calls": [{"id": "b", "function": {"name": "bash", "arguments": "{not json"}}]}
    assert parse_reply(bad)[0] == Action("bash", command="")


@pytest.mark.sandbox
def test_a_model_fixes_the_bug_through_tool_calls_and_a_fenced_block(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = load_environment("agent/fix_add")
    monkeypatch.setenv("DEEPGYM_TEST_CHAT_KEY", "sekret")
    agent = ChatAgent(server.url, "scripted", api_key_env="DEEPGYM_TEST_CHAT_KEY")
    assert "sekret" not in repr(vars(agent)) + repr(vars(agent.client))  # read, never kept
    with DeepGym() as dg:
        episode = dg.run_episode(env, agent, budget=Budget(turns=10))
    assert episode.result.has_verdict and episode.result.passed
    assert [s.action.tool for s in episode.trajectory] == ["bash", "bash", "done"]
    assert episode.trajectory[1].action.command == FIX
    first, second, third = server.requests
    assert first["path"] == "/v1/chat/completions" and first["model"] == "scripted"
    assert first["auth"] == "Bearer sekret"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1]["content"] == env.task
    tool_reply = second["messages"][-1]
    assert tool_reply["role"] == "tool" and tool_reply["tool_call_id"] == "c1"
    assert tool_reply["content"].startswith("exit 0\n") and "return a - b" in tool_reply["content"]
    assert third["messages"][-1]["role"] == "user"  # a fenced block's output: a user message
    assert [t["function"]["name"] for t in first["tools"]] == ["bash", "write_file", "done"]


def test_the_agent_checks_its_settings_as_the_model_client_does() -> None:
    from deepgym.exceptions import ConfigError

    for bad in (float("nan"), True, -1.0):
        with pytest.raises(ConfigError, match="temperature"):
            ChatAgent("http://127.0.0.1:1/v1", "m", temperature=bad)
    with pytest.raises(ConfigError, match="url"):
        ChatAgent("127.0.0.1:1", "m")


@pytest.mark.sandbox
def test_the_budget_holds_and_a_failed_endpoint_has_no_verdict() -> None:
    chatty = _Server([{"role": "assistant", "content": "```bash\ntrue\n```"}] * 10)
    try:
        with DeepGym() as dg:
            episode = dg.run_episode(
                load_environment("agent/fix_add"),
                ChatAgent(chatty.url, "m"),
                budget=Budget(turns=3),
            )
        assert len(chatty.requests) == 3 and len(episode.trajectory) == 3
        assert episode.result.has_verdict and episode.result.score == 0.0
    finally:
        chatty.close()
    down = _Server([], status=503)
    try:
        with DeepGym() as dg:
            episode = dg.run_episode(load_environment("agent/fix_add"), ChatAgent(down.url, "m"))
        assert not episode.result.has_verdict  # the endpoint's failure, not the agent's 0
        assert "chat endpoint" in episode.result.error
    finally:
        down.close()


@pytest.mark.sandbox
def test_deepgym_episode_with_a_model_url(server: _Server) -> None:
    r = CliRunner().invoke(
        cli,
        [
            "episode",
            "agent/fix_add",
            "--model-url",
            server.url,
            "--model",
            "scripted",
            "--no-store",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "--- verdict: 1.000 passed" in r.output
    r = CliRunner().invoke(cli, ["episode", "agent/fix_add", "--model", "m", "--no-store"])
    assert r.exit_code == 2 and "go together" in r.output
