"""Processes as ``/proc`` lists them, for tests that check what a sandbox leaves behind."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
from collections.abc import Iterator

from deepgym.judge.solution_host import RT_SIGACTION


def comm(pid: int) -> str:
    """Process ``pid``'s name, or "" once it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def parent(pid: int) -> int | None:
    """The parent of ``pid``; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return int(raw[raw.rfind(b")") + 2 :].split()[1])


def children() -> dict[int, list[int]]:
    """Each parent pid with the pids of its children."""
    out: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (ppid := parent(int(name))) is not None:
            out.setdefault(ppid, []).append(int(name))
    return out


def descendants(pid: int) -> set[int]:
    """Every process below ``pid``."""
    tree = children()
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


@contextlib.contextmanager
def host_ignores() -> Iterator[None]:
    """This process ignores what a host process may have inherited as ignored: SIGHUP
    (``nohup``), SIGINT and SIGQUIT (a shell's background job), and glibc's own signal 32 (seen
    ignored in a full test run), for the sandboxes started meanwhile; restored after. (32 through
    the kernel's own call: glibc refuses to set it.)"""
    ignored = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)
    before = {sig: signal.signal(sig, signal.SIG_IGN) for sig in ignored}
    number = RT_SIGACTION[os.uname().machine]
    libc = ctypes.CDLL(None, use_errno=True)
    old = (ctypes.c_ulong * 4)()
    ignore = (ctypes.c_ulong * 4)(1)  # SIG_IGN
    assert libc.syscall(number, 32, ctypes.byref(ignore), ctypes.byref(old), 8) == 0
    try:
        yield
    finally:
        libc.syscall(number, 32, ctypes.byref(old), None, 8)
        for sig, handler in before.items():
            signal.signal(sig, handler)


def sigint_as_a_terminal_has_it() -> None:
    """A ``preexec_fn``: in the child, before it runs, SIGINT at its default, as a terminal's
    process has it. A process started in the background (make, CI, a shell's ``&``) inherits
    SIGINT ignored, and a Python child then installs no handler for it and never raises
    ``KeyboardInterrupt``."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop(proc: subprocess.Popen[str]) -> None:
    """End a server the test started (SIGTERM, then SIGKILL after 30 s) and close its pipes."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
