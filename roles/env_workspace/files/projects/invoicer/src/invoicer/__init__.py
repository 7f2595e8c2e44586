"""Invoices for a small shop: money, lines, VAT and payment terms."""

from invoicer.invoice import Invoice, Line
from invoicer.money import Money
from invoicer.terms import PaymentTerms

__all__ = ["Invoice", "Line", "Money", "PaymentTerms"]
__version__ = "0.9.2"
