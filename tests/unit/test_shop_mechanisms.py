"""Shop parts that issue 34's fault mechanisms act on: the per-instance rate limiter, the release a replica runs
(the catalog's table layout), payment's request-time window and checkout's answer to a refused charge."""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "env_shop" / "files" / "app"))

from shop.flags import Flags
from shop.services import builder
from shop.services.catalog import SCHEMA_COLUMNS, row_to_product
from shop.telemetry import Telemetry
from shop.web import App, RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def apps() -> Iterator[list[App]]:
    made: list[App] = []
    yield made
    for app in made:
        app.stopping.set()


def build(apps: list[App], service: str, **env: str) -> App:
    app = App(service, Telemetry(service, f"{service}-t", None, stream=io.StringIO()))
    app.flags = Flags(None)
    builder(service)(app, env)
    apps.append(app)
    return app


def call(app: App, method: str, path: str, body: object = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    resp = app.handle(method, path, headers or {}, json.dumps(body).encode() if body is not None else b"")
    body_out = json.loads(resp.body) if resp.content_type == "application/json" else resp.body.decode()
    return resp.status, body_out, resp.headers


# -- rate limiter ----------------------------------------------------------------------------------------------

def test_token_bucket_passes_a_burst_then_the_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(2.0, 3.0, clock=clock)
    assert [limiter.acquire() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.acquire() == pytest.approx(0.5)  # empty: one token every 0.5 s
    clock.now += 0.5
    assert limiter.acquire() == 0.0
    assert limiter.acquire() > 0
    clock.now += 60  # refills to the burst, never above it
    assert [limiter.acquire() for _ in range(4)].count(0.0) == 3


def test_rate_limit_from_env() -> None:
    assert RateLimiter.from_env({}) is None
    assert RateLimiter.from_env({"SHOP_RATE_LIMIT_RPS": "0"}) is None
    limiter = RateLimiter.from_env({"SHOP_RATE_LIMIT_RPS": "0.5"})
    assert limiter is not None and limiter.rate == 0.5 and limiter.burst == 1.0  # a burst is at least 1
    limiter = RateLimiter.from_env({"SHOP_RATE_LIMIT_RPS": "4", "SHOP_RATE_LIMIT_BURST": "10"})
    assert limiter is not None and (limiter.rate, limiter.burst) == (4.0, 10.0)
    with pytest.raises(ValueError, match="must be numbers"):
        RateLimiter.from_env({"SHOP_RATE_LIMIT_RPS": "fast"})
    with pytest.raises(ValueError, match="positive finite"):
        RateLimiter(-1)


def test_limited_app_answers_429_with_retry_after_but_never_limits_probes() -> None:
    app = App("catalog", Telemetry("catalog", "catalog-t", None, stream=io.StringIO()))
    app.router.add("GET", "/products", lambda req: {"ok": True})
    app.rate_limiter = RateLimiter(1.0, 2.0, clock=Clock())
    codes = [call(app, "GET", "/products")[0] for _ in range(5)]
    assert codes == [200, 200, 429, 429, 429]
    status, body, headers = call(app, "GET", "/products")
    assert status == 429 and headers["Retry-After"] == "1"
    assert body["error"] == "rate limit exceeded: catalog accepts 1 requests/s (burst 2) per instance"
    assert call(app, "GET", "/healthz")[0] == 200 and call(app, "GET", "/metrics")[0] == 200


# -- catalog release 2 (table layout 2) ------------------------------------------------------------------------

def test_catalog_layout_two_reads_the_stock_column() -> None:
    assert SCHEMA_COLUMNS["2"].endswith(", stock") and "stock" not in SCHEMA_COLUMNS["1"]
    row = ("A", "name", "d", "p.svg", 1.5, ["x"])
    assert "stock" not in row_to_product(row)
    assert row_to_product((*row, 7))["stock"] == 7


def test_catalog_refuses_an_unknown_layout(apps: list[App]) -> None:
    with pytest.raises(ValueError, match="CATALOG_SCHEMA must be one of 1, 2"):
        build(apps, "catalog", PG_DSN="host=127.0.0.1 port=1 connect_timeout=1", CATALOG_SCHEMA="3")


# -- payment's request-time window -----------------------------------------------------------------------------

GOOD = {"amount": 12.5, "currency": "EUR", "card": "4432-8015-6152-0454"}


def test_payment_refuses_a_request_time_outside_its_window(apps: list[App]) -> None:
    app = build(apps, "payment", PAYMENT_MAX_CLOCK_SKEW="60")
    assert call(app, "POST", "/charge", GOOD)[0] == 200  # no header: nothing to check
    assert call(app, "POST", "/charge", GOOD, {"X-Request-Time": f"{time.time() + 30:.3f}"})[0] == 200
    status, body, _ = call(app, "POST", "/charge", GOOD, {"X-Request-Time": f"{time.time() + 900:.3f}"})
    assert status == 401 and "X-Request-Time is +900 s from payment's clock (allowed +/-60 s)" in body["error"]
    assert call(app, "POST", "/charge", GOOD, {"X-Request-Time": f"{time.time() - 900:.3f}"})[0] == 401
    assert call(app, "POST", "/charge", GOOD, {"X-Request-Time": "yesterday"})[0] == 400
    off = build(apps, "payment", PAYMENT_MAX_CLOCK_SKEW="0")
    assert call(off, "POST", "/charge", GOOD, {"X-Request-Time": f"{time.time() + 9e5:.3f}"})[0] == 200


def test_checkout_sends_its_clock_and_answers_a_refused_charge_with_502(apps: list[App],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from shop.client import Upstream, UpstreamError

    sent: list[dict[str, str]] = []

    def fake_request(self: Upstream, method: str, path: str, **kw: Any) -> Any:
        if self.peer == "cart":
            return {"items": [{"product_id": "A", "quantity": 1}]} if method == "GET" else {}
        if self.peer == "catalog":
            return {"id": "A", "name": "a", "price_usd": 2.0}
        if self.peer == "currency":
            return {"result": 2.0}
        if self.peer == "shipping":
            return {"cost_usd": 1.0, "tracking_id": "t"}
        if self.peer == "payment":
            sent.append(kw.get("headers") or {})
            raise UpstreamError(401, "payment: request time outside the allowed window", "payment", 401)
        return {}

    monkeypatch.setattr(Upstream, "request", fake_request)
    app = build(apps, "checkout")
    status, body, _ = call(app, "POST", "/checkout", {"user": "u", "email": "u@x", "address": {"city": "c"}})
    assert status == 502 and body["error"].startswith("payment refused checkout's request: payment: request time")
    assert abs(float(sent[0]["X-Request-Time"]) - time.time()) < 60
