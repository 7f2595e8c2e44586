"""The shop frontend's browser pages in-process: the DOM contract (data-testids, scripts), the currency of a page,
the upstream calls each page makes, and static assets (content types, no-store, 404, traversal refused).

The frontend runs in-process (``App.handle``); its upstreams are one fake service on loopback that records every
call, so a test can assert which calls a page makes.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "env_shop" / "files" / "app"))

from shop.data import PRODUCTS, RATES, convert
from shop.services import builder
from shop.telemetry import Telemetry
from shop.web import App, HTTPError, Request, Response

APP_DIR = Path(__file__).resolve().parents[2] / "roles" / "env_shop" / "files" / "app"
STATIC = APP_DIR / "shop" / "static"
PAGES = ("home", "product", "cart", "checkout")
HEADER_TESTIDS = ("home-link", "currency-select", "cart-link", "cart-count")
# the exact strings that frontend-mutation faults replace, each exactly once in its file
ANCHORS = {
    "product.js": ('product_id: productId,', 'button.addEventListener("click", addToCart);'),
    "cart.js": ("total += line.price * line.quantity;",),
    "app.js": ('document.cookie = "shop_currency=" + code',),
    "checkout.js": ("currency: currentCurrency(),",),
}


@dataclass
class Upstreams:
    """catalog, cart, currency, recommendation and ads in one fake service; ``calls`` lists (method, route)."""
    app: App
    port: int
    calls: list[tuple[str, str]] = field(default_factory=list)
    failing: set[str] = field(default_factory=set)  # routes answering 500


def fake_upstreams() -> Upstreams:
    app = App("fake", Telemetry("fake", "fake-t", None, stream=io.StringIO()))
    ups = Upstreams(app, 0)
    by_id = {p["id"]: p for p in PRODUCTS}

    def route(method: str, template: str, handler: Any) -> None:
        def wrapped(req: Request) -> Any:
            ups.calls.append((method, template))
            if template in ups.failing:
                raise HTTPError(500, f"{template} failed on purpose")
            return handler(req)
        app.router.add(method, template, wrapped)

    def product(req: Request) -> Any:
        if req.params["id"] not in by_id:
            raise HTTPError(404, f"product not found: {req.params['id']}")
        return dict(by_id[req.params["id"]])

    route("GET", "/products", lambda req: {"products": [dict(p) for p in PRODUCTS]})
    route("GET", "/products/{id}", product)
    route("GET", "/currencies", lambda req: {"currencies": sorted(RATES)})
    route("GET", "/convert", lambda req: {"result": float(convert(req.query["amount"], "USD", req.query["to"]))})
    route("GET", "/recommendations", lambda req: {"products": [dict(p) for p in PRODUCTS[:3]]})
    route("GET", "/ads", lambda req: {"ads": [{"text": "Look up!", "redirect_url": "/product/2ZYFJ3GM2N"}]})
    route("GET", "/cart/{user}", lambda req: {"user": req.params["user"], "items": []})
    server = app.make_server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    ups.port = int(server.server_address[1])
    return ups


@pytest.fixture(scope="module")
def upstreams() -> Iterator[Upstreams]:
    ups = fake_upstreams()
    yield ups
    assert ups.app.server is not None
    ups.app.server.shutdown()
    ups.app.server.server_close()


def frontend(ups: Upstreams, **env: str) -> App:
    app = App("frontend", Telemetry("frontend", "frontend-t", None, stream=io.StringIO()))
    addr = f"127.0.0.1:{ups.port}"
    builder("frontend")(app, {"CATALOG_ADDR": addr, "CART_ADDR": addr, "CURRENCY_ADDR": addr,
                              "RECOMMENDATION_ADDR": addr, "AD_ADDR": addr, "CHECKOUT_ADDR": addr, **env})
    return app


@pytest.fixture
def front(upstreams: Upstreams) -> Iterator[App]:
    upstreams.calls.clear()
    upstreams.failing.clear()
    yield frontend(upstreams)
    upstreams.failing.clear()


def get(app: App, path: str, cookie: str = "") -> Response:
    return app.handle("GET", path, {"Cookie": cookie} if cookie else {})


def ids_in(html: str) -> list[str]:
    return re.findall(r'data-testid="([^"]+)"', html)


def assert_layout(html: str, page: str, currency: str) -> None:
    assert f'<body data-page="{page}" data-currency="{currency}">' in html
    assert '<link rel="stylesheet" href="/static/style.css">' in html
    scripts = re.findall(r"<script [^>]*></script>", html)
    assert scripts == ['<script src="/static/app.js" defer></script>',
                       f'<script src="/static/{page}.js" defer></script>']
    assert '<a data-testid="home-link" href="/">' in html
    assert '<select data-testid="currency-select" id="currency">' in html
    assert '<a data-testid="cart-link" href="/cart">Cart (<span data-testid="cart-count">0</span>)</a>' in html
    assert f'<option value="{currency}" selected>' in html and html.count(" selected>") == 1
    assert re.search(r'<meta name="traceparent" content="00-[0-9a-f]{32}-[0-9a-f]{16}-01">', html)
    assert "http://" not in html and "https://" not in html  # no external resources
    ids = ids_in(html)
    assert all(ids.count(t) == 1 for t in HEADER_TESTIDS)


def test_home_page_follows_the_contract_and_keeps_its_upstream_calls(front: App, upstreams: Upstreams) -> None:
    resp = get(front, "/", "shop_session=abc; shop_currency=EUR")
    html = resp.body.decode()
    assert resp.status == 200 and resp.content_type.startswith("text/html")
    assert_layout(html, "home", "EUR")
    ids = ids_in(html)
    assert ids.count("product-list") == 1 and ids.count("ads") == 1
    assert ids.count("product-card") == ids.count("product-link") == ids.count("product-price") == len(PRODUCTS)
    first = PRODUCTS[0]
    assert (f'<li data-testid="product-card" data-product-id="{first["id"]}">' in html
            and f'<a data-testid="product-link" href="/product/{first["id"]}">{first["name"]}</a>' in html)
    eur = convert(first["price_usd"], "USD", "EUR")
    assert f'<span data-testid="product-price" data-amount="{eur}">{eur} EUR</span>' in html
    assert "/static/img/" not in html  # no product pictures are shipped: a placeholder that exists instead
    assert re.findall(r'src="/static/([^"]+)"', html) and all(
        (STATIC / name).is_file() for name in re.findall(r'(?:src|href)="/static/([^"]+)"', html))
    # the calls a load generator and the fault scenarios rely on, unchanged
    assert upstreams.calls == [("GET", "/currencies"), ("GET", "/products")] + [("GET", "/convert")] * len(PRODUCTS) \
        + [("GET", "/ads")]


def test_page_currency_is_query_then_cookie_then_usd(front: App, upstreams: Upstreams) -> None:
    assert 'data-currency="GBP"' in get(front, "/?currency=gbp", "shop_currency=EUR").body.decode()
    assert 'data-currency="JPY"' in get(front, "/product/OLJCESPC7Z", "a=b; shop_currency=JPY").body.decode()
    upstreams.calls.clear()
    html = get(front, "/").body.decode()
    assert 'data-currency="USD"' in html and f'{PRODUCTS[0]["price_usd"]:.2f} USD' in html
    assert ("GET", "/convert") not in upstreams.calls  # USD needs no conversion
    resp = get(front, "/", "shop_currency=XXX")
    assert resp.status == 400 and json.loads(resp.body)["error"] == "unsupported currency: XXX"
    # the JSON API keeps its answers: the query or USD, never the cookie
    resp = front.handle("GET", "/api/products", {"Cookie": "shop_currency=EUR"})
    assert {p["price"]["currency"] for p in json.loads(resp.body)["products"]} == {"USD"}


def test_product_page_follows_the_contract_and_keeps_its_upstream_calls(front: App, upstreams: Upstreams) -> None:
    resp = get(front, "/product/66VCHSJNUP?currency=EUR")
    html = resp.body.decode()
    assert resp.status == 200
    assert_layout(html, "product", "EUR")
    amount = convert(349.95, "USD", "EUR")
    assert '<h2 data-testid="product-name">Starsense Explorer Refractor Telescope</h2>' in html
    assert (f'<p data-testid="product-price" class="price" data-amount="{amount}" data-currency="EUR">'
            f"{amount} EUR</p>") in html
    assert '<input data-testid="quantity" id="quantity" type="number" value="1" min="1" max="10">' in html
    assert '<button data-testid="add-to-cart" data-product-id="66VCHSJNUP" type="button">Add to cart</button>' in html
    assert '<p data-testid="add-status" role="status" hidden></p>' in html
    assert '<p data-testid="add-error" class="error" role="alert" hidden></p>' in html
    assert ids_in(html).count("recommendations") == 1 and ids_in(html).count("recommendation") == 3
    assert f'<li data-testid="recommendation"><a href="/product/{PRODUCTS[0]["id"]}">' in html
    assert ids_in(html).count("ads") == 1
    assert html.count("<option ") == len(RATES)
    # no /currencies: the selector comes from the shop's rate table
    assert upstreams.calls == [("GET", "/products/{id}"), ("GET", "/convert"), ("GET", "/recommendations"),
                               ("GET", "/ads")]


def test_pages_render_without_ads_and_recommendations_when_they_fail(front: App, upstreams: Upstreams) -> None:
    upstreams.failing |= {"/ads", "/recommendations"}
    html = get(front, "/product/66VCHSJNUP").body.decode()
    ids = ids_in(html)
    assert "ads" not in ids and "recommendation" not in ids and ids.count("recommendations") == 1
    home = get(front, "/")
    assert home.status == 200 and "ads" not in ids_in(home.body.decode())
    assert get(front, "/product/NOSUCHITEM").status == 404


def test_cart_and_checkout_shells(front: App, upstreams: Upstreams) -> None:
    html = get(front, "/cart", "shop_currency=CHF").body.decode()
    assert_layout(html, "cart", "CHF")
    for testid in ("cart-items", "cart-total", "checkout-link", "empty-cart", "cart-empty", "cart-error"):
        assert ids_in(html).count(testid) == 1, testid
    assert '<p data-testid="cart-error" class="error" role="alert" hidden></p>' in html
    assert '<a data-testid="checkout-link" class="button" href="/checkout">' in html
    assert "<main>" in html and "data-ready" not in html  # cart.js sets it once the cart is rendered
    html = get(front, "/checkout").body.decode()
    assert_layout(html, "checkout", "USD")
    for testid in ("checkout-form", "email", "street", "city", "state", "country", "zip", "card-number",
                   "place-order", "order-confirmation", "order-id", "order-total", "checkout-error"):
        assert ids_in(html).count(testid) == 1, testid
    assert re.search(r'<input data-testid="card-number" [^>]*value="4432-8015-6152-0454">', html)
    assert '<button data-testid="place-order" type="submit">' in html
    assert '<p data-testid="checkout-error" class="error" role="alert" hidden></p>' in html
    assert upstreams.calls == [("GET", "/currencies")] * 2  # the rest is fetched by the page's script
    upstreams.failing.add("/currencies")
    assert get(front, "/cart").status == 502


@pytest.mark.parametrize(("name", "ctype"), [
    ("app.js", "text/javascript; charset=utf-8"), ("home.js", "text/javascript; charset=utf-8"),
    ("product.js", "text/javascript; charset=utf-8"), ("cart.js", "text/javascript; charset=utf-8"),
    ("checkout.js", "text/javascript; charset=utf-8"), ("style.css", "text/css; charset=utf-8"),
    ("favicon.svg", "image/svg+xml"), ("product.svg", "image/svg+xml")])
def test_static_assets_are_served_uncached(front: App, name: str, ctype: str) -> None:
    resp = get(front, f"/static/{name}")
    assert resp.status == 200 and resp.content_type == ctype
    assert resp.headers == {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
    assert resp.body == (STATIC / name).read_bytes()


def test_static_dir_from_env_is_read_on_every_request(upstreams: Upstreams, tmp_path: Path) -> None:
    app = frontend(upstreams, STATIC_DIR=str(tmp_path))
    (tmp_path / "pixel.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / "page.html").write_text("<p>hi</p>")
    (tmp_path / "app.js").write_text("// v1")
    (tmp_path / "notes.txt").write_text("secret")
    (tmp_path / ".hidden.js").write_text("// hidden")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.js").write_text("// nested")
    assert get(app, "/static/pixel.png").content_type == "image/png"
    assert get(app, "/static/page.html").content_type == "text/html; charset=utf-8"
    assert get(app, "/static/app.js").body == b"// v1"
    (tmp_path / "app.js").write_text("// v2, a fault changed the asset")
    assert get(app, "/static/app.js").body == b"// v2, a fault changed the asset"  # no cache
    for path in ("/static/notes.txt", "/static/missing.js", "/static/sub", "/static/sub/x.js", "/static/"):
        resp = get(app, path)
        assert resp.status == 404 and resp.content_type == "application/json", path
        assert "error" in json.loads(resp.body)


@pytest.mark.parametrize("path", ["/static/..%2Fweb.py", "/static/..%2F..%2Fshop%2Fweb.py", "/static/.hidden.js",
                                  "/static/%2Eenv", "/static/..", "/static/a%00.js", "/static/%2Fetc%2Fpasswd",
                                  "/static/a%5Cb.js"])
def test_static_refuses_anything_but_a_plain_file_name(front: App, path: str) -> None:
    resp = get(front, path)
    assert resp.status in (400, 404), path
    assert b"root:" not in resp.body and b"import" not in resp.body
    assert "error" in json.loads(resp.body)


def test_js_anchors_exist_exactly_once_and_scripts_stay_local() -> None:
    for name, anchors in ANCHORS.items():
        text = (STATIC / name).read_text()
        for anchor in anchors:
            assert text.count(anchor) == 1, (name, anchor)
            others = [p.name for p in STATIC.glob("*.js") if p.name != name and anchor in p.read_text()]
            assert not others, (anchor, others)
    for page in PAGES:
        assert (STATIC / f"{page}.js").is_file()
    for path in [*STATIC.glob("*.js"), STATIC / "style.css"]:
        text = path.read_text()
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, path.name
    app = (STATIC / "app.js").read_text()
    for name in ("function tracedFetch(", "function setCurrency(", "function currentCurrency(", "traceparent",
                 '"opsbench.spans"', '"shop_session="', '"shop.session"', '"shop.currency"'):
        assert name in app, name
    # every testid a script looks up is rendered by some page
    rendered = {t for page in ("/", "/product/OLJCESPC7Z", "/cart", "/checkout") for t in ids_in(get_page(page))}
    scripted = {t for p in STATIC.glob("*.js") for t in re.findall(r'byTestId\("([^"]+)"\)', p.read_text())}
    assert scripted and scripted <= rendered, scripted - rendered


def get_page(path: str) -> str:
    ups = fake_upstreams()
    try:
        return get(frontend(ups), path).body.decode()
    finally:
        assert ups.app.server is not None
        ups.app.server.shutdown()
        ups.app.server.server_close()


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_scripts_parse() -> None:
    for path in sorted(STATIC.glob("*.js")):
        result = subprocess.run(["node", "--check", str(path)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, (path.name, result.stderr)
