"""Counting words and lines in plain text."""


def words(text: str) -> list[str]:
    """The words of ``text``: the runs of characters between whitespace."""
    return text.split(" ")


def word_count(text: str) -> int:
    """How many words ``text`` holds."""
    return len(words(text))


def line_count(text: str) -> int:
    """How many lines ``text`` holds; a final line needs no newline."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def average_word_length(text: str) -> float:
    """The mean length of the words of ``text``, rounded to 2 places (0.0 without words)."""
    found = words(text)
    if not found:
        return 0.0
    return round(sum(len(w) for w in found) / len(found), 2)
