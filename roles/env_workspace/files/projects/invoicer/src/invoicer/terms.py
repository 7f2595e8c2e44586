"""Payment terms: when an invoice is due, and the early-payment discount."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from dateutil.relativedelta import relativedelta

_NET = re.compile(r"^net (\d{1,3})$")
_EOM = re.compile(r"^eom(?: \+ ?(\d{1,3}))?$")
_SKONTO = re.compile(r"^(\d+(?:\.\d+)?)% (\d{1,3}) net (\d{1,3})$")


@dataclass(frozen=True)
class PaymentTerms:
    """`net N` (due N days after the invoice date), `eom` / `eom + N` (the end of the invoice month, plus N days),
    or `P% D net N` (P percent off when paid within D days, else due after N days)."""

    text: str
    days: int
    end_of_month: bool = False
    discount: Decimal = Decimal(0)
    discount_days: int = 0

    @classmethod
    def parse(cls, text: str) -> PaymentTerms:
        norm = " ".join(text.lower().split())
        if m := _NET.match(norm):
            return cls(norm, int(m.group(1)))
        if m := _EOM.match(norm):
            return cls(norm, int(m.group(1) or 0), end_of_month=True)
        if m := _SKONTO.match(norm):
            rate, within, net = Decimal(m.group(1)) / 100, int(m.group(2)), int(m.group(3))
            if within > net:
                raise ValueError(f"discount period longer than the payment period: {text!r}")
            return cls(norm, net, discount=rate, discount_days=within)
        raise ValueError(f"unknown payment terms: {text!r}")

    def due_date(self, issued: date) -> date:
        if self.end_of_month:
            last_day = issued + relativedelta(day=31)
            return last_day + relativedelta(days=self.days)
        return issued + relativedelta(days=self.days)

    def discount_until(self, issued: date) -> date | None:
        if not self.discount:
            return None
        return issued + relativedelta(days=self.discount_days)
