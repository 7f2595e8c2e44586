"""email: POST /send {email, order} renders an order confirmation; nothing is sent anywhere."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

from ..web import App, HTTPError, Request

EMAIL_RE = re.compile(r"^[^@\s]{1,64}@[^@\s]{1,255}$")


def render(email: str, order: Mapping[str, Any]) -> str:
    lines = [f"<p>Dear customer ({html.escape(email)}),</p>",
             f"<p>thank you for your order {html.escape(str(order.get('order_id', '')))}.</p>", "<ul>"]
    for item in order.get("items", []) or []:
        if isinstance(item, Mapping):
            lines.append(f"<li>{html.escape(str(item.get('quantity', 1)))} x "
                         f"{html.escape(str(item.get('name', item.get('product_id', ''))))}</li>")
    lines.append("</ul>")
    total = order.get("total") or {}
    if isinstance(total, Mapping):
        lines.append(f"<p>Total: {html.escape(str(total.get('amount', '')))} "
                     f"{html.escape(str(total.get('currency', '')))}</p>")
    lines.append(f"<p>Tracking number: {html.escape(str(order.get('tracking_id', '')))}</p>")
    return "\n".join(lines)


def build(app: App, env: Mapping[str, str]) -> None:
    @app.route("POST", "/send")
    def send(req: Request) -> dict[str, Any]:
        body = req.json()
        email = body.get("email")
        if not isinstance(email, str) or not EMAIL_RE.match(email):
            raise HTTPError(400, "invalid email address")
        order = body.get("order") or {}
        if not isinstance(order, Mapping):
            raise HTTPError(400, "order must be an object")
        text = render(email, order)
        app.log.info(f"order confirmation rendered for order {order.get('order_id', '?')}",
                     **{"email.bytes": len(text)})
        return {"status": "rendered", "bytes": len(text)}
