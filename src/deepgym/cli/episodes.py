"""``deepgym episodes``: the agent episodes recorded in the run store, and one episode's trace.

``deepgym episodes`` lists them, newest first; ``deepgym episodes ID`` prints one episode step
by step (each action, its exit code, duration and output), then the work dir's diff and the
verdict; ``--json`` prints the same as one JSON trajectory (the export).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from deepgym.cli.common import out, store_option
from deepgym.cli.tables import Cell, Column, echo, print_table
from deepgym.store import RunStore, default_store_path
from deepgym.text import one_line

__all__ = ["episodes_cmd"]

_OUTPUT_LINES = 20
"""Lines of a step's output shown in the text view (the JSON keeps what the trace kept)."""


def _verdict(result: dict[str, Any] | None) -> str:
    if result is None:
        return "unfinished"
    if not result.get("has_verdict", True):
        return f"no verdict ({result.get('error_type')})"
    return f"{result.get('score', 0.0):.3f}" + (" passed" if result.get("passed") else "")


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
    result = episode["result"]
    click.echo(f"--- verdict: {_verdict(result)}")
    if result and result.get("error"):
        echo(f"cause: {one_line(result['error'], 300)}", console)


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
            else _verdict(
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
