"""Answers in C, C++, Java, JavaScript, Rust and Go against the real sandboxes.

Per language and backend: a right answer scores 1.0; a wrong one 0 with a verdict; one the
compiler refuses is a judged ``compile_error`` carrying the compiler's word; one that never ends,
or that allocates past its memory limit, is a judged 0 naming the limit. Then the compile cache
(one build for a group of equal answers), the ``float`` comparison of a program's output, and the
configuration errors: a toolchain this host lacks, an unknown language, a language on a kind
other than ``script``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest

from deepgym import DeepGym, Environment, languages
from deepgym.exceptions import ConfigError
from deepgym.judge.blame import BACKSTOP
from deepgym.sandbox.base import Backend
from deepgym.sandbox.spec import START_GRACE_S

from .conftest import judged, need, program_cache

pytestmark = pytest.mark.sandbox

LANGS = ["c", "cpp", "java", "js", "rust", "go"]
"""The first six languages, tested in depth here (``test_more_languages`` tests the rest)."""
CASES = [
    {"stdin": "1 2\n", "expected_stdout": "3\n"},
    {"stdin": "5 7\n", "expected_stdout": "12\n"},
]

RIGHT = {
    "c": '#include <stdio.h>\nint main(void){long a,b; if(scanf("%ld %ld",&a,&b)==2)'
    ' printf("%ld\\n",a+b); return 0;}\n',
    "cpp": "#include <iostream>\nint main(){long long a,b; std::cin>>a>>b;"
    ' std::cout<<a+b<<"\\n";}\n',
    "java": "import java.util.*;\npublic class Main{public static void main(String[] x){"
    "Scanner s=new Scanner(System.in);long a=s.nextLong(),b=s.nextLong();"
    "System.out.println(a+b);}}\n",
    "js": 'const [a,b]=require("fs").readFileSync(0,"utf8").trim().split(/\\s+/).map(Number);'
    "console.log(a+b);\n",
    "rust": "use std::io::Read;\nfn main(){let mut s=String::new();"
    "std::io::stdin().read_to_string(&mut s).unwrap();"
    "let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();"
    'println!("{}",v[0]+v[1]);}\n',
    "go": 'package main\nimport "fmt"\nfunc main(){var a,b int64;fmt.Scan(&a,&b);'
    "fmt.Println(a+b)}\n",
}
WRONG = {
    lang: src.replace("a+b", "a-b").replace("v[0]+v[1]", "v[0]-v[1]") for lang, src in RIGHT.items()
}
BROKEN = "this is not code\n"
WHERE = {
    "c": "main.c:",
    "cpp": "main.cpp:",
    "java": "Main.java:",
    "js": "SyntaxError",
    "rust": "main.rs:",
    "go": "main.go:",
}
"""What each compiler's diagnostics name: the file, or the kind of error."""

LOOP = {
    "c": "int main(void){volatile unsigned long x=0; for(;;) x++;}\n",
    "cpp": "int main(){volatile unsigned long x=0; for(;;) x++;}\n",
    "java": "public class Main{public static void main(String[] a){long x=0; while(true){x++;}}}\n",
    "js": "let x=0; for(;;){x++;}\n",
    "rust": "fn main(){let mut x:u64=0; loop {unsafe {std::ptr::write_volatile(&mut x, x+1);}}}\n",
    "go": "package main\nfunc main(){x:=0; for {x++}}\n",
}
SLEEP = {
    "c": "#include <unistd.h>\nint main(void){for(;;) sleep(100);}\n",
    "cpp": "#include <unistd.h>\nint main(){for(;;) sleep(100);}\n",
    "java": "public class Main{public static void main(String[] a) throws Exception{"
    " while(true) Thread.sleep(100000);}}\n",
    "js": "setInterval(() => {}, 100000);\n",
    "rust": "fn main(){loop {std::thread::sleep(std::time::Duration::from_secs(100));}}\n",
    "go": 'package main\nimport "time"\nfunc main(){for {time.Sleep(100*time.Second)}}\n',
}
HOG = {
    "c": "#include <stdlib.h>\n#include <string.h>\n#include <stdio.h>\n"
    "int main(void){for(int i=0;i<128;i++){char*p=malloc(16<<20); if(!p) break;"
    ' memset(p,1,16<<20);} puts("0"); return 0;}\n',
    "cpp": "#include <vector>\n#include <iostream>\nint main(){std::vector<std::vector<char>> v;"
    ' for(int i=0;i<128;i++) v.emplace_back(16<<20, 1); std::cout<<"0\\n";}\n',
    "java": "import java.util.*;\npublic class Main{public static void main(String[] a){"
    "List<byte[]> l=new ArrayList<>(); for(int i=0;i<128;i++){byte[] b=new byte[16<<20];"
    ' Arrays.fill(b,(byte)1); l.add(b);} System.out.println("0");}}\n',
    "js": 'const l=[]; for(let i=0;i<128;i++) l.push(Buffer.alloc(16<<20, 1)); console.log("0");\n',
    "rust": "fn main(){let mut v:Vec<Vec<u8>>=Vec::new();"
    ' for _ in 0..128 {v.push(vec![1u8; 16<<20]);} println!("0");}\n',
    "go": 'package main\nimport "fmt"\nvar keep [][]byte\nfunc main(){for i:=0;i<128;i++{'
    "b:=make([]byte,16<<20); for j:=range b {b[j]=1}; keep=append(keep,b)};"
    ' fmt.Println("0")}\n',
}
"""Allocate and touch 2 GiB in 16 MiB pieces, then print a wrong answer."""


def script_env(lang: str, name: str, **fields: Any) -> Environment:
    return Environment(
        name=f"lang-{lang}-{name}",
        kind="script",
        language=lang,
        test_cases=fields.pop("test_cases", CASES),
        compare=fields.pop("compare", "tokens"),
        **{"timeout": 6.0, "case_timeout": 3.0, "memory_mb": 512, **fields},
    )


@pytest.mark.parametrize("lang", LANGS)
def test_a_right_answer_passes(dg: DeepGym, lang: str) -> None:
    need(lang)
    r = dg.run(script_env(lang, "sum"), RIGHT[lang])
    judged(r, 1.0)
    assert r.error_type is None, r
    assert [c.passed for c in r.cases] == [True, True], r.cases


@pytest.mark.parametrize("lang", LANGS)
def test_a_wrong_answer_scores_zero(dg: DeepGym, lang: str) -> None:
    need(lang)
    r = dg.run(script_env(lang, "sum"), WRONG[lang])
    judged(r, 0.0)
    assert r.error_type is None, r
    assert [c.passed for c in r.cases] == [False, False], r.cases


@pytest.mark.parametrize("lang", LANGS)
def test_a_compile_error_is_the_answers_fault(dg: DeepGym, lang: str) -> None:
    need(lang)
    r = dg.run(script_env(lang, "sum"), BROKEN)
    judged(r, 0.0)
    assert r.error_type == "compile_error", r
    assert r.error and not r.error.startswith("compile error"), r  # the compiler's own words
    assert WHERE[lang] in r.error, r.error


@pytest.mark.parametrize(
    ("past", "how"),
    [("case", "spin"), ("run", "sleep"), ("run", "spin")],
    ids=["case-spin", "run-sleep", "run-spin"],
)
@pytest.mark.parametrize("lang", LANGS)
def test_an_endless_program_is_a_time_limit_failure(
    dg: DeepGym, lang: str, past: str, how: str
) -> None:
    """Past the case's limit: that case fails ("timeout"), a judged 0. Past the run's:
    ``solution_timeout``, a judged 0. Limits are judged on CPU time: a program that spins uses
    it, one that sleeps waits past it on the clock; a spinning one the host held back past the
    backstop has no verdict (``timeout``), as a Python script may."""
    need(lang)
    limits = {"timeout": 4.0, "case_timeout": 1.0} if past == "case" else {"timeout": 1.5}
    env = script_env(lang, "loop", test_cases=CASES[:1], **limits)
    t0 = time.monotonic()
    r = dg.run(env, (LOOP if how == "spin" else SLEEP)[lang])
    elapsed = time.monotonic() - t0
    # the build's time, then the host's wall limit on the run (the judge's backstop)
    assert elapsed < BACKSTOP * env.timeout + START_GRACE_S + 5.0, elapsed
    assert r.evidence.limit_fired in (None, "case_time", "cpu_time"), r.evidence
    if how == "spin" and not r.has_verdict:
        assert r.error_type == "timeout" and "held back by the host" in (r.error or ""), r
        return
    if past == "case":
        judged(r, 0.0)
        assert r.error_type is None, r
        assert [(c.passed, c.message) for c in r.cases] == [(False, "timeout")], r.cases
        return
    used = "used the run's 1.5 s of CPU time" if how == "spin" else "waited past the run's 1.5 s"
    assert r.error is not None and r.error.startswith(f"test_0 {used}"), r  # the case it ran
    judged(r, 0.0)
    assert r.error_type == "solution_timeout", r


@pytest.mark.parametrize("lang", LANGS)
def test_a_memory_hog_fails_on_its_memory_limit(dg: DeepGym, lang: str) -> None:
    need(lang)
    env = script_env(
        lang, "hog", test_cases=CASES[:1], memory_mb=256, timeout=8.0, case_timeout=6.0
    )
    r = dg.run(env, HOG[lang])
    judged(r, 0.0)
    assert r.error_type is None, r
    assert not r.cases[0].passed, r.cases
    if lang == "java":  # -Xmx holds the heap to the limit: the JVM's own OutOfMemoryError
        assert r.evidence.limit_fired == "memory" or "OutOfMemoryError" in r.cases[0].message, r
    elif r.evidence.limit_mechanism.get("memory", "").startswith("cgroup"):
        assert r.evidence.limit_fired == "memory", r.evidence
        assert (r.evidence.peak_memory_mb or 0.0) <= env.memory_mb + 1, r.evidence


# -- the compile cache -----------------------------------------------------------------------


def test_equal_answers_run_together_compile_once(dg: DeepGym, backend: Backend) -> None:
    need("c")
    src = f"/* {secrets.token_hex(8)} */\n" + RIGHT["c"]
    cache = program_cache(backend)
    before = cache.stats()
    batch = dg.run_batch(script_env("c", "sum"), [src] * 8, max_parallel=8)
    after = cache.stats()
    assert [r.score for r in batch.results] == [1.0] * 8, batch.results
    assert after["misses"] - before["misses"] == 1, (before, after)
    assert after["hits"] - before["hits"] == 7, (before, after)


def test_a_refused_source_is_cached_too(dg: DeepGym, backend: Backend) -> None:
    need("c")
    src = f"/* {secrets.token_hex(8)} */\n" + BROKEN
    cache = program_cache(backend)
    before = cache.stats()
    first, second = (dg.run(script_env("c", "sum"), src) for _ in range(2))
    after = cache.stats()
    assert first.error_type == second.error_type == "compile_error", (first, second)
    assert first.error == second.error, (first, second)
    assert (after["misses"] - before["misses"], after["hits"] - before["hits"]) == (1, 1)


# -- comparing a program's output ------------------------------------------------------------

THIRD = '#include <stdio.h>\nint main(void){puts("%s"); return 0;}\n'


@pytest.mark.parametrize(("printed", "score"), [("0.3333333", 1.0), ("0.34", 0.0)])
def test_float_compare(dg: DeepGym, printed: str, score: float) -> None:
    need("c")
    cases = [{"stdin": "", "expected_stdout": "0.333333333\n"}]
    r = dg.run(script_env("c", "third", test_cases=cases, compare="float"), THIRD % printed)
    judged(r, score)


# -- configuration errors --------------------------------------------------------------------


@pytest.fixture
def no_gpp(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This host without g++, as ``languages.toolchain`` sees it (restored after the test)."""
    which = languages._system_which
    monkeypatch.setattr(languages, "_system_which", lambda n: None if n == "g++" else which(n))
    languages.toolchain.cache_clear()
    try:
        yield
    finally:
        monkeypatch.undo()
        languages.toolchain.cache_clear()


@pytest.mark.usefixtures("no_gpp")
def test_a_missing_toolchain_is_a_config_error_naming_the_package(dg: DeepGym) -> None:
    with pytest.raises(ConfigError, match=r"apt-get install g\+\+"):
        dg.run(script_env("cpp", "sum"), RIGHT["cpp"])


def test_an_unknown_language_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="cobol"):
        Environment(name="lang-cobol", kind="script", language="cobol", test_cases=CASES)


def test_a_compiled_language_needs_kind_script() -> None:
    cases = [{"args": [1, 2], "expected": 3}]
    with pytest.raises(ValueError, match="needs kind 'script'"):
        Environment(name="lang-fn", language="c", entry_point="add", test_cases=cases)
