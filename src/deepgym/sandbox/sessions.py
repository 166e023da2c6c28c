"""Agent sessions on this host: one bwrap sandbox per session, driven through its supervisor.

``LocalSessions.open(env)`` starts a ``session`` sandbox (``policy``: uid 65534, no capabilities,
no network, its own pid, mount and ipc namespaces, a size-capped work dir seeded from the
environment's ``repo``, the session's own cgroups) running ``judge/agent_shell.py``, and runs the
environment's setup script. ``LocalSession`` sends it one request a line: ``exec``, files, and at
``score`` a snapshot of the work dir, after which the agent's sandbox is ended and the final
verifier runs in a fresh ``session`` sandbox over that snapshot (``session_verifier``, running
``judge/session_verify.py``).

Failures, as the session rule reads them (``deepgym.session.failure_result``):

- the supervisor gone (its sandbox killed from outside, or by the agent): ``SandboxDiedError``;
- past the session's ``lifetime``: the sandbox is ended and ``SandboxExpiredError`` raised;
- a start that fails: ``SandboxError``, before the agent could act.

Nothing outlives a session: ``close`` kills its whole process tree and removes its cgroups and
files; a sandbox dies with the host process (``--die-with-parent``); and each session writes its
id, pid and cgroups to ``$DEEPGYM_HOME/sessions``, so one left by a host that was SIGKILLed is
found and ended by id the next time sessions start on the host.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import io
import json
import os
import secrets
import shutil
import stat
import tarfile
import time
import weakref
from pathlib import Path
from typing import Any

from deepgym.exceptions import (
    ConfigError,
    DeepGymError,
    SandboxDiedError,
    SandboxError,
    SandboxExpiredError,
    SandboxUnavailableError,
)
from deepgym.home import deepgym_home
from deepgym.identity import env_key
from deepgym.judge.blame import tree_pids
from deepgym.models import Environment, ExecResult, RunResult
from deepgym.protocol import REPLY_GRACE_S
from deepgym.sandbox import cgroups, policy, seccomp
from deepgym.sandbox.host import check_bwrap, compile_judge, host_params
from deepgym.sandbox.image_root import ImageResolver, ImageRoots
from deepgym.sandbox.session_verifier import home, run_as, verify_snapshot
from deepgym.sandbox.spawn import end_process, kill_tree, start_process
from deepgym.sandbox.workdiff import work_diff
from deepgym.sandbox.workspace import Workspace

__all__ = [
    "ExecResult",
    "LocalSession",
    "LocalSessions",
    "reap_leftovers",
    "sessions_dir",
]

STANDBY_ENVS = 4
"""Environments that keep a standby sandbox (the most recently opened)."""
OUTPUT_CAP = 65536
"""Bytes of a command's stdout, and of its stderr, that come back (the counts are kept)."""
READ_CAP = 1 << 20
"""Bytes of a file ``read_file`` returns."""


def sessions_dir() -> Path:
    """``$DEEPGYM_HOME/sessions``: one file per open session, for reaping after a crash."""
    return deepgym_home() / "sessions"


def _alive_with(pid: int, marker: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return marker.encode() in f.read()
    except OSError:
        return False


def reap_leftovers() -> int:
    """End the sessions a host process left when it died without closing them (found by their
    id in ``sessions_dir``); the number ended."""
    d = sessions_dir()
    if not d.is_dir():
        return 0
    ended = 0
    for path in d.glob("*.json"):
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        owner = int(info.get("owner", 0))
        if owner and owner != os.getpid() and os.path.exists(f"/proc/{owner}"):
            continue  # its host is alive: its sessions are its own
        pid = int(info.get("pid", 0))
        if pid and _alive_with(pid, str(info.get("id", "?"))):
            kill_tree(pid)
            ended += 1
        for group in info.get("cgroups", []):
            with contextlib.suppress(OSError):
                os.rmdir(group)
        path.unlink(missing_ok=True)
    return ended


class LocalSession:
    """One open session: its sandbox, its supervisor, its clock."""

    def __init__(self, owner: LocalSessions, env: Environment) -> None:
        self.owner = owner
        self.env = env
        self.sandbox_id = f"local-{secrets.token_hex(6)}"
        self.acted = False
        """Whether the agent has acted (a command, a file written): the session rule's line."""
        self.agent_s = 0.0
        """Time the agent's own commands ran."""
        self.opened = 0.0
        self.proc: asyncio.subprocess.Process | None = None
        self.group: cgroups.RunCgroup | None = None
        self.dir = owner.workspace.root / self.sandbox_id
        self.closed = False
        self.ended_by: DeepGymError | None = None
        self._lock = asyncio.Lock()
        self._expiry: asyncio.TimerHandle | None = None
        self.diff = ""
        """The work dir's changes from its seed, as a unified diff (set by ``score``)."""
        self._steps = 0

    # -- start -----------------------------------------------------------------------------
    def _limits(self) -> dict[str, int]:
        env = self.env
        limits = {"fsize_bytes": env.max_file_mb * 2**20, "nproc": env.max_processes}
        if self.group is not None and not self.group.holds("memory"):
            limits["as_bytes"] = env.memory_mb * 2**20
        return limits

    def work_bytes(self) -> int:
        """The size cap of the work dir (and of /tmp): twice the largest file allowed."""
        return self.env.max_file_mb * 2 * 2**20

    async def start(self) -> None:
        """Start the sandbox and its supervisor, then begin the session."""
        await self.boot()
        await self.begin()

    async def boot(self) -> None:
        """Start the sandbox and its supervisor (a standby stops here until it is taken)."""
        self.dir.mkdir(mode=0o700)
        env_dir = self.owner.workspace.env_dir(self.env, keep=True)
        self.group = cgroups.create(
            self.env.memory_mb, self.env.max_processes, owner=self.owner.workspace.owner
        )
        joins, binds, join_fds = self.group.join(policy.RUN_CGROUP)
        try:
            host = self.owner.host_for(self.env, self.group)
        except BaseException:
            await self.close()
            raise
        params = dataclasses.replace(
            host,
            command=("session", json.dumps(self._limits())),
            uid=run_as(self.env),
            env={
                "HOME": home(self.env),
                "DEEPGYM_SESSION": self.sandbox_id,
                "DEEPGYM_CGROUP_PROCS": joins,
            },
            cgroups=binds,
            size=self.work_bytes(),
            seed_dir=str(env_dir / "repo") if (env_dir / "repo").is_dir() else "",
        )
        filter_fd = seccomp.filter_fd() if params.uid == policy.ROOT_UID else -1
        params = dataclasses.replace(params, seccomp_fd=filter_fd)
        argv = policy.argv(policy.SESSION, params)
        try:
            self.proc = await start_process(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                pass_fds=(*join_fds, *([filter_fd] if filter_fd >= 0 else [])),
                start_new_session=True,
                limit=2**28,
            )
            self._record()
            self.owner.live[self.sandbox_id] = self.proc.pid
            assert self.proc.stdout is not None
            line = await asyncio.wait_for(self.proc.stdout.readline(), 30.0)
            if not line or not json.loads(line).get("ready"):
                raise SandboxError(f"session {self.sandbox_id}: the sandbox did not start")
        except (OSError, ValueError, TimeoutError) as exc:
            await self.close()
            raise SandboxError(
                f"session {self.sandbox_id}: the sandbox did not start: {exc}"
            ) from exc
        except BaseException:
            await self.close()
            raise
        finally:
            if filter_fd >= 0:
                os.close(filter_fd)

    def alive(self) -> bool:
        """Whether the sandbox is still running (a standby that died is not handed out)."""
        return self.proc is not None and self.proc.returncode is None and not self.closed

    async def begin(self) -> None:
        """The session's clock starts (its lifetime), then the environment's setup script."""
        self.opened = time.monotonic()
        loop = asyncio.get_running_loop()
        # A weak reference: a pending timer must not keep a session (and its provider) alive.
        self._expiry = loop.call_later(self.env.lifetime, _expire_later, weakref.ref(self))
        if self.env.setup_script:
            done = await self._exec(self.env.setup_script, self.env.step_timeout, agent=False)
            if done.exit_code != 0 or done.timed_out:
                await self.close()
                raise SandboxError(
                    f"session {self.sandbox_id}: the environment's setup script failed "
                    f"(exit {done.exit_code}): {done.stderr[-500:]}"
                )

    def _record(self) -> None:
        """Note this session where ``reap_leftovers`` finds it if the host dies."""
        assert self.proc is not None and self.group is not None
        d = sessions_dir()
        d.mkdir(parents=True, exist_ok=True)
        info = {
            "id": self.sandbox_id,
            "pid": self.proc.pid,
            "owner": os.getpid(),
            "cgroups": list(self.group.dirs.values()),
        }
        (d / f"{self.sandbox_id}.json").write_text(json.dumps(info))

    def _expire(self) -> None:
        if not self.closed and self.ended_by is None:
            self.ended_by = SandboxExpiredError(
                f"session {self.sandbox_id}: its sandbox's lifetime of {self.env.lifetime:g} s "
                "ended"
            )
            if self.proc is not None and self.proc.returncode is None:
                kill_tree(self.proc.pid)

    # -- requests --------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.ended_by is not None:
            raise self.ended_by
        if self.closed:
            raise ConfigError(f"session {self.sandbox_id} is closed")
        if time.monotonic() - self.opened > self.env.lifetime:
            self._expire()
            assert self.ended_by is not None
            raise self.ended_by

    async def _request(self, op: str, wait_s: float, **fields: Any) -> dict[str, Any]:
        self._check_open()
        proc = self.proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        async with self._lock:
            try:
                proc.stdin.write(json.dumps({"op": op, **fields}).encode() + b"\n")
                await proc.stdin.drain()
                line = await asyncio.wait_for(proc.stdout.readline(), wait_s + REPLY_GRACE_S)
            except (OSError, TimeoutError) as exc:
                line = b""
                cause = f"{type(exc).__name__}: {exc}"
            else:
                cause = "its supervisor exited"
        if not line:
            if self.ended_by is not None:
                raise self.ended_by
            self.ended_by = SandboxDiedError(
                f"session {self.sandbox_id}: the sandbox died ({cause})"
            )
            raise self.ended_by
        reply = json.loads(line)
        if "err" in reply:
            raise ConfigError(f"session {self.sandbox_id}: {op}: {reply['err']}")
        result: dict[str, Any] = reply["ok"]
        return result

    async def _exec(self, command: str, timeout: float, *, agent: bool) -> ExecResult:
        left = self.env.lifetime - (time.monotonic() - self.opened)
        got = await self._request(
            "exec", min(timeout, max(left, 0.0)), cmd=command, timeout=timeout, cap=OUTPUT_CAP
        )
        result = ExecResult(
            stdout=got["stdout"],
            stderr=got["stderr"],
            exit_code=int(got["exit_code"]),
            timed_out=bool(got["timed_out"]),
            truncated=bool(got["truncated"]),
            duration_s=float(got["duration_s"]),
            stdout_bytes=int(got["stdout_bytes"]),
            stderr_bytes=int(got["stderr_bytes"]),
        )
        if agent:
            self.agent_s += result.duration_s
        return result

    async def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        """Run ``command`` in the session's shell; past ``timeout`` (the environment's step
        limit by default) its process group is killed and the result says ``timed_out``."""
        limit = self.env.step_timeout if timeout is None else timeout  # checked by AsyncSession
        self.acted = True
        return await self._exec(command, float(limit), agent=True)

    async def write_file(self, path: str, content: str | bytes) -> None:
        """Write ``content`` to ``path`` under the work dir."""
        data = content.encode() if isinstance(content, str) else bytes(content)
        self.acted = True
        await self._request("write", 10.0, path=path, data=base64.b64encode(data).decode())

    async def read_file(self, path: str) -> str:
        """The text of ``path`` under the work dir (its first ``READ_CAP`` bytes)."""
        got = await self._request("read", 10.0, path=path, cap=READ_CAP)
        return base64.b64decode(got["data"]).decode("utf-8", "replace")

    async def list_files(self, path: str = ".") -> list[str]:
        """Every file under ``path`` in the work dir, relative to it."""
        got = await self._request("list", 10.0, path=path)
        return list(got["files"])

    # -- the verdict -----------------------------------------------------------------------
    async def score(self) -> RunResult:
        """End the agent's phase, then run the final verifier over a snapshot of the work dir.

        Raises the session's own failure (``SandboxDiedError``, ``SandboxExpiredError``, a
        failed snapshot as ``SandboxDiedError``) for ``failure_result`` to read.
        """
        try:
            got = await self._request("snapshot", 30.0, cap=self.work_bytes())
        except ConfigError as exc:  # the agent's work dir could not be taken (too big)
            raise SandboxDiedError(str(exc)) from exc
        await self._end_sandbox()
        snap = self._unpack(got["tar"], "snapshot")
        self.diff = work_diff(self.env.repo_path, snap)
        return await self.owner.verify(self, snap)

    async def score_stage(self, stage: str, *, last: bool) -> RunResult:
        """The final verifier over a snapshot of the work dir, judging ``stage``
        (``Environment.stages``); the agent's processes go on unless it is the ``last``."""
        try:
            got = await self._request("snapshot", 30.0, cap=self.work_bytes(), end=last)
        except ConfigError as exc:  # the agent's work dir could not be taken (too big)
            raise SandboxDiedError(str(exc)) from exc
        if last:
            await self._end_sandbox()
        self._steps += 1
        snap = self._unpack(got["tar"], f"stage-{self._steps}")
        self.diff = work_diff(self.env.repo_path, snap)
        return await self.owner.verify(self, snap, stage=stage)

    async def setup_stage(self, script: str) -> None:
        """A stage's setup script, run in the session's shell (not the agent's action);
        ``SandboxError`` when it fails."""
        done = await self._exec(script, self.env.step_timeout, agent=False)
        if done.exit_code != 0 or done.timed_out:
            raise SandboxError(
                f"session {self.sandbox_id}: a stage's setup script failed "
                f"(exit {done.exit_code}): {done.stderr[-500:]}"
            )

    async def step_reward(self) -> RunResult | None:
        """The environment's per-step verifier over a snapshot of the work dir as it is now
        (the agent's processes go on); None where the environment has none. A shaping reward:
        never the episode's verdict, and a failure of it is a result without a verdict."""
        if self.env.step_verifier_code is None:
            return None
        got = await self._request("snapshot", 30.0, cap=self.work_bytes(), end=False)
        self._steps += 1
        snap = self._unpack(got["tar"], f"step-{self._steps}")
        try:
            return await self.owner.verify(self, snap, step=True)
        finally:
            shutil.rmtree(snap, ignore_errors=True)

    def _unpack(self, tar_b64: str, name: str) -> Path:
        """A snapshot's tar into ``name`` under the session's folder, for the verifier's sandbox:
        links kept as links, and each entry's permission bits as the agent left them (a script
        it made executable, a mode a task asks for), never set-uid, set-gid or sticky, always
        readable by their owner (and writable, for a task run as root, whose root writes
        whatever the mode). The snapshot's folder is the host user's alone (0700): a mode the
        agent chose opens nothing on the host."""
        snap = self.dir / name
        snap.mkdir(mode=0o700)
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(tar_b64))) as archive:
            modes = {m.name: m.mode & 0o777 for m in archive.getmembers() if not m.issym()}
            archive.extractall(snap, filter="data")
        owner = stat.S_IRUSR | (stat.S_IWUSR if self.env.user == "root" else 0)
        for rel, mode in modes.items():
            p = snap / rel
            if p.is_symlink() or not p.exists():
                continue
            os.chmod(p, mode | owner | (stat.S_IXUSR | stat.S_IWUSR if p.is_dir() else 0))
        os.chmod(snap, 0o700)
        os.chmod(self.dir, 0o755)
        return snap

    # -- the end ---------------------------------------------------------------------------
    async def _end_sandbox(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        proc = self.proc
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()
            await end_process(proc)
        self.owner.live.pop(self.sandbox_id, None)
        if self.group is not None:
            self.group.remove()
            self.group = None
        (sessions_dir() / f"{self.sandbox_id}.json").unlink(missing_ok=True)

    async def close(self) -> None:
        """End everything the session started and remove its files."""
        if self.closed:
            return
        self.closed = True
        await self._end_sandbox()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.owner.sessions.discard(self)


class LocalSessions:
    """Sessions on this host: opens them, runs their final verifiers, ends what is left."""

    isolation = "strict"

    def __init__(self, images: ImageResolver | None = None) -> None:
        """``images``: how an environment's ``image`` becomes a root folder (the image store's
        by default: ``image_root.store_resolver``)."""
        compile_judge()
        check_bwrap()
        reap_leftovers()
        self.host = host_params()
        self.images = ImageRoots(images)
        self.workspace = Workspace()
        self.sessions: set[LocalSession] = set()
        self.live: dict[str, int] = {}
        """Each running session's sandbox pid: what a provider collected unclosed kills."""
        weakref.finalize(self, _kill_all, self.live)
        self._standby: dict[str, asyncio.Task[LocalSession]] = {}

    async def open(self, env: Environment) -> LocalSession:
        """A new session of ``env`` (a ``kind: "session"`` environment), started.

        A warm start: the sandbox of the environment's last session already started the next
        one's (a standby, booted but not begun: its lifetime starts when it is handed out).
        """
        if env.kind != "session":
            raise ConfigError(f"env {env.name!r} is a {env.kind} task, not a session")
        key = env_key(env)  # its limits and setup included: what the standby booted with
        session = await self._take_standby(key)
        if session is None:
            session = LocalSession(self, env)
            self.sessions.add(session)
            await session.boot()
        else:
            session.env = env
        if key not in self._standby:
            self._standby[key] = asyncio.ensure_future(self._prepare(env))
            while len(self._standby) > STANDBY_ENVS:  # the oldest environment's goes
                await self._drop_standby(next(iter(self._standby)))
        await session.begin()
        return session

    async def _prepare(self, env: Environment) -> LocalSession:
        standby = LocalSession(self, env)
        self.sessions.add(standby)
        await standby.boot()
        return standby

    async def _take_standby(self, key: str) -> LocalSession | None:
        task = self._standby.pop(key, None)
        if task is None:
            return None
        try:
            standby = await task
        except DeepGymError:  # it did not start: this open starts its own
            return None
        if standby.alive():
            return standby
        await standby.close()
        return None

    async def _drop_standby(self, key: str) -> None:
        task = self._standby.pop(key)
        task.cancel()
        done = await asyncio.gather(task, return_exceptions=True)
        if isinstance(done[0], LocalSession):
            await done[0].close()

    def host_for(
        self, env: Environment, group: cgroups.RunCgroup | None = None, *, verifier: bool = False
    ) -> policy.Params:
        """The host's facts for a sandbox of ``env`` (on its image's root where it names one;
        ``verifier``: on its ``verifier_image`` where it names one). An image session needs
        bwrap's overlay and a memory cgroup (``group``) to bound its writable layer: else
        refused, one line. The agent's shell starts in the work dir on an image too
        (``RootImage``)."""
        if env.image is None:
            return self.host
        image = env.verifier_image if verifier and env.verifier_image else env.image
        if group is not None and not group.holds("memory"):
            raise SandboxUnavailableError(
                f"env {env.name!r}: a session on image {env.image!r} needs a memory cgroup "
                "(its writable layer is memory no other limit bounds); run `deepgym doctor`"
            )
        return self.images.params(self.host, image, writable=True)

    async def verify(
        self, session: LocalSession, snapshot: Path, step: bool = False, stage: str | None = None
    ) -> RunResult:
        """The final verifier of ``session`` (``step``: its per-step verifier), in a fresh
        sandbox over ``snapshot`` (``session_verifier``), on the session's image if it has one:
        the image as built, not as the agent left it (only the work dir carries over)."""
        return await verify_snapshot(
            self.host_for(session.env, verifier=True),
            self.workspace,
            session.env,
            session.sandbox_id,
            session.work_bytes(),
            snapshot,
            step=step,
            stage=stage,
        )

    async def close(self) -> None:
        """Close every session still open (the standbys too), and remove the provider's
        files."""
        for key in list(self._standby):
            await self._drop_standby(key)
        for session in list(self.sessions):
            await session.close()
        # groups still busy when their sandbox ended (its processes exiting): gone before we are
        cgroups.retry_pending(final=True)
        self.workspace.close()


def _expire_later(ref: weakref.ref[LocalSession]) -> None:
    session = ref()
    if session is not None:
        session._expire()


def _kill_all(live: dict[str, int]) -> None:
    """End the sandboxes of a provider that was garbage-collected without ``close``."""
    for sandbox_id, pid in list(live.items()):
        if _alive_with(pid, sandbox_id):
            kill_tree(pid)
    live.clear()


def leftover_pids(session: LocalSession) -> set[int]:
    """Processes of ``session``'s sandbox still alive (for tests)."""
    return tree_pids(session.proc.pid) if session.proc is not None else set()
