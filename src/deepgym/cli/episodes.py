"""``deepgym episode`` runs one agent episode; ``deepgym episodes`` lists the episodes recorded
in the run store, and shows one episode's trace.

``deepgym episode ENV --agent module:function`` (or ``path/to/agent.py:function``, or
``--agent reference``, the environment's own reference agent: ``deepgym.cli.agents``; or
``--model-url URL --model NAME``, a model behind an OpenAI-compatible chat endpoint:
``deepgym.chat_agent``) runs one episode, records it, and prints its trajectory and verdict.
``deepgym session ENV`` opens a session in which a person plays the agent: each line typed runs
in its shell, ``score`` ends it with the verdict.

``deepgym episodes`` lists them, newest first; ``deepgym episodes ID`` prints one episode step
by step (each action, its exit code, duration and output), then the work dir's diff and the
verdict; ``--json`` prints the same as one JSON trajectory (the export).

A verdict is shown as ``run`` shows one, each case with the verifier's message, and ``episode``
and ``session`` exit as ``run`` does: 0 passed, 1 judged and not passed, 3 no verdict
(``deepgym.cli.verdicts``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from deepgym.cli import common
from deepgym.cli.agents import load_agent
from deepgym.cli.common import no_store_option, out, store_option
from deepgym.cli.tables import Cell, Column, echo, print_table
from deepgym.cli.verdicts import exit_on, show_result, verdict_text
from deepgym.envs.registry import load_environment
from deepgym.exceptions import ConfigError
from deepgym.session import Agent, Budget
from deepgym.store import RunStore, default_store_path
from deepgym.text import one_line

__all__ = ["episode_cmd", "episodes_cmd", "session_cmd"]

_OUTPUT_LINES = 20
"""Lines of a step's output shown in the text view (the JSON keeps what the trace kept)."""


def _show(episode: dict[str, Any]) -> None:
    console = out()
    click.echo(
        f"episode {episode['id']}  env {episode['env_name']}  sandbox {episode['sandbox_id']}"
    )
    for i, step in enumerate(episode["steps"]):
        action = step["action"]
        what = action.get("command") or action.get("path") or ""
        click.echo(f"--- step {i + 1}: {action['tool']} {one_line(what, 200)}")
        output = step.get("output")
        if output is None:
            continue
        flag = " (timed out)" if step.get("timed_out") else ""
        echo(f"exit {step.get('exit_code')}, {step['duration_s'] * 1000:.0f} ms{flag}", console)
        for stream in ("stdout", "stderr"):
            lines = output[stream].splitlines()
            for line in lines[:_OUTPUT_LINES]:
                click.echo(f"  {line}" if stream == "stdout" else f"! {line}")
            if len(lines) > _OUTPUT_LINES:
                click.echo(f"  ... {len(lines) - _OUTPUT_LINES} more lines")
    if episode["diff"]:
        click.echo("--- the work dir's diff")
        click.echo(episode["diff"].rstrip("\n"))
    show_result(episode["result"])


@click.command("episodes")
@click.argument("episode_id", required=False)
@store_option
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON (one trajectory per episode).")
def episodes_cmd(
    episode_id: str | None, store_path: Path | None, limit: int, as_json: bool
) -> None:
    """List the recorded agent episodes, or show EPISODE_ID's trace step by step."""
    path = store_path if store_path is not None else default_store_path()
    if not path.exists():
        empty = f"no episodes yet (no store at {path})"
        click.echo("[]" if as_json and episode_id is None else empty)
        return
    with RunStore(path) as store:
        if episode_id is not None:
            episode = store.episode(episode_id)
            if as_json:
                click.echo(json.dumps(episode, indent=2))
            else:
                _show(episode)
            return
        rows = store.episodes(limit=limit)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table: list[list[Cell]] = [
        [
            r["id"],
            r["env_name"],
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r["created"])),
            str(r["steps"]),
            "unfinished"
            if r["finished"] is None
            else verdict_text(
                {
                    "has_verdict": r["has_verdict"],
                    "score": r["score"],
                    "error_type": r["error_type"],
                }
            ),
        ]
        for r in rows
    ]
    columns = [Column(h) for h in ("episode", "env", "started", "steps", "verdict")]
    print_table(out(), f"episodes in {path}", columns, table)


@click.command("episode")
@click.argument("env_name")
@click.option(
    "--agent",
    "agent_spec",
    default="reference",
    show_default=True,
    help="The agent: 'reference' (the environment's own), module:function (the current "
    "directory is on the import path) or path/to/agent.py:function; a callable from an "
    "Observation to an action.",
)
@click.option(
    "--model-url",
    default=None,
    help="An OpenAI-compatible chat endpoint (.../v1) whose model acts (instead of --agent).",
)
@click.option("--model", default=None, help="The model's name at --model-url.")
@click.option(
    "--api-key-env",
    default="OPENAI_API_KEY",
    show_default=True,
    metavar="VAR",
    help="The environment variable holding the bearer token for --model-url (read, never kept).",
)
@click.option(
    "--turns", type=click.IntRange(min=1), default=None, help="At most this many actions."
)
@store_option
@no_store_option
@click.option("--json", "as_json", is_flag=True, help="Print the episode as one JSON trajectory.")
def episode_cmd(
    env_name: str,
    agent_spec: str,
    model_url: str | None,
    model: str | None,
    api_key_env: str,
    turns: int | None,
    store_path: Path | None,
    no_store: bool,
    as_json: bool,
) -> None:
    """Run one agent episode of the session environment ENV_NAME; print its trajectory and
    verdict.

    \b
    Exit codes: 0 the episode passed; 1 it was judged and did not pass; 3 no
    verdict (the session, not the agent, failed); 2 bad input; 130 interrupted.
    """
    env = load_environment(env_name)
    if env.kind != "session":
        raise ConfigError(f"{env.name} is a {env.kind} environment: an episode needs a session")
    if model_url is not None or model is not None:
        if model_url is None or model is None:
            raise ConfigError("--model-url and --model go together")
        if agent_spec != "reference":
            raise ConfigError("give --agent or --model-url, not both")
        from deepgym.chat_agent import ChatAgent

        agent: Agent = ChatAgent(model_url, model, api_key_env=api_key_env or None)
    else:
        agent = load_agent(agent_spec, env)
    store = None if no_store else RunStore(store_path or default_store_path())
    try:
        with common.make_client(None) as dg:
            episode = dg.run_episode(env, agent, budget=Budget(turns=turns), store=store)
    finally:
        if store is not None:
            store.close()
    data = {"env_name": env.name, **episode.to_json()}
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        _show(data)
    exit_on(episode.result)


_SESSION_HELP = (
    "a shell in the work dir: type a command to run it; 'score' ends the session with the "
    "final verifier's verdict, 'exit' (or end of input) ends it without one"
)


@click.command("session")
@click.argument("env_name")
def session_cmd(env_name: str) -> None:
    """Open a session of ENV_NAME and play the agent yourself: each line you type runs in the
    session's shell; 'score' ends it with the verdict, 'exit' without one.

    \b
    Exit codes: 0 scored and passed, or ended without scoring; 1 judged and not
    passed; 3 no verdict (the session failed); 2 bad input; 130 interrupted.
    """
    env = load_environment(env_name)
    if env.kind != "session":
        raise ConfigError(f"{env.name} is a {env.kind} environment: a session needs a session")
    console = out()
    with common.make_client(None) as dg, dg.session(env) as session:
        click.echo(env.task.rstrip("\n"))
        echo(f"(session {session.sandbox_id}: {_SESSION_HELP})", console)
        while True:
            try:
                line = input(f"deepgym:{env.name}$ ")
            except EOFError:
                click.echo()
                line = "exit"
            command = line.strip()
            if not command:
                continue
            if command in ("exit", "quit"):
                click.echo("ended without a verdict")
                return
            if command == "help":
                click.echo(_SESSION_HELP)
                continue
            if command == "score":
                result = session.score()
                show_result(result)
                exit_on(result)
                return
            t0 = time.monotonic()
            output = session.exec(command, timeout=env.step_timeout)
            if output.stdout:
                click.echo(output.stdout, nl=not output.stdout.endswith("\n"))
            if output.stderr:
                click.echo(output.stderr, nl=not output.stderr.endswith("\n"), err=True)
            flag = ", timed out" if output.timed_out else ""
            took = (time.monotonic() - t0) * 1000.0
            echo(f"[exit {output.exit_code}, {took:.0f} ms{flag}]", console)
