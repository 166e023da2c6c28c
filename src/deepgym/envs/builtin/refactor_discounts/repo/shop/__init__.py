"""A tiny shop: cart totals and invoices, in cents."""
