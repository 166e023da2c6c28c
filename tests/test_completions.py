"""Which code a completion gives: the last fenced block of its last assistant turn."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym.completions import answer_of, completion_text, extract_code, multipl_e_code
from deepgym.exceptions import ConfigError


def test_the_last_fenced_block_is_the_answer() -> None:
    text = "First try:\n```python\na = 1\n```\nBetter:\n```py\nb = 2\n```\nDone."
    assert extract_code(text) == "b = 2\n"
    assert extract_code("~~~\nx = 1\n~~~") == "x = 1\n"
    assert extract_code("````python\nprint('```')\n````") == "print('```')\n"


def test_without_a_block_the_whole_text_is_the_answer() -> None:
    assert extract_code("def f():\n    return 1\n") == "def f():\n    return 1\n"
    assert extract_code("inline ```x``` only") == "inline ```x``` only"


def test_an_unclosed_fence_gives_what_follows_it() -> None:
    assert extract_code("Sure:\n```python\ndef f():\n    return 1") == "def f():\n    return 1"
    assert extract_code("Sure:\n```python\n") == "Sure:\n```python\n"  # nothing after it


@given(st.text(alphabet=st.characters(blacklist_characters="`~\r"), max_size=200))
def test_a_fenced_body_comes_back_unchanged(body: str) -> None:
    body = body if body.endswith("\n") or not body else body + "\n"
    assert extract_code(f"Answer:\n```python\n{body}```\nThanks") == body


def test_completion_text_reads_every_shape() -> None:
    assert completion_text("plain") == "plain"
    assert completion_text({"role": "assistant", "content": "one"}) == "one"
    conv = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "first"},
        {"role": "tool", "content": "out"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "image"}, "b"]},
    ]
    assert completion_text(conv) == "ab"
    assert completion_text([{"role": "user", "content": "q"}]) == ""  # no assistant turn
    assert completion_text([{"content": "x"}, {"content": "y"}]) == "y"  # no roles: the last
    with pytest.raises(ConfigError):
        completion_text(42)


def test_answer_of_prepends_the_prefix_only_without_a_block() -> None:
    assert answer_of("    return 1\n", "def f():\n") == "def f():\n    return 1\n"
    assert answer_of("```python\nx = 1\n```", "def f():\n") == "x = 1\n"


def test_shell_blocks_are_the_fences_marked_as_shell_and_the_rest_is_outside() -> None:
    from deepgym.completions import shell_blocks

    text = "Plan.\n```python\nx = 1\n```\n~~~bash\nls -la\n~~~\nthen DONE\n```sh title\npwd\n```\n"
    commands, outside = shell_blocks(text)
    assert commands == ["ls -la", "pwd"]
    assert "DONE" in outside and "ls -la" not in outside and "x = 1" not in outside
    assert shell_blocks("```bash\nunclosed\n") == ([], "")


# -- MultiPL-E: a written-out answer before the problem's tests ---------------------------------

CS_PROMPT = "using System;\n\nclass Problem {\n    public static long Twice(long x) {\n"
CS_TESTS = (
    "    }\n    public static void Main(string[] args) {\n"
    "    Debug.Assert(Twice(2L) == 4L);\n    }\n\n}\n"
)
CS_ANSWER = """```csharp
using System;

class Problem {
    public static long Twice(long x)
    {
        return Helper(x) * 2; // "}" in a string: {
    }

    private static long Helper(long x) { return x; }

    static void Main() {
        Console.WriteLine(Twice(2)); /* } */
    }
}
```
"""


def test_a_written_out_answer_keeps_its_helpers_and_loses_its_main() -> None:
    """Its signature's brace on the next line, a helper after the function, its own Main: the
    program is kept whole but for Main and the class's end, which the tests bring."""
    code = multipl_e_code(CS_ANSWER, CS_PROMPT, ["\n    }\n"], "csharp") + CS_TESTS
    assert "Helper(long x)" in code and "Console.WriteLine" not in code
    assert code.count("Main(") == 1 and code.count("class Problem") == 1
    assert "static void MultiplEClosedByTheTests() {\n    }\n    public static void Main" in code


def test_a_cpp_answer_loses_only_its_main() -> None:
    answer = (
        "#include <cassert>\nlong twice(long x) { return x * 2; }\n"
        "int main() { assert(twice(2) == 4); }\n"
    )
    code = multipl_e_code(answer, "#include <cassert>\nlong twice(long x) {\n", ["\n}"], "cpp")
    assert "int main" not in code and "return x * 2;" in code
    assert code.rstrip().endswith("{")  # the tests' first "}" closes it


def test_an_answer_whose_braces_do_not_balance_is_cut_as_before() -> None:
    answer = "long twice(long x) {\n    return x * 2;\n}\nint main() {\n"
    code = multipl_e_code(answer, "long twice(long x) {\n", ["\n}"], "cpp")
    assert code == "long twice(long x) {\n    return x * 2;\n"


def test_a_d_answer_loses_its_main_even_where_it_renamed_a_parameter() -> None:
    """D's tests bring ``void main(){}``: a written-out answer's own main goes, wherever its
    signature differs from the prompt's (``string s`` for the prompt's ``string string``)."""
    answer = (
        "```d\nimport std.math;\n\nstring twice(string s) {\n    return s ~ s;\n}\n\n"
        'void main() {\n    assert(twice("a") == "aa");\n}\n```\n'
    )
    code = multipl_e_code(answer, "import std.math;\nstring twice(string string) \n", [], "d")
    assert "void main" not in code and "return s ~ s;" in code


RS_ANSWER = """```rust
fn twice(x: isize) -> isize {
    helper(x) * 2
}

fn helper(x: isize) -> isize { x }

fn main() {
    let s: &'static str = "}";
    let c = '{';
    assert_eq!(twice(2), 4);
}
```
"""


def test_a_rust_answer_keeps_its_helpers_and_loses_its_main() -> None:
    """Rust's tests close the function (``}``) and bring their own ``main``: a written-out answer
    keeps a helper defined after the function, loses its own main (a lifetime, a brace in a
    string and in a character inside it), and leaves a function open for the tests to close."""
    tests = "\n}\n\nfn main() {\n    let candidate = twice;\n    assert_eq!(candidate(3), 6);\n}\n"
    code = multipl_e_code(RS_ANSWER, "fn twice(x: isize) -> isize {\n", ["\n}"], "rust")
    program = code + tests
    assert "fn helper" in program and "'static" not in program
    assert program.count("fn main") == 1 and program.count("{") == program.count("}")


SCALA_ANSWER = """```scala
object Problem {
  def twice(x: Long): Long = helper(x) * 2

  def helper(x: Long): Long = x

  def main(args: Array[String]): Unit = {
    println(twice(2))
  }
}

Problem.main(Array())
```
"""


def test_a_scala_answer_keeps_its_helpers_and_loses_its_main_and_object_end() -> None:
    """Scala's tests close the function, bring ``main`` and close the object: a written-out
    answer loses its own main, the object's end and what follows it."""
    prompt = "object Problem {\n    def twice(x : Long) : Long = {\n"
    tests = "    }\n    def main(args: Array[String]) = {\n    assert(twice(3) == 6);\n    }\n\n}\n"
    program = multipl_e_code(SCALA_ANSWER, prompt, ["\n    }\n"], "scala") + tests
    assert "def helper" in program and "println" not in program
    assert "Problem.main(Array())" not in program
    assert program.count("def main") == 1 and program.count("{") == program.count("}")
