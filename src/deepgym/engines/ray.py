"""The Ray engine: the same API across a Ray cluster (``DeepGym(mode="ray")``).

One async actor per node (``NodeScorer``) owns that node's warm pool, a ``LocalEngine`` sized
from the node's CPUs, and is pinned to its node. The driver sends work in chunks, never one Ray
call per answer: a GRPO group goes to one actor whole (whole groups up to ``chunk_size`` answers
a call, or ``chunk_size`` consecutive answers without groups), and the actor with the fewest
answers in flight for its slots gets the next chunk.

Invariants:

- Backpressure at two levels: the driver keeps at most twice the cluster's slots of chunks in
  flight, and each actor runs no more answers at once than its pool has workers (the rest of
  its chunks wait in the actor). A batch of 100,000 answers holds that many chunks in flight,
  not 100,000 futures.
- Failures follow the contract. Results come back a chunk at a time, so the driver never holds
  a verdict for an answer it sends again. A chunk whose actor or node died is sent once more,
  to another actor where there is one, if its deadline allows; otherwise its answers come back
  without a verdict (``sandbox_error``): never a 0, never lost, never scored twice.
- A batch never hangs: a chunk not back by its deadline (every run's cap, twice, for each round
  of its actor's slots it can wait and run, plus the sandbox's start grace) is cancelled, and
  its answers come back without a verdict (``timeout``).
- Health apart from the work: the driver pings every actor every ``health_s``; one that does
  not answer in time is killed, and Ray restarts it. An actor whose runs made no progress for
  longer than any run may take exits itself, and Ray restarts it. A node that joins gets an
  actor; a lost node's actor is dropped and its chunks go elsewhere.
- Derived time limits are measured once per cluster: on the node that first needs one, sent
  back with its chunk and sent with every later chunk of that environment (each node also keeps
  them in its store of limits, ``deepgym.time_limits``). The driver and every node hold them in a
  ``TimeLimits`` (the same decisions as local mode), keyed by ``env_key``, the same in every
  process; what travels is the reference's runtime, and each holder applies the one policy.

Environments travel as objects (a built-in's files are found in each node's own install of
deepgym); a verifier or repository of your own given by path must be readable at that path on
every node (a shared filesystem, or the same checkout).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import math
import os
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from deepgym.engines.local import resolve_per_answer
from deepgym.envs.registry import resolve_many
from deepgym.exceptions import (
    ConfigError,
    DeepGymTimeoutError,
    SandboxError,
    SandboxUnavailableError,
    VerifierError,
)
from deepgym.identity import env_key
from deepgym.judge.blame import BACKSTOP
from deepgym.models import BatchResult, Environment, EvalResult, RunResult
from deepgym.protocol import Raised, RunReply, raised_error
from deepgym.sandbox.spec import START_GRACE_S
from deepgym.scheduling import TimeLimitPolicy, group_slices, should_resend
from deepgym.text import install_extra
from deepgym.time_limits import TimeLimits
from deepgym.types import EnvLike, Envs, Group, ProgressFn

__all__ = ["NodeScorer", "RayEngine"]

log = logging.getLogger("deepgym.ray")

HEALTH_S = 5.0
"""How often the driver pings each actor and looks for nodes that joined or left."""
PING_TIMEOUT_S = 30.0
"""How long an actor may take to answer a ping before it is killed (and restarted)."""
_PACKAGE = str(Path(__file__).resolve().parents[1])
"""This install's ``deepgym`` package folder (built-in environments' files live under it)."""
_PATH_FIELDS = ("verifier_path", "repo_path", "tests_path", "source_dir")
Wired = tuple[Environment, str, str]
"""An environment as it travels: the object, the driver's package folder, its ``env_key``."""
Runtimes = dict[str, float | None]
"""Reference runtimes (ms; None: the reference did not pass) by the driver's ``env_key``."""


def _require_ray() -> Any:
    try:
        import ray
    except ImportError as exc:  # an optional extra
        raise ConfigError(f"mode='ray' needs Ray: {install_extra('ray')}") from exc
    return ray


# -- the actor: one per node ---------------------------------------------------------------------


class NodeScorer:
    """One node's scorer: a ``LocalEngine`` whose pool has ``workers`` workers, and which runs no
    more answers at once than that, whatever the number of chunks it was sent.

    ``backend_factory`` (tests): makes the engine's backend instead of ``sandbox``'s.
    ``stall_s``: runs in flight with none finished for this long means the pool is wedged; the
    next ping then ends this process, and Ray starts a new actor."""

    def __init__(
        self,
        workers: int,
        sandbox: str = "pool",
        policy: TimeLimitPolicy | None = None,
        stall_s: float = 600.0,
        backend_factory: Callable[[], Any] | None = None,
    ) -> None:
        from deepgym.engines.local import LocalEngine

        backend = backend_factory() if backend_factory is not None else None
        self.engine = LocalEngine(
            backend, sandbox=sandbox, workers=workers, time_limits=policy, max_in_flight=workers
        )
        self.slots = workers
        self.stall_s = stall_s
        self.running = 0
        self.scored = 0
        self.progress_at = time.monotonic()

    async def ping(self) -> dict[str, Any]:
        """This actor's figures; if its pool is wedged, it says so and then exits."""
        wedged = self.running > 0 and time.monotonic() - self.progress_at > self.stall_s
        if wedged:  # after this reply: Ray sees the process die and starts a new actor
            asyncio.get_running_loop().call_later(0.2, os._exit, 70)
        return {
            "pid": os.getpid(),
            "slots": self.slots,
            "running": self.running,
            "scored": self.scored,
            "wedged": wedged,
        }

    def _learn(
        self, wired: list[Wired], envs: list[Environment], runtimes: Runtimes
    ) -> dict[str, Environment]:
        """Seed the engine with the reference runtimes the driver knows; this node's copies of
        the environments by the driver's keys (the same on every node: a copy whose files moved
        to this node's install has a key of its own here)."""
        named = {key: env for (_, _, key), env in zip(wired, envs, strict=True)}
        self.engine.limits.learn(named, runtimes)
        return named

    async def score(
        self,
        envs: list[Wired],
        which: list[int],
        answers: list[str],
        time_limit: float | None,
        runtimes: Runtimes,
    ) -> tuple[list[RunResult], Runtimes]:
        """Score ``answers`` (answer ``i`` on ``envs[which[i]]``), given the reference runtimes
        the driver knows; return the results and the runtimes known here afterwards."""
        resolved = [_local(e) for e in envs]
        named = self._learn(envs, resolved, runtimes)
        left = len(answers)
        self.running += left

        def done(_: int, __: int) -> None:
            nonlocal left
            left -= 1
            self.running -= 1
            self.scored += 1
            self.progress_at = time.monotonic()

        try:
            batch = await self.engine.run_batch(
                [resolved[w] for w in which],
                answers,
                max_parallel=self.slots,
                time_limit=time_limit,
                progress=done,
            )
        finally:
            self.running -= left  # cancelled: what did not finish is no longer running
        return batch.results, self.engine.limits.known(named)

    async def run_one(
        self,
        env: Wired,
        answer: str,
        time_limit: float | None,
        runtimes: Runtimes,
    ) -> tuple[RunReply, Runtimes]:
        """``dg.run`` on this node; its no-verdict exception travels in the reply."""
        resolved = _local(env)
        named = self._learn([env], [resolved], runtimes)
        self.running += 1
        try:
            reply = RunReply(result=await self.engine.run(resolved, answer, time_limit=time_limit))
        except (SandboxError, DeepGymTimeoutError, VerifierError) as exc:
            got = exc.result if isinstance(exc.result, RunResult) else None
            reply = RunReply(result=got, raised=Raised(type=type(exc).__name__, message=str(exc)))
        finally:
            self.running -= 1
            self.progress_at = time.monotonic()
        return reply, self.engine.limits.known(named)

    async def runtime(self, env: Wired, runtimes: Runtimes) -> tuple[float | None, Runtimes]:
        """The reference runtime of ``env`` on this node (ms; from this node's store, or
        measured here: the driver asks when no one knows it yet)."""
        resolved = _local(env)
        named = self._learn([env], [resolved], runtimes)
        return await self.engine.limits.runtime(resolved), self.engine.limits.known(named)

    async def stats(self) -> dict[str, Any]:
        """The node's pool in figures."""
        return await self.engine.sandbox_stats()

    async def close(self) -> None:
        """Release the pool."""
        await self.engine.close()


# -- the driver --------------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class _Actor:
    handle: Any
    node_id: str
    slots: int
    in_flight: int = 0
    lost: bool = False


@dataclasses.dataclass(eq=False)
class _Chunk:
    indices: list[int]
    deadline: float | None = None
    attempts: int = 0
    tried: set[str] = dataclasses.field(default_factory=set)


class _Lost(Exception):
    """The chunk's actor or node died, or could not be reached: the chunk may go elsewhere."""


class RayEngine:
    """Runs a client's calls on a Ray cluster: one scorer actor per node.

    ``address``: None starts a local Ray instance (and says so in the log), ``"auto"`` or
    ``"ray://..."`` attaches to a running cluster, such as a trainer's. ``sandbox`` and
    ``time_limits`` apply on every node; ``workers_per_cpu`` sizes each node's pool from its CPUs
    (two per CPU, as the local pool); ``chunk_size``: the answers per call (whole groups, as
    many as fit; ``stream_groups`` sends one group a call, so each comes back when complete).
    ``max_parallel`` is not used: the cluster's slots bound the runs at once.
    """

    mode = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        sandbox: str = "pool",
        time_limits: TimeLimitPolicy | None = None,
        workers_per_cpu: int = 2,
        chunk_size: int = 32,
        health_s: float = HEALTH_S,
        stall_s: float = 600.0,
        namespace: str | None = None,
        backend_factory: Callable[[], Any] | None = None,
    ) -> None:
        self.address = address
        self.sandbox = sandbox
        self.time_limits = time_limits
        self.workers_per_cpu = workers_per_cpu
        self.chunk_size = chunk_size
        self.health_s = health_s
        self.stall_s = stall_s
        self.namespace = namespace
        self._backend_factory = backend_factory
        self._ray: Any = None
        self._actors: dict[str, _Actor] = {}
        self.limits = TimeLimits(
            time_limits if time_limits is not None else TimeLimitPolicy(),
            self._runtime_on_a_node,
            sandbox=sandbox,
            persist=False,  # each node keeps them in its own store
        )
        """The derived limits, as the nodes measure them (one node for each environment)."""
        self._health: asyncio.Task[None] | None = None
        self._started_ray = False
        self._ready: asyncio.Lock | None = None
        self.started_local = False
        """True when this engine started a local Ray instance (no address given)."""
        self.resent = 0
        """How many chunks were sent again after their actor or node failed."""

    # -- the cluster -------------------------------------------------------------------------
    async def _connect(self) -> None:
        if self._ready is None:
            self._ready = asyncio.Lock()
        async with self._ready:
            if self._ray is not None:
                return
            ray = _require_ray()
            if not ray.is_initialized():
                kwargs: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False}
                if self.namespace is not None:
                    kwargs["namespace"] = self.namespace
                if self.address is None:
                    log.warning("deepgym: no Ray address given: starting a local Ray instance")
                    self.started_local = True
                else:
                    kwargs["address"] = self.address
                await asyncio.to_thread(ray.init, **kwargs)
                self._started_ray = True
            self._ray = ray
            await self._refresh()
            if not self._actors:
                raise SandboxUnavailableError("the Ray cluster has no alive node with a CPU")
            self._health = asyncio.ensure_future(self._watch())

    def _make_actor(self, node_id: str, cpus: float) -> _Actor:
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        workers = max(1, int(cpus) * self.workers_per_cpu)
        cls = ray.remote(NodeScorer)
        handle = cls.options(
            num_cpus=0,
            max_restarts=-1,
            max_task_retries=0,
            max_concurrency=1000,
            name=f"deepgym-scorer-{node_id[:12]}-{uuid.uuid4().hex[:8]}",
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(
            workers,
            self.sandbox,
            self.time_limits,
            self.stall_s,
            self._backend_factory,
        )
        return _Actor(handle=handle, node_id=node_id, slots=workers)

    async def _refresh(self) -> None:
        """An actor for every alive node with a CPU that has none; lost nodes' actors dropped."""
        nodes = await asyncio.to_thread(self._ray.nodes)
        alive = {
            n["NodeID"]: float(n.get("Resources", {}).get("CPU", 0))
            for n in nodes
            if n.get("Alive")
        }
        for node_id, actor in list(self._actors.items()):
            if node_id not in alive:
                actor.lost = True
                del self._actors[node_id]
                log.warning("deepgym: Ray node %s left: its actor is dropped", node_id[:12])
        for node_id, cpus in alive.items():
            if cpus >= 1 and node_id not in self._actors:
                self._actors[node_id] = self._make_actor(node_id, cpus)

    async def _ping(self, actor: _Actor) -> None:
        ray = self._ray
        try:
            ref = actor.handle.ping.remote()
            await asyncio.wait_for(asyncio.wrap_future(ref.future()), PING_TIMEOUT_S)
        except TimeoutError:  # unresponsive: Ray restarts it (max_restarts)
            log.warning(
                "deepgym: the actor on node %s did not answer: restarting it", actor.node_id[:12]
            )
            ray.kill(actor.handle, no_restart=False)
        except Exception:  # dead or restarting: Ray restarts it, or the node is gone
            pass

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.health_s)
            try:
                await self._refresh()
                await asyncio.gather(*(self._ping(a) for a in list(self._actors.values())))
            except Exception as exc:  # the watch goes on: the work's own errors are the work's
                log.warning("deepgym: Ray health check failed: %s", exc)

    def _slots(self) -> int:
        return sum(a.slots for a in self._actors.values())

    def _pick(self, chunk: _Chunk) -> _Actor | None:
        """The least-loaded actor (answers in flight for its slots), preferring one this chunk
        has not failed on."""
        actors = [a for a in self._actors.values() if not a.lost]
        if not actors:
            return None
        fresh = [a for a in actors if a.node_id not in chunk.tried] or actors
        return min(fresh, key=lambda a: a.in_flight / a.slots)

    # -- sending chunks ---------------------------------------------------------------------
    async def _send(
        self,
        actor: _Actor,
        chunk: _Chunk,
        envs: Sequence[Environment],
        wired: Mapping[int, Wired],
        outputs: Sequence[str],
        time_limit: float | None,
    ) -> list[RunResult]:
        ray = self._ray
        distinct: dict[int, int] = {}
        send_envs: list[Wired] = []
        which: list[int] = []
        for i in chunk.indices:
            k = id(envs[i])
            if k not in distinct:
                distinct[k] = len(send_envs)
                send_envs.append(wired[k])
            which.append(distinct[k])
        named = {key: env for env, _, key in send_envs}
        runtimes = self.limits.known(named)
        answers = [outputs[i] for i in chunk.indices]
        assert chunk.deadline is not None
        left = chunk.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ref = actor.handle.score.remote(send_envs, which, answers, time_limit, runtimes)
        try:
            results, learned = await asyncio.wait_for(asyncio.wrap_future(ref.future()), left)
        except TimeoutError:
            ray.cancel(ref)
            raise
        except ray.exceptions.RayTaskError as exc:  # the actor's code raised: never a 0
            raise _Lost(f"{type(exc.cause).__name__}: {exc.cause}") from exc
        except (ray.exceptions.RayError, ConnectionError) as exc:  # the actor or node died
            raise _Lost(f"{type(exc).__name__}: {exc}") from exc
        self.limits.learn(named, learned)
        return list(results)

    def _deadline(
        self, chunk: _Chunk, envs: Sequence[Environment], time_limit: float | None
    ) -> float:
        cap = max((time_limit or envs[i].time_limit or envs[i].timeout) for i in chunk.indices)
        slots = min((a.slots for a in self._actors.values()), default=1)
        rounds = math.ceil(len(chunk.indices) / slots) + 2  # its own, and what waits ahead of it
        # a round: a run held to its backstop (a starved one), or a failed start and its retry
        return time.monotonic() + rounds * ((BACKSTOP + 1) * cap + START_GRACE_S) + 10.0

    async def _score(
        self,
        envs: Sequence[Environment],
        outputs: Sequence[str],
        groups: list[range],
        time_limit: float | None,
        progress: ProgressFn | None,
        on_chunk: Callable[[list[int], list[RunResult]], None],
    ) -> None:
        """Send every chunk, bounded in flight; hand each finished chunk to ``on_chunk``."""
        await self._connect()
        wired: dict[int, Wired] = {}  # each distinct environment wired (and hashed) once
        for e in envs:
            if id(e) not in wired:
                wired[id(e)] = _wire(e)
        pending: collections.deque[_Chunk] = collections.deque(
            _Chunk(list(r)) for r in groups if len(r)
        )
        running: dict[asyncio.Task[list[RunResult]], tuple[_Chunk, _Actor]] = {}
        done_count = 0
        n = len(outputs)

        def finish(chunk: _Chunk, results: list[RunResult]) -> None:
            nonlocal done_count
            on_chunk(chunk.indices, results)
            done_count += len(chunk.indices)
            if progress is not None:
                progress(done_count, n)

        def no_verdict(chunk: _Chunk, error_type: str, why: str) -> list[RunResult]:
            return [
                RunResult.no_verdict(error_type, why, env_name=envs[i].name) for i in chunk.indices
            ]

        try:
            while pending or running:
                bound = max(2 * self._slots(), 1)  # chunks in flight: twice the slots
                while pending and len(running) < bound:
                    chunk = pending[0]
                    actor = self._pick(chunk)
                    if actor is None:
                        if running:
                            break  # wait for what is running: a node may come back
                        pending.popleft()
                        finish(chunk, no_verdict(chunk, "sandbox_error", "no Ray node is alive"))
                        continue
                    pending.popleft()
                    if chunk.deadline is None:
                        chunk.deadline = self._deadline(chunk, envs, time_limit)
                    chunk.attempts += 1
                    chunk.tried.add(actor.node_id)
                    actor.in_flight += len(chunk.indices)
                    task = asyncio.ensure_future(
                        self._send(actor, chunk, envs, wired, outputs, time_limit)
                    )
                    running[task] = (chunk, actor)
                if not running:
                    continue
                finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in finished:
                    chunk, actor = running.pop(task)
                    actor.in_flight -= len(chunk.indices)
                    exc = task.exception()
                    if exc is None:
                        finish(chunk, task.result())
                    elif isinstance(exc, _Lost):
                        left = (chunk.deadline or 0) - time.monotonic()
                        if should_resend(chunk.attempts, left):
                            log.warning("deepgym: a chunk's Ray actor failed (%s): sent again", exc)
                            pending.appendleft(chunk)
                            self.resent += 1
                        else:
                            why = f"the Ray actor failed and the retry was spent: {exc}"
                            finish(chunk, no_verdict(chunk, "sandbox_error", why))
                    elif isinstance(exc, TimeoutError):
                        why = "the chunk did not come back from Ray by its deadline"
                        finish(chunk, no_verdict(chunk, "timeout", why))
                    else:
                        raise exc
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)

    # -- the engine protocol ----------------------------------------------------------------
    async def _call_one(self, method: str, env: Environment, *args: Any) -> Any:
        """One call of an actor's ``method`` for one environment, sent once more to another
        actor if the first died; the reference runtime it knows afterwards is kept."""
        await self._connect()
        named = {env_key(env): env}
        runtimes = self.limits.known(named)
        chunk = _Chunk([0])
        last: Exception | None = None
        for _ in range(2):
            actor = self._pick(chunk)
            if actor is None:
                break
            chunk.tried.add(actor.node_id)
            ref = getattr(actor.handle, method).remote(_wire(env), *args, runtimes)
            try:
                reply, learned = await asyncio.wrap_future(ref.future())
                self.limits.learn(named, learned)
                return reply
            except self._ray.exceptions.RayTaskError as exc:  # the actor's code raised
                if isinstance(exc.cause, Exception):
                    raise exc.cause from None  # as local mode raises it
                raise
            except (self._ray.exceptions.RayError, ConnectionError) as exc:  # it died
                last = exc
        raise SandboxError(f"no Ray actor could take the run: {last}")

    async def _runtime_on_a_node(self, env: Environment) -> float | None:
        """``env``'s reference runtime, from the node that takes the call (its store, or measured
        there): the driver's ``TimeLimits``'s measurement."""
        runtime: float | None = await self._call_one("runtime", env)
        return runtime

    async def time_limit(self, env: EnvLike, time_limit: float | None = None) -> float:
        """The effective time limit of a run of ``env`` (measured on one node, once); a
        session is refused here, as on every node."""
        return await self.limits.limit(resolve_per_answer(env, 1)[0], time_limit)

    async def run(
        self, env: EnvLike, model_output: str, *, time_limit: float | None = None
    ) -> RunResult:
        """Score one answer on a node; raise the contract's no-verdict exceptions."""
        e = resolve_per_answer(env, 1)[0]
        reply = await self._call_one("run_one", e, model_output, time_limit)
        if reply.raised is not None:
            raise raised_error(reply.raised, reply.result)
        result: RunResult | None = reply.result
        assert result is not None
        return result

    async def run_batch(
        self,
        env: Envs,
        outputs: Sequence[str],
        *,
        max_parallel: int = 8,
        group_size: int | None = None,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> BatchResult:
        """Score many answers across the cluster, in the order of ``outputs``."""
        envs = resolve_per_answer(env, len(outputs))
        t0 = time.monotonic()
        results: list[RunResult | None] = [None] * len(outputs)

        def keep(indices: list[int], got: list[RunResult]) -> None:
            for i, r in zip(indices, got, strict=True):
                results[i] = r

        chunks = self._chunks(len(outputs), group_size)
        await self._score(envs, outputs, chunks, time_limit, progress, keep)
        done = [r for r in results if r is not None]
        assert len(done) == len(results)
        return BatchResult(
            results=done,
            execution_time_ms=(time.monotonic() - t0) * 1000.0,
        )

    def _chunks(self, n: int, group_size: int | None) -> list[range]:
        """Whole groups, as many as fit in ``chunk_size`` answers (at least one); without
        groups, ``chunk_size`` consecutive answers."""
        if group_size is None:
            return group_slices(n, self.chunk_size)
        return group_slices(n, max(1, self.chunk_size // group_size) * group_size)

    async def stream_groups(
        self,
        env: Envs,
        outputs: Sequence[str],
        *,
        group_size: int,
        max_parallel: int = 8,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> AsyncGenerator[Group, None]:
        """Yield ``(group_index, results)`` the moment each group is complete."""
        envs = resolve_per_answer(env, len(outputs))
        groups = group_slices(len(outputs), group_size)
        ready: asyncio.Queue[Group | None] = asyncio.Queue()
        index = {r.start: g for g, r in enumerate(groups)}

        def keep(indices: list[int], got: list[RunResult]) -> None:
            ready.put_nowait((index[indices[0]], got))

        async def work() -> None:
            try:
                await self._score(envs, outputs, groups, time_limit, progress, keep)
            finally:
                ready.put_nowait(None)  # the end (or the error, which the task holds)

        task = asyncio.ensure_future(work())
        try:
            for _ in groups:
                item = await ready.get()
                if item is None:
                    task.result()  # raised: the batch's own error
                    raise RuntimeError("the Ray batch ended before its last group")
                yield item
        finally:
            if not task.done():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def eval(
        self,
        envs_or_suite: Sequence[EnvLike] | str,
        outputs: Mapping[str, str],
        *,
        max_parallel: int = 8,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> EvalResult:
        """Score one answer per environment of a suite or a list, across the cluster."""
        envs = resolve_many(envs_or_suite)
        answers = [outputs.get(e.name, "") for e in envs]
        batch = await self.run_batch(envs, answers, time_limit=time_limit, progress=progress)
        return EvalResult(
            results=batch.results,
            env_names=[e.name for e in envs],
            execution_time_ms=batch.execution_time_ms,
        )

    async def sandbox_stats(self) -> dict[str, Any]:
        """Each node's actor and its pool: ``{"nodes": {node_id: {...}}}``."""
        if self._ray is None:
            return {}
        out: dict[str, Any] = {}
        for node_id, actor in list(self._actors.items()):
            try:
                ref = actor.handle.ping.remote()
                out[node_id] = await asyncio.wait_for(asyncio.wrap_future(ref.future()), 10.0)
            except Exception as exc:
                out[node_id] = {"error": f"{type(exc).__name__}: {exc}"}
        return {"nodes": out, "slots": self._slots()}

    async def close(self) -> None:
        """Stop the health check, release every node's pool and the actors (and Ray, if this
        engine started it)."""
        if self._health is not None:
            self._health.cancel()
            await asyncio.gather(self._health, return_exceptions=True)
            self._health = None
        await self.limits.close()
        if self._ray is None:
            return
        ray = self._ray
        actors = list(self._actors.values())
        self._actors.clear()
        closing = [asyncio.wrap_future(a.handle.close.remote().future()) for a in actors]
        await asyncio.gather(*(asyncio.wait_for(c, 30.0) for c in closing), return_exceptions=True)
        for a in actors:
            ray.kill(a.handle, no_restart=True)
        if self._started_ray:
            await asyncio.to_thread(ray.shutdown)
        self._ray = None


def _wire(env: Environment) -> Wired:
    """How ``env`` travels to a node: the object, with the driver's package folder (a node whose
    deepgym is installed elsewhere finds a built-in's files in its own install) and its
    ``env_key`` (the key of its derived limit, computed on the driver, of the driver's copy)."""
    return env, _PACKAGE, env_key(env)


def _local(wired: Wired) -> Environment:
    """A wired environment with its built-in files at this node's install."""
    env, package, _ = wired
    if package == _PACKAGE:
        return env
    moved = {}
    for field in _PATH_FIELDS:
        value = getattr(env, field, None)
        if value is not None and str(value).startswith(package + os.sep):
            moved[field] = type(value)(_PACKAGE + str(value)[len(package) :])
    return env.model_copy(update=moved) if moved else env
