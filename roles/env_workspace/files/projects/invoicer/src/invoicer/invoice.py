"""Invoice lines, quantity discounts and VAT per rate."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from invoicer.money import Money, zero
from invoicer.terms import PaymentTerms

VAT_RATES = {"standard": Decimal("0.19"), "reduced": Decimal("0.07"), "zero": Decimal(0)}
# Quantity discounts: (minimum quantity, rate), largest first.
QUANTITY_DISCOUNTS = ((100, Decimal("0.10")), (20, Decimal("0.05")))


@dataclass(frozen=True)
class Line:
    sku: str
    description: str
    quantity: int
    unit_price: Money
    vat: str = "standard"

    def __post_init__(self) -> None:
        if self.quantity <= 0:
            raise ValueError(f"{self.sku}: quantity must be positive, got {self.quantity}")
        if self.vat not in VAT_RATES:
            raise ValueError(f"{self.sku}: unknown VAT class {self.vat!r}")

    @property
    def discount_rate(self) -> Decimal:
        for minimum, rate in QUANTITY_DISCOUNTS:
            if self.quantity >= minimum:
                return rate
        return Decimal(0)

    @property
    def net(self) -> Money:
        """Net amount of the line after its quantity discount, rounded to cents."""
        gross = self.unit_price.times(self.quantity)
        return gross.times(1 - self.discount_rate).rounded()


@dataclass
class Invoice:
    number: str
    issued: date
    terms: PaymentTerms
    currency: str = "EUR"
    lines: list[Line] = field(default_factory=list)

    def add(self, line: Line) -> None:
        if line.unit_price.currency != self.currency:
            raise ValueError(f"{line.sku}: priced in {line.unit_price.currency}, invoice is in {self.currency}")
        self.lines.append(line)

    @property
    def net_total(self) -> Money:
        total = zero(self.currency)
        for line in self.lines:
            total += line.net
        return total

    def vat_by_rate(self) -> dict[str, Money]:
        """VAT per VAT class, computed on the class's summed net amount (not per line), rounded to cents."""
        nets: dict[str, Money] = defaultdict(lambda: zero(self.currency))
        for line in self.lines:
            nets[line.vat] += line.net
        return {vat: net.times(VAT_RATES[vat]).rounded() for vat, net in sorted(nets.items())}

    @property
    def vat_total(self) -> Money:
        total = zero(self.currency)
        for amount in self.vat_by_rate().values():
            total += amount
        return total

    @property
    def gross_total(self) -> Money:
        return self.net_total + self.vat_total

    @property
    def due(self) -> date:
        return self.terms.due_date(self.issued)

    def amount_if_paid_on(self, day: date) -> Money:
        """What settles the invoice when paid on `day`: the early-payment discount applies within its period."""
        until = self.terms.discount_until(self.issued)
        if until is not None and day <= until:
            return self.gross_total.times(1 - self.terms.discount).rounded()
        return self.gross_total
