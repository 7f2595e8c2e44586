"""frontend: HTML pages and the JSON API; calls catalog, cart, recommendation, ads, currency, checkout.

HTML pages degrade gracefully when ads or recommendations fail (the failed call is still traced
and counted); the JSON API propagates every upstream error as a JSON 4xx/5xx.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from ..client import UpstreamError
from ..web import App, HTTPError, Request, Response
from .common import require_int, require_str, upstream

CHECKOUT_TIMEOUT = 10.0  # checkout makes many calls of its own

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>{title} - OpsBench Astronomy Shop</title></head>
<body><header><h1><a href="/">OpsBench Astronomy Shop</a></h1></header>
{body}
</body></html>
"""


def page(title: str, body: str) -> Response:
    return Response.html(PAGE.format(title=html.escape(title), body=body))


def build(app: App, env: Mapping[str, str]) -> None:
    catalog = upstream(app, "catalog", env)
    cart = upstream(app, "cart", env)
    recommendation = upstream(app, "recommendation", env)
    ads = upstream(app, "ads", env)
    currency_svc = upstream(app, "currency", env)
    checkout = upstream(app, "checkout", env, timeout=CHECKOUT_TIMEOUT)

    def user_of(req: Request, body: Mapping[str, Any] | None = None) -> str:
        user = (body or {}).get("user") or req.query.get("user") or req.headers.get("x-shop-user") or "anonymous"
        if not isinstance(user, str):
            raise HTTPError(400, "user must be a string")
        return user

    def currency_of(req: Request) -> str:
        return (req.query.get("currency") or "USD").upper()

    def price(amount_usd: float, currency: str) -> float:
        if currency == "USD":
            return amount_usd
        data = currency_svc.get("/convert", route="/convert",
                                query={"from": "USD", "to": currency, "amount": str(Decimal(str(amount_usd)))})
        return float(data["result"])

    def products(currency: str) -> list[dict[str, Any]]:
        data = catalog.get("/products", route="/products")
        items: list[dict[str, Any]] = list(data.get("products", []))
        for p in items:
            p["price"] = {"currency": currency, "amount": price(float(p["price_usd"]), currency)}
        return items

    def ads_for(context: str) -> list[dict[str, str]]:
        try:
            data = ads.get("/ads", route="/ads", query={"context": context} if context else None)
        except UpstreamError as exc:
            app.log.warn(f"ads unavailable, rendering without ads: {exc.message}")
            return []
        return list(data.get("ads", []))

    def ads_html(items: list[dict[str, str]]) -> str:
        if not items:
            return ""
        links = "".join(f'<li><a href="{html.escape(a.get("redirect_url", "/"))}">{html.escape(a.get("text", ""))}'
                        "</a></li>" for a in items)
        return f'<aside class="ads"><ul>{links}</ul></aside>'

    # -- HTML ------------------------------------------------------------------------------
    @app.route("GET", "/")
    def home(req: Request) -> Response:
        currency = currency_of(req)
        currencies = currency_svc.get("/currencies", route="/currencies").get("currencies", [])
        if currency not in currencies:
            raise HTTPError(400, f"unsupported currency: {currency}")
        rows = "".join(
            f'<li><a href="/product/{quote(p["id"])}">{html.escape(p["name"])}</a> '
            f'{p["price"]["amount"]:.2f} {html.escape(currency)}</li>' for p in products(currency))
        options = " ".join(f'<a href="/?currency={html.escape(c)}">{html.escape(c)}</a>' for c in currencies)
        return page("Home", f"<nav>Currency: {options}</nav><ul class=\"products\">{rows}</ul>{ads_html(ads_for(''))}")

    @app.route("GET", "/product/{id}")
    def product_page(req: Request) -> Response:
        currency = currency_of(req)
        pid = req.params["id"]
        p = catalog.get(f"/products/{quote(pid, safe='')}", route="/products/{id}")
        amount = price(float(p["price_usd"]), currency)
        try:
            recs = recommendation.get("/recommendations", route="/recommendations",
                                      query={"product_ids": pid}).get("products", [])
        except UpstreamError as exc:
            app.log.warn(f"recommendations unavailable, rendering without them: {exc.message}")
            recs = []
        rec_html = "".join(f'<li><a href="/product/{quote(r["id"])}">{html.escape(r["name"])}</a></li>' for r in recs)
        body = (f'<article><h2>{html.escape(p["name"])}</h2><p>{html.escape(p["description"])}</p>'
                f'<p class="price">{amount:.2f} {html.escape(currency)}</p>'
                f'<img alt="{html.escape(p["name"])}" src="/static/img/{html.escape(p["picture"])}"></article>'
                f'<section><h3>You may also like</h3><ul>{rec_html}</ul></section>'
                f'{ads_html(ads_for(",".join(p.get("categories", []))))}')
        return page(p["name"], body)

    # -- JSON API --------------------------------------------------------------------------
    @app.route("GET", "/api/products")
    def api_products(req: Request) -> dict[str, Any]:
        return {"products": products(currency_of(req))}

    @app.route("GET", "/api/products/{id}")
    def api_product(req: Request) -> Any:
        p = catalog.get(f"/products/{quote(req.params['id'], safe='')}", route="/products/{id}")
        currency = currency_of(req)
        p["price"] = {"currency": currency, "amount": price(float(p["price_usd"]), currency)}
        return p

    @app.route("GET", "/api/cart")
    def api_cart(req: Request) -> Any:
        return cart.get(f"/cart/{quote(user_of(req), safe='')}", route="/cart/{user}")

    @app.route("POST", "/api/cart")
    def api_cart_add(req: Request) -> Any:
        body = req.json()
        product_id = require_str(body, "product_id", 64)
        quantity = require_int(body, "quantity", 1, 100, default=1)
        catalog.get(f"/products/{quote(product_id, safe='')}", route="/products/{id}")  # must exist
        return cart.post(f"/cart/{quote(user_of(req, body), safe='')}",
                         {"product_id": product_id, "quantity": quantity}, route="/cart/{user}")

    @app.route("DELETE", "/api/cart")
    def api_cart_empty(req: Request) -> Any:
        return cart.delete(f"/cart/{quote(user_of(req), safe='')}", route="/cart/{user}")

    @app.route("POST", "/api/checkout")
    def api_checkout(req: Request) -> Any:
        body = req.json()
        body["user"] = user_of(req, body)
        return checkout.post("/checkout", body, route="/checkout")

    @app.route("GET", "/api/recommendations")
    def api_recommendations(req: Request) -> Any:
        return recommendation.get("/recommendations", route="/recommendations",
                                  query={"product_ids": req.query.get("product_ids", "")})

    @app.route("GET", "/api/ads")
    def api_ads(req: Request) -> Any:
        context = req.query.get("context", "")
        return ads.get("/ads", route="/ads", query={"context": context} if context else None)
