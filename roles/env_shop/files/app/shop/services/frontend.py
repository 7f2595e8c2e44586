"""frontend: HTML pages, their static assets and the JSON API; calls catalog, cart, recommendation, ads, currency,
checkout.

The pages follow the browser contract (data-testids, /static/app.js plus one script per page): ``/`` and
``/product/{id}`` are rendered on the server, ``/cart`` and ``/checkout`` are shells that their scripts fill from
the JSON API. HTML pages degrade gracefully when ads or recommendations fail (the failed call is still traced and
counted); the JSON API propagates every upstream error as a JSON 4xx/5xx.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from opentelemetry import trace

from ..client import UpstreamError
from ..data import RATES
from ..web import App, HTTPError, Request, Response
from .common import require_int, require_str, upstream

CHECKOUT_TIMEOUT = 10.0  # checkout makes many calls of its own
CURRENCY_COOKIE = "shop_currency"
DEFAULT_STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
STATIC_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".html": "text/html; charset=utf-8",
}
STATIC_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")  # a plain file name: no '/', no leading dot
# what /checkout is prefilled with: an address the shipping service accepts and a card that passes the Luhn check
CHECKOUT_FIELDS = (
    ("email", "Email", "email", "someone@example.com"),
    ("street", "Street", "text", "1600 Amphitheatre Parkway"),
    ("city", "City", "text", "Mountain View"),
    ("state", "State", "text", "CA"),
    ("country", "Country", "text", "USA"),
    ("zip", "ZIP code", "text", "94043"),
    ("card-number", "Card number", "text", "4432-8015-6152-0454"),
)

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{traceparent}<title>{title} - OpsBench Astronomy Shop</title>
<link rel="icon" href="/static/favicon.svg">
<link rel="stylesheet" href="/static/style.css">
<script src="/static/app.js" defer></script>
<script src="/static/{page}.js" defer></script>
</head>
<body data-page="{page}" data-currency="{currency}">
<header><h1><a data-testid="home-link" href="/">OpsBench Astronomy Shop</a></h1>
<label>Currency <select data-testid="currency-select" id="currency">{options}</select></label>
<a data-testid="cart-link" href="/cart">Cart (<span data-testid="cart-count">0</span>)</a></header>
<main>
{body}
</main>
</body></html>
"""


def traceparent_meta() -> str:
    """The server span of this page as a ``<meta name="traceparent">``: app.js makes the browser's documentLoad
    span a child of it, so the page load and the backend calls that rendered it share one trace."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return ""
    return f'<meta name="traceparent" content="00-{ctx.trace_id:032x}-{ctx.span_id:016x}-01">\n'


def page(name: str, title: str, currency: str, currencies: Iterable[str], body: str) -> Response:
    options = "".join(f'<option value="{html.escape(c)}"{" selected" if c == currency else ""}>{html.escape(c)}'
                      "</option>" for c in currencies)
    return Response.html(PAGE.format(traceparent=traceparent_meta(), title=html.escape(title), page=name,
                                     currency=html.escape(currency), options=options, body=body))


def cookie(req: Request, name: str) -> str:
    for part in req.headers.get("cookie", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return unquote(value.strip().strip('"'))
    return ""


def money(amount: float, currency: str) -> str:
    return f"{amount:.2f} {html.escape(currency)}"


def serve_static(directory: Path, name: str) -> Response:
    """One file of the static directory, read on every request: a fault that changes an asset shows at once."""
    if not STATIC_NAME.match(name):
        raise HTTPError(400, f"invalid static file name: {name!r}")
    ctype = STATIC_TYPES.get(Path(name).suffix.lower())
    path = directory / name
    if ctype is None or not path.is_file():
        raise HTTPError(404, f"no such static file: {name}")
    return Response(200, path.read_bytes(), ctype, {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})


def build(app: App, env: Mapping[str, str]) -> None:
    catalog = upstream(app, "catalog", env)
    cart = upstream(app, "cart", env)
    recommendation = upstream(app, "recommendation", env)
    ads = upstream(app, "ads", env)
    currency_svc = upstream(app, "currency", env)
    checkout = upstream(app, "checkout", env, timeout=CHECKOUT_TIMEOUT)
    static_dir = Path(env.get("STATIC_DIR") or DEFAULT_STATIC_DIR)

    def user_of(req: Request, body: Mapping[str, Any] | None = None) -> str:
        user = (body or {}).get("user") or req.query.get("user") or req.headers.get("x-shop-user") or "anonymous"
        if not isinstance(user, str):
            raise HTTPError(400, "user must be a string")
        return user

    def currency_of(req: Request) -> str:
        """The JSON API's currency: the query, else USD."""
        return (req.query.get("currency") or "USD").upper()

    def page_currency(req: Request) -> str:
        """A page's currency: the query, else the cookie app.js's setCurrency writes, else USD."""
        return (req.query.get("currency") or cookie(req, CURRENCY_COOKIE) or "USD").upper()

    def currencies_for(currency: str) -> list[str]:
        currencies = [str(c) for c in currency_svc.get("/currencies", route="/currencies").get("currencies", [])]
        if currency not in currencies:
            raise HTTPError(400, f"unsupported currency: {currency}")
        return currencies

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
        links = "".join(f'<li data-testid="ad"><a href="{html.escape(a.get("redirect_url", "/"))}">'
                        f'{html.escape(a.get("text", ""))}</a></li>' for a in items)
        return f'<aside data-testid="ads" class="ads"><h3>Ads</h3><ul>{links}</ul></aside>'

    # -- HTML ------------------------------------------------------------------------------
    @app.route("GET", "/")
    def home(req: Request) -> Response:
        currency = page_currency(req)
        currencies = currencies_for(currency)
        cards = "".join(
            f'<li data-testid="product-card" data-product-id="{html.escape(p["id"])}">'
            f'<img alt="" src="/static/product.svg" width="64" height="64">'
            f'<a data-testid="product-link" href="/product/{quote(p["id"])}">{html.escape(p["name"])}</a> '
            f'<span data-testid="product-price" data-amount="{p["price"]["amount"]:.2f}">'
            f'{money(p["price"]["amount"], currency)}</span></li>' for p in products(currency))
        body = f'<h2>Products</h2><ul data-testid="product-list" class="products">{cards}</ul>{ads_html(ads_for(""))}'
        return page("home", "Home", currency, currencies, body)

    @app.route("GET", "/product/{id}")
    def product_page(req: Request) -> Response:
        currency = page_currency(req)
        pid = req.params["id"]
        p = catalog.get(f"/products/{quote(pid, safe='')}", route="/products/{id}")
        amount = price(float(p["price_usd"]), currency)
        try:
            recs = recommendation.get("/recommendations", route="/recommendations",
                                      query={"product_ids": pid}).get("products", [])
        except UpstreamError as exc:
            app.log.warn(f"recommendations unavailable, rendering without them: {exc.message}")
            recs = []
        rec_html = "".join(f'<li data-testid="recommendation"><a href="/product/{quote(r["id"])}">'
                           f'{html.escape(r["name"])}</a></li>' for r in recs)
        name = html.escape(p["name"])
        body = (f'<article class="product"><img alt="{name}" src="/static/product.svg" width="160" height="160">'
                f'<div><h2 data-testid="product-name">{name}</h2><p>{html.escape(p["description"])}</p>'
                f'<p data-testid="product-price" class="price" data-amount="{amount:.2f}" '
                f'data-currency="{html.escape(currency)}">{money(amount, currency)}</p>'
                '<p><label>Quantity <input data-testid="quantity" id="quantity" type="number" value="1" min="1" '
                f'max="10"></label> <button data-testid="add-to-cart" data-product-id="{html.escape(p["id"])}" '
                'type="button">Add to cart</button></p>'
                '<p data-testid="add-status" role="status" hidden></p>'
                '<p data-testid="add-error" class="error" role="alert" hidden></p></div></article>'
                f'<section data-testid="recommendations"><h3>You may also like</h3><ul>{rec_html}</ul></section>'
                f'{ads_html(ads_for(",".join(p.get("categories", []))))}')
        # The selector lists the shop's rate table (the currency service's own source) rather than asking the
        # currency service: this page's upstream calls stay catalog, currency /convert, recommendation and ads.
        return page("product", p["name"], currency, sorted(RATES), body)

    @app.route("GET", "/cart")
    def cart_page(req: Request) -> Response:
        currency = page_currency(req)
        body = ('<h2>Your cart</h2>'
                '<p data-testid="cart-error" class="error" role="alert" hidden></p>'
                '<p data-testid="cart-empty" hidden>Your cart is empty.</p>'
                '<table data-testid="cart-items" hidden><thead><tr><th>Product</th><th>Quantity</th><th>Price</th>'
                '</tr></thead><tbody></tbody></table>'
                '<p data-testid="cart-total" data-amount="0.00" hidden></p>'
                '<p id="cart-actions" hidden><a data-testid="checkout-link" class="button" href="/checkout">'
                'Proceed to checkout</a> <button data-testid="empty-cart" type="button">Empty cart</button></p>')
        return page("cart", "Cart", currency, currencies_for(currency), body)

    @app.route("GET", "/checkout")
    def checkout_page(req: Request) -> Response:
        currency = page_currency(req)
        # no `required`: an empty field reaches the API, whose error message the page shows
        inputs = "".join(f'<label>{label} <input data-testid="{name}" id="{name}" name="{name}" type="{kind}" '
                         f'value="{html.escape(value)}"></label>' for name, label, kind, value in CHECKOUT_FIELDS)
        body = ('<h2>Checkout</h2>'
                f'<form data-testid="checkout-form" class="checkout" novalidate>{inputs}'
                '<button data-testid="place-order" type="submit">Place order</button></form>'
                '<p data-testid="checkout-error" class="error" role="alert" hidden></p>'
                '<section data-testid="order-confirmation" hidden><h3>Thank you for your order</h3>'
                '<p>Order <span data-testid="order-id"></span>, total <span data-testid="order-total" '
                'data-amount=""></span></p></section>')
        return page("checkout", "Checkout", currency, currencies_for(currency), body)

    @app.route("GET", "/static/{name}")
    def static(req: Request) -> Response:
        return serve_static(static_dir, req.params["name"])

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
