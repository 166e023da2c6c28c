"""A session's supervisor: the one process of deepgym's inside an agent's sandbox.

``python -I -S _boot.py session`` runs this as uid 65534 in a ``session`` sandbox (uid 0 of
the sandbox's own user namespace, with no capabilities, for a task on an image run as root). It
joins the session's cgroups, seeds ``/work`` from ``/seed`` (the shell starts in ``/work``, on an
image too), then answers the host's requests, one JSON object a line on stdin, one reply a line
on stdout:

- ``exec``: run a command in a persistent shell. Each command is a fresh ``bash`` in a process
  group of its own that first restores the shell's state (working dir, variables, functions)
  and saves it on exit, so state carries over between steps and a command past its timeout is
  ended with its whole group while the shell stays usable. Output is capped; byte counts kept.
- ``write`` / ``read`` / ``list``: files under ``/work``.
- ``snapshot``: end every other process in the sandbox (the agent's phase is over), then a tar
  of ``/work`` (base64), for the final verifier's fresh sandbox.

The supervisor makes itself non-dumpable, so the agent (same uid) can neither trace it nor reach
its descriptors through ``/proc``; it can kill it, which ends the session (the agent's doing).
Standard library only.
"""

from __future__ import annotations

import base64
import io
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from typing import Any

from . import isolate
from .solution_host import default_signals, join_cgroups

WORK = "/work"
SEED = "/seed"
STATE = "/tmp/.deepgym-shell"
GRACE_S = 0.05
"""After a command's shell exits, how long output still held open by a background process is
read before the step returns."""

_RESTORE = (
    "[ -f {s}/cwd ] && {{ read -r __dg_cwd < {s}/cwd; "
    'cd "$__dg_cwd" 2>/dev/null || cd /work; }}\n'
    "[ -f {s}/vars ] && . {s}/vars >/dev/null 2>&1\n"
)
# Builtins only (no process started): a step costs one bash. Read-only variables in the saved
# set fail to assign again, silently.
_SAVE = (
    "__dg_save() {{ __dg_rc=$?; pwd > {s}/cwd; "
    "{{ declare -p; declare -f; }} > {s}/vars 2>/dev/null; "
    "return $__dg_rc; }}\ntrap __dg_save EXIT\n"
)


def _inside(path: str) -> str:
    full = os.path.realpath(os.path.join(WORK, path))
    if full != WORK and not full.startswith(WORK + "/"):
        raise ValueError(f"{path!r} is outside the work dir")
    return full


def _read_capped(proc: subprocess.Popen[bytes], cap: int, deadline: float) -> dict[str, Any]:
    """Both streams until the shell exits (or the deadline), each kept up to ``cap`` bytes."""
    sel = selectors.DefaultSelector()
    kept = {"stdout": bytearray(), "stderr": bytearray()}
    counts = {"stdout": 0, "stderr": 0}
    assert proc.stdout is not None and proc.stderr is not None
    for name, stream in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        os.set_blocking(stream.fileno(), False)
        sel.register(stream, selectors.EVENT_READ, name)
    timed_out = False
    exited_at: float | None = None
    while sel.get_map():
        now = time.monotonic()
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > GRACE_S:
            break  # a background process holds the pipe open: the step is over all the same
        if exited_at is None and now >= deadline:
            timed_out = True
            break
        wait = GRACE_S if exited_at is not None else min(deadline - now, 0.5)
        for key, _ in sel.select(max(wait, 0.0)):
            try:
                chunk = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            counts[key.data] += len(chunk)
            room = cap - len(kept[key.data])
            if room > 0:
                kept[key.data] += chunk[:room]
    sel.close()
    return {
        "stdout": kept["stdout"].decode("utf-8", "replace"),
        "stderr": kept["stderr"].decode("utf-8", "replace"),
        "stdout_bytes": counts["stdout"],
        "stderr_bytes": counts["stderr"],
        "truncated": counts["stdout"] > cap or counts["stderr"] > cap,
        "timed_out": timed_out,
    }


def _exec(req: dict[str, Any]) -> dict[str, Any]:
    command = str(req["cmd"])
    timeout = float(req.get("timeout") or 30.0)
    cap = int(req.get("cap") or 65536)
    script = _RESTORE.format(s=STATE) + _SAVE.format(s=STATE) + command + "\n"
    start = time.monotonic()
    for attempt in range(5):
        try:
            proc = subprocess.Popen(
                ["/bin/bash", "--norc", "--noprofile", "-c", script],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                cwd=WORK,
                env={"HOME": WORK, **os.environ},  # the session's HOME where it sets one
                close_fds=True,
            )
            break
        except BlockingIOError:  # the session's process limit is reached (the agent's doing)
            time.sleep(0.05 * (attempt + 1))
    else:
        return {
            "stdout": "",
            "stderr": "deepgym: the command could not start: the session's process limit is "
            "reached\n",
            "stdout_bytes": 0,
            "stderr_bytes": 0,
            "truncated": False,
            "timed_out": False,
            "exit_code": 126,
            "duration_s": time.monotonic() - start,
        }
    out = _read_capped(proc, cap, start + timeout)
    if out["timed_out"]:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        code = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    out["exit_code"] = code if code >= 0 else 128 - code
    out["duration_s"] = time.monotonic() - start
    return out


def _write(req: dict[str, Any]) -> dict[str, Any]:
    full = _inside(str(req["path"]))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    data = base64.b64decode(req["data"])
    with open(full, "wb") as f:
        f.write(data)
    return {"bytes": len(data)}


def _read(req: dict[str, Any]) -> dict[str, Any]:
    full = _inside(str(req["path"]))
    cap = int(req.get("cap") or 1 << 20)
    size = os.path.getsize(full)
    with open(full, "rb") as f:
        data = f.read(cap)
    return {"data": base64.b64encode(data).decode(), "bytes": size, "truncated": size > cap}


def _list(req: dict[str, Any]) -> dict[str, Any]:
    top = _inside(str(req.get("path") or "."))
    names: list[str] = []
    for root, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(files):
            names.append(os.path.relpath(os.path.join(root, name), top))
            if len(names) >= 10_000:
                return {"files": names, "truncated": True}
    return {"files": names, "truncated": False}


def _end_others() -> None:
    """SIGKILL every process of this sandbox but itself and the sandbox's init."""
    me = os.getpid()
    for _ in range(20):
        others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
        if not others:
            return
        for pid in others:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)


def _snapshot(req: dict[str, Any]) -> dict[str, Any]:
    if req.get("end", True):  # the final snapshot: the agent's phase is over
        _end_others()
    cap = int(req.get("cap") or 1 << 26)
    total = 0
    for root, _, files in os.walk(WORK):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                total += os.lstat(path).st_size  # a sparse file counts at its full size
    if total > cap:
        raise ValueError(f"the work dir holds {total} bytes, more than the {cap} a snapshot takes")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in sorted(os.listdir(WORK)):
            tar.add(os.path.join(WORK, name), arcname=name, recursive=True)
    return {"tar": base64.b64encode(buf.getvalue()).decode()}


OPS = {"exec": _exec, "write": _write, "read": _read, "list": _list, "snapshot": _snapshot}


def _apply_limits(limits: dict[str, int]) -> None:
    """Hard limits for everything the agent starts (memory only where no cgroup holds it)."""
    import resource

    pairs = {
        "fsize_bytes": resource.RLIMIT_FSIZE,
        "nproc": resource.RLIMIT_NPROC,
        "as_bytes": resource.RLIMIT_AS,
    }
    for key, which in pairs.items():
        if key in limits:
            resource.setrlimit(which, (limits[key], limits[key]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(argv: list[str]) -> int:
    """Serve the host's requests until stdin closes."""
    join_cgroups(os.environ.pop("DEEPGYM_CGROUP_PROCS", ""))
    isolate.dumpable(False)
    default_signals()  # the agent's commands start as on a plain host (none ignored or blocked)
    _apply_limits(json.loads(argv[0]) if argv else {})
    os.makedirs(STATE, exist_ok=True)
    if os.path.isdir(SEED):
        shutil.copytree(SEED, WORK, dirs_exist_ok=True, symlinks=True)
        os.chmod(WORK, os.stat(WORK).st_mode | 0o700)  # the work dir is the agent's, whatever
        # mode the seed's top folder had
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            reply: dict[str, Any] = {"ok": OPS[str(req["op"])](req)}
        except Exception as exc:  # a bad request or a file error: the host raises it
            reply = {"err": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0
