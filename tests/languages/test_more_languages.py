"""Answers in the languages besides the first six, and the test-runner modes, against the real
sandboxes (both, as ``test_languages`` tests the first six).

Per language and backend: a right answer scores 1.0; a wrong one 0 with a verdict; one its
compile phase (a compiler, or a syntax check) refuses is a judged ``compile_error``; one that
crashes is its runtime error; one that never ends fails its case on its time limit. Per
test-runner mode: each test the runner reports is a case, a failing test a failed one. Then
the languages Debian packages no toolchain for: refused by name, in one line.

Time: each language's answer is one program that reads what to do from its stdin (add two
numbers, crash on a first number of -1, spin on -2): it compiles once per backend (the
program cache), and a JVM language's slow compile is paid twice in all, not once per test.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from deepgym import DeepGym, Environment, RunResult
from deepgym.exceptions import ConfigError
from deepgym.judge.blame import BACKSTOP
from deepgym.sandbox.spec import START_GRACE_S

from .conftest import judged, need

pytestmark = pytest.mark.sandbox

PROGRAM = {
    "bash": """\
read -r a b
if [ "$a" = -1 ]; then echo boom >&2; exit 3; fi
if [ "$a" = -2 ]; then while :; do :; done; fi
echo $((a + b))
""",
    "ts": """\
const [a, b]: number[] = require("fs").readFileSync(0, "utf8").trim().split(/\\s+/).map(Number);
if (a === -1) throw new Error("boom");
if (a === -2) { let x: number = 0; for (;;) { x++; } }
console.log(a + b);
""",
    "php": """\
<?php
[$a, $b] = array_map('intval', preg_split('/\\s+/', trim(stream_get_contents(STDIN))));
if ($a === -1) { throw new Exception("boom"); }
if ($a === -2) { $x = 0; for (;;) { $x++; } }
echo $a + $b, "\\n";
""",
    "ruby": """\
a, b = $stdin.read.split.map(&:to_i)
raise "boom" if a == -1
if a == -2 then x = 0; loop { x += 1 } end
puts a + b
""",
    "lua": """\
local a, b = io.read("n", "n")
if a == -1 then error("boom") end
if a == -2 then local x = 0; while true do x = x + 1 end end
print(a + b)
""",
    "perl": """\
my ($x, $y) = split ' ', do { local $/; <STDIN> };
die "boom\\n" if $x == -1;
if ($x == -2) { my $n = 0; while (1) { $n++ } }
print $x + $y, "\\n";
""",
    "r": """\
w <- scan(file("stdin"), quiet = TRUE)
if (w[1] == -1) stop("boom")
if (w[1] == -2) { x <- 0; repeat { x <- x + 1 } }
cat(w[1] + w[2], "\\n", sep = "")
""",
    "racket": """\
#lang racket/base
(define a (read))
(define b (read))
(cond [(= a -1) (error "boom")]
      [(= a -2) (let loop ([x 0]) (loop (add1 x)))]
      [else (displayln (+ a b))])
""",
    "csharp": """\
using System;
using System.Numerics;  // referenced as .NET's is (MultiPL-E's C# uses BigInteger)
class Program {
    static void Main() {
        var w = Console.In.ReadToEnd().Split((char[])null, StringSplitOptions.RemoveEmptyEntries);
        long a = long.Parse(w[0]), b = long.Parse(w[1]);
        if (a == -1) throw new Exception("boom");
        if (a == -2) { long x = 0; while (true) { x++; } }
        Console.WriteLine(BigInteger.Add(a, b));
    }
}
""",
    "scala": """\
object Main {
  def main(args: Array[String]): Unit = {
    val w = scala.io.Source.stdin.mkString.trim.split("\\\\s+").map(_.toLong)
    if (w(0) == -1) throw new RuntimeException("boom")
    if (w(0) == -2) { var x = 0L; while (true) { x += 1 } }
    println(w(0) + w(1))
  }
}
""",
    "kotlin": """\
fun main() {
    val text = System.`in`.bufferedReader().readText()
    val w = text.trim().split(Regex("\\\\s+")).map { it.toLong() }
    if (w[0] == -1L) throw RuntimeException("boom")
    if (w[0] == -2L) { var x = 0L; while (true) { x++ } }
    println(w[0] + w[1])
}
""",
    "d": """\
import std.array, std.conv, std.stdio;
void main() {
    auto w = readln().split;
    long a = to!long(w[0]), b = to!long(w[1]);
    if (a == -1) throw new Exception("boom");
    if (a == -2) { long x = 0; while (true) { x++; } }
    writeln(a + b);
}
""",
    "verilog": """\
module main;
  integer a, b, n, x;
  initial begin
    n = $fscanf(32'h8000_0000, "%d %d", a, b);
    if (a == -1) $fatal(1, "boom");
    if (a == -2) begin x = 0; forever x = x + 1; end
    $display("%0d", a + b);
    $finish;
  end
endmodule
""",
}
"""Each language's one answer: its stdin's two numbers added, a crash on -1, a spin on -2."""
SQL = {
    "right": "SELECT 1 + 2;\n",
    "wrong": "SELECT 1 - 2;\n",
    "crash": "SELECT * FROM no_such_table;\n",
    "spin": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)"
    " SELECT count(*) FROM c;\n",
}
"""SQL's answers, one per behaviour (SQLite reads its program, not the case's stdin)."""
LANGS = [*PROGRAM, "sql"]
BROKEN = {
    "bash": "if then fi\n",
    "ts": "const x: number = ;\n",
    "php": "<?php this is not code\n",
    "ruby": "def (\n",
    "lua": "this is not code\n",
    "perl": "sub {{\n",
    "csharp": "this is not code\n",
    "scala": "this is not code\n",
    "kotlin": "this is not code\n",
    "d": "this is not code\n",
    "verilog": "this is not code\n",
}
"""A source each language's compile phase refuses (R, Racket and SQL have none)."""
WHERE = {
    "bash": "syntax error",
    "ts": "main.ts(",
    "php": "syntax error",
    "ruby": "syntax error",
    "lua": "main.lua:",
    "perl": "syntax error",
    "csharp": "Main.cs(",
    "scala": "Main.scala:",
    "kotlin": "main.kt:",
    "d": "main.d:",
    "verilog": "main.v:",
}
"""What each compile phase's diagnostics name: the file, or the kind of error."""
STDIN = {"right": "1 2\n", "wrong": "1 2\n", "crash": "-1 0\n", "spin": "-2 0\n"}
EXPECTED = {"right": "3\n", "wrong": "4\n", "crash": "3\n", "spin": "3\n"}
"""The one case of each behaviour: "wrong" is the answer's 3 where 4 is expected."""


def answer(lang: str, behaviour: str) -> tuple[str, dict[str, str]]:
    """``lang``'s source for ``behaviour`` and its one test case."""
    case = {"stdin": STDIN[behaviour], "expected_stdout": EXPECTED[behaviour]}
    if lang == "sql":
        return SQL[behaviour], {**case, "stdin": ""}
    return PROGRAM[lang], case


def script_env(lang: str, name: str, cases: list[dict[str, Any]], **fields: Any) -> Environment:
    limits = {"timeout": 8.0, "case_timeout": 5.0, "compile_timeout": 120.0, "memory_mb": 512}
    return Environment(
        name=f"lang-{lang}-{name}",
        kind="script",
        language=lang,
        test_cases=cases,
        **{"compare": "tokens", **limits, **fields},
    )


def run(dg: DeepGym, lang: str, behaviour: str, **fields: Any) -> RunResult:
    need(lang)
    source, case = answer(lang, behaviour)
    return dg.run(script_env(lang, behaviour, [case], **fields), source)


@pytest.mark.parametrize("lang", LANGS)
def test_a_right_answer_passes(dg: DeepGym, lang: str) -> None:
    r = run(dg, lang, "right")
    judged(r, 1.0)
    assert r.error_type is None, r


@pytest.mark.parametrize(
    ("behaviour", "said"), [("wrong", "stdout "), ("crash", "runtime error: exit ")]
)
@pytest.mark.parametrize("lang", LANGS)
def test_a_wrong_or_crashing_answer_scores_zero(
    dg: DeepGym, lang: str, behaviour: str, said: str
) -> None:
    """A wrong output fails its case; so does a crash, as a runtime error."""
    r = run(dg, lang, behaviour)
    judged(r, 0.0)
    assert r.error_type is None, r
    assert r.cases[0].message.startswith(said), r.cases


def test_php_loads_debians_extensions(dg: DeepGym) -> None:
    """PHP reads Debian's ``/etc/php``, so ``ctype`` and ``posix`` load as outside a sandbox
    (without it, MultiPL-E answers that call ``ctype_digit`` were scored 0)."""
    need("php")
    case = {"stdin": "", "expected_stdout": "yes 1"}
    source = '<?php echo ctype_digit("12") ? "yes" : "no", " ", posix_getpid() > 0 ? 1 : 0;'
    judged(dg.run(script_env("php", "ext", [case]), source), 1.0)


SYSTEM_VERILOG = """\
module top_module(input logic a, b, output logic y);
  always_comb y = a & b;
endmodule
module tb;
  logic a = 1, b = 1, y;
  top_module dut(.a(a), .b(b), .y(y));
  initial begin #1 $display("%b", y); $finish; end
endmodule
"""


def test_verilog_takes_system_verilog(dg: DeepGym) -> None:
    """Verilog is compiled as SystemVerilog 2012 (``iverilog -g2012``, as SandboxFusion and
    verilog-eval do): ``logic`` and ``always_comb`` were a compile error, a right answer's 0."""
    need("verilog")
    case = {"stdin": "", "expected_stdout": "1"}
    judged(dg.run(script_env("verilog", "sv", [case]), SYSTEM_VERILOG), 1.0)


def test_a_test_programs_stdout_explains_its_failure(dg: DeepGym) -> None:
    """A program judged by its exit status that says nothing on stderr (a Lua ``luaunit`` or
    Perl test program prints its failed assertion on stdout): its last words are the message."""
    need("lua")
    source = 'print("1) test_humaneval: expected: 2, actual: 3")\nos.exit(1)\n'
    r = dg.run(script_env("lua", "said", [{"stdin": ""}], compare="exit"), source)
    judged(r, 0.0)
    assert r.cases[0].message == "runtime error: exit 1: 1) test_humaneval: expected: 2, actual: 3"


@pytest.mark.parametrize("lang", sorted(BROKEN))
def test_a_compile_error_is_the_answers_fault(dg: DeepGym, lang: str) -> None:
    need(lang)
    env = script_env(lang, "broken", [answer(lang, "right")[1]])
    r = dg.run(env, BROKEN[lang])
    judged(r, 0.0)
    assert r.error_type == "compile_error", r
    assert r.error and WHERE[lang] in r.error, r.error  # the compile phase's own words


@pytest.mark.parametrize("lang", LANGS)
def test_an_endless_answer_fails_its_case_on_time(dg: DeepGym, lang: str) -> None:
    """Past the case's CPU-time limit: that case fails ("timeout"), a judged 0; or, where the
    host held the answer back past its backstop, no verdict (``timeout``)."""
    t0 = time.monotonic()
    r = run(dg, lang, "spin", timeout=6.0, case_timeout=1.0)
    assert time.monotonic() - t0 < BACKSTOP * 6.0 + START_GRACE_S + 60.0
    if not r.has_verdict:
        assert r.error_type == "timeout" and "held back by the host" in (r.error or ""), r
        return
    judged(r, 0.0)
    assert [(c.passed, c.message) for c in r.cases] == [(False, "timeout")], r.cases


# -- the test-runner modes ---------------------------------------------------------------------

PYTEST_TWO = "def test_one():\n    assert 1 + 2 == 3\n\n\ndef test_two():\n    assert 2 * 2 == %d\n"
RUNNERS = {
    "pytest": {
        "right": PYTEST_TWO % 4,
        "wrong": PYTEST_TWO % 5,
        "crash": "import os\n\n\ndef test_one():\n    os._exit(3)\n",
        "spin": "def test_one():\n    while True:\n        pass\n",
    },
    "go_test": {
        kind: 'package main\n\nimport (\n\t"os"\n\t"testing"\n)\n\nvar _ = os.Exit\n\n'
        'func TestOne(t *testing.T) {\n\tif 1+2 != 3 {\n\t\tt.Fatal("sum")\n\t}\n}\n\n'
        f"func TestTwo(t *testing.T) {{\n{body}}}\n"
        for kind, body in {
            "right": '\tif 2*2 != 4 {\n\t\tt.Fatal("product")\n\t}\n',
            "wrong": '\tif 2*2 != 5 {\n\t\tt.Fatal("product")\n\t}\n',
            "broken": "\tthis is not code\n",
            "crash": "\tos.Exit(3)\n",
            "spin": "\tfor x := 0; ; x++ {\n\t}\n",
        }.items()
    },
    "junit": {
        kind: "import org.junit.jupiter.api.Test;\n"
        "import static org.junit.jupiter.api.Assertions.assertEquals;\n\n"
        "public class MainTest {\n"
        "    @Test void one() { assertEquals(3, 1 + 2); }\n"
        f"    @Test void two() {{ {body} }}\n"
        "}\n"
        for kind, body in {
            "right": "assertEquals(4, 2 * 2);",
            "wrong": "assertEquals(5, 2 * 2);",
            "broken": "this is not code",
            "crash": "Runtime.getRuntime().halt(3);",
            "spin": "long x = 0; while (true) { x++; }",
        }.items()
    },
}
"""Each mode's test files, by behaviour: two tests ("wrong": the second fails), one that does
not compile (pytest has no compile phase), one that ends the runner, one that never ends."""
RUNNER_WHERE = {"go_test": "main_test.go:", "junit": "MainTest.java:"}
NAMES = {
    "pytest": ["test_one", "test_two"],
    "go_test": ["TestOne", "TestTwo"],
    "junit": ["MainTest > one()", "MainTest > two()"],
}
"""The names each runner gives the two tests."""


def runner_run(dg: DeepGym, mode: str, behaviour: str, **fields: Any) -> RunResult:
    need(mode)
    env = script_env(mode, behaviour, [{"stdin": ""}], **fields)
    return dg.run(env, RUNNERS[mode][behaviour])


@pytest.mark.parametrize(("behaviour", "second"), [("right", True), ("wrong", False)])
@pytest.mark.parametrize("mode", sorted(RUNNERS))
def test_each_test_the_runner_reports_is_a_case(
    dg: DeepGym, mode: str, behaviour: str, second: bool
) -> None:
    """A passing test is a passed case, a failing one a failed case with the runner's reason."""
    r = runner_run(dg, mode, behaviour, scoring="partial")
    judged(r, 1.0 if second else 0.5)
    one, two = NAMES[mode]
    assert sorted((c.name, c.passed) for c in r.cases) == [(one, True), (two, second)], r
    assert all(c.message for c in r.cases if not c.passed), r.cases


@pytest.mark.parametrize("mode", sorted(RUNNER_WHERE))
def test_a_runner_modes_compile_error_is_the_answers_fault(dg: DeepGym, mode: str) -> None:
    r = runner_run(dg, mode, "broken")
    judged(r, 0.0)
    assert r.error_type == "compile_error", r
    assert r.error and RUNNER_WHERE[mode] in r.error, r.error


@pytest.mark.parametrize("mode", sorted(RUNNERS))
def test_a_runner_that_dies_fails(dg: DeepGym, mode: str) -> None:
    r = runner_run(dg, mode, "crash")
    judged(r, 0.0)
    assert r.error_type is None, r
    assert any("exit 3" in c.message for c in r.cases if not c.passed), r.cases


@pytest.mark.parametrize("mode", sorted(RUNNERS))
def test_an_endless_test_fails_on_time(dg: DeepGym, mode: str) -> None:
    r = runner_run(dg, mode, "spin", timeout=8.0, case_timeout=2.0)
    if not r.has_verdict:
        assert r.error_type == "timeout" and "held back by the host" in (r.error or ""), r
        return
    judged(r, 0.0)
    assert [(c.passed, c.message) for c in r.cases] == [(False, "timeout")], r.cases


# -- what is refused ---------------------------------------------------------------------------

REFUSED = ["swift", "julia", "lean", "cuda", "python_gpu", "jest"]


@pytest.mark.parametrize("lang", REFUSED)
def test_a_language_debian_lacks_is_refused_in_one_line(dg: DeepGym, lang: str) -> None:
    env = script_env(lang, "refused", [{"stdin": "", "expected_stdout": ""}])
    with pytest.raises(ConfigError, match=f"^language '{lang}' is not run here: [^\\n]+$"):
        dg.run(env, "anything\n")


@pytest.mark.parametrize("lang", REFUSED)
def test_the_sandbox_fusion_routes_refuse_it_before_running(lang: str) -> None:
    """A 400 (the request's fault), never a run without a verdict that a client retries."""
    from deepgym.server.fusion import language_of

    with pytest.raises(ConfigError, match=f"^language '{lang}' is not run here: "):
        language_of(lang)
