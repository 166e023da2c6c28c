"""The pool's init (``judge.init.Maker``): its machine code run for real, in a child of this
test with user and pid namespaces of its own, and its refusal to copy a signal handler."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from deepgym.judge import init
from tests.procs import sigint_as_a_terminal_has_it

pytestmark = pytest.mark.sandbox

CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    from deepgym.judge import init, isolate
    from tests.procs import children
    isolate.new_user_namespace(os.getuid(), os.getgid(), 65534)
    isolate.unshare(isolate.CLONE_NEWPID)
    if os.fork():  # (pid 1 of a namespace of our user namespace's: setns back is allowed)
        _, status = os.wait()
        sys.exit(os.waitstatus_to_exitcode(status))
    {setup}
    make = init.Maker()
    fd = make(b"test")
    pid = os.fork()
    if pid == 0:  # pid 2: orphan a grandchild, which the init must reap
        if os.fork() == 0:
            os._exit(0)
        os._exit(0)
    make.leave()
    os.waitpid(pid, 0)
    with open(f"/proc/self/fdinfo/{{fd}}") as f:
        ipid = next(line.split()[1] for line in f if line.startswith("Pid:"))
    # (on a loaded host the init may first run after the orphan has ended: it reaps it then)
    deadline = time.monotonic() + 30
    while True:
        with open(f"/proc/{{ipid}}/status") as f:
            status = dict(line.split(":", 1) for line in f)
        kids = children().get(int(ipid), [])
        asleep = status["State"].split()[0] == "S" and not kids
        if asleep or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    print(status["Name"].strip(), status["State"].split()[0], int(status["SigCgt"], 16),
          int(status["SigIgn"], 16) >> (signal.SIGCHLD - 1) & 1, len(kids))
    signal.pidfd_send_signal(fd, signal.SIGKILL)
    make.reap(fd)
    """
)


def _child(setup: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            sys.executable,
            "-c",
            CHILD.format(setup=setup),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=sigint_as_a_terminal_has_it,  # (so Python installs its SIGINT handler)
    )


def test_the_init_waits_handles_nothing_and_reaps_orphans() -> None:
    done = _child("signal.signal(signal.SIGINT, signal.SIG_IGN)")
    assert done.returncode == 0, done.stderr
    # named dg-init, sleeping, no handler, SIGCHLD ignored, no zombie of the orphan left
    assert done.stdout.split() == [init.NAME, "S", "0", "1", "0"], done


def test_no_init_is_made_where_a_signal_has_a_handler() -> None:
    done = _child("")  # Python's own SIGINT handler
    assert done.returncode != 0
    assert "no init may be made here" in done.stderr, done.stderr
    assert os.uname().machine in init.INIT_CODE


ENTER = textwrap.dedent(
    """
    import os, signal, sys
    from deepgym.judge import init, isolate
    isolate.new_user_namespace(os.getuid(), os.getgid(), 65534)
    isolate.unshare(isolate.CLONE_NEWPID)
    if os.fork():
        _, status = os.wait()
        sys.exit(os.waitstatus_to_exitcode(status))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    make = init.Maker()
    fd = make(b"test")
    pids = []
    for enter in (False, True, True):
        if enter:
            make.enter(fd)
        pid = os.fork()
        if pid == 0:
            os._exit(os.getpid())  # its pid in the init's namespace
        make.leave()
        pids.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    outside = os.fork()  # after leave: born in this process's own namespace again
    if outside == 0:
        os._exit(os.getpid() % 256)
    inside_own = os.waitstatus_to_exitcode(os.waitpid(outside, 0)[1]) == outside % 256
    namespace = make.namespaces[fd]
    signal.pidfd_send_signal(fd, signal.SIGKILL)
    make.reap(fd)
    try:
        os.fstat(namespace)
        closed = False
    except OSError:
        closed = True
    print(*pids, inside_own, closed, make.namespaces == {} and make.pids == {})
    """
)


def test_a_live_init_takes_further_children_into_its_namespace() -> None:
    """``enter``: a pool's zygote puts the next solution process under the init of a namespace
    that holds nothing else; the children go on from pid 3. ``reap`` closes the namespace."""
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", ENTER],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "3", "4", "True", "True", "True"], done
