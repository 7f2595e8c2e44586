"""currency: conversions with a fixed rate table (``/convert?from=&to=&amount=``, ``/currencies``)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from ..data import RATES, UnknownCurrency, convert
from ..web import App, HTTPError, Request


def build(app: App, env: Mapping[str, str]) -> None:
    @app.route("GET", "/currencies")
    def currencies(req: Request) -> dict[str, Any]:
        return {"currencies": sorted(RATES)}

    @app.route("GET", "/convert")
    def convert_route(req: Request) -> dict[str, Any]:
        src = req.query.get("from", "USD")
        dst = req.query.get("to", "")
        raw = req.query.get("amount", "")
        try:
            amount = Decimal(raw)
        except InvalidOperation:
            raise HTTPError(400, f"invalid amount: {raw!r}") from None
        if not amount.is_finite() or amount < 0:
            raise HTTPError(400, f"invalid amount: {raw!r}")
        try:
            result = convert(amount, src, dst)
        except UnknownCurrency as exc:
            raise HTTPError(400, str(exc)) from None
        return {"from": src.upper(), "to": dst.upper(), "amount": float(amount), "result": float(result)}
