"""The shop's four critical user journeys in real Chromium against the real shop stack (every service a process on
loopback, real Redis and PostgreSQL: tests/e2e/test_shop_app.py's ``stack`` fixture).

Healthy, every journey passes without a console error and the capture joins the browser to the backend (the
traceparent of a request is its span's). With ``cartServiceFailure`` on, checkout fails at add-to-cart, and the
capture shows why: POST /api/cart answered 502 (the cart service's 500), and the page's add-error says so.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.cuj import SHOP_JOURNEYS, RunResult, load_capture, run
from tests.e2e.test_shop_app import Stack, stack  # noqa: F401 - the module-scoped shop stack fixture

CHROMIUM = "/usr/bin/chromium"
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                 reason=f"{CHROMIUM} is absent: `make setup` installs Debian's chromium")]


def base_url(st: Stack) -> str:
    return st.url("frontend").rstrip("/")


def size_of(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


@pytest.fixture(scope="module")
def healthy(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunResult]:  # noqa: F811
    stack.set_flags()  # every flag off
    t0 = time.monotonic()
    result = run(base_url(stack), tmp_path_factory.mktemp("cuj-shop") / "capture", timeout=180)
    print(f"\nfour shop journeys: {time.monotonic() - t0:.1f} s wall, index duration {result.index['duration_s']} s, "
          f"capture {size_of(result.out) / 1024:.0f} KiB")
    yield result


def test_every_shop_journey_passes_without_console_errors(healthy: RunResult) -> None:
    details = {j["name"]: (j["status"], j["message"]) for j in healthy.index["journeys"]}
    assert healthy.statuses() == dict.fromkeys(("browse", "checkout", "currency", "recommendations"), "passed"), \
        details
    assert healthy.exit_code == 0 and healthy.leftovers == []
    cap = load_capture(healthy.out)
    errors = [e for e in cap.console() if e["type"] in ("error", "pageerror")]
    assert errors == []
    failed = [e for e in cap.network() if e["failure"] or (e["status"] or 0) >= 400]
    assert failed == []
    for journey in cap.journeys():
        for record in cap.steps(journey):
            assert cap.screenshot(journey, record["name"]).read_bytes()[:4] == b"\x89PNG"
            assert "data-testid" in cap.dom(journey, record["name"])
    assert size_of(healthy.out) < 5 * 1024 * 1024


def test_checkout_capture_joins_browser_and_backend(healthy: RunResult) -> None:
    cap = load_capture(healthy.out)
    report = cap.report("checkout")
    assert report["vars"]["unit_price"] > 0
    cart_rows = cap.dom("checkout", "open-cart")
    assert 'data-product-id="OLJCESPC7Z"' in cart_rows
    add = [e for e in cap.network("checkout", "add-to-cart") if e["url"] == "/api/cart" and e["method"] == "POST"]
    assert len(add) == 1 and add[0]["status"] == 200
    assert add[0]["request_body"]["product_id"] == "OLJCESPC7Z" and add[0]["request_body"]["quantity"] == 2
    user = add[0]["request_headers"]["x-shop-user"]
    assert add[0]["request_body"]["user"] == user
    spans = {s["spanId"]: s for s in cap.spans("checkout")}
    trace, span = add[0]["request_headers"]["traceparent"].split("-")[1:3]
    assert spans[span]["traceId"] == trace and spans[span]["name"] == "POST /api/cart"
    assert spans[spans[span]["parentSpanId"]]["name"] == "click add-to-cart"
    cookies = {e["name"]: e["value"] for e in cap.storage("checkout", "place-order") if e["kind"] == "cookie"}
    assert cookies["shop_session"] == user
    order = [e for e in cap.network("checkout", "place-order") if e["url"] == "/api/checkout"]
    assert order[0]["status"] == 200 and order[0]["response_body"]["total"]["amount"] > 0
    currency = cap.storage("currency", "select-eur")
    assert {(e["kind"], e["name"], e["value"]) for e in currency} >= {("cookie", "shop_currency", "EUR"),
                                                                       ("local", "shop.currency", "EUR")}


def test_cart_failure_fails_checkout_at_add_to_cart(stack: Stack, tmp_path: Path) -> None:  # noqa: F811
    stack.set_flags(cartServiceFailure=True)
    try:
        result = run(base_url(stack), tmp_path / "capture", [SHOP_JOURNEYS["checkout"]], timeout=120)
    finally:
        stack.set_flags()
    assert result.exit_code == 1
    cap = load_capture(result.out)
    summary = cap.summary("checkout")
    assert summary["status"] == "failed" and summary["failed_step"] == "add-to-cart", summary
    add = cap.step("checkout", "add-to-cart")
    assert add["assertion"] == 'the text of [data-testid="add-status"] matches /^Added/'
    assert '"", while the page shows [data-testid="add-error"]: "Could not add to cart: ' in add["actual"]
    assert [s["status"] for s in cap.steps("checkout")][2:] == ["skipped"] * 3
    posts = [e for e in cap.network("checkout", "add-to-cart") if e["url"] == "/api/cart" and e["method"] == "POST"]
    # the cart service answers 500; the frontend passes the failure on as 502 (an upstream failed)
    assert len(posts) == 1 and posts[0]["status"] >= 500 and posts[0]["failure"] is None, posts
    api_error = posts[0]["response_body"]["error"]
    assert f"Could not add to cart: {api_error}" in add["actual"]
    assert f"Could not add to cart: {api_error}" in cap.dom("checkout", "add-to-cart")
    span = next(s for s in cap.spans("checkout", "add-to-cart") if s["name"] == "POST /api/cart")
    assert span["status"] == "error" and span["attributes"]["http.status_code"] == posts[0]["status"]
    assert span["error"] == api_error
    assert any(str(posts[0]["status"]) in e["text"] for e in cap.console("checkout", "add-to-cart")
               if e["type"] == "error")  # Chromium logs the failed resource
