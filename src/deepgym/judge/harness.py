"""The verifier process: load the job, drive the checks, send the verdict on the private fd.

The private fd carries JSON lines: ``{"event": "in_play", ...}`` the instant the answer comes into
play (its process starts, or the verifier opens its file), then one ``{"event": "report", ...}``.
Nothing the answer prints reaches that fd. A verifier that exits 2 reports its own failure.

Drivers: ``run_declarative`` (call the entry point per case), ``run_script`` (run the answer as a
program per case), ``run_custom`` (the environment's ``verify``), and ``run_patch`` (apply the
answer's diff here, then check the patched repository through the solution process).
"""

from __future__ import annotations

import _socket
import os
import sys
import time

from . import compare, files, wire
from .codes import BEGAN, EXEC_FAILED, REPORT_MAX_BYTES, SETUP_FAILED, VERIFIER_BROKEN
from .errors import AheadError, LaunchError, SolutionDied, SolutionError, SolutionTimeout
from .launch import Launcher, served_by
from .report import ends, fit, report_from_value
from .rpc import Session, SolutionProxy, call_request
from .solution_host import write_all

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .launch import Process


_CURRENT: Judge | None = None
_HOOKED = False


def _install_audit_hook() -> None:
    """The verifier opening the answer's file puts the answer in play (an audit hook)."""
    global _HOOKED

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and _CURRENT is not None and args:
            _CURRENT.audit_open(args[0])

    sys.addaudithook(hook)
    _HOOKED = True


class Judge:
    """One run's state: the clock, the in-play instant, the result channel."""

    def __init__(
        self, job: dict[str, Any], result_fd: int, launcher: Any = None, marks_fd: int = -1
    ) -> None:
        self.job = job
        self.t0 = time.monotonic()
        self.case_timeout = float(job["case_timeout"])
        self.result_fd = result_fd
        self.marks_fd = marks_fd
        self.in_play = False
        self.launcher = (launcher or Launcher)(job, self.mark_in_play)
        self.session = Session(self.launcher, self.case_timeout)
        self.shown: Process | None = None
        """A script's program whose output the result shows: the first that failed its case,
        else the last that ran."""
        self._shown_failed = False
        global _CURRENT
        _CURRENT = self
        if not _HOOKED:  # one hook per process (hooks cannot be removed); it asks _CURRENT
            _install_audit_hook()

    def audit_open(self, path: Any) -> None:
        """The audit hook's view of an ``open``: opening the answer's file puts it in play."""
        if not self.in_play and path == self.job["answer_path"]:
            self.mark_in_play("solution_file_opened")

    def mark_in_play(self, by: str = "solution_started") -> None:
        """Record, once, the instant the answer came into play, on a channel it cannot reach."""
        if not self.in_play:
            self.in_play = True
            ms = (time.monotonic() - self.t0) * 1000.0
            msg = {"event": "in_play", "in_play_ms": ms, "by": by}
            if self.marks_fd >= 0:  # read by the host when the run ends: no wake-up now
                os.write(self.marks_fd, (wire.dumps(msg) + "\n").encode())
            else:
                self.send(msg)

    def show(self, proc: Process, passed: bool) -> None:
        """``proc`` ran a case: its output is the result's unless an earlier one failed."""
        if not self._shown_failed:
            self.shown, self._shown_failed = proc, not passed

    def send(self, msg: dict[str, Any], then: dict[str, Any] | None = None) -> None:
        """Write ``msg`` (and ``then``, if given) as JSON lines, in one write; ``msg`` fitted
        under the line the host reads (``report.fit``)."""
        data = (fit(_plain(msg), REPORT_MAX_BYTES - 1024, wire.dumps) + "\n").encode()
        if then is not None:
            data += (wire.dumps(then) + "\n").encode()
        write_all(self.result_fd, data)

    def cases(self, shared: bool = False) -> list[dict[str, Any]]:
        """The environment's test cases (none for a custom verifier without them).
        ``shared``: for the harness's own use, which changes none of them: a staged file's
        cases are parsed once per process and shared by its runs (a pool worker judges many
        runs of one environment; a program's cases can be megabytes of JSON). A verifier gets
        its own copy, which it may change."""
        inline = self.job.get("test_cases")
        if inline is not None:  # the run's own (``sandbox.base.RunInput``): nothing staged
            return list(inline)
        path = self.job.get("test_cases_path")
        if not path:
            return []
        if not shared:
            return _read_cases(path)
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns)
        data = _CASES.get(key)
        if data is None:
            data = _read_cases(path)
            if st.st_size <= _CASES_MAX_BYTES:
                if sum(k[1] for k in _CASES) + st.st_size > _CASES_ALL_BYTES:
                    _CASES.clear()
                _CASES[key] = data
        return list(data)


def _read_cases(path: str) -> list[dict[str, Any]]:
    with open(path) as f:
        data: list[dict[str, Any]] = wire.loads(f.read())
    return data


def _plain(x: Any) -> Any:
    """JSON-safe copy of a report: anything else (a verifier's odd value) becomes its repr."""
    t = type(x)  # exact types first: a report is mostly these
    if t is str or t is bool or t is int or x is None:
        return x
    if t is dict:
        return {k if type(k) is str else str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, bool | int | str):
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


def run_declarative(j: Judge, cases: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Call the entry point (or the case's ``call``, ``"package.module:function"``) once per
    test case; score = share passed."""
    entry = j.job["entry_point"]
    how = j.job.get("compare", "exact")
    cases = j.cases(shared=True) if cases is None else cases
    # every call is known before the first: all go ahead of their replies
    reqs = [
        call_request(case.get("call") or entry, case.get("args", []), case.get("kwargs", {}))
        for case in cases
    ]
    pending = j.session.ahead(reqs)
    results = []
    for i, case in enumerate(cases):
        try:
            got = pending.take()
        except SolutionTimeout as exc:
            if exc.whole_run or not exc.blame_solution:  # the run's limit, or held back: no case
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
    """Run the answer as a program once per case, with the case's stdin and arguments.

    The job may cap the cases judged (``case_limit``: the first N) and stop at the first failed
    one (``stop_on_failure``: the rest count as failed, not run). A compiled language's program
    (``run_argv``) also fails a case by a non-zero exit or a signal (a runtime error, as a
    judge of programming contests counts it), whatever it printed first. ``compare: "exit"``:
    the case passes by the program's exit 0 alone (a test program's asserts), whatever it
    printed. A test-runner mode (``report``) gives a case per test its runner reported
    (``judge.reports``), where a program gives one per run."""
    results: list[dict[str, Any]] = []
    program = j.job.get("run_argv")  # a compiled language: its built program, run as is
    mode, prefix = ("exec", tuple(program)) if program else ("script", ())
    runner = j.job.get("report")
    cases = j.cases(shared=True)
    if j.job.get("case_limit"):
        cases = cases[: int(j.job["case_limit"])]
    for i, case in enumerate(cases):
        if results and not results[-1]["passed"] and j.job.get("stop_on_failure"):
            results.append(_case(i, False, "not run: stopped at the first failed case"))
            continue
        args = prefix + tuple(map(str, case.get("args", [])))
        how = {"compiled": bool(program), "check": check, "runner": runner}
        results.extend(_run_case(j, i, case, mode, args, **how))
    return _score(results)


def _run_case(
    j: Judge, i: int, case: dict[str, Any], mode: str, args: tuple[str, ...], **how: Any
) -> list[dict[str, Any]]:
    """One case: its program started, given the run's files (``judge.files``) and its stdin,
    and judged at its end under the case's and the run's CPU-time limits. ``how``: ``compiled``
    (a non-zero exit fails the case), ``check`` (the environment's output check) and
    ``runner`` (a test-runner mode: a result per test it reported, where a program gives one)."""
    t_case = time.monotonic()
    proc = j.launcher.start(mode, args, keep_stdout=True)
    io = proc.fds.pop("io", None)
    try:
        cpu0 = j.launcher.cpu_ms(proc)
        j.mark_in_play()  # a script runs the answer at once
        if not proc.hosted:
            _send_files(j, io)
        stdin = str(case.get("stdin", "")).encode()
        try:
            write_all(proc.fds["in"], stdin)
        except BrokenPipeError:
            pass
        os.close(proc.fds.pop("in"))
        try:  # its end (reaped), under the case's and the run's CPU-time limits
            j.launcher.wait(proc, j.case_timeout, t_case, cpu0, want_line=False)
        except SolutionTimeout as exc:
            j.launcher.kill(proc)
            if exc.whole_run or not exc.blame_solution:
                what = f"test_{i}" if exc.whole_run else "the program"
                raise SolutionTimeout(f"{what} {exc}", exc.blame_solution, exc.whole_run) from None
            proc.out.chunks = []
            j.show(proc, passed=False)
            return [_kept(j, _case(i, False, "timeout"), proc, t_case, timed_out=True, io=io)]
        if _setup_failed(proc):
            raise LaunchError("the solution process could not start: " + proc.err.text_head())
        crash = _runtime_error(proc.status)
        if crash and (said := proc.err.last_words() or _stdout_words(j, how["runner"], proc)):
            crash = f"{crash}: {said}"  # its last words: a traceback's error
        if how["runner"] and not proc.limit:
            from . import reports

            tests = reports.cases(how["runner"], proc.out.text(), crash, i)
            proc.out.chunks = []
            j.show(proc, all(t["passed"] for t in tests))
            return [_kept(j, tests[0], proc, t_case, timed_out=False, io=io), *tests[1:]]
        if proc.limit:
            result = _case(i, False, f"limit: {proc.limit}")
        elif (how["compiled"] or j.job.get("compare") == "exit") and crash:
            result = _case(i, False, crash)
        elif j.job.get("compare") == "exit":
            result = _case(i, True)
        else:
            result = _judge_output(j, i, case, proc.out.text(), how["check"])
            if crash and not result["passed"]:
                result = _case(i, False, f"{crash}; {result['message']}".rstrip("; "))
        proc.out.chunks = []  # judged: only what comes back of it is kept from here
        j.show(proc, result["passed"])
        return [_kept(j, result, proc, t_case, timed_out=False, io=io)]
    finally:
        if io is not None:
            os.close(io)


def _send_files(j: Judge, io: int | None) -> None:
    """Send a program's solution process the run's files, and whether its work dir is read
    back (``judge.files``), then end the message. A process that ended before it read them
    failed its own set-up: its end says so."""
    if io is None:
        return
    data = files.message(j.job.get("files") or {}, bool(j.job.get("fetch")))
    try:
        if data:
            write_all(io, data)
        files.end_message(io)
    except OSError:
        pass


def _kept(
    j: Judge, result: dict[str, Any], proc: Any, t0: float, *, timed_out: bool, io: int | None
) -> dict[str, Any]:
    """``result`` with the program's output and end, where the job keeps them, and the files
    it read back from the program's work dir (``io``: the program's io socket)."""
    if not j.job.get("keep_output"):
        return result
    status = proc.status
    ended_by = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None
    exited = status is not None and os.WIFEXITED(status)
    result["output"] = {
        "stdout": proc.out.kept(),
        "stderr": proc.err.kept(),
        "exit_code": os.WEXITSTATUS(status) if exited and not timed_out else None,
        "signal": ended_by,
        "time_ms": (time.monotonic() - t0) * 1000.0,
        "timed_out": timed_out,
    }
    names = j.job.get("fetch")
    if names and io is not None:
        work = files.take_dir(io)
        got, over = files.fetch(work, list(names)) if work is not None else ({}, [])
        if work is not None:
            os.close(work)
        result["output"]["files"], result["output"]["files_left_out"] = got, over
    return result


def _stdout_words(j: Judge, runner: Any, proc: Process) -> str:
    """A program judged by its exit status that said nothing on stderr: its stdout's last words
    (a test program that prints its failed assertion there: Lua's, Perl's), for the message."""
    if runner or j.job.get("compare") != "exit":
        return ""
    return proc.out.last_words()


def _runtime_error(status: int | None) -> str:
    """What a program's wait ``status`` says went wrong ("" for a clean exit 0)."""
    if status is None or status == 0:
        return ""
    if os.WIFSIGNALED(status):
        import signal  # here, not at the top: the judge's imports stay few (and stdlib's own)

        return f"runtime error: killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"runtime error: exit {os.WEXITSTATUS(status)}"


def _judge_output(j: Judge, i: int, case: dict[str, Any], out: str, check: Any) -> dict[str, Any]:
    """One case's result from the program's stdout: by the verifier's ``check``, the
    environment's checker program, or the comparison the job names."""
    if check is not None:
        verdict = check(case, out)
        ok = bool(verdict >= 1.0) if isinstance(verdict, float) else bool(verdict)
        return _case(i, ok)
    if j.job.get("checker_path"):
        ok, message = run_checker(j, case, out)
        return _case(i, ok, message)
    ok = compare.equal(out, case["expected_stdout"], j.job.get("compare", "tokens"))
    return _case(i, ok, "" if ok else f"stdout {out[:200]!r}")


class CheckerFailed(Exception):
    """The environment's checker program failed (testlib's exit 3, a crash, a timeout): the
    verifier's own failure, so the run has no verdict, whatever the answer printed."""


def run_checker(j: Judge, case: dict[str, Any], out: str) -> tuple[bool, str]:
    """Judge one case's output with the environment's checker (``judge.checker``'s
    convention): (passed, message). ``CheckerFailed`` where the checker failed."""
    import subprocess
    import tempfile

    from . import checker

    boot = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_boot.py")
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name, text in (
            ("input", case.get("stdin", "")),
            ("expected", case.get("expected_stdout", "")),
            ("output", out),
        ):
            path = os.path.join(d, name)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(str(text))
            paths.append(path)
        argv = [sys.executable, "-I", "-S", boot, "checker", j.job["checker_path"], *paths]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=CHECKER_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise CheckerFailed(f"the checker ran past {CHECKER_TIMEOUT_S:g} s") from None
    said = (done.stdout + done.stderr).decode("utf-8", "replace").strip()[:300]
    if done.returncode == checker.ACCEPTED:
        return True, ""
    if done.returncode in (checker.WRONG_ANSWER, checker.PRESENTATION_ERROR):
        what = checker.VERDICTS[done.returncode]
        return False, f"{what}: {said}" if said else what
    raise CheckerFailed(f"the checker failed (exit {done.returncode}): {said or 'no word'}")


CHECKER_TIMEOUT_S = 10.0
"""The time one checker call may take (it is the environment's code, not the answer's)."""


def _setup_failed(proc: Any) -> bool:
    """Ours, not the answer's: the solution host's own set-up failed, or bwrap's did, or a
    program's exec. Once the process said the answer began (``BEGAN``, and no exec failure
    after it), its exit code is the answer's, ``SETUP_FAILED``'s number included."""
    if proc.marks.startswith(BEGAN) and EXEC_FAILED not in proc.marks:
        return False
    status = proc.status or 0
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == SETUP_FAILED:
        return True
    return bool(proc.out.size == 0 and proc.err.head.startswith(b"bwrap: "))


_SOURCES: dict[tuple[str, int, int], bytes] = {}
_CASES: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
_CASES_MAX_BYTES = 16 * 2**20
"""A staged cases file larger than this is parsed for each run, not kept."""
_CASES_ALL_BYTES = 128 * 2**20
"""What the kept cases' files hold at most, together (then all are forgotten)."""
_CODE_CACHE: dict[bytes, Any] = {}
_PROCESS_CACHES: dict[bytes, dict[Any, Any]] = {}
_CACHE_MAX = 4096


def _load_verifier(j: Judge) -> Any:
    """A fresh module for the verifier file, every run; its compiled code is cached by content
    (a pool worker judges many runs, and many environments share one verifier file, such as
    every HumanEval problem: compiling is the expensive part).

    The module finds ``process_cache`` among its globals: a dict that outlives the run in a pool
    worker (one per verifier source), for work that depends only on the verifier's trusted
    data, such as compiling a problem's tests. Nothing of the answer belongs in it."""
    path = j.job["verifier_path"]
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    source = _SOURCES.get(key)
    if source is None:
        with open(path, "rb") as f:
            source = f.read()
        if len(_SOURCES) >= _CACHE_MAX:
            _SOURCES.clear()
        _SOURCES[key] = source
    code = _CODE_CACHE.get(source)
    if code is None:
        if len(_CODE_CACHE) >= _CACHE_MAX:
            _CODE_CACHE.clear()
            _PROCESS_CACHES.clear()
        code = _CODE_CACHE[source] = compile(source, path, "exec")
    module = type(sys)("verifier")
    module.__file__ = path
    module.process_cache = _PROCESS_CACHES.setdefault(source, {})  # type: ignore[attr-defined]
    sys.modules["verifier"] = module
    exec(code, module.__dict__)
    return module


def run_custom(j: Judge) -> dict[str, Any]:
    """Drive the environment's own ``verify`` and turn its value into a report."""
    module = _load_verifier(j)
    if j.job.get("kind") == "script":
        return run_script(j, getattr(module, "check", None))
    verify = getattr(module, "verify", None)
    if verify is None:
        return {"status": "verifier_error", "message": "the verifier defines no verify()"}
    return report_from_value(verify(SolutionProxy(j.session), j.cases()))


def _repo_files(root: str) -> dict[str, str]:
    """A patch task's repository (trusted files) as ``{relative path: text}``."""
    out: dict[str, str] = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".pyc"):
                continue
            full = os.path.join(folder, name)
            with open(full, encoding="utf-8", newline="") as f:
                out[os.path.relpath(full, root).replace(os.sep, "/")] = f.read()
    return out


def run_patch(j: Judge) -> dict[str, Any]:
    """Apply the answer's diff here, in the verifier, then check the patched code from here.

    Everything the verifier needs (the repository, the test data, a custom verifier) is read
    before the answer is opened, so a failure to read it is never blamed on the answer. The
    patched files travel to the solution process (``write_files``), which imports nothing of
    its own; each check is then a call into it, compared here. Tests shipped inside the
    repository do not score: code the patch changed runs in the solution process and could
    rewrite any test runner that shares its interpreter.
    """
    from . import patch

    verify = None
    if j.job.get("verifier_path"):
        verify = getattr(_load_verifier(j), "verify", None)
        if verify is None:
            return {"status": "verifier_error", "message": "the verifier defines no verify()"}
    repo = _repo_files(j.job["repo_path"])
    cases = j.cases()
    with open(j.job["answer_path"], encoding="utf-8", errors="replace", newline="") as f:
        answer = f.read()  # the answer is in play from here
    try:
        files = patch.patch_repo(answer, repo)
    except patch.PatchError as exc:
        return {"status": exc.status, "message": str(exc)}
    j.session.mode = "repo"
    j.session.prelude = {"op": "write_files", "files": files}
    if verify is None:
        return run_declarative(j, cases)
    return report_from_value(verify(SolutionProxy(j.session), cases))


def _timeout_report(j: Judge, exc: SolutionTimeout) -> dict[str, Any]:
    """The report of a run a time limit ended: the answer's 0 where it used its own time,
    unless the limit was the run's and the run's limit is only a backstop (``timeout_kind``):
    then a limit of the runner's cut the run short, and the run has no verdict."""
    if exc.whole_run and j.job.get("timeout_kind") == "backstop":
        message = (
            f"the run's backstop of {float(j.job['timeout']):g} s ran out before its cases "
            "had run within their own limits (a limit of the runner's, not the task's)"
        )
        return {"status": "timeout", "message": message}
    status = "solution_timeout" if exc.blame_solution else "timeout"
    return {"status": status, "message": str(exc)}


def drive(j: Judge) -> dict[str, Any]:
    """The report of one job: the driver its kind names."""
    if j.job.get("kind") == "patch":
        return run_patch(j)
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
    ctl = _socket.socket(fileno=int(job["ctl_fd"]))  # the host starts each solution process
    return judge(job, result_fd, served_by(ctl))


def judge(
    job: dict[str, Any],
    result_fd: int,
    launcher: Any = None,
    done: bool = False,
    marks_fd: int = -1,
) -> int:
    """Run one job and send its report; return the verifier's exit code.

    ``launcher`` builds the solution launcher (a ``launch.Launcher`` subclass); the strict sandbox
    execs a nested sandbox, the pool asks its clean worker to fork one. ``done``: follow the
    report with a ``done`` event carrying the exit code, in the same write (a pool worker's end
    of job). ``marks_fd``: where the ``in_play`` event goes instead (a pool worker's host reads
    it once the run has ended, or the worker died).
    """
    j = Judge(job, result_fd, launcher, marks_fd)
    code = 0
    try:
        report = drive(j)
    except SolutionTimeout as exc:
        report = _timeout_report(j, exc)
    except LaunchError as exc:  # ours: no verdict, whatever the verifier had done
        report = {"status": "sandbox_error", "message": str(exc)}
    except AheadError as exc:  # calls sent ahead, misused: the verifier's fault, never the answer's
        code = VERIFIER_BROKEN
        report = {"status": "verifier_error", "message": f"AheadError: {exc}"}
    except CheckerFailed as exc:  # the environment's checker: ours, in play or not
        code = VERIFIER_BROKEN
        report = {"status": "verifier_error", "message": str(exc)}
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        report = {"status": "verifier_error", "message": f"the verifier exited {exc.code}"}
    except BaseException as exc:
        import traceback

        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        report = {"status": "verifier_error", "message": ends(tb, 3000)}
    finally:
        j.session.close()
    if j.launcher.starved is not None:  # whatever the verifier made of it: no verdict
        report = {"status": "timeout", "message": f"the answer {j.launcher.starved}"}
    elif j.session.timed_out and report.get("status") in ("verifier_error", "invalid_score"):
        report = {"status": "solution_timeout", "message": "a call into the answer timed out"}
    proc = j.session.proc
    shown = proc or j.shown  # a function task's serving process, or a script's program
    cpu_ms = j.launcher.run_used_ms or None  # over every call and program run, where any ran
    if proc is not None and proc.rusage_cpu_ms is not None:
        cpu_ms = max(cpu_ms or 0.0, proc.rusage_cpu_ms)
    report["solution"] = {
        "cpu_ms": cpu_ms,
        "limit": proc.limit if proc else None,
        "stdout": shown.out.kept() if shown else "",
        "stderr": shown.err.kept() if shown else "",
    }
    report["elapsed_ms"] = (time.monotonic() - j.t0) * 1000.0
    j.send({"event": "report", **report}, {"event": "done", "exit_code": code} if done else None)
    global _CURRENT
    _CURRENT = None
    return code
