"""The verifier process: load the job, drive the checks, send the verdict on the private fd.

The private fd carries JSON lines: ``{"event": "in_play", ...}`` the instant the answer comes into
play (its process starts, or the verifier opens its file), then one ``{"event": "report", ...}``.
Nothing the answer prints reaches that fd. A verifier that exits 2 reports its own failure.
"""

from __future__ import annotations

import os
import sys
import time

from . import compare, wire
from .proxy import Launcher, Session, SolutionDied, SolutionError, SolutionProxy, SolutionTimeout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Judge:
    """One run's state: the clock, the in-play instant, the result channel."""

    def __init__(self, job: dict[str, Any], result_fd: int, launcher: Any = None) -> None:
        self.job = job
        self.t0 = time.monotonic()
        self.deadline = self.t0 + float(job["timeout"])
        self.case_timeout = float(job["case_timeout"])
        self.result = os.fdopen(result_fd, "w", buffering=1)
        self.in_play = False
        self.launcher = (launcher or Launcher)(job, self.mark_in_play)
        self.session = Session(self.launcher, self.case_timeout, self.deadline)
        sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and not self.in_play and args and args[0] == self.job["answer_path"]:
            self.mark_in_play("solution_file_opened")

    def mark_in_play(self, by: str = "solution_started") -> None:
        if not self.in_play:
            self.in_play = True
            ms = (time.monotonic() - self.t0) * 1000.0
            self.send({"event": "in_play", "in_play_ms": ms, "by": by})

    def send(self, msg: dict[str, Any]) -> None:
        self.result.write(wire.dumps(_plain(msg)) + "\n")

    def cases(self) -> list[dict[str, Any]]:
        path = self.job.get("test_cases_path")
        if not path:
            return []
        with open(path) as f:
            data: list[dict[str, Any]] = wire.loads(f.read())
        return data


def _plain(x: Any) -> Any:
    """JSON-safe copy of a report: anything else (a verifier's odd value) becomes its repr."""
    if x is None or isinstance(x, bool | int | str):
        return x
    if isinstance(x, float):
        return x if x == x and abs(x) != float("inf") else repr(x)
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    return repr(x)


def _case(i: int, passed: bool, message: str = "") -> dict[str, Any]:
    return {"name": f"test_{i}", "passed": passed, "message": message[:500]}


def _score(cases: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(cases)
    good = sum(1 for c in cases if c["passed"])
    return {
        "status": "ok",
        "score": good / n if n else 0.0,
        "passed": n > 0 and good == n,
        "cases": cases,
    }


def run_declarative(j: Judge) -> dict[str, Any]:
    """Call the entry point once per test case; score = share passed."""
    entry = j.job["entry_point"]
    how = j.job.get("compare", "exact")
    proxy = SolutionProxy(j.session)
    results = []
    for i, case in enumerate(j.cases()):
        try:
            got = getattr(proxy, entry)(*case.get("args", []), **case.get("kwargs", {}))
        except SolutionTimeout as exc:
            if time.monotonic() >= j.deadline:
                raise
            results.append(_case(i, False, f"timeout: {exc}"))
            continue
        except (SolutionError, SolutionDied) as exc:
            results.append(_case(i, False, str(exc)))
            continue
        ok = compare.equal(got, case["expected"], how)
        results.append(_case(i, ok, "" if ok else f"expected {case['expected']!r}, got {got!r}"))
    return _score(results)


def run_script(j: Judge, check: Any = None) -> dict[str, Any]:
    """Run the answer as a program once per case, with the case's stdin and arguments."""
    results = []
    for i, case in enumerate(j.cases()):
        proc = j.launcher.start("script", tuple(map(str, case.get("args", []))), keep_stdout=True)
        stdin = str(case.get("stdin", "")).encode()
        try:
            os.write(proc.fds["in"], stdin) if len(stdin) < 65536 else _write_all(proc, stdin)
        except BrokenPipeError:
            pass
        os.close(proc.fds.pop("in"))
        limit = min(j.case_timeout, max(j.deadline - time.monotonic(), 0.0))
        try:
            j.launcher.pump(proc, time.monotonic() + limit, want_line=False)
        except TimeoutError:
            blame = j.launcher.timeout_blame(proc, limit * 1000.0)
            j.launcher.kill(proc)
            if time.monotonic() >= j.deadline:
                raise SolutionTimeout("script ran past the run's limit", blame) from None
            results.append(_case(i, False, "timeout"))
            continue
        j.launcher.reap(proc)
        out = proc.out.text()
        if proc.limit:
            results.append(_case(i, False, f"limit: {proc.limit}"))
        elif check is not None:
            verdict = check(case, out)
            ok = bool(verdict >= 1.0) if isinstance(verdict, float) else bool(verdict)
            results.append(_case(i, ok))
        else:
            ok = compare.equal(out, case["expected_stdout"], j.job.get("compare", "tokens"))
            results.append(_case(i, ok, "" if ok else f"stdout {out[:200]!r}"))
    return _score(results)


def _write_all(proc: Any, data: bytes) -> None:
    os.set_blocking(proc.fds["in"], True)
    os.write(proc.fds["in"], data)


def _load_verifier(j: Judge) -> Any:
    import importlib.util

    path = j.job["verifier_path"]
    spec = importlib.util.spec_from_file_location("verifier", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load verifier {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def report_from_value(value: Any) -> dict[str, Any]:
    """A ``verify`` return value (bool, number or dict) as a report; the host checks the score."""
    if isinstance(value, bool | int | float):
        return {"status": "ok", "score": value}
    if isinstance(value, dict):
        out: dict[str, Any] = {"status": "ok", "score": value.get("score")}
        if isinstance(value.get("passed"), bool):
            out["passed"] = value["passed"]
        if isinstance(value.get("reward_components"), dict):
            out["reward_components"] = value["reward_components"]
        if isinstance(value.get("cases"), list):
            out["cases"] = value["cases"]
        if out["score"] is None and "passed" in out:
            out["score"] = 1.0 if out["passed"] else 0.0
        return out
    return {"status": "invalid_score", "message": f"verify returned a {type(value).__name__}"}


def run_custom(j: Judge) -> dict[str, Any]:
    module = _load_verifier(j)
    if j.job.get("kind") == "script":
        return run_script(j, getattr(module, "check", None))
    verify = getattr(module, "verify", None)
    if verify is None:
        return {"status": "verifier_error", "message": "the verifier defines no verify()"}
    return report_from_value(verify(SolutionProxy(j.session), j.cases()))


def drive(j: Judge) -> dict[str, Any]:
    if j.job.get("verifier_path"):
        return run_custom(j)
    if j.job.get("kind") == "script":
        return run_script(j)
    return run_declarative(j)


def main(argv: list[str]) -> int:
    """``verifier JOB_JSON RESULT_FD``."""
    job_path, result_fd = argv[0], int(argv[1])
    with open(job_path) as f:
        job = wire.loads(f.read())
    return judge(job, result_fd)


def judge(job: dict[str, Any], result_fd: int, launcher: Any = None) -> int:
    """Run one job and send its report; return the verifier's exit code.

    ``launcher`` builds the solution launcher (a ``proxy.Launcher`` subclass); the strict sandbox
    execs a nested sandbox, the pool asks its clean worker to fork one.
    """
    j = Judge(job, result_fd, launcher)
    code = 0
    try:
        report = drive(j)
    except SolutionTimeout as exc:
        status = "solution_timeout" if exc.blame_solution else "timeout"
        report = {"status": status, "message": str(exc)}
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        report = {"status": "verifier_error", "message": f"the verifier exited {exc.code}"}
    except BaseException as exc:
        import traceback

        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        report = {"status": "verifier_error", "message": tb[-3000:]}
    finally:
        j.session.close()
    if j.session.timed_out and report.get("status") in ("verifier_error", "invalid_score"):
        report = {"status": "solution_timeout", "message": "a call into the answer timed out"}
    proc = j.session.proc
    report["solution"] = {
        "cpu_ms": proc.rusage_cpu_ms if proc else None,
        "limit": proc.limit if proc else None,
        "stdout": proc.out.head.decode("utf-8", "replace") if proc else "",
        "stderr": proc.err.head.decode("utf-8", "replace") if proc else "",
    }
    report["elapsed_ms"] = (time.monotonic() - j.t0) * 1000.0
    j.send({"event": "report", **report})
    return code
