"""The total of a shopping cart, in cents."""

_DISCOUNTS = {"SAVE10": 10, "STAFF": 30, "HALF": 50}


def cart_total(prices_cents: list[int], code: str | None = None) -> int:
    """The sum of ``prices_cents`` with the discount ``code`` taken off (rounded down)."""
    subtotal = sum(prices_cents)
    if code is None:
        return subtotal
    if code not in _DISCOUNTS:
        raise ValueError(f"unknown discount code {code!r}")
    return subtotal - subtotal * _DISCOUNTS[code] // 100
