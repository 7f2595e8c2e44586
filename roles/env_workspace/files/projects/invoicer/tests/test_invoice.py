import json
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from invoicer import Invoice, Line, Money, PaymentTerms
from invoicer.cli import main


def make_invoice() -> Invoice:
    invoice = Invoice("2026-0042", date(2026, 1, 15), PaymentTerms.parse("2% 10 net 30"))
    invoice.add(Line("TEL-0070", "Starfinder 70mm refractor", 1, Money.of("129.00")))
    invoice.add(Line("EYE-0032", "Wide-field eyepiece 32mm", 20, Money.of("45.50")))
    invoice.add(Line("BOK-0001", "Star atlas", 3, Money.of("19.99"), vat="reduced"))
    return invoice


def test_quantity_discount_applies_from_its_minimum() -> None:
    assert Line("A", "", 19, Money.of("1")).discount_rate == 0
    assert Line("A", "", 20, Money.of("1")).discount_rate == Decimal("0.05")
    assert Line("A", "", 150, Money.of("1")).discount_rate == Decimal("0.10")


def test_totals() -> None:
    invoice = make_invoice()
    # 129.00 + 20 x 45.50 x 0.95 (= 864.50) + 3 x 19.99 (= 59.97)
    assert invoice.net_total == Money.of("1053.47")
    assert invoice.vat_by_rate() == {"reduced": Money.of("4.20"), "standard": Money.of("188.77")}
    assert invoice.gross_total == Money.of("1246.44")


def test_vat_is_computed_per_rate_not_per_line() -> None:
    invoice = Invoice("X", date(2026, 1, 1), PaymentTerms.parse("net 14"))
    for _ in range(3):
        invoice.add(Line("PEN-0001", "", 1, Money.of("0.07")))
    # 19 % of 0.21 = 0.0399 -> 0.04; rounding per line would give 3 x 0.01 (0.0133 each) = 0.03.
    assert invoice.vat_total == Money.of("0.04")


def test_early_payment_discount_within_its_period() -> None:
    invoice = make_invoice()
    assert invoice.amount_if_paid_on(date(2026, 1, 25)) == Money.of("1221.51")
    assert invoice.amount_if_paid_on(date(2026, 1, 26)) == invoice.gross_total
    assert invoice.due == date(2026, 2, 14)


def test_rejects_other_currencies_and_bad_lines() -> None:
    invoice = make_invoice()
    with pytest.raises(ValueError, match="USD"):
        invoice.add(Line("X", "", 1, Money.of("1", "USD")))
    with pytest.raises(ValueError):
        Line("X", "", 0, Money.of("1"))
    with pytest.raises(ValueError):
        Line("X", "", 1, Money.of("1"), vat="luxury")


def test_cli_prints_the_invoice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    order = {"number": "2026-0001", "issued": "2026-01-31", "terms": "eom + 15",
             "lines": [{"sku": "TEL-0070", "quantity": 2, "unit_price": "129.00"}]}
    path = tmp_path / "order.json"
    path.write_text(json.dumps(order))
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "due 2026-02-15" in out
    assert "307.02 EUR" in out  # 258.00 + 19 % VAT


def test_cli_reports_a_bad_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "order.json"
    path.write_text(json.dumps({"number": "1", "issued": "2026-01-01", "terms": "soon", "lines": []}))
    assert main([str(path)]) == 1
    assert "unknown payment terms" in capsys.readouterr().err
