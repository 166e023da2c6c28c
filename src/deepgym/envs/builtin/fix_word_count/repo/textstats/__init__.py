"""Small statistics over plain text: words, lines, average word length."""

from textstats.counting import average_word_length, line_count, word_count, words

__all__ = ["average_word_length", "line_count", "word_count", "words"]
