"""The answer is an ordinary process: pid 2 or higher under an init of ours, signals as on any host.

As pid 1 of its namespace an answer ignored every signal it sent itself without a handler:
C++'s ``raise(SIGTERM)`` returned and the program exited 0, Python printed on after
``os.kill(os.getpid(), SIGTERM)``, and ``abort()`` ended by SIGSEGV. Here each case runs on both
sandboxes and is read as ``POST /run_code`` reports it (SandboxFusion's ``return_code`` is minus
the signal), while the init above the answer stays out of its reach: it cannot be traced, and it
reaps what the answer leaves to it. After each test the host guard checks that nothing is left.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from deepgym import DeepGym, Environment, RunResult
from deepgym.languages import LANGUAGES
from deepgym.server.fusion import RunCodeRequest, run_code_env, run_code_reply
from deepgym.server.inputs import Limits
from tests.procs import host_ignores
from tests.sandbox.conftest import HostGuard

from .conftest import need

pytestmark = pytest.mark.sandbox

SIGABRT = 6
SIGPIPE = 13
SIGTERM = 15


def run_code(dg: DeepGym, language: str, code: str, **fields: Any) -> tuple[RunResult, Any]:
    """``code`` run as ``POST /run_code`` runs it: the result, and the reply's body."""
    code = textwrap.dedent(code)
    env = run_code_env(RunCodeRequest(code=code, language=language, **fields), Limits())
    r = dg.run(env, code)
    status, body = run_code_reply(r, language)
    assert status == 200, body
    return r, body


def killed_by(r: RunResult, body: dict[str, Any], signal: int) -> None:
    """The program ran and ended by ``signal``: so its case says, and so SandboxFusion's reply
    (``Failed``, ``return_code`` minus the signal)."""
    assert r.has_verdict and r.error_type is None, r
    output = r.cases[0].output
    assert output is not None and output.signal == signal and output.exit_code is None, output
    reply = body["run_result"]
    assert reply["status"] == "Finished" and reply["return_code"] == -signal, body
    assert body["status"] == "Failed", body


# -- the three reproductions ---------------------------------------------------------------

CPP_RAISE = """
    #include <csignal>
    #include <cstdio>
    int main() {
        std::raise(SIGTERM);
        std::puts("survived");
        return 0;
    }
    """


def test_cpp_raise_sigterm_ends_the_program_by_sigterm(dg: DeepGym, host: HostGuard) -> None:
    need("cpp")
    r, body = run_code(dg, "cpp", CPP_RAISE)
    killed_by(r, body, SIGTERM)
    assert body["run_result"]["stdout"] == "", body
    # a program's case fails by its signal, whatever it printed (a runtime error)
    assert r.score == 0.0 and "runtime error: killed by SIGTERM" in r.cases[0].message, r


PY_KILL = """
    import os, signal
    os.kill(os.getpid(), signal.SIGTERM)
    print("survived")
    """


def test_python_sigterm_to_itself_ends_it(dg: DeepGym, host: HostGuard) -> None:
    r, body = run_code(dg, "python", PY_KILL)
    killed_by(r, body, SIGTERM)
    assert "survived" not in body["run_result"]["stdout"], body


CPP_ABORT = """
    #include <cstdio>
    #include <cstdlib>
    int main() {
        std::puts("before");
        std::fflush(stdout);
        std::abort();
    }
    """


def test_abort_ends_by_sigabrt(dg: DeepGym, host: HostGuard) -> None:
    need("cpp")
    r, body = run_code(dg, "cpp", CPP_ABORT)
    killed_by(r, body, SIGABRT)
    assert body["run_result"]["stdout"] == "before\n", body
    assert r.score == 0.0 and "runtime error: killed by SIGABRT" in r.cases[0].message, r


# -- every language: not pid 1, and its own SIGTERM ends it ----------------------------------------

SELF_SIGTERM = {  # each prints its pid, sends itself SIGTERM, and prints "survived" if it lives
    "c": """
        #include <signal.h>
        #include <stdio.h>
        #include <unistd.h>
        int main(void) {
            printf("%d\\n", (int)getpid());
            fflush(stdout);
            raise(SIGTERM);
            puts("survived");
            return 0;
        }
        """,
    "cpp": """
        #include <csignal>
        #include <cstdio>
        #include <unistd.h>
        int main() {
            std::printf("%d\\n", (int)getpid());
            std::fflush(stdout);
            std::raise(SIGTERM);
            std::puts("survived");
        }
        """,
    "rust": """
        use std::io::Write;
        extern "C" {
            fn raise(sig: i32) -> i32;
        }
        fn main() {
            println!("{}", std::process::id());
            std::io::stdout().flush().unwrap();
            unsafe { raise(15); }
            println!("survived");
        }
        """,
    "go": """
        package main

        import (
            "fmt"
            "os"
            "syscall"
            "time"
        )

        func main() {
            fmt.Println(os.Getpid())
            syscall.Kill(os.Getpid(), syscall.SIGTERM)
            time.Sleep(time.Second)
            fmt.Println("survived")
        }
        """,
    "js": """
        console.log(process.pid);
        process.kill(process.pid, "SIGTERM");
        setTimeout(() => console.log("survived"), 1000);
        """,
    "python": """
        import os, signal
        print(os.getpid(), flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        print("survived")
        """,
    "bash": """
        echo $$
        kill -TERM $$
        echo survived
        """,
    "perl": """
        $| = 1;
        print "$$\n";
        kill 'TERM', $$;
        print "survived\n";
        """,
    "ruby": """
        puts Process.pid
        $stdout.flush
        Process.kill("TERM", Process.pid)
        sleep 1
        puts "survived"
        """,
    "ts": """
        console.log(process.pid);
        process.kill(process.pid, "SIGTERM");
        setTimeout(() => console.log("survived"), 1000);
        """,
    "php": """<?php
        echo posix_getpid(), "\n";
        posix_kill(posix_getpid(), 15);
        sleep(1);
        echo "survived\n";
        """,
    "r": """
        cat(Sys.getpid(), "\n")
        tools::pskill(Sys.getpid(), tools::SIGTERM)
        Sys.sleep(1)
        cat("survived\n")
        """,
    "d": """
        import core.stdc.stdio : fflush, printf, puts, stdout;
        import core.sys.posix.signal : SIGTERM, kill;
        import core.sys.posix.unistd : getpid;
        void main() {
            printf("%d\\n", cast(int) getpid());
            fflush(stdout);
            kill(getpid(), SIGTERM);
            puts("survived");
        }
        """,
    "csharp": """
        using System;
        using System.Runtime.InteropServices;
        public class Program {
            [DllImport("libc")] static extern int getpid();
            [DllImport("libc")] static extern int kill(int pid, int sig);
            public static void Main() {
                Console.WriteLine(getpid());
                Console.Out.Flush();
                kill(getpid(), 15);
                System.Threading.Thread.Sleep(1000);
                Console.WriteLine("survived");
            }
        }
        """,
    # Racket turns SIGTERM into a break on any host: "user break" on stderr, then exit 1.
    "racket": """
        #lang racket/base
        (require racket/os ffi/unsafe)
        (displayln (getpid))
        (flush-output)
        (void ((get-ffi-obj "kill" #f (_fun _int _int -> _int)) (getpid) 15))
        (sleep 1)
        (displayln "survived")
        """,
    # The JVM handles SIGTERM itself on any host (its shutdown hooks, then exit 143): only its
    # pid is checked. ``ProcessHandle.current()``, a static method of an interface, also checks
    # that Scala and Kotlin compile for a JVM newer than their 1.6 default.
    "java": """
        public class Main {
            public static void main(String[] args) {
                System.out.println(ProcessHandle.current().pid());
            }
        }
        """,
    "scala": """
        object Main {
          def main(args: Array[String]): Unit = println(ProcessHandle.current().pid())
        }
        """,
    "kotlin": """
        fun main() { println(ProcessHandle.current().pid()) }
        """,
}
JVM = {"java", "scala", "kotlin"}

NOT_YET = {
    "lua": "Lua's standard library has no getpid",
    "verilog": "a simulation has no pid of its own to signal",
    "sql": "SQLite's shell sends no signal",
    "pytest": "a test runner: python's case",
    "junit": "a test runner: java's case",
    "go_test": "a test runner: go's case",
}

"""Languages without a signal case here, each with its reason (the process model is the same
code for every language: ``judge.init``)."""


def test_every_language_is_covered() -> None:
    """Every runnable language has a case, or is named in ``NOT_YET`` with a reason."""
    runnable = {name for name, lang in LANGUAGES.items() if not lang.unavailable}
    assert set(SELF_SIGTERM) | set(NOT_YET) == {*runnable, "python"}
    assert not set(SELF_SIGTERM) & set(NOT_YET)


@pytest.mark.parametrize("language", sorted(SELF_SIGTERM))
def test_the_answer_is_not_pid_1_and_its_own_sigterm_ends_it(
    dg: DeepGym, host: HostGuard, language: str
) -> None:
    if language != "python":
        need(language)
    r, body = run_code(dg, language, SELF_SIGTERM[language], run_timeout=10)
    stdout = body["run_result"]["stdout"]
    pid = stdout.split()[0] if stdout.split() else ""
    assert pid.isdigit() and int(pid) >= 2, body
    if language in JVM:
        assert body["run_result"]["return_code"] == 0, body
    elif language == "racket":
        assert body["run_result"]["return_code"] == 1, body
        assert "user break" in body["run_result"]["stderr"], body
        assert "survived" not in stdout, body
    else:
        killed_by(r, body, SIGTERM)
        assert "survived" not in stdout, body


# -- a program starts with the signal dispositions a shell gives it --------------------------------

C_DISPOSITIONS = """
    #include <signal.h>
    #include <stdio.h>
    int main(void) {
        struct sigaction action;
        for (int sig = 1; sig < 32; sig++)
            if (sigaction(sig, 0, &action) == 0 && action.sa_handler == SIG_IGN)
                printf("ignored %d\\n", sig);
        sigset_t mask;
        sigprocmask(SIG_BLOCK, 0, &mask);
        for (int sig = 1; sig < 32; sig++)
            if (sigismember(&mask, sig)) printf("blocked %d\\n", sig);
        return 0;
    }
    """
C_SIGPIPE = """
    #include <stdio.h>
    #include <unistd.h>
    int main(void) {
        int ends[2];
        if (pipe(ends) != 0) return 3;
        close(ends[0]);
        write(ends[1], "x", 1);  /* no reader: SIGPIPE */
        puts("survived");
        return 0;
    }
    """


def test_a_program_starts_with_no_signal_ignored_or_blocked(dg: DeepGym, host: HostGuard) -> None:
    """The interpreter that starts it ignores SIGPIPE and SIGXFSZ; the program does not."""
    need("c")
    _, body = run_code(dg, "c", C_DISPOSITIONS)
    assert body["run_result"]["return_code"] == 0, body
    assert body["run_result"]["stdout"] == "", body


C_DISPOSITIONS_ALL = """
    #include <stdio.h>
    #include <string.h>
    int main(void) {  /* every signal, glibc's own 32 and 33 too: none ignored */
        char line[256];
        FILE *f = fopen("/proc/self/status", "r");
        if (!f) return 0;  /* no /proc: the dispositions test above covers 1 - 31 */
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "SigIgn:", 7) && strcmp(line, "SigIgn:\\t0000000000000000\\n"))
                fputs(line, stdout);
        return 0;
    }
    """
PY_DISPOSITIONS = """
    import signal
    print(
        signal.getsignal(signal.SIGHUP) == signal.SIG_DFL,
        signal.getsignal(signal.SIGQUIT) == signal.SIG_DFL,
        signal.getsignal(signal.SIGINT) is signal.default_int_handler,
    )
    """


@pytest.mark.parametrize("sandbox", ["strict", "pool"])
def test_what_the_host_process_ignores_never_reaches_the_answer(sandbox: str) -> None:
    """Started under ``nohup`` (SIGHUP ignored) or as a shell's background job (SIGINT and
    SIGQUIT ignored), deepgym's answers still start as on a plain host: a program with no
    signal ignored, a Python answer with SIGINT raising ``KeyboardInterrupt``. (A client of its
    own: its sandboxes start after the host ignores them.)"""
    need("c")
    with host_ignores(), DeepGym(sandbox=sandbox) as dg:
        _, body = run_code(dg, "c", C_DISPOSITIONS_ALL)
        assert body["run_result"]["return_code"] == 0, body
        assert body["run_result"]["stdout"] == "", body
        env = Environment(
            name="dispositions",
            kind="script",
            test_cases=[{"stdin": "", "expected_stdout": "True True True\n"}],
        )
        r = dg.run(env, textwrap.dedent(PY_DISPOSITIONS))
        assert r.has_verdict and r.score == 1.0, r


def test_a_write_to_a_closed_pipe_ends_a_program_by_sigpipe(dg: DeepGym, host: HostGuard) -> None:
    need("c")
    r, body = run_code(dg, "c", C_SIGPIPE)
    killed_by(r, body, SIGPIPE)
    assert body["run_result"]["stdout"] == "", body


# -- the exit status passes through as it was ------------------------------------------------------

C_EXIT = """
    #include <stdio.h>
    int main(void) {
        puts("x");
        return @CODE@;
    }
    """


@pytest.mark.parametrize("code", [3, 143])
def test_an_exit_code_is_passed_on_exactly(dg: DeepGym, host: HostGuard, code: int) -> None:
    """143 is 128 + SIGTERM, how bwrap reports a child's signal: the answer's own exit code
    is still not read as a signal."""
    need("c")
    r, body = run_code(dg, "c", C_EXIT.replace("@CODE@", str(code)))
    output = r.cases[0].output
    assert output is not None and output.exit_code == code and output.signal is None, output
    reply = body["run_result"]
    assert reply["return_code"] == code and reply["stdout"] == "x\n", body
    assert f"runtime error: exit {code}" in r.cases[0].message, r.cases


# -- the init: it reaps, and it cannot be traced ---------------------------------------------------

ORPHANS = """
    #include <stdio.h>
    #include <sys/wait.h>
    #include <unistd.h>
    /* A child that forks a grandchild and exits at once: the grandchild is orphaned, the
       init's to reap. The child's exit code says whether the grandchild was born. */
    static int orphan(void) {
        pid_t child = fork();
        if (child < 0) return 0;
        if (child == 0) {
            pid_t grandchild = fork();
            if (grandchild == 0) _exit(0);
            _exit(grandchild > 0 ? 0 : 1);
        }
        int status = 1;
        waitpid(child, &status, 0);
        return status == 0;
    }
    int main(void) {
        int done = 0;
        for (int i = 0; i < 200; i++) {
            int tries = 0;
            while (!orphan() && ++tries < 100) usleep(10000);
            if (tries == 100) break;
            done++;
        }
        printf("%d\\n", done);
        return 0;
    }
    """


def test_the_init_reaps_what_the_answer_orphans(dg: DeepGym, host: HostGuard) -> None:
    """200 orphans, at most 16 processes: each orphan is reaped at its end, so no fork is
    refused for processes that no longer run (an answer that were pid 1 would keep them all
    as zombies of its own)."""
    need("c")
    env = Environment(
        name="orphans",
        kind="script",
        language="c",
        test_cases=[{"stdin": "", "expected_stdout": "200\n"}],
        timeout=20.0,
        case_timeout=15.0,
        max_processes=16,
    )
    r = dg.run(env, textwrap.dedent(ORPHANS))
    assert r.has_verdict and r.passed and r.score == 1.0, r


PTRACE_INIT = """
    #include <errno.h>
    #include <signal.h>
    #include <stdio.h>
    #include <string.h>
    #include <sys/ptrace.h>
    #include <sys/wait.h>
    #include <unistd.h>
    int main(void) {
        /* pid 1 is there, of our uid (a signal may be sent): only its state keeps us out */
        if (getpid() == 1 || kill(1, 0) != 0) {
            printf("no init: %s\\n", strerror(errno));
            return 0;
        }
        if (ptrace(PTRACE_ATTACH, 1, 0, 0) == 0) {
            int status;
            waitpid(1, &status, __WALL);
            ptrace(PTRACE_DETACH, 1, 0, 0);
            puts("3");
            return 0;
        }
        printf("0 %s\\n", strerror(errno));
        if (ptrace(PTRACE_SEIZE, 1, 0, 0) == 0) puts("3");
        return 0;
    }
    """
PY_PTRACE_INIT = """
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    assert os.getpid() != 1
    os.kill(1, 0)  # pid 1 is there, of our uid
    if libc.ptrace(16, 1, None, None) == 0:  # PTRACE_ATTACH
        print(3)
    else:
        print(0, os.strerror(ctypes.get_errno()))
    """


def test_the_init_cannot_be_traced(dg: DeepGym, host: HostGuard) -> None:
    """PTRACE_ATTACH and PTRACE_SEIZE on the init, from a program and from a Python answer (the
    pool's forked path): refused, the init being non-dumpable."""
    need("c")
    for language, code in (("c", PTRACE_INIT), ("python", PY_PTRACE_INIT)):
        _, body = run_code(dg, language, code)
        reply = body["run_result"]
        assert reply["return_code"] == 0, body
        assert reply["stdout"] == "0 Operation not permitted\n", body


PY_SIGNAL_INIT = """
    import os, time
    assert os.getpid() != 1
    for sig in range(1, 65):
        try:
            os.kill(1, sig)
        except OSError as exc:
            print("refused", sig, exc)
    time.sleep(0.2)  # a signal the init acted on would have ended it, and this process with it
    os.kill(1, 0)
    print("init alive")
    """


def test_no_signal_reaches_the_init(dg: DeepGym, host: HostGuard) -> None:
    """The answer sends its init every signal, SIGINT (the one Python installs a handler for)
    and SIGKILL among them: each is dropped (the init has no handler to run), the init lives on,
    and the next run is judged as usual (the pool's init shares its zygote's memory: a handler
    run there would have reached the zygote)."""
    r, body = run_code(dg, "python", PY_SIGNAL_INIT)
    assert body["run_result"]["return_code"] == 0, body
    assert body["run_result"]["stdout"] == "init alive\n", body
    r, body = run_code(dg, "python", "print(6 * 7)")
    assert r.has_verdict and body["run_result"]["stdout"] == "42\n", body
