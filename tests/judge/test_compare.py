"""How a program's output is compared with the expected one: word by word (``tokens``), or word
by word with numbers within a tolerance (``float``), whatever the whitespace around the words."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from deepgym.judge import compare

WORDS = st.lists(st.sampled_from(["1", "2", "-3", "0.5", "abc", "é", "nan"]), max_size=8)
SPACE = st.text(alphabet=" \t\n\r\x0b\x0c\u3000", max_size=3)


@st.composite
def spaced(draw: st.DrawFn, words: list[str]) -> str:
    """``words`` with any whitespace around and between them."""
    gaps = [draw(SPACE) for _ in range(len(words) + 1)]
    inner = [g or " " for g in gaps[1:-1]]
    out = gaps[0]
    for i, w in enumerate(words):
        out += w + (inner[i] if i < len(inner) else "")
    return out + gaps[-1]


@given(data=st.data(), got=WORDS, want=WORDS)
def test_words_decide_whatever_the_whitespace(
    data: st.DataObject, got: list[str], want: list[str]
) -> None:
    a, e = data.draw(spaced(got)), data.draw(spaced(want))
    assert compare.equal(a, e, "tokens") is (got == want)
    if got == want:
        assert compare.equal(a, e, "float")


def test_the_same_text_and_near_numbers() -> None:
    big = "\n".join(str(i) for i in range(20000)) + "\n"
    assert compare.equal(big, big.rstrip("\n"), "tokens")
    assert not compare.equal(big, big + "20000", "tokens")
    assert not compare.equal(big[:-3], big, "tokens")  # a prefix is not the output
    assert compare.equal("0.3333333 x", "0.33333333 x", "float")
    assert not compare.equal("0.3333333 x", "0.33333333 x", "tokens")
    assert compare.equal("nan", " nan", "float")  # the same word, not a number to compare
