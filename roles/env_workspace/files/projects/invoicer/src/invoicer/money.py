"""Amounts of money in one currency, exact (Decimal) and rounded to cents half-up as invoices are."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


@dataclass(frozen=True, order=True)
class Money:
    amount: Decimal
    currency: str = "EUR"

    @classmethod
    def of(cls, value: str | int | Decimal, currency: str = "EUR") -> Money:
        if isinstance(value, float):
            raise TypeError("use a string or Decimal for money, not float")
        return cls(Decimal(value), currency)

    def __add__(self, other: Money) -> Money:
        self._same_currency(other)
        return Money(self.amount + other.amount, self.currency)

    def __sub__(self, other: Money) -> Money:
        self._same_currency(other)
        return Money(self.amount - other.amount, self.currency)

    def times(self, factor: int | Decimal) -> Money:
        return Money(self.amount * Decimal(factor), self.currency)

    def rounded(self) -> Money:
        """Rounded to whole cents, half away from zero."""
        return Money(self.amount.quantize(CENT, rounding=ROUND_HALF_UP), self.currency)

    def __str__(self) -> str:
        return f"{self.rounded().amount:.2f} {self.currency}"

    def _same_currency(self, other: Money) -> None:
        if self.currency != other.currency:
            raise ValueError(f"cannot combine {self.currency} and {other.currency}")


def zero(currency: str = "EUR") -> Money:
    return Money(Decimal(0), currency)
