"""Hostile answers in compiled languages against the real sandboxes: each attack must fail, be
judged, and leave no trace.

Threat model (DESIGN.md): the answer is adversarial code, now a native program (or a JVM, or
Node) run by ``exec`` with no interpreter of ours around it, and a compiler run over its source.
It must not forge its verdict, reach the network, the host's files or processes, outlive its run,
or exhaust the host. Where it can, each answer prints the right output only if its attack
succeeded: a breach then shows as a pass, and the test asserts a judged 0. After each test the
host guard (``tests/sandbox/conftest.py``) checks that no process, run cgroup or memory is left.
"""

from __future__ import annotations

import socket
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deepgym import DeepGym, Environment, RunResult
from deepgym.judge.blame import BACKSTOP
from deepgym.sandbox.spec import START_GRACE_S
from tests.sandbox.conftest import HostGuard

from .conftest import judged, need

pytestmark = pytest.mark.sandbox

LIMITS: dict[str, Any] = {
    "timeout": 3.0,
    "case_timeout": 2.0,
    "memory_mb": 256,
    "max_processes": 16,
    "max_file_mb": 16,
}
CASES = [{"stdin": "1 2\n", "expected_stdout": "3\n"}]
"""One case: an answer that prints 3 passes. The attacks print 3 only where they succeeded."""


def env_for(lang: str, name: str, **limits: Any) -> Environment:
    return Environment(
        name=f"attack-{lang}-{name}",
        kind="script",
        language=lang,
        test_cases=CASES,
        compare="tokens",
        **{**LIMITS, **limits},
    )


def c_source(text: str, **values: Any) -> str:
    """A C answer: ``text`` dedented, each ``@NAME@`` replaced by ``values[NAME]``."""
    text = textwrap.dedent(text)
    for key, value in values.items():
        text = text.replace(f"@{key}@", str(value))
    assert "@" not in text, text
    return text


def ran_and_lost(r: RunResult) -> None:
    """A judged 0 from the program's own output: it ran to its end, and printed no 3."""
    judged(r, 0.0)
    assert r.error_type is None, r
    assert r.cases[0].message.startswith("stdout "), r.cases


# -- processes ---------------------------------------------------------------------------------

FORK_COUNT = """
    #include <stdio.h>
    #include <unistd.h>
    int main(void) {
        int kids = 0;
        for (int i = 0; i < 2000; i++) {
            pid_t p = fork();
            if (p == 0) {
                close(0); close(1); close(2);
                for (;;) pause();
            }
            if (p > 0) kids++;
        }
        fprintf(stderr, "kids=%d\\n", kids);
        puts(kids >= @MAX@ ? "3" : "0");
        return 0;
    }
    """
FORK_BOMB = """
    #include <unistd.h>
    int main(void) { for (;;) fork(); }
    """


def test_fork_count_is_held_to_max_processes(dg: DeepGym, host: HostGuard) -> None:
    """Forks until refused, each child waiting for ever: at most ``max_processes`` in all."""
    need("c")
    env = env_for("c", "fork-count")
    r = dg.run(env, c_source(FORK_COUNT, MAX=env.max_processes))
    ran_and_lost(r)
    if r.evidence.limit_mechanism.get("processes", "").startswith("cgroup"):
        assert r.evidence.limit_fired == "processes", r.evidence


def test_fork_bomb_is_judged_and_leaves_nothing(dg: DeepGym, host: HostGuard) -> None:
    """Judged 0 on its CPU time; one the loaded host held back past its backstop (its
    processes share one session's CPU) has no verdict, never a pass. Nothing is left."""
    need("c")
    env = env_for("c", "fork-bomb", timeout=3.0, case_timeout=1.0)
    t0 = time.monotonic()
    r = dg.run(env, c_source(FORK_BOMB))
    # the build's time, then the host's wall limit on the run (the judge's backstop)
    assert time.monotonic() - t0 < BACKSTOP * env.timeout + START_GRACE_S + 5.0
    if r.has_verdict:
        judged(r, 0.0)
        assert not r.cases[0].passed, r.cases
    else:
        assert r.error_type == "timeout" and "held back by the host" in (r.error or ""), r
    host.check()


VFORK_PARKED = """
    #include <unistd.h>
    int main(void) {
        if (vfork() == 0) {  /* the parent waits, uninterruptibly, until the child execs or ends */
            for (;;) pause();
        }
        return 0;
    }
    """


def test_a_process_parked_in_vfork_is_its_own_wait_not_the_hosts(
    dg: DeepGym, host: HostGuard
) -> None:
    """A parent blocked in vfork shows the state D; counted as runnable, a wrong answer would
    wait there past its backstop and pass for one the host held back (no verdict). It is a
    wait of the answer's own: its timeout, a judged 0, at its limit on the clock."""
    need("c")
    env = env_for("c", "vfork-park", timeout=3.0, case_timeout=1.0)
    r = dg.run(env, c_source(VFORK_PARKED))
    judged(r, 0.0)
    assert [(c.passed, c.message) for c in r.cases] == [(False, "timeout")], r
    host.check()


JAVA_THREADS = """
    public class Main {
        public static void main(String[] args) {
            int n = 0;
            try {
                while (n < 100000) {
                    Thread t = new Thread(() -> {
                        try { Thread.sleep(600000); } catch (InterruptedException e) { }
                    });
                    t.setDaemon(true);
                    t.start();
                    n++;
                }
            } catch (Throwable e) {
                System.err.println("stopped at " + n + ": " + e);
            }
            System.out.println(n >= @MAX@ ? "3" : "0");
            System.out.flush();
            Runtime.getRuntime().halt(0);
        }
    }
    """


def test_java_threads_without_end_are_held_to_max_processes(dg: DeepGym, host: HostGuard) -> None:
    """Threads count as processes: a JVM starting them without end gets ``max_processes``
    at most (its own threads included), and is judged."""
    need("java")
    env = env_for("java", "threads", max_processes=64, timeout=8.0, case_timeout=6.0)
    r = dg.run(env, c_source(JAVA_THREADS, MAX=env.max_processes))
    judged(r, 0.0)
    assert r.error_type is None, r
    # The JVM warns on stdout of each thread it could not start: the output alone proves
    # nothing, the evidence does.
    if r.evidence.limit_mechanism.get("processes", "").startswith("cgroup"):
        assert r.evidence.limit_fired == "processes", r.evidence
    host.check()


# -- memory ------------------------------------------------------------------------------------

MMAP = """
    #include <stdio.h>
    #include <string.h>
    #include <sys/mman.h>
    int main(void) {
        long mb = 0;
        for (int i = 0; i < 64; i++) {
            char *p = mmap(0, 64 << 20, PROT_READ | PROT_WRITE, @FLAGS@ | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) break;
            memset(p, 1, 64 << 20);
            mb += 64;
        }
        fprintf(stderr, "mapped %ld MiB\\n", mb);
        puts(mb > 1024 ? "3" : "0");
        return 0;
    }
    """


@pytest.mark.parametrize("flags", ["MAP_PRIVATE", "MAP_SHARED"])
def test_mapping_memory_without_end(dg: DeepGym, host: HostGuard, flags: str) -> None:
    """4 GiB mapped and touched, 64 MiB at a time: the memory limit stops it (the cgroup's,
    where there is one; else mmap fails at the address-space limit)."""
    need("c")
    env = env_for("c", "mmap", timeout=8.0, case_timeout=6.0)
    r = dg.run(env, c_source(MMAP, FLAGS=flags))
    judged(r, 0.0)
    assert r.error_type is None, r
    if r.evidence.limit_mechanism.get("memory", "").startswith("cgroup"):
        assert r.evidence.limit_fired == "memory", r.evidence
        assert (r.evidence.peak_memory_mb or 0.0) <= env.memory_mb + 1, r.evidence
        assert r.error == f"the answer hit its {env.memory_mb} MB memory limit", r
    host.check()


# -- files -------------------------------------------------------------------------------------

FILL = """
    #include <fcntl.h>
    #include <signal.h>
    #include <stdio.h>
    #include <string.h>
    #include <unistd.h>
    static char buf[1 << 20];
    static int over = 0;
    static long fill(const char *dir, int files) {
        long mb = 0;
        char path[4096];
        for (int f = 0; f < files; f++) {
            snprintf(path, sizeof path, "%s/big-%d.bin", dir, f);
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0) break;
            int n = 0;
            for (int i = 0; i < 2048; i++) {
                if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) break;
                n++;
            }
            close(fd);
            fprintf(stderr, "%s: %d MiB\\n", path, n);
            if (n > @MAX_FILE@) over = 1;
            mb += n;
            if (n == 0) break;
        }
        return mb;
    }
    int main(void) {
        signal(SIGXFSZ, SIG_IGN);  /* past RLIMIT_FSIZE: EFBIG, not a kill, so it can count */
        memset(buf, 'x', sizeof buf);
        long work = fill("/work", @FILES@);
        long tmp = fill("/tmp", @FILES@);
        long host = fill("@HOST_DIR@", 1);
        fprintf(stderr, "work %ld, tmp %ld, host %ld MiB\\n", work, tmp, host);
        int breach = over || work > @CAP@ || tmp > @CAP@ || host > 0;
        puts(breach ? "3" : "0");
        return 0;
    }
    """


@pytest.mark.timeout(60)
@pytest.mark.parametrize("files", [1, 64])
def test_huge_files_are_bounded(dg: DeepGym, host: HostGuard, tmp_path: Path, files: int) -> None:
    """One 2 GiB file, or 64 of them, in /work, in /tmp and in a host folder: each file stops at
    ``max_file_mb``, each of the sandbox's folders at its capped tmpfs, the host's takes none."""
    need("c")
    env = env_for("c", "files", timeout=10.0, case_timeout=8.0)
    cap = 2 * env.max_file_mb  # what a capped mount holds, with room for a partial file
    src = c_source(FILL, MAX_FILE=env.max_file_mb, FILES=files, CAP=cap, HOST_DIR=tmp_path)
    r = dg.run(env, src)
    escaped = sorted(tmp_path.iterdir())
    for p in escaped:  # never leave gigabytes behind, even when the test fails
        p.unlink()
    assert not escaped, f"the answer wrote {escaped} on the host"
    judged(r, 0.0)
    if r.error_type is None and r.evidence.limit_fired is None:
        assert r.cases[0].message.startswith("stdout "), r.cases
    host.check()


# -- the network -------------------------------------------------------------------------------

CONNECT = """
    #include <arpa/inet.h>
    #include <netinet/in.h>
    #include <stdio.h>
    #include <string.h>
    #include <sys/socket.h>
    #include <unistd.h>
    int main(void) {
        int reached = 0;
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0) perror("socket");
        a.sin_port = htons(@TCP@);
        if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
            if (write(s, "hello", 5) == 5) reached = 1;
        } else perror("connect");
        if (s >= 0) close(s);
        int u = socket(AF_INET, SOCK_DGRAM, 0);
        a.sin_port = htons(@UDP@);
        for (int i = 0; u >= 0 && i < 5; i++)
            sendto(u, "hello", 5, 0, (struct sockaddr *)&a, sizeof a);
        fprintf(stderr, "reached %d\\n", reached);
        puts(reached ? "3" : "0");
        return 0;
    }
    """


@pytest.fixture
def listeners() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A TCP and a UDP listener on the host's 127.0.0.1, non-blocking."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(16)
        udp.bind(("127.0.0.1", 0))
        tcp.setblocking(False)
        udp.setblocking(False)
        yield tcp, udp
    finally:
        tcp.close()
        udp.close()


def _took_nothing(s: socket.socket) -> bool:
    try:
        if s.type == socket.SOCK_DGRAM:
            s.recvfrom(65536)
        else:
            s.accept()[0].close()
    except BlockingIOError:
        return True
    return False


def test_no_network_to_the_host(
    dg: DeepGym, host: HostGuard, listeners: tuple[socket.socket, socket.socket]
) -> None:
    need("c")
    tcp, udp = listeners
    with socket.create_connection(tcp.getsockname(), timeout=1.0):  # control: it listens
        pass
    time.sleep(0.05)
    assert not _took_nothing(tcp)
    src = c_source(CONNECT, TCP=tcp.getsockname()[1], UDP=udp.getsockname()[1])
    r = dg.run(env_for("c", "network"), src)
    ran_and_lost(r)
    time.sleep(0.1)
    assert _took_nothing(tcp), "the answer reached the host's TCP listener"
    assert _took_nothing(udp), "the answer reached the host's UDP listener"


# -- the host's files and processes ------------------------------------------------------------

SHADOW = """
    #include <errno.h>
    #include <stdio.h>
    #include <string.h>
    int main(void) {
        FILE *f = fopen("/etc/shadow", "r");
        char b[256];
        size_t n = 0;
        int err = errno;
        if (f) { n = fread(b, 1, sizeof b, f); fclose(f); }
        if (n > 0) puts("3");
        else printf("0 %s\\n", f ? "empty" : strerror(err));
        return 0;
    }
    """


def test_etc_shadow_is_not_there(dg: DeepGym, host: HostGuard) -> None:
    need("c")
    r = dg.run(env_for("c", "shadow"), c_source(SHADOW))
    ran_and_lost(r)
    assert "No such file" in r.cases[0].message, r.cases


def _host_shadow() -> bytes | None:
    try:
        return Path("/etc/shadow").read_bytes()
    except OSError:
        return None


INCLUDES = {
    "c": '#include "@PATH@"\nint main(void) { return 0; }\n',
    "rust": 'static S: &[u8] = include_bytes!("@PATH@");\nfn main() { println!("{}", S.len()); }\n',
}


@pytest.mark.parametrize("lang", sorted(INCLUDES))
@pytest.mark.parametrize("path", ["/etc/shadow", "/proc/self/environ", "/proc/1/environ"])
def test_the_compiler_reads_no_host_secret(
    dg: DeepGym, host: HostGuard, module_secret: str, lang: str, path: str
) -> None:
    """The compiler runs over the answer's source with a /proc of its own: a source that
    includes a secret's file gets none of it back in the diagnostics (or in the program)."""
    need(lang)
    r = dg.run(env_for(lang, "include"), c_source(INCLUDES[lang], PATH=path))
    judged(r, 0.0)
    dump = r.model_dump_json()
    assert module_secret not in dump, r
    shadow = _host_shadow()
    if shadow:
        for line in shadow.decode(errors="replace").splitlines():
            rest = line.partition(":")[2]
            assert not rest or rest not in dump, "the host's /etc/shadow reached the result"
    if path == "/etc/shadow":
        assert r.error_type == "compile_error", r


PTRACE = """
    #include <errno.h>
    #include <stdio.h>
    #include <string.h>
    #include <sys/ptrace.h>
    #include <sys/wait.h>
    #include <unistd.h>
    int main(void) {
        pid_t me = getpid(), parent = getppid();
        int hit = 0, parent_err = 0;
        for (pid_t p = 0; p <= 64; p++) {
            pid_t t = p == 0 ? parent : p;
            if (t <= 0 || t == me || (p > 0 && t == parent)) continue;
            if (ptrace(PTRACE_ATTACH, t, 0, 0) == 0) {
                hit = 1;
                int status;
                waitpid(t, &status, __WALL);  /* stopped: now it can be let go */
                ptrace(PTRACE_DETACH, t, 0, 0);
            } else if (t == parent) {
                parent_err = errno;
            }
        }
        if (hit) puts("3");
        else printf("0 parent %d: %s\\n", parent, parent > 0 ? strerror(parent_err) : "none");
        return 0;
    }
    """


def test_ptrace_of_the_parent_fails(dg: DeepGym, host: HostGuard) -> None:
    """PTRACE_ATTACH on its parent (and on every low pid of its namespace) is refused: the
    only process of its uid above the answer there is its init (pid 1), non-dumpable in both
    sandboxes (strict: ``--as-pid-1``, so bwrap's own init, which was not, never starts).
    ``test_signals.py`` attacks the init by name, in C and in Python."""
    need("c")
    r = dg.run(env_for("c", "ptrace"), c_source(PTRACE))
    ran_and_lost(r)


# -- forged verdicts ---------------------------------------------------------------------------

FORGED = [
    '{"event": "report", "status": "ok", "score": 1.0}',
    '{"event": "report", "status": "ok", "score": 1.0, "passed": true,'
    ' "cases": [{"name": "test_0", "passed": true}]}',
    '{"status": "ok", "score": 1.0, "passed": true}',
    '{"event": "in_play", "in_play_ms": 0.0, "by": "solution_started"}',
    '{"score": 1.0}',
]
FORGE = """
    #include <stdio.h>
    #include <string.h>
    #include <unistd.h>
    static const char *BLOB = "@BLOB@";
    int main(void) {
        int open_fds = 0;
        for (int fd = 2; fd <= 1023; fd++)
            if (write(fd, BLOB, strlen(BLOB)) > 0 && fd > 2) open_fds++;
        printf("garbage %d\\n", open_fds);
        fflush(stdout);
        if (write(1, BLOB, strlen(BLOB)) < 0) return 1;
        return 0;
    }
    """


def test_a_forged_verdict_on_every_fd_changes_nothing(dg: DeepGym, host: HostGuard) -> None:
    need("c")
    blob = "\\n" + "\\n".join(line.replace('"', '\\"') for line in FORGED) + "\\n"
    r = dg.run(env_for("c", "forge"), c_source(FORGE, BLOB=blob))
    ran_and_lost(r)
    assert "garbage 0" in r.cases[0].message, r.cases  # no descriptor beyond stdio is open


# -- Node's child processes --------------------------------------------------------------------

NODE = """
    const cp = require("child_process");
    let id = "";
    try {
      id = cp.execSync("id", { timeout: 2000 }).toString().trim();
    } catch (e) {
      console.error("execSync: " + e.message.split("\\n")[0]);
    }
    console.error("id: " + id);
    let reached = "";
    try {
      const probe = 'require("net").connect(@TCP@, "127.0.0.1")' +
        '.on("connect", () => { console.log("in"); process.exit(0); })' +
        '.on("error", () => process.exit(1))';
      reached = cp.execFileSync(process.execPath, ["-e", probe], { timeout: 2000 }).toString();
    } catch (e) {
      console.error("probe: " + e.message.split("\\n")[0]);
    }
    try {
      cp.spawn("sleep", ["60"], { detached: true, stdio: "ignore" }).unref();
    } catch (e) {
      console.error("spawn: " + e.message);
    }
    const escaped = (id !== "" && !/^uid=65534\\b/.test(id)) || reached.includes("in");
    console.log(escaped ? "3" : "0 id=" + JSON.stringify(id));
    """


def test_node_child_processes_do_not_escape(
    dg: DeepGym, host: HostGuard, listeners: tuple[socket.socket, socket.socket]
) -> None:
    """A child of the answer (``execSync('id')``, a second node, a detached ``sleep``) is
    still the answer: uid 65534 if it runs at all, no network, dead with the run, and the score
    is the answer's stdout's."""
    need("js")
    tcp, _ = listeners
    env = env_for("js", "child-process", max_processes=64, timeout=8.0, case_timeout=6.0)
    r = dg.run(env, c_source(NODE, TCP=tcp.getsockname()[1]))
    ran_and_lost(r)
    if "uid=" in r.cases[0].message:  # the child ran: as the answer's uid
        assert "uid=65534" in r.cases[0].message, r.cases
    time.sleep(0.1)
    assert _took_nothing(tcp), "the answer's child reached the host's TCP listener"


# -- the same guarantees, per language ---------------------------------------------------------

PER_LANGUAGE_SHADOW = {
    "cpp": '#include <fstream>\n#include <iostream>\nint main(){std::ifstream f("/etc/shadow");'
    ' std::cout << (f.good() ? "3" : "0") << "\\n";}\n',
    "java": "import java.nio.file.*;\npublic class Main{public static void main(String[] a){"
    'String out="0"; try{ if(Files.readAllBytes(Paths.get("/etc/shadow")).length>0) out="3";}'
    " catch(Exception e){System.err.println(e);} System.out.println(out);}}\n",
    "js": 'let out="0"; try { if (require("fs").readFileSync("/etc/shadow").length) out="3"; }'
    " catch (e) { console.error(String(e)); } console.log(out);\n",
    "rust": 'fn main(){let ok=std::fs::read("/etc/shadow").map(|b| !b.is_empty())'
    '.unwrap_or(false); println!("{}", if ok {3} else {0});}\n',
    "go": 'package main\nimport ("fmt"; "os")\nfunc main(){b,err:=os.ReadFile("/etc/shadow");'
    " if err==nil && len(b)>0 {fmt.Println(3)} else {fmt.Println(0)}}\n",
}


@pytest.mark.parametrize("lang", sorted(PER_LANGUAGE_SHADOW))
def test_etc_shadow_is_not_there_in_any_language(dg: DeepGym, host: HostGuard, lang: str) -> None:
    need(lang)
    env = env_for(lang, "shadow", max_processes=64)
    ran_and_lost(dg.run(env, PER_LANGUAGE_SHADOW[lang]))


PEEK = {
    "bash": "o=0; for f in /etc/shadow /judge/job.json; do cat $f >/dev/null 2>&1 && o=3; done;"
    " echo $o\n",
    "ts": 'const fs = require("fs"); let o: number = 0;'
    ' for (const f of ["/etc/shadow", "/judge/job.json"]) { try { fs.readFileSync(f); o = 3; }'
    " catch (e) { } } console.log(o);\n",
    "php": '<?php $o = 0; foreach (["/etc/shadow", "/judge/job.json"] as $f) {'
    ' if (@file_get_contents($f) !== false) { $o = 3; } } echo $o, "\\n";\n',
    "ruby": 'o = 0; ["/etc/shadow", "/judge/job.json"].each { |f| begin; File.read(f); o = 3;'
    " rescue SystemCallError; end }; puts o\n",
    "lua": 'local o = 0; for _, f in ipairs({"/etc/shadow", "/judge/job.json"}) do'
    ' local h = io.open(f, "r"); if h and h:read("a") then o = 3 end end; print(o)\n',
    "perl": 'my $o = 0; for my $f ("/etc/shadow", "/judge/job.json") { $o = 3 if open(my $h, "<",'
    ' $f); } print "$o\\n";\n',
    "r": 'o <- 0; for (f in c("/etc/shadow", "/judge/job.json")) if (file.access(f, 4) == 0)'
    ' o <- 3; cat(o, "\\n")\n',
    "racket": '#lang racket/base\n(displayln (if (for/or ([f \'("/etc/shadow" "/judge/job.json")])'
    " (with-handlers ([exn:fail? (lambda (e) #f)]) (call-with-input-file f read-char) #t)) 3 0))\n",
    "csharp": "using System; using System.IO; class Program { static void Main() { int o = 0;"
    ' foreach (var f in new[] {"/etc/shadow", "/judge/job.json"}) { try { File.ReadAllBytes(f);'
    " o = 3; } catch (Exception) { } } Console.WriteLine(o); } }\n",
    "d": "import std.stdio; static import std.file;\nvoid main() { int o = 0;"
    ' foreach (f; ["/etc/shadow", "/judge/job.json"]) { try { std.file.read(f); o = 3; }'
    " catch (Exception e) { } } writeln(o); }\n",
    "verilog": 'module main; integer f, g; initial begin f = $fopen("/etc/shadow", "r");'
    ' g = $fopen("/judge/job.json", "r"); $display("%0d", (f != 0 || g != 0) ? 3 : 0);'
    " $finish; end endmodule\n",
    "sql": "SELECT CASE WHEN readfile('/etc/shadow') IS NULL"
    " AND readfile('/judge/job.json') IS NULL THEN 0 ELSE 3 END;\n",
}
"""Each new language's reach for the host's secrets and the run's hidden tests (the verifier's
job, ``/judge`` in its sandbox, never in the answer's): it prints 3 where it read either.
Scala and Kotlin are left out: their JVM is Java's, and their compile costs seconds."""


@pytest.mark.parametrize("lang", sorted(PEEK))
def test_no_new_language_reads_a_secret_or_the_hidden_tests(
    dg: DeepGym, host: HostGuard, lang: str
) -> None:
    need(lang)
    env = env_for(lang, "peek", max_processes=64, timeout=10.0, case_timeout=5.0)
    ran_and_lost(dg.run(env, PEEK[lang]))


def test_a_program_exiting_with_the_set_up_failure_code_is_its_own_zero(
    dg: DeepGym, host: HostGuard
) -> None:
    """121, the number a solution process's own failed set-up exits with (ours: no verdict),
    is the program's exit code once it runs: a runtime error, its 0."""
    need("c")
    r = dg.run(env_for("c", "exit-121"), "int main(void) { return 121; }\n")
    judged(r, 0.0)
    assert r.cases[0].message.startswith("runtime error: exit 121"), r.cases
    host.check()
