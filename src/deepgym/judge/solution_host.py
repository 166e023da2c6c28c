"""The solution process: holds the answer and serves plain-data calls from the verifier.

Started by the verifier at its first use of the answer (the in-play instant), inside its own
namespaces. It sets its own hard limits before the answer's first line runs, then either imports
the answer and serves calls on fds 3 (requests) and 4 (replies) (``module`` mode) or runs it as
``__main__`` with the test's stdin (``script`` mode). The answer cannot raise a hard limit back.
"""

from __future__ import annotations

import os
import resource
import sys

from . import wire

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

REQ_FD = 3
REP_FD = 4


def apply_limits(limits: dict[str, int]) -> None:
    """Hard and soft rlimits for this process and everything it starts."""
    table = {
        "as_bytes": resource.RLIMIT_AS,
        "cpu_s": resource.RLIMIT_CPU,
        "fsize_bytes": resource.RLIMIT_FSIZE,
        "nofile": resource.RLIMIT_NOFILE,
        "nproc": resource.RLIMIT_NPROC,
        "core": resource.RLIMIT_CORE,
    }
    for key, which in table.items():
        if key in limits:
            value = int(limits[key])
            resource.setrlimit(which, (value, value))


class _Refs:
    """Objects the verifier holds by id (class instances, generators, functions)."""

    def __init__(self) -> None:
        self.table: dict[int, Any] = {}

    def put(self, obj: Any) -> int:
        key = len(self.table) + 1
        self.table[key] = obj
        return key

    def get(self, key: int) -> Any:
        try:
            return self.table[key]
        except KeyError:
            raise LookupError(f"no remote object {key}") from None


def _error(exc: BaseException) -> dict[str, Any]:
    import traceback

    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:2000],
        "traceback": "".join(tb)[-4000:],
    }


def _serve_one(module: Any, refs: _Refs, req: dict[str, Any]) -> Any:
    op = req.get("op")
    if op == "call":
        fn = getattr(module, str(req["name"]))
        return fn(*req.get("args", ()), **req.get("kwargs", {}))
    if op == "getattr":
        return getattr(module, str(req["name"]))
    if op == "method":
        target = getattr(refs.get(req["ref"]), str(req["name"]))
        return target(*req.get("args", ()), **req.get("kwargs", {}))
    if op == "call_ref":
        return refs.get(req["ref"])(*req.get("args", ()), **req.get("kwargs", {}))
    if op == "attr_ref":
        return getattr(refs.get(req["ref"]), str(req["name"]))
    if op == "iter":
        return iter(refs.get(req["ref"]))
    if op == "next":
        return next(refs.get(req["ref"]))
    raise ValueError(f"unknown op {op!r}")


def _load_answer(path: str) -> Any:
    """Import the answer as module ``solution`` (without ``importlib``'s start-up cost)."""
    with open(path, "rb") as f:
        source = f.read()
    module = type(sys)("solution")
    module.__file__ = path
    sys.modules["solution"] = module
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def _serve(path: str) -> int:
    reqs = os.fdopen(REQ_FD, "rb", buffering=65536)
    reps = os.fdopen(REP_FD, "wb", buffering=0)
    refs = _Refs()
    module: Any = None
    load_error: dict[str, Any] | None = None
    try:
        module = _load_answer(path)
    except BaseException as exc:  # the answer's own failure, reported on every call
        load_error = _error(exc)
    for line in reqs:
        if load_error is not None:
            reply: dict[str, Any] = {"err": load_error}
        else:
            try:
                req = wire.decode(line)
                reply = {"ok": _serve_one(module, refs, req)}
            except StopIteration:
                reply = {"stop": True}
            except BaseException as exc:  # SystemExit and KeyboardInterrupt in the answer too
                reply = {"err": _error(exc)}
        try:
            data = wire.encode(reply, refs.put)
        except (wire.WireError, RecursionError, TypeError, ValueError) as exc:
            data = wire.encode({"err": _error(exc)})
        reps.write(data)
    return 0


def main(argv: list[str]) -> int:
    """``solution module|script PATH LIMITS_JSON [ARGS...]``."""
    mode, path, limits_json, *args = argv
    apply_limits(wire.loads(limits_json))
    os.chdir(os.path.dirname(path) or "/")
    if mode == "module":
        return _serve(path)
    sys.argv = [path, *args]
    import runpy

    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        try:
            sys.stdout.flush()
        except Exception:  # a closed or full stdout: the answer's own doing
            pass
    return 0
