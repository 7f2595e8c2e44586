"""Shop core: Luhn, currency conversion, client-side load balancing, routing, span/log line formats."""

from __future__ import annotations

import io
import json
import re
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode
from prometheus_client import REGISTRY

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "env_shop" / "files" / "app"))

from shop.client import Upstream, UpstreamError, parse_addr
from shop.data import RATES, UnknownCurrency, convert, luhn_valid
from shop.telemetry import JsonLogger, JsonlSpanExporter, Telemetry
from shop.web import UNMATCHED_ROUTE, App, HTTPError, Request, Response, Router, compile_template

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def make_app(service: str, tmp: Path | None = None) -> App:
    return App(service, Telemetry(service, f"{service}-t", str(tmp) if tmp else None, stream=io.StringIO(),
                                  schedule_delay_millis=50))


@pytest.fixture
def serve() -> Iterator[Any]:
    """serve(app, host='127.0.0.1', port=0) -> port; every server is shut down after the test."""
    servers = []

    def start(app: App, host: str = "127.0.0.1", port: int = 0) -> int:
        server = app.make_server(host, port)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return int(server.server_address[1])

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


# -- Luhn and currency ---------------------------------------------------------------------

@pytest.mark.parametrize("number", ["4432-8015-6152-0454", "4111 1111 1111 1111", "5555555555554444",
                                    "378282246310005", "6011111111111117"])
def test_luhn_accepts_valid_numbers(number: str) -> None:
    assert luhn_valid(number)


@pytest.mark.parametrize("number", ["4432-8015-6152-0455", "4111111111111112", "1234", "", "4111-1111-1111-111a",
                                    "\uff14\uff11" * 8, "41111111111111111111"])
def test_luhn_rejects_invalid_numbers(number: str) -> None:
    assert not luhn_valid(number)


def test_currency_conversion() -> None:
    assert convert(100, "USD", "EUR") == Decimal("92.00")
    assert convert("92", "eur", "usd") == Decimal("100.00")
    assert convert(10, "USD", "JPY") == Decimal("1495.00")
    assert convert(Decimal("0.99"), "USD", "GBP") == Decimal("0.78")  # 0.7821 rounds half-up to cents
    assert convert(1, "GBP", "EUR") == Decimal("1.16")  # cross rate through USD: 0.92 / 0.79
    for code in RATES:
        assert convert("123.45", code, code) == Decimal("123.45")
    with pytest.raises(UnknownCurrency):
        convert(1, "USD", "XXX")
    with pytest.raises(ValueError):
        convert("NaN", "USD", "EUR")


# -- addresses and client-side load balancing ----------------------------------------------

def test_parse_addr() -> None:
    assert parse_addr("cart:8080") == ("cart", 8080)
    assert parse_addr("cart") == ("cart", 8080)
    assert parse_addr("redis", 6379) == ("redis", 6379)
    assert parse_addr("http://gateway:9000/") == ("gateway", 9000)
    assert parse_addr("[::1]:81") == ("::1", 81)
    with pytest.raises(ValueError):
        parse_addr(":80")


def fake_getaddrinfo(addresses: list[tuple[int, str]], calls: list[str]) -> Any:
    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        calls.append(host)
        return [(family, socket.SOCK_STREAM, 6, "", (ip, port) if family == socket.AF_INET else (ip, port, 0, 0))
                for family, ip in addresses]
    return getaddrinfo


def test_client_resolves_on_every_call_and_picks_among_all_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo(
        [(socket.AF_INET, "10.0.0.1"), (socket.AF_INET, "10.0.0.2"), (socket.AF_INET, "10.0.0.3"),
         (socket.AF_INET, "10.0.0.1"), (socket.AF_INET6, "fd00::1")], calls))
    up = Upstream("frontend", "cart", "cart:8080", make_app("frontend").tracer)
    picks = Counter(up.pick() for _ in range(300))
    assert len(calls) == 300 and set(calls) == {"cart"}
    assert set(picks) == {("10.0.0.1", 8080), ("10.0.0.2", 8080), ("10.0.0.3", 8080)}  # deduplicated, IPv4 only
    assert min(picks.values()) > 50  # roughly uniform
    # the DNS answer changes (a replica added): the very next calls see it
    calls.clear()
    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo([(socket.AF_INET, "10.0.0.9")], calls))
    assert up.pick() == ("10.0.0.9", 8080) and calls == ["cart"]


def test_client_balances_real_requests_across_replicas(monkeypatch: pytest.MonkeyPatch, serve: Any) -> None:
    hits: Counter[str] = Counter()
    replicas = []
    port = 0
    for ip in ("127.0.0.1", "127.0.0.2"):
        app = make_app("cart")

        @app.route("GET", "/who")
        def who(req: Request, ip: str = ip) -> dict[str, Any]:
            hits[ip] += 1
            return {"ip": ip}

        port = serve(app, ip, port)  # both replicas on the same port, like containers behind one alias
        replicas.append(app)
    real = socket.getaddrinfo

    def getaddrinfo(host: str, p: int, *args: Any, **kwargs: Any) -> list[Any]:
        if host == "cart":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, p)) for ip in ("127.0.0.1", "127.0.0.2")]
        return real(host, p, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    up = Upstream("checkout", "cart", f"cart:{port}", make_app("checkout").tracer)
    before = sample("http_client_requests_total", service="checkout", peer="cart", code="200")
    answers = Counter(up.get("/who")["ip"] for _ in range(40))
    assert answers == hits and set(hits) == {"127.0.0.1", "127.0.0.2"}
    assert sample("http_client_requests_total", service="checkout", peer="cart", code="200") - before == 40


def test_client_errors_become_json_5xx(serve: Any) -> None:
    app = make_app("payment")

    @app.route("POST", "/charge")
    def charge(req: Request) -> Response:
        raise HTTPError(500, "gateway down")

    @app.route("GET", "/slow")
    def slow(req: Request) -> dict[str, Any]:
        time.sleep(1.0)
        return {}

    @app.route("GET", "/bad")
    def bad(req: Request) -> dict[str, Any]:
        raise HTTPError(400, "invalid card number")

    port = serve(app)
    tracer = make_app("checkout").tracer
    up = Upstream("checkout", "payment", f"127.0.0.1:{port}", tracer, timeout=0.3)
    with pytest.raises(UpstreamError) as err:
        up.post("/charge", {})
    assert err.value.status == 502 and err.value.upstream_status == 500
    assert err.value.message == "payment returned 500: gateway down"
    with pytest.raises(UpstreamError) as err:
        up.get("/bad")
    assert err.value.status == 400 and "invalid card number" in err.value.message
    with pytest.raises(UpstreamError) as err:
        up.get("/slow")
    assert err.value.status == 504 and "timeout" in err.value.message

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    before = sample("http_client_requests_total", service="checkout", peer="nobody", code="error")
    with pytest.raises(UpstreamError) as err:
        Upstream("checkout", "nobody", f"127.0.0.1:{dead}", tracer).get("/x")
    assert err.value.status == 503 and "connection to 127.0.0.1" in err.value.message
    assert sample("http_client_requests_total", service="checkout", peer="nobody", code="error") - before == 1

    # through a server: the handler answers with the upstream error as a JSON body
    front = make_app("checkout")

    @front.route("POST", "/checkout")
    def checkout(req: Request) -> Any:
        return up.post("/charge", {})

    resp = front.handle("POST", "/checkout", {}, b"{}")
    assert resp.status == 502 and resp.content_type == "application/json"
    assert json.loads(resp.body) == {"error": "payment returned 500: gateway down", "service": "checkout"}


# -- routing ---------------------------------------------------------------------------------

def test_route_templates() -> None:
    pattern = compile_template("/product/{id}")
    m = pattern.match("/product/OLJCESPC7Z")
    assert m is not None and m.group("id") == "OLJCESPC7Z"
    assert pattern.match("/product/a/b") is None and pattern.match("/product/") is None
    assert compile_template("/a.b").match("/aXb") is None  # literal parts are escaped

    router = Router()
    router.add("GET", "/cart/{user}", lambda r: {})
    router.add("POST", "/cart/{user}", lambda r: {})
    router.add("GET", "/products/{id}/reviews/{n}", lambda r: {})
    route, params, label = router.match("GET", "/cart/jane%20doe")
    assert route is not None and params == {"user": "jane doe"} and label == "/cart/{user}"
    route, params, label = router.match("POST", "/cart/u1")
    assert route is not None and route.method == "POST"
    route, params, label = router.match("DELETE", "/cart/u1")
    assert route is None and label == "/cart/{user}"  # 405, still templated
    assert router.match("GET", "/products/p1/reviews/3")[1] == {"id": "p1", "n": "3"}
    assert router.match("GET", "/nope/u1")[2] == UNMATCHED_ROUTE
    assert router.route_label("/cart/someone") == "/cart/{user}"


def test_metrics_and_logs_use_templated_routes() -> None:
    stream = io.StringIO()
    app = App("catalog", Telemetry("catalog", "catalog-t", None, stream=stream))

    @app.route("GET", "/products/{id}")
    def product(req: Request) -> dict[str, Any]:
        if req.params["id"] == "missing":
            raise HTTPError(404, "product not found: missing")
        return {"id": req.params["id"]}

    before = sample("http_server_requests_total", service="catalog", route="/products/{id}", method="GET", code="200")
    for pid in ("A1", "B2", "C3"):
        assert app.handle("GET", f"/products/{pid}?x=1", {}).status == 200
    assert app.handle("GET", "/products/missing", {}).status == 404
    assert app.handle("POST", "/products/A1", {}).status == 405
    assert app.handle("GET", "/random/raw/path", {}).status == 404
    after = sample("http_server_requests_total", service="catalog", route="/products/{id}", method="GET", code="200")
    assert after - before == 3
    assert sample("http_server_requests_total", service="catalog", route="/products/{id}", method="GET",
                  code="404") >= 1
    assert sample("http_server_requests_total", service="catalog", route="/products/{id}", method="POST",
                  code="405") >= 1
    assert sample("http_server_requests_total", service="catalog", route=UNMATCHED_ROUTE, method="GET",
                  code="404") >= 1
    assert sample("http_server_request_duration_seconds_count", service="catalog", route="/products/{id}") >= 4
    exposition = app.handle("GET", "/metrics", {}).body.decode()
    assert "/products/A1" not in exposition and "/random/raw/path" not in exposition
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [ln["attributes"]["http.route"] for ln in lines] == ["/products/{id}"] * 5 + [UNMATCHED_ROUTE]
    assert [ln["severityText"] for ln in lines] == ["INFO"] * 3 + ["WARN"] * 3
    assert lines[0]["attributes"]["url.path"] == "/products/A1"
    assert lines[3]["body"].startswith("GET /products/{id} -> 404 in ") and lines[3]["body"].endswith(
        ": product not found: missing")


def test_server_answers_bad_requests_with_json(serve: Any) -> None:
    app = make_app("email")
    app.route("POST", "/send")(lambda req: {"got": req.json()})
    port = serve(app)

    def raw(request: bytes) -> tuple[int, dict[str, Any]]:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(request)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split()[1]), json.loads(body)

    assert raw(b'POST /send HTTP/1.0\r\nContent-Length: 8\r\n\r\n{"a": 1}') == (200, {"got": {"a": 1}})
    status, body = raw(b"POST /send HTTP/1.0\r\nContent-Length: nope\r\n\r\n")
    assert status == 400 and body["service"] == "email"
    status, body = raw(b"POST /send HTTP/1.0\r\nContent-Length: 99999999\r\n\r\n")
    assert status == 413
    status, body = raw(b"POST /send HTTP/1.0\r\nContent-Length: 2\r\n\r\n[]")
    assert status == 400 and body["error"] == "JSON body must be an object"


def test_healthz_reports_readiness() -> None:
    app = make_app("cart")
    resp = app.handle("GET", "/healthz", {})
    assert resp.status == 200 and json.loads(resp.body)["status"] == "ok"
    app.readiness = lambda: (False, "redis unavailable")
    resp = app.handle("GET", "/healthz", {})
    assert resp.status == 503 and json.loads(resp.body)["detail"] == "redis unavailable"

    def broken() -> tuple[bool, str]:
        raise RuntimeError("boom")

    app.readiness = broken
    assert app.handle("GET", "/healthz", {}).status == 503


# -- span and log line formats ------------------------------------------------------------------

def check_span_line(line: dict[str, Any]) -> None:
    assert set(line) == {"resource", "traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano",
                         "endTimeUnixNano", "attributes", "status"}
    assert set(line["resource"]) == {"service.name", "service.instance.id"}
    assert HEX32.match(line["traceId"]) and HEX16.match(line["spanId"])
    assert line["parentSpanId"] == "" or HEX16.match(line["parentSpanId"])
    assert line["kind"] in {"SERVER", "CLIENT", "INTERNAL"}
    assert isinstance(line["startTimeUnixNano"], int) and isinstance(line["endTimeUnixNano"], int)
    assert 1_600_000_000 * 10**9 < line["startTimeUnixNano"] <= line["endTimeUnixNano"]
    assert isinstance(line["attributes"], dict)
    assert set(line["status"]) == {"code", "message"} and line["status"]["code"] in {"UNSET", "OK", "ERROR"}
    assert isinstance(line["status"]["message"], str)


def test_span_exporter_line_format(tmp_path: Path) -> None:
    path = tmp_path / "traces" / "checkout-7.jsonl"
    provider = TracerProvider(resource=Resource({"service.name": "checkout", "service.instance.id": "checkout-7",
                                                 "other.attribute": "dropped"}))
    provider.add_span_processor(SimpleSpanProcessor(JsonlSpanExporter(path)))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("POST /checkout", kind=SpanKind.SERVER, attributes={
            "http.request.method": "POST", "url.path": "/checkout", "http.route": "/checkout"}) as server:
        with tracer.start_as_current_span("POST /charge", kind=SpanKind.CLIENT, attributes={
                "http.request.method": "POST", "url.path": "/charge", "http.route": "/charge",
                "peer.service": "payment"}) as client:
            client.set_attribute("http.response.status_code", 500)
            client.set_status(Status(StatusCode.ERROR, "payment returned 500"))
        server.set_attribute("http.response.status_code", 200)
    provider.shutdown()
    lines = [json.loads(raw) for raw in path.read_text().splitlines()]
    assert len(lines) == 2
    for line in lines:
        check_span_line(line)
    child, parent = lines  # the child ends first
    assert parent["resource"] == {"service.name": "checkout", "service.instance.id": "checkout-7"}
    assert parent["parentSpanId"] == "" and parent["kind"] == "SERVER" and parent["name"] == "POST /checkout"
    assert parent["status"] == {"code": "UNSET", "message": ""}
    assert parent["attributes"] == {"http.request.method": "POST", "url.path": "/checkout", "http.route": "/checkout",
                                    "http.response.status_code": 200}
    assert child["traceId"] == parent["traceId"] and child["parentSpanId"] == parent["spanId"]
    assert child["kind"] == "CLIENT" and child["attributes"]["peer.service"] == "payment"
    assert child["status"] == {"code": "ERROR", "message": "payment returned 500"}
    assert parent["startTimeUnixNano"] <= child["startTimeUnixNano"] <= child["endTimeUnixNano"] \
        <= parent["endTimeUnixNano"]


def test_server_spans_continue_incoming_traceparent(tmp_path: Path) -> None:
    app = make_app("payment", tmp_path)

    @app.route("POST", "/charge")
    def charge(req: Request) -> Response:
        if req.json().get("fail"):
            raise HTTPError(500, "declined")
        return Response.json({"ok": True})

    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    headers = {"Traceparent": f"00-{trace_id}-{parent_id}-01"}
    assert app.handle("POST", "/charge", headers, b"{}").status == 200
    assert app.handle("POST", "/charge", headers, b'{"fail": true}').status == 500
    assert app.handle("POST", "/charge", {}, b"{bad json").status == 400
    assert app.handle("GET", "/healthz", headers).status == 200  # quiet: no span, no log line
    app.telemetry.shutdown()
    spans = [json.loads(raw) for raw in (tmp_path / "traces" / "payment-t.jsonl").read_text().splitlines()]
    assert len(spans) == 3
    for span in spans:
        check_span_line(span)
        assert span["kind"] == "SERVER" and span["name"] == "POST /charge"
    ok, failed, bad = spans
    assert ok["traceId"] == trace_id and ok["parentSpanId"] == parent_id and ok["status"]["code"] == "UNSET"
    assert failed["status"] == {"code": "ERROR", "message": "declined"}
    assert failed["attributes"]["http.response.status_code"] == 500
    assert bad["parentSpanId"] == "" and bad["traceId"] != trace_id and bad["status"]["code"] == "UNSET"
    logs = [json.loads(raw) for raw in (tmp_path / "logs" / "payment-t.jsonl").read_text().splitlines()]
    assert [(r["traceId"], r["spanId"]) for r in logs] == [(s["traceId"], s["spanId"]) for s in spans]
    assert [r["severityNumber"] for r in logs] == [9, 17, 13]


def test_client_spans_propagate_context_to_the_next_service(tmp_path: Path, serve: Any) -> None:
    back = make_app("cart", tmp_path)
    back.route("GET", "/cart/{user}")(lambda req: {"user": req.params["user"], "items": []})
    port = serve(back)
    front = make_app("checkout", tmp_path)
    up = Upstream("checkout", "cart", f"127.0.0.1:{port}", front.tracer)
    front.route("POST", "/checkout")(lambda req: up.get("/cart/u1", route="/cart/{user}"))
    assert front.handle("POST", "/checkout", {}).status == 200
    front.telemetry.shutdown()
    back.telemetry.shutdown()
    spans = {(s["resource"]["service.name"], s["kind"]): s for s in
             (json.loads(raw) for f in sorted((tmp_path / "traces").iterdir()) for raw in f.read_text().splitlines())}
    server, client, remote = spans[("checkout", "SERVER")], spans[("checkout", "CLIENT")], spans[("cart", "SERVER")]
    assert {s["traceId"] for s in (server, client, remote)} == {server["traceId"]}
    assert client["parentSpanId"] == server["spanId"] and remote["parentSpanId"] == client["spanId"]
    assert client["name"] == "GET /cart/{user}" and client["attributes"]["peer.service"] == "cart"
    assert client["attributes"]["url.path"] == "/cart/u1" and client["attributes"]["http.response.status_code"] == 200
    assert remote["attributes"]["http.route"] == "/cart/{user}"


def test_log_line_format(tmp_path: Path) -> None:
    stream = io.StringIO()
    logger = JsonLogger("cart", "cart-2", tmp_path / "logs" / "cart-2.jsonl", stream=stream)
    logger.info("hello", answer=42)
    provider = TracerProvider()
    with provider.get_tracer("t").start_as_current_span("s") as span:
        logger.error("inside a span")
        ctx = span.get_span_context()
    logger.warn("careful")
    logger.close()
    from_stdout = [json.loads(raw) for raw in stream.getvalue().splitlines()]
    from_file = [json.loads(raw) for raw in (tmp_path / "logs" / "cart-2.jsonl").read_text().splitlines()]
    assert from_stdout == from_file and len(from_file) == 3
    for rec in from_file:
        assert set(rec) == {"resource", "timeUnixNano", "severityText", "severityNumber", "body", "attributes",
                            "traceId", "spanId"}
        assert rec["resource"] == {"service.name": "cart", "service.instance.id": "cart-2"}
        assert isinstance(rec["timeUnixNano"], int) and abs(rec["timeUnixNano"] / 1e9 - time.time()) < 60
    info, err, warn = from_file
    assert (info["severityText"], info["severityNumber"], info["body"]) == ("INFO", 9, "hello")
    assert info["attributes"] == {"answer": 42} and info["traceId"] == "" and info["spanId"] == ""
    assert (err["severityText"], err["severityNumber"]) == ("ERROR", 17)
    assert err["traceId"] == format(ctx.trace_id, "032x") and err["spanId"] == format(ctx.span_id, "016x")
    assert (warn["severityText"], warn["severityNumber"]) == ("WARN", 13)
