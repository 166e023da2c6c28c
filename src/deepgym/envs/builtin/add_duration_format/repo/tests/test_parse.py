import unittest

from durations import parse_duration


class ParseTest(unittest.TestCase):
    def test_hours_and_minutes(self) -> None:
        self.assertEqual(parse_duration("1h30m"), 5400)

    def test_bad_unit(self) -> None:
        with self.assertRaises(ValueError):
            parse_duration("3x")


if __name__ == "__main__":
    unittest.main()
