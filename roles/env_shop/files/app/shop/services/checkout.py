"""checkout: POST /checkout {user, currency, address, email[, card]} places an order.

Steps: get the cart, price each item via catalog and convert it via currency, quote shipping,
charge via payment (with ``X-Request-Time``, checkout's clock: payment refuses a time outside its window, and
checkout answers such a refusal, 401 or 403, with 502: the shop's fault, not the customer's), ship, empty the
cart, send the confirmation via email (an email failure is logged, not fatal). Flag paymentServiceUnreachable:
charge through a bad payment address (PAYMENT_UNREACHABLE_ADDR, default the payment host on port 1,
which refuses connections).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from ..client import Upstream, UpstreamError
from ..web import App, HTTPError, Request
from .common import require_str, upstream

DEFAULT_CARD = "4432-8015-6152-0454"


def build(app: App, env: Mapping[str, str]) -> None:
    cart = upstream(app, "cart", env)
    catalog = upstream(app, "catalog", env)
    currency_svc = upstream(app, "currency", env)
    payment = upstream(app, "payment", env)
    bad_payment = upstream(app, "payment", env, addr=env.get("PAYMENT_UNREACHABLE_ADDR") or f"{payment.host}:1")
    shipping = upstream(app, "shipping", env)
    email_svc = upstream(app, "email", env)
    flags = app.flags

    def convert(amount: Decimal, to: str) -> Decimal:
        data = currency_svc.get("/convert", route="/convert",
                                query={"from": "USD", "to": to, "amount": str(amount)})
        return Decimal(str(data["result"]))

    @app.route("POST", "/checkout")
    def checkout(req: Request) -> dict[str, Any]:
        body = req.json()
        user = require_str(body, "user", 100)
        email = require_str(body, "email", 320)
        currency = str(body.get("currency") or "USD").upper()
        address = body.get("address")
        if not isinstance(address, dict):
            raise HTTPError(400, "address must be an object")
        card = body.get("card") or DEFAULT_CARD

        user_path = quote(user, safe="")
        cart_data = cart.get(f"/cart/{user_path}", route="/cart/{user}")
        items = cart_data.get("items") if isinstance(cart_data, dict) else None
        if not items:
            raise HTTPError(400, f"cart of {user} is empty")

        order_items: list[dict[str, Any]] = []
        subtotal = Decimal("0")
        for item in items:
            product = catalog.get(f"/products/{quote(str(item['product_id']), safe='')}", route="/products/{id}")
            unit = convert(Decimal(str(product["price_usd"])), currency)
            qty = int(item["quantity"])
            subtotal += unit * qty
            order_items.append({"product_id": product["id"], "name": product["name"], "quantity": qty,
                                "unit_price": float(unit)})

        ship_items = [{"product_id": i["product_id"], "quantity": i["quantity"]} for i in order_items]
        quote_data = shipping.post("/quote", {"address": address, "items": ship_items}, route="/quote")
        shipping_cost = convert(Decimal(str(quote_data["cost_usd"])), currency)
        total = subtotal + shipping_cost

        payer: Upstream = bad_payment if flags.enabled("paymentServiceUnreachable") else payment
        try:
            charge = payer.post("/charge", {"amount": float(total), "currency": currency, "card": card},
                                route="/charge", headers={"X-Request-Time": f"{time.time():.3f}"})
        except UpstreamError as exc:
            if exc.status in (401, 403):
                raise HTTPError(502, f"payment refused checkout's request: {exc.message}") from None
            raise
        shipment = shipping.post("/ship", {"address": address, "items": ship_items}, route="/ship")
        cart.delete(f"/cart/{user_path}", route="/cart/{user}")

        order = {"order_id": str(uuid.uuid4()), "user": user, "items": order_items,
                 "shipping_cost": {"currency": currency, "amount": float(shipping_cost)},
                 "total": {"currency": currency, "amount": float(total)},
                 "transaction_id": charge.get("transaction_id"), "tracking_id": shipment.get("tracking_id")}
        try:
            email_svc.post("/send", {"email": email, "order": order}, route="/send")
        except UpstreamError as exc:
            app.log.warn(f"order {order['order_id']} placed but the confirmation email failed: {exc.message}",
                         **{"order.id": order["order_id"]})
        app.log.info(f"order {order['order_id']} placed: {len(order_items)} products, {total:.2f} {currency}",
                     **{"order.id": order["order_id"], "order.total": float(total), "order.currency": currency})
        return order
