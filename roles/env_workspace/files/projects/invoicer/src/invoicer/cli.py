"""`invoicer ORDER.json`: print the invoice of an order."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path

from invoicer.invoice import Invoice, Line
from invoicer.money import Money
from invoicer.terms import PaymentTerms


def load(path: Path) -> Invoice:
    order = json.loads(path.read_text())
    currency = order.get("currency", "EUR")
    invoice = Invoice(order["number"], date.fromisoformat(order["issued"]), PaymentTerms.parse(order["terms"]),
                      currency)
    for item in order["lines"]:
        invoice.add(Line(item["sku"], item.get("description", ""), int(item["quantity"]),
                         Money.of(str(item["unit_price"]), currency), item.get("vat", "standard")))
    return invoice


def render(invoice: Invoice) -> str:
    out = [f"Invoice {invoice.number}  issued {invoice.issued.isoformat()}  due {invoice.due.isoformat()}"]
    for line in invoice.lines:
        out.append(f"  {line.sku:<10} {line.quantity:>5} x {line.unit_price!s:>14}  {line.net!s:>14}")
    out.append(f"  {'net':<33} {invoice.net_total!s:>14}")
    for vat, amount in invoice.vat_by_rate().items():
        out.append(f"  {'VAT ' + vat:<33} {amount!s:>14}")
    out.append(f"  {'total':<33} {invoice.gross_total!s:>14}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="invoicer", description=__doc__)
    parser.add_argument("order", type=Path, help="order as JSON")
    args = parser.parse_args(argv)
    try:
        print(render(load(args.order)))
    except (OSError, KeyError, ValueError) as exc:
        print(f"invoicer: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
