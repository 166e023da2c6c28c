"""Invoice lines and totals, in cents."""

_CODES = {"SAVE10": 10, "STAFF": 30, "HALF": 50}


def line_total(unit_cents: int, quantity: int, code: str | None = None) -> int:
    """One line: ``quantity`` units, with the discount ``code`` taken off (rounded down)."""
    if quantity < 0:
        raise ValueError("quantity must not be negative")
    amount = unit_cents * quantity
    if code is None:
        return amount
    if code not in _CODES:
        raise ValueError(f"unknown discount code {code!r}")
    return amount - amount * _CODES[code] // 100


def invoice_total(lines: list[tuple[int, int]], code: str | None = None) -> int:
    """The sum of the lines ``(unit_cents, quantity)``, each with ``code`` taken off."""
    return sum(line_total(unit, quantity, code) for unit, quantity in lines)
