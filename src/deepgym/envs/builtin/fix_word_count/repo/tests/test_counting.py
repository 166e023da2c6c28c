import unittest

from textstats import average_word_length, line_count, word_count


class CountingTest(unittest.TestCase):
    def test_word_count(self) -> None:
        self.assertEqual(word_count("one two three"), 3)

    def test_line_count(self) -> None:
        self.assertEqual(line_count("a\nb\n"), 2)

    def test_average(self) -> None:
        self.assertEqual(average_word_length("ab abcd"), 3.0)


if __name__ == "__main__":
    unittest.main()
