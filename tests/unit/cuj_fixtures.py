"""A browser capture on disk in orchestrator.cuj's layout, for the tests of its readers (gateway tools, contracts)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJ"
                       "RU5ErkJggg==")
BASE = "http://127.0.0.1:30280"


def write_capture(root: Path, started: float, failed_step: str | None = "add-to-cart") -> Path:
    """A capture in orchestrator.cuj's layout: one journey, checkout, failing at `failed_step` (or passing)."""
    root.mkdir(parents=True)
    status = "failed" if failed_step else "passed"
    (root / "cuj.json").write_text(json.dumps({
        "version": 1, "base_url": BASE, "started": started, "finished": started + 2, "duration_s": 2,
        "journeys": [{"name": "checkout", "status": status, "failed_step": failed_step, "duration_s": 1.5,
                      "message": "step 2 'add-to-cart' failed" if failed_step else None}]}))
    j = root / "checkout"
    j.mkdir()
    steps = [{"index": 1, "name": "open-product", "status": "passed", "url": f"{BASE}/product/OLJCESPC7Z",
              "duration_ms": 300, "screenshot": "step-01-open-product.png", "dom": "dom-01-open-product.html",
              "evidence_id": "cuj:checkout:open-product"},
             {"index": 2, "name": "add-to-cart", "status": status if failed_step else "passed",
              "assertion": "the text of add-status matches /^Added/", "expected": "text matching /^Added/",
              "actual": '""', "url": f"{BASE}/product/OLJCESPC7Z", "duration_ms": 900,
              "screenshot": "step-02-add-to-cart.png", "dom": "dom-02-add-to-cart.html",
              "evidence_id": "cuj:checkout:add-to-cart"},
             {"index": 3, "name": "open-cart", "status": "skipped", "evidence_id": "cuj:checkout:open-cart"}]
    (j / "report.json").write_text(json.dumps({"journey": "checkout", "description": "buy two", "status": status,
                                               "failed_step": failed_step, "steps": steps}))
    (j / "step-01-open-product.png").write_bytes(PNG)
    (j / "step-02-add-to-cart.png").write_bytes(PNG)
    (j / "dom-01-open-product.html").write_text("<html><body><h2>Explorascope</h2></body></html>")
    (j / "dom-02-add-to-cart.html").write_text("<html><body>" + "x" * 500 +
                                               '<p data-testid="add-error">Could not add to cart: Service '
                                               "Unavailable</p></body></html>")
    (j / "console.json").write_text(json.dumps([
        {"id": "console:checkout:open-product:1", "step": "open-product", "type": "log", "text": "page ready",
         "location": {"url": f"{BASE}/static/app.js", "line": 3, "column": 1}},
        {"id": "console:checkout:add-to-cart:1", "step": "add-to-cart", "type": "error",
         "text": "Failed to load resource: the server responded with a status of 503",
         "location": {"url": f"{BASE}/api/cart", "line": 0, "column": 0}}]))
    (j / "network.json").write_text(json.dumps([
        {"id": "net:checkout:open-product:1", "step": "open-product", "method": "GET",
         "url": "/product/OLJCESPC7Z", "status": 200, "failure": None},
        {"id": "net:checkout:add-to-cart:1", "step": "add-to-cart", "method": "POST", "url": "/api/cart",
         "status": 503, "failure": None, "request_headers": {"traceparent": "00-" + "c" * 32 + "-" + "d" * 16 + "-01"}},
        {"id": "net:checkout:add-to-cart:2", "step": "add-to-cart", "method": "GET", "url": "/static/x.js",
         "status": None, "failure": "net::ERR_ABORTED"}]))
    (j / "storage.json").write_text(json.dumps([
        {"id": "storage:checkout:add-to-cart:cookie:shop_session", "step": "add-to-cart", "kind": "cookie",
         "name": "shop_session", "value": "abc"}]))
    (j / "spans.json").write_text(json.dumps([
        {"id": "span:checkout:add-to-cart:1", "step": "add-to-cart", "traceId": "c" * 32, "spanId": "d" * 16,
         "name": "POST /api/cart", "kind": "client", "status": "error",
         "attributes": {"http.url": f"{BASE}/api/cart", "http.status_code": 503}},
        {"id": "span:checkout:open-product:1", "step": "open-product", "traceId": "e" * 32, "spanId": "f" * 16,
         "name": "documentLoad", "kind": "documentLoad", "status": "ok", "attributes": {}}]))
    return root
