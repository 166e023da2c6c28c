import unittest

from shop.cart import cart_total
from shop.invoice import invoice_total, line_total


class ShopTest(unittest.TestCase):
    def test_cart(self) -> None:
        self.assertEqual(cart_total([1000, 999], "SAVE10"), 1800)

    def test_line(self) -> None:
        self.assertEqual(line_total(250, 4, "HALF"), 500)

    def test_invoice(self) -> None:
        self.assertEqual(invoice_total([(100, 3), (50, 1)]), 350)

    def test_unknown_code(self) -> None:
        with self.assertRaises(ValueError):
            cart_total([100], "FREE")


if __name__ == "__main__":
    unittest.main()
