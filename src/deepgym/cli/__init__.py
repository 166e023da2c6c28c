"""The ``deepgym`` command line: score answers, evaluate suites, browse environments, run the demo.

Exit codes: 0 done (``run``: the answer passed), 1 ``run`` judged the answer and it did not pass
(``check``, ``qa``: a check failed; ``demo``: a run did not go as expected), 2 bad input (a
missing or malformed file, an unknown environment, an invalid environment folder: one
``Error: ...`` line on stderr, never a traceback), 3 ``run`` got no verdict (the sandbox, the
time limit or the verifier failed, not the answer), 130 interrupted. ``run-batch`` and ``eval``
exit 0 whatever the answers scored (``EXIT_CODES``, printed by ``deepgym --help``).

Every command that scores goes through ``DeepGym``; the verdict and the totals come from the
library (``RunResult.has_verdict``, ``Totals.summary_line``), never recomputed here. A run without
a verdict is shown as ``ERROR (<error_type>)`` with its cause, and no score.

One module per family of commands, on one shared module:

- ``common``: the group that translates the library's errors once, exit codes, shared options,
  ``make_client``, the progress bar, output helpers, the readers of answer files;
- ``runs``: ``run``, ``run-batch``, ``eval`` (scoring answers) and ``runs`` (the run store);
- ``environments``: ``list``, ``show``, ``check``, ``qa``;
- ``demo``: ``demo``;
- ``episodes``: ``episode`` (run one agent episode; exit 3 when it has no verdict),
  ``session`` (a person plays the agent) and ``episodes`` (the recorded ones);
- ``harbor``: ``harbor import``, ``harbor export`` (Harbor task folders);
- ``images``: ``image pull|build|load|list|rm|prune`` (container images, no daemon);
- ``runtimes``: ``runtime build|list`` (the packages Python answers run with);
- ``latency``: ``price``, ``sweep``;
- ``service``: ``serve``, ``console``;
- ``doctor``: ``doctor`` (this host's check: exit 0 full limits, 1 weaker limits, 2 no sandbox).

The domain packages never import this one. Importing it loads no heavy optional dependency
(FastAPI, uvicorn, torch, matplotlib): the commands that need one import it when they run.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from deepgym import __version__
from deepgym.cli import (
    common,
    demo,
    doctor,
    environments,
    episodes,
    harbor,
    images,
    latency,
    runs,
    runtimes,
    service,
)
from deepgym.cli.common import DeepGymGroup

__all__ = ["EXIT_CODES", "cli", "main"]


EXIT_CODES = """\b
Exit codes:
  0    done (run: the answer passed)
  1    run: judged, and it did not pass; check, qa: a check failed;
       demo: a run did not go as expected
  2    bad input: one "Error: ..." line on stderr, never a traceback
  3    run: no verdict (the sandbox, the time limit or the verifier failed,
       not the answer)
  130  interrupted (Ctrl-C or SIGTERM)
run-batch and eval exit 0 whatever the answers scored, runs without a verdict
included: read the totals, or --json.
"""
"""The exit codes, as ``deepgym --help`` prints them (docs/cli.md has the same table)."""


@click.group(
    cls=DeepGymGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXIT_CODES,
)
@click.version_option(__version__, prog_name="deepgym")
def cli() -> None:
    """Score a model's code answers in a sandbox, with a verdict or plainly without one."""


for _command in (
    runs.run,
    runs.run_batch,
    runs.eval_cmd,
    runs.runs_cmd,
    episodes.episode_cmd,
    episodes.session_cmd,
    episodes.episodes_cmd,
    environments.list_cmd,
    environments.show,
    environments.check,
    environments.qa,
    environments.limits_cmd,
    harbor.harbor_cmd,
    images.image_cmd,
    runtimes.runtime_cmd,
    demo.demo,
    latency.price_cmd,
    latency.sweep_cmd,
    service.serve_cmd,
    service.console_cmd,
    doctor.doctor_cmd,
):
    cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> None:
    """The ``deepgym`` console entry point (also ``python -m deepgym``)."""
    common.handle_sigterm()
    cli.main(args=list(argv) if argv is not None else None, prog_name="deepgym")
