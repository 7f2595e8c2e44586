from decimal import Decimal

import pytest

from invoicer.money import Money


def test_rounds_half_up_to_cents() -> None:
    assert Money.of("2.345").rounded().amount == Decimal("2.35")
    assert Money.of("-2.345").rounded().amount == Decimal("-2.35")


def test_adds_in_one_currency_only() -> None:
    assert Money.of("1.10") + Money.of("2.20") == Money.of("3.30")
    with pytest.raises(ValueError, match="EUR and USD"):
        Money.of("1") + Money.of("1", "USD")


def test_refuses_floats() -> None:
    with pytest.raises(TypeError):
        Money.of(0.1)  # type: ignore[arg-type]


def test_prints_two_decimals_and_currency() -> None:
    assert str(Money.of("7")) == "7.00 EUR"
