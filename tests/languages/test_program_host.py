"""Each case of a compiled program's run starts as in a fresh sandbox, whatever the last one did.

The pool runs a program's cases from one sandbox per run (``deepgym.judge.program_host``): its
host, pid 1 of the run's namespace, starts each case's program and, before the next, ends what
the last left running and empties the work dir, ``/tmp`` and ``/dev/shm``. strict starts a
sandbox per case. Both must look the same from inside: no case sees another's files or
processes, and a case that signals every process it can reach ends nothing but its own.
"""

from __future__ import annotations

import os
import secrets
import signal
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from deepgym import DeepGym, Environment
from tests.sandbox.conftest import HostGuard

from .conftest import need

pytestmark = pytest.mark.sandbox

LEAVES = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int exists(const char *path) { struct stat st; return lstat(path, &st) == 0; }

int main(void) {
    const char *left[] = {"/work/left", "/tmp/left", "/dev/shm/left", "/tmp/locked/inside",
                          "/tmp/locked", "/work/link"};
    int clean = 1;
    for (int fd = 3; fd < 256; fd++)  /* nothing of the sandbox's is open to the program */
        if (fcntl(fd, F_GETFD) != -1) { printf("fd %d open\n", fd); clean = 0; }
    for (unsigned i = 0; i < sizeof left / sizeof *left; i++)
        if (exists(left[i])) { printf("found %s\n", left[i]); clean = 0; }
    /* a stray of an earlier case, still running, would write this again */
    unlink("/tmp/alive");
    usleep(200000);
    if (exists("/tmp/alive")) { printf("a stray runs\n"); clean = 0; }
    /* what this case leaves */
    fclose(fopen("/work/left", "w"));
    fclose(fopen("/tmp/left", "w"));
    FILE *shm = fopen("/dev/shm/left", "w");
    if (shm) fclose(shm); else unlink("/dev/shm/left");
    mkdir("/tmp/locked", 0700);
    fclose(fopen("/tmp/locked/inside", "w"));
    chmod("/tmp/locked", 0);
    symlink("/work/solution.py", "/work/link");
    chmod("/work", 0500);
    if (fork() == 0) {  /* the stray: it outlives this case */
        for (int i = 0; i < 3000; i++) { fclose(fopen("/tmp/alive", "w")); usleep(10000); }
        _exit(0);
    }
    puts(clean ? "clean" : "dirty");
    return 0;
}
"""


def cases(n: int, expected: str = "clean\n") -> list[dict[str, str]]:
    return [{"stdin": "", "expected_stdout": expected} for _ in range(n)]


def test_no_case_sees_what_an_earlier_one_left(dg: DeepGym, host: HostGuard) -> None:
    need("c")
    env = Environment(name="leaves", kind="script", language="c", test_cases=cases(3))
    r = dg.run(env, LEAVES)
    assert r.has_verdict and r.passed, [c.message for c in r.cases]


SIGNALS_ALL = r"""
#include <signal.h>
#include <stdio.h>

int main(void) {
    int n = 0;
    if (scanf("%d", &n) != 1) return 2;
    if (n == 1) {  /* its host is pid 1: kill(-1) passes it over, and it drops the rest */
        kill(1, SIGSTOP);
        kill(1, SIGKILL);
        kill(-1, SIGSTOP);
        kill(-1, SIGKILL);
    }
    printf("%d\n", n * 2);
    return 0;
}
"""


def test_a_case_that_signals_every_process_ends_none_but_its_own(
    dg: DeepGym, host: HostGuard
) -> None:
    need("c")
    env = Environment(
        name="signals-all",
        kind="script",
        language="c",
        test_cases=[{"stdin": f"{n}\n", "expected_stdout": f"{2 * n}\n"} for n in (1, 2, 3)],
    )
    r = dg.run(env, SIGNALS_ALL)
    assert r.has_verdict and r.passed, [c.message for c in r.cases]


DEEP = r"""
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void) {
    struct stat st;
    int clean = lstat("/tmp/d", &st) != 0;
    if (chdir("/tmp") != 0) return 2;
    for (int i = 0; i < 200; i++) {  /* deeper than a host clears */
        if (mkdir("d", 0700) != 0 || chdir("d") != 0) return 3;
    }
    puts(clean ? "clean" : "dirty");
    return 0;
}
"""


def test_folders_too_deep_to_clear_cost_the_next_case_a_new_sandbox(
    dg: DeepGym, host: HostGuard
) -> None:
    need("c")
    env = Environment(name="deep", kind="script", language="c", test_cases=cases(2))
    r = dg.run(env, textwrap.dedent(DEEP))
    assert r.has_verdict and r.passed, [c.message for c in r.cases]


NAMED = r"""
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(void) {
    char name[16] = {0};
    int n = 0;
    if (scanf("%15s %d", name, &n) != 2) return 2;
    if (n == 1) {
        prctl(PR_SET_NAME, name);
        sleep(20);  /* until its host is killed */
    }
    printf("%d\n", n);
    return 0;
}
"""


def _kill_parent_of(comm: str, deadline: float) -> bool:
    """Kill (SIGKILL) the parent of the process named ``comm``, as the kernel's OOM killer
    would end a program host; whether it was found before ``deadline``."""
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if (entry / "comm").read_text().strip() != comm:
                    continue
                status = (entry / "status").read_text()
            except OSError:
                continue
            ppid = int(status.split("PPid:")[1].split()[0])
            os.kill(ppid, signal.SIGKILL)
            return True
        time.sleep(0.05)
    return False


def test_a_host_the_kernel_kills_mid_case_fails_that_case_only(
    dg: DeepGym, sandbox: str, host: HostGuard
) -> None:
    """Only the kernel can end a program host unasked (pid 1 of its namespace drops what the
    answer sends it): the memory group's OOM kill, for the run's processes, which are the
    answer's. The case it took with it fails, killed; the next runs on a new host."""
    if sandbox != "pool":
        pytest.skip("a program host is the pool's (strict starts a sandbox per case)")
    need("c")
    token = f"dg{secrets.token_hex(5)}"
    env = Environment(
        name="host-killed",
        kind="script",
        language="c",
        test_cases=[{"stdin": f"{token} {n}\n", "expected_stdout": f"{n}\n"} for n in (1, 2)],
        case_timeout=30.0,
        timeout=60.0,
    )
    with ThreadPoolExecutor(1) as pool:
        found = pool.submit(_kill_parent_of, token, time.monotonic() + 20)
        r = dg.run(env, NAMED)
        assert found.result()
    assert r.has_verdict, r
    first, second = r.cases
    assert not first.passed and "SIGKILL" in first.message, first
    assert second.passed, second
