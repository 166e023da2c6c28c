"""Harbor tasks (harborframework.com) as session environments, and session environments as
Harbor tasks: ``deepgym harbor import|export``.

A Harbor task is a folder: ``task.toml`` (``[metadata]``; ``[verifier]`` ``timeout_sec`` and
``env``; ``[agent] timeout_sec``; ``[solution] env``; ``[environment]`` ``docker_image``,
``memory_mb``, ``gpus``, ``env``, ...), ``instruction.md`` (the prompt), ``environment/`` (a
``Dockerfile`` and the files it copies, or a compose file), ``tests/test.sh`` (run after the
agent; it writes the reward to ``/logs/verifier/reward.txt``, a number, or ``reward.json``, an
object whose ``reward`` is the number) and ``solution/solve.sh`` (the oracle).

The package, one concern a module:

- ``import_task``: ``import_harbor_task``, a task as a session environment folder;
- ``tbench``: ``import_terminal_bench_task``, terminal-bench's first format (``task.yaml``, a
  one-service compose file, ``run-tests.sh`` and a parser), staged in Harbor's layout;
- ``folder``: ``import_task`` (either format), ``import_harbor_folder``, every task of a
  folder, with a report of those refused;
- ``export_task``: ``export_harbor_task``, a session environment in Harbor's layout;
- ``plan``: whether the host sandbox stands in for a task's image, and what a session starts
  from where it does;
- ``image``: the task's image, built (``deepgym.images``) where only an image gives it;
- ``files``: reading a task's files within limits (a task folder is untrusted input);
- ``paths``: Harbor's paths, and where a session has them;
- ``output``: a folder written whole or not at all, a file written by a bash command;
- ``verifier`` and ``runner``: files shipped into sandboxes, standard library only, never
  imported by the rest: an imported task's ``verifier.py`` (``import_task.VERIFIER``) and an
  exported task's ``tests/deepgym_verify.py`` (``export_task.RUNNER``).
"""

from __future__ import annotations

from deepgym.envs.harbor.export_task import export_harbor_task
from deepgym.envs.harbor.folder import FolderImport, import_harbor_folder, import_task
from deepgym.envs.harbor.import_task import import_harbor_task
from deepgym.envs.harbor.paths import HARBOR_ROOT, WORK, path_map, rewrite
from deepgym.envs.harbor.tbench import import_terminal_bench_task

__all__ = [
    "HARBOR_ROOT",
    "WORK",
    "FolderImport",
    "export_harbor_task",
    "import_harbor_folder",
    "import_harbor_task",
    "import_task",
    "import_terminal_bench_task",
    "path_map",
    "rewrite",
]
