from datetime import date
from decimal import Decimal

import pytest

from invoicer.terms import PaymentTerms


def test_net_days() -> None:
    assert PaymentTerms.parse("Net 30").due_date(date(2026, 1, 15)) == date(2026, 2, 14)


def test_end_of_month_plus_days() -> None:
    terms = PaymentTerms.parse("EOM + 15")
    assert terms.due_date(date(2026, 1, 15)) == date(2026, 2, 15)
    # February of a leap year ends on the 29th.
    assert terms.due_date(date(2028, 2, 3)) == date(2028, 3, 15)


def test_end_of_month_alone() -> None:
    assert PaymentTerms.parse("eom").due_date(date(2026, 4, 30)) == date(2026, 4, 30)


def test_early_payment_discount() -> None:
    terms = PaymentTerms.parse("2% 10 net 30")
    assert terms.discount == Decimal("0.02")
    assert terms.discount_until(date(2026, 3, 1)) == date(2026, 3, 11)
    assert terms.due_date(date(2026, 3, 1)) == date(2026, 3, 31)


@pytest.mark.parametrize("text", ["net", "net thirty", "2% 40 net 30", "cash"])
def test_rejects_unknown_terms(text: str) -> None:
    with pytest.raises(ValueError):
        PaymentTerms.parse(text)
