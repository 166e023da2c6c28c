"""AgentBench's OS tasks (MIT) as session environments: the suite ``agentbench_os``.

The tasks ship inside the ``inspect-evals`` package (``inspect_evals/agent_bench/data``: 26 dev
tasks in ``agent_bench_os.json``, 119 test tasks in ``agent_bench_os_test.json``, and the check
and example scripts under ``scripts/``). They are read from the installed package, found
without importing it (``importlib.util.find_spec``: its own imports are heavy), never copied
into deepgym. ``pip install 'deepgym[agentbench]'`` installs it.

Each task (``agentbench_os/dev-3``, ``agentbench_os/test-17``) is a session on one Debian image,
``IMAGE``, built once (``build_image``: the tasks' Dockerfile starts from a Python image of
Docker Hub's that no registry here serves; ``image/Dockerfile`` is its equivalent from Debian's
packages), run as root (``Environment.user``), as AgentBench runs them:

- **The home is the work dir.** The tasks name ``/root`` and ``/usr``, which inspect-evals'
  port moves to its home, ``/home/agent``: all three are the work dir ``/work`` here (in the
  records and in the scripts), whose state the final verifier sees. ``HOME`` is ``/work``, and
  ``PATH`` starts with ``/work/local/bin`` and ``/work/bin`` (``/usr``'s, moved).
- **The init** (``create.init``: bash code, a script, or commands) and the background program
  (``start``) run in the setup script, before the agent acts.
- **The answer** is what the agent writes to ``/work/answer.txt`` (the task says so); the
  evaluation is the verifier's (``verifier.py``): ``match`` compared as AgentBench does, a check
  script run with the answer and the expected one (``example``'s output on the initial state),
  or a check of the state the agent left.
- **The reference agent** is the task's ``example``: run in the work dir, its output written as
  the answer (or, for a state check, run as the change it makes).

Not run here, each with its reason (``refusals``): a task whose init is a file of AgentBench's
repository (not in the package), one whose init runs as another user (the namespace maps one
uid), and one with no ``example`` (no reference).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.util
import json
import os
import re
import shlex
import uuid
from pathlib import Path
from typing import Any

from deepgym.exceptions import ConfigError, UnknownEnvironmentError
from deepgym.home import deepgym_home
from deepgym.models import Environment

__all__ = [
    "IMAGE",
    "IMAGE_DIR",
    "SPLITS",
    "VERIFIER",
    "build_image",
    "data_dir",
    "load_all",
    "load_problem",
    "records",
    "refusals",
]

SUITE = "agentbench_os"
SPLITS = {"dev": "agent_bench_os.json", "test": "agent_bench_os_test.json"}
IMAGE_DIR = Path(__file__).resolve().parent / "image"
"""The Dockerfile of the tasks' image (Debian's equivalent of their Python base)."""
VERIFIER = Path(__file__).resolve().parent / "verifier.py"
WORK = "/work"
ANSWER = f"{WORK}/answer.txt"
_HOMES = re.compile(r"/home/agent|/root|/usr")


def _image_tag() -> str:
    return hashlib.sha256((IMAGE_DIR / "Dockerfile").read_bytes()).hexdigest()[:12]


IMAGE = f"deepgym/agentbench-os:{_image_tag()}"
"""The tasks' image in the store, named by its Dockerfile's hash (``build_image`` builds it)."""


def data_dir() -> Path:
    """``inspect_evals/agent_bench/data`` of the installed package (found, not imported);
    ``ConfigError`` naming the extra without it."""
    try:
        spec = importlib.util.find_spec("inspect_evals")
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        data = Path(folder) / "agent_bench" / "data"
        if (data / SPLITS["dev"]).is_file():
            return data
    raise ConfigError(
        "the agentbench_os suite reads its tasks from the inspect-evals package: "
        "pip install 'deepgym[agentbench]'"
    )


def build_image(progress: Any = None) -> str:
    """Build ``IMAGE`` in the image store unless it is there (each step cached); its name."""
    from deepgym.images.build import build
    from deepgym.images.store import ImageStore

    store = ImageStore()
    try:
        store.lookup(IMAGE)
    except ConfigError:
        build(IMAGE_DIR / "Dockerfile", IMAGE_DIR, IMAGE, store=store, progress=progress)
    return IMAGE


@functools.cache
def _records(data: Path) -> tuple[tuple[str, str], ...]:
    out = []
    for split, file in SPLITS.items():
        for i, record in enumerate(json.loads((data / file).read_text())):
            ident = record.get("id", i) if isinstance(record, dict) else i
            out.append((f"{SUITE}/{split}-{ident}", json.dumps(record)))
    return tuple(out)


def records() -> list[tuple[str, dict[str, Any]]]:
    """Every task, ``(name, record)``, dev then test, as the package ships them."""
    return [(name, json.loads(raw)) for name, raw in _records(data_dir())]


def _moved(value: Any) -> Any:
    """``value`` with ``/root``, ``/usr`` and ``/home/agent`` (inspect-evals' home) moved to
    the work dir in every string."""
    if isinstance(value, str):
        return _HOMES.sub(WORK, value)
    if isinstance(value, list):
        return [_moved(v) for v in value]
    if isinstance(value, dict):
        return {k: _moved(v) for k, v in value.items()}
    return value


def _inits(record: dict[str, Any]) -> list[Any]:
    create = record.get("create")
    init = create.get("init") if isinstance(create, dict) else None
    return [] if init is None else init if isinstance(init, list) else [init]


def _kind(evaluation: dict[str, Any]) -> str:
    check = evaluation.get("check")
    if "match" in evaluation and check is None:
        return "answer"
    if isinstance(check, list) and check and check[0] is None:
        return "answer"
    return "state"


_OTHER_USERS = re.compile(r"\b(runuser|su -|sudo -u|useradd|adduser)\b")


def refusal(record: dict[str, Any]) -> str | None:
    """Why the task does not run here, or None."""
    if not isinstance(record, dict) or not isinstance(record.get("evaluation"), dict):
        return "its record has no evaluation"
    text = json.dumps(record)
    if "bin/find" in text:
        return "its check reads a set-uid bit, which never leaves a session's sandbox"
    if re.search(r"apt(-get)? (update|install)", json.dumps(_inits(record))):
        return "its init installs packages (apt-get), and no session has a network"
    if _OTHER_USERS.search(json.dumps(record["evaluation"].get("check"))):
        return "its check runs as other users, and a session's namespace maps one uid"
    for step in _inits(record):
        if isinstance(step, dict) and "file" in step:
            return f"its init is {step['file']}, a file of AgentBench's repository, not shipped"
        if isinstance(step, dict) and "user" in step:
            return f"its init runs as user {step['user']!r} (a session's namespace maps one uid)"
        if not (isinstance(step, str) or (isinstance(step, dict) and "code" in step)):
            return f"an init this suite does not read: {str(step)[:60]}"
    evaluation = record["evaluation"]
    if "match" not in evaluation and "check" not in evaluation:
        return "its evaluation has neither match nor check"
    if "example" not in evaluation and not (
        _kind(evaluation) == "answer" and "match" in evaluation
    ):
        return "it has no example (no reference action)"
    return None


def refusals() -> dict[str, str]:
    """Each task that does not run here, and why (one line)."""
    return {name: why for name, record in records() if (why := refusal(record)) is not None}


def _init_code(record: dict[str, Any]) -> list[str]:
    out = []
    for step in _inits(record):
        code = step["code"] if isinstance(step, dict) else step
        out.append(str(code).replace("<random-string>", uuid.uuid4().hex))
    return out


def _example_code(example: Any, tests: str) -> str:
    if isinstance(example, dict) and "file" in example:
        return f"bash {tests}/{example['file']}"
    return str(example["code"] if isinstance(example, dict) else example)


def _scripts(evaluation: dict[str, Any]) -> list[str]:
    """The check and example scripts ``evaluation`` names (paths under ``data/scripts``)."""
    check = evaluation.get("check")
    items = [check, evaluation.get("example"), *(check if isinstance(check, list) else [])]
    return sorted({item["file"] for item in items if isinstance(item, dict) and "file" in item})


def _task_dir(name: str, task: dict[str, Any], data: Path) -> Path:
    """The task's hidden tests (its ``task.json`` and the scripts it names), written once
    under ``$DEEPGYM_HOME/suites``, keyed by their content."""
    scripts = _scripts(task["evaluation"])
    files = {"task.json": json.dumps(task, indent=2, sort_keys=True).encode()}
    for script in scripts:
        files[script] = _moved((data / "scripts" / script).read_text()).encode()
    digest = hashlib.sha256(json.dumps({k: v.hex() for k, v in files.items()}).encode())
    folder = deepgym_home() / "suites" / SUITE / digest.hexdigest()[:16] / "tests"
    if not (folder / "task.json").is_file():
        tmp = folder.parent / f".tests-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        for rel, data_ in files.items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data_)
        try:
            os.rename(tmp, folder)
        except OSError:  # another process wrote it first
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _setup(init: list[str], start: str | None, dirs: list[str]) -> str:
    lines = [
        "# AgentBench's init, as root, with the work dir as the home; then its background",
        "# program, if it has one.",
        f"export HOME={WORK} PATH={WORK}/local/bin:{WORK}/bin:$PATH",
        f"cd {WORK}",
        *(f"mkdir -p {WORK}/{d}  # /usr/{d}, moved to the home" for d in dirs),
    ]
    for code in init:
        lines.append(f"bash -c {shlex.quote(code)}")
    if start:
        lines.append(f"(bash -c {shlex.quote(start)}) >/dev/null 2>&1 </dev/null")
    lines.append(f"cd {WORK}")
    return "\n".join(lines) + "\n"


def _reference(kind: str, evaluation: dict[str, Any], tests: Path) -> list[dict[str, str]]:
    if "example" not in evaluation:  # a match task without one: the answer itself
        text = str(evaluation["match"])
        return [{"tool": "write_file", "path": "answer.txt", "content": text + "\n"}]
    code = _example_code(evaluation["example"], "/tmp/agentbench")
    actions = []
    if isinstance(evaluation["example"], dict) and "file" in evaluation["example"]:
        script = evaluation["example"]["file"]
        body = (tests / script).read_text()
        actions.append(
            {
                "tool": "bash",
                "command": f"mkdir -p /tmp/agentbench/{os.path.dirname(script)} && cat > "
                f"/tmp/agentbench/{script} <<'AGENTBENCH_EOF'\n{body}\nAGENTBENCH_EOF",
            }
        )
    if kind == "state":
        actions.append({"tool": "bash", "command": f"cd {WORK} && {code}"})
    else:
        actions.append(
            # The closing parenthesis on a line of its own: an example may end in a comment.
            {"tool": "bash", "command": f"cd {WORK} && ({code}\n) > /tmp/answer.out"},
        )
        actions.append({"tool": "bash", "command": f"cp /tmp/answer.out {ANSWER}"})
    return actions


_ANSWER_NOTE = (
    "\n\nWhen you know the answer, write it, and nothing else, to the file {answer} (for "
    "example: echo 42 > {answer})."
)
_STATE_NOTE = "\n\nYou work as root; your home directory is {work}."


def environment(name: str, record: dict[str, Any]) -> Environment:
    """The task ``record`` as a session environment named ``name``; ``ConfigError`` for one
    that does not run here (``refusal``)."""
    why = refusal(record)
    if why is not None:
        raise ConfigError(f"{name}: {why}")
    data = data_dir()
    task = _moved(copy.deepcopy(record))
    evaluation = task["evaluation"]
    kind = _kind(evaluation)
    init = _init_code(task)
    start = task.get("start")
    example = evaluation.get("example")
    # /usr's folders the task names (its record or its scripts: an example that installs a
    # command into /usr/local/bin), made in the home they move to.
    named = [json.dumps(record)]
    named += [(data / "scripts" / s).read_text() for s in _scripts(record["evaluation"])]
    dirs = sorted({m for m in ("local/bin", "bin") if any(f"/usr/{m}" in t for t in named)})
    hidden = {
        "dirs": dirs,
        "name": name,
        "kind": kind,
        "evaluation": evaluation,
        "init": init,
        "start": start,
    }
    if isinstance(example, dict) and "file" in example:
        hidden["example"] = {"file": example["file"]}
    elif example is not None:
        hidden["example"] = {"code": _example_code(example, "")}
    tests = _task_dir(name, hidden, data)
    note = _ANSWER_NOTE if kind == "answer" else ""
    text = task["description"] + note.format(answer=ANSWER) + _STATE_NOTE.format(work=WORK)
    labels = [str(x) for x in task.get("labels", []) if isinstance(x, str)]
    return Environment(
        name=name,
        kind="session",
        task=text,
        image=IMAGE,
        user="root",
        setup_script=_setup(init, start, dirs),
        verifier_path=VERIFIER,
        tests_path=tests,
        reference_solution=json.dumps(_reference(kind, evaluation, tests)),
        tags=("agentbench", *(re.sub(r"[^\w.-]", "-", t) for t in labels)),
        description=name,
        step_timeout=60.0,
        lifetime=900.0,
        timeout=600.0,
        max_processes=256,
    )


def load_all() -> list[Environment]:
    """Every task that runs here (``refusals`` says why each other does not), in order."""
    return [environment(name, record) for name, record in records() if refusal(record) is None]


def load_problem(ident: str) -> Environment:
    """``agentbench_os/<ident>`` (``dev-3``, ``test-17``)."""
    for name, record in records():
        if name == f"{SUITE}/{ident}":
            return environment(name, record)
    raise UnknownEnvironmentError(f"unknown environment '{SUITE}/{ident}'")
