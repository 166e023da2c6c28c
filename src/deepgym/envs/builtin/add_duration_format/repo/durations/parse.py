"""Reading short durations such as ``"1h30m"`` into seconds."""

UNITS = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> int:
    """The seconds in ``text``: numbers each followed by a unit (``h``, ``m``, ``s``).

    Surrounding whitespace is ignored; anything else that is not a digit or a unit is an error.
    """
    text = text.strip()
    if not text:
        raise ValueError("empty duration")
    total = 0
    number = ""
    for ch in text:
        if ch in "0123456789":
            number += ch
        elif ch in UNITS:
            if not number:
                raise ValueError(f"unit {ch!r} without a number")
            total += int(number) * UNITS[ch]
            number = ""
        else:
            raise ValueError(f"unexpected character {ch!r}")
    if number:
        raise ValueError(f"number {number!r} without a unit")
    return total
