"""What comes back of a solution process's output (``launch.Stream``): at most the kept size
(the environment's ``kept_output_kb``), its start and always its end, in bounded memory however
much it writes; what is judged (a script's whole stdout) is never cut."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from deepgym.judge.codes import KEPT_OUTPUT_BYTES, OUTPUT_TAIL_BYTES
from deepgym.judge.launch import Stream, cut


def test_a_flood_is_held_in_bounded_memory() -> None:
    s = Stream(keep_all=False)
    chunk = b"e" * 65536
    for _ in range(800):  # 50 MiB, as a pipe delivers it
        s.add(chunk)
    s.add(b"\nTraceback (most recent call last):\nValueError: boom\n")
    assert s.size > 50 * 2**20 and s.chunks == []
    assert len(s.head) == KEPT_OUTPUT_BYTES and len(s.tail) == OUTPUT_TAIL_BYTES
    kept = s.kept()
    assert len(kept) <= KEPT_OUTPUT_BYTES and kept.startswith("e" * 1000)
    assert kept.endswith("ValueError: boom\n") and s.last_words().endswith("\nValueError: boom")


NODE_CRASH = b"""/work/solution.py:30
        throw new Error('too big');
        ^

Error: too big
    at prime_fib (/work/solution.py:30:15)
    at test (/work/solution.py:56:20)
    at Object.<anonymous> (/work/solution.py:60:1)

Node.js v20.20.2
"""
JVM_CRASH = b"""Exception in thread "main" java.lang.AssertionError: wrong
\tat MainKt.main(main.kt:2)
\tat MainKt.main(main.kt)
"""
RUBY_CRASH = b"""/work/solution.py:13:in `<main>': uninitialized constant F (NameError)
\tfrom /work/solution.py:20:in `test'
"""


def test_last_words_are_the_error_and_its_first_frame() -> None:
    """A stack printed after its error (Node.js, a JVM, Ruby): the message is the error and the
    frame that raised it, not the runtime's last frames or Node.js's version line."""
    said = {}
    for name, text in (("node", NODE_CRASH), ("jvm", JVM_CRASH), ("ruby", RUBY_CRASH)):
        s = Stream(keep_all=False)
        s.add(text)
        said[name] = s.last_words()
    assert said["node"].endswith("Error: too big\n    at prime_fib (/work/solution.py:30:15)")
    assert (
        said["jvm"]
        == 'Exception in thread "main" java.lang.AssertionError: wrong\n\tat MainKt.main(main.kt:2)'
    )
    assert said["ruby"].endswith("(NameError)\n\tfrom /work/solution.py:20:in `test'")


def test_within_the_cap_a_stream_comes_back_whole() -> None:
    s = Stream(keep_all=True, cap=100)
    for piece in (b"a" * 60, b"b" * 40):
        s.add(piece)
    assert s.kept() == "a" * 60 + "b" * 40 and s.tail == b""
    s.add(b"c")  # one byte past: the start, what was left out, the end
    kept = s.kept()
    assert len(kept) <= 100 and kept.startswith("a") and kept.endswith("c")
    assert s.text() == "a" * 60 + "b" * 40 + "c"  # what is judged: whole


@given(st.lists(st.binary(max_size=3000), max_size=30), st.integers(1, 9000))
def test_what_comes_back_is_at_most_the_cap_and_counts_what_it_left_out(
    pieces: list[bytes], cap: int
) -> None:
    s = Stream(keep_all=False, cap=cap)
    for piece in pieces:
        s.add(piece)
    data = b"".join(pieces)
    assert s.size == len(data) and len(s.head) <= cap and len(s.tail) <= OUTPUT_TAIL_BYTES
    if len(data) <= cap:
        assert s.kept() == data.decode("utf-8", "replace")
        return
    got = cut(bytes(s.head), s.tail, s.size, cap)
    assert len(got) <= cap
    start, note, end = got.partition(b"\n[... ")
    if not note:  # too small a cap to say what was left out: the end alone
        assert data.endswith(got)
        return
    count, _, end = end.partition(b" bytes left out ...]\n")
    assert data.startswith(start) and data.endswith(end)
    assert len(start) + int(count) + len(end) == len(data)  # the count is exact


def test_text_cut_on_characters() -> None:
    text = ("é" * 3000).encode()  # two bytes each: a cut at an odd byte splits one
    s = Stream(keep_all=False, cap=1001)
    s.add(text)
    kept = s.kept()
    assert "\ufffd" not in kept and len(kept.encode()) <= 1001
