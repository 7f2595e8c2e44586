"""The shop application end to end: every service as a real process on loopback, with real Redis and PostgreSQL.

No containers: each service runs as ``python -m shop`` (PYTHONPATH=roles/env_shop/files/app) on a free
loopback port, with TELEMETRY_DIR and FLAGS_FILE in a temporary directory. Set SHOP_TEST_PYTHON to run
the services with another interpreter (e.g. a venv over Debian's python3 packages, as in the image).
"""

from __future__ import annotations

import glob
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest
import redis

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
APP_DIR = ROOT / "roles" / "env_shop" / "files" / "app"
PYTHON = os.environ.get("SHOP_TEST_PYTHON") or sys.executable
SERVICES = ("catalog", "cart", "currency", "payment", "shipping", "email", "recommendation", "ads", "checkout",
            "frontend")
ADDR_VARS = {"catalog": "CATALOG_ADDR", "cart": "CART_ADDR", "checkout": "CHECKOUT_ADDR",
             "payment": "PAYMENT_ADDR", "shipping": "SHIPPING_ADDR", "email": "EMAIL_ADDR",
             "currency": "CURRENCY_ADDR", "recommendation": "RECOMMENDATION_ADDR", "ads": "AD_ADDR"}
ADDRESS = {"street_address": "1 Main St", "city": "Springfield", "state": "IL", "country": "USA",
           "zip_code": "62701"}
REDIS_PASSWORD = "shop-test-pw"
ALL_FLAGS = ("recommendationServiceCacheFailure", "adServiceHighCpu", "adServiceManualGc", "adServiceFailure",
             "paymentServiceFailure", "paymentServiceUnreachable", "cartServiceFailure", "productCatalogFailure",
             "catalogSlowResponse", "imageSlowLoad", "loadgeneratorFloodHomepage")
PG_SUPERUSER_PASSWORD = "pg-test-pw"
PG_SHOP_PASSWORD = "shop-db-pw"


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A free loopback port below the ephemeral range, so no outgoing connection can take it before
    the service binds it (the kernel picks source ports of connections from the ephemeral range)."""
    low_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(max(1024, low_ephemeral - 12000), low_ephemeral)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise AssertionError("no free loopback port found")


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> float:
    """Poll until true; returns the seconds it took."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def http(method: str, url: str, body: object = None, headers: dict[str, str] | None = None,
         timeout: float = 15) -> tuple[int, Any, str]:
    """(status, parsed JSON or text, content type); never raises for HTTP errors."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={
        **({"Content-Type": "application/json"} if data is not None else {}), **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        status, raw, ctype = exc.code, exc.read(), exc.headers.get("Content-Type", "")
    return status, (json.loads(raw) if "json" in ctype else raw.decode()), ctype


def metric_value(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(m.group(4))
    return total


def read_jsonl(directory: Path) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                lines.append(json.loads(line))
    return lines


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, grace: float = 5) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@dataclass
class Stack:
    tmp: Path
    telemetry: Path
    flags_file: Path
    ports: dict[str, int]
    env: dict[str, str]
    pg_port: int
    redis_port: int
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def url(self, service: str, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.ports[service]}{path}"

    def set_flags(self, **flags: object) -> None:
        """Write the flags file (flagd format) atomically, like the deployed one: every flag present,
        ``name=value`` switched to an "on" variant of that value, the others on their "off" variant."""
        doc = {"flags": {name: {"state": "ENABLED", "variants": {"on": flags.get(name, True), "off": False},
                                "defaultVariant": "on" if name in flags else "off"}
                         for name in sorted(set(ALL_FLAGS) | set(flags))}}
        tmp = self.flags_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, self.flags_file)

    def start(self, service: str, **extra: str) -> subprocess.Popen[bytes]:
        port = self.ports.setdefault(service, free_port())
        env = {**self.env, "SHOP_SERVICE": service, "SHOP_PORT": str(port), "SHOP_INSTANCE": f"{service}-1", **extra}
        log = open(self.tmp / f"{service}.out", "wb")  # noqa: SIM115 - closed when the test dir is removed
        proc = subprocess.Popen([PYTHON, "-m", "shop"], env=env, cwd=self.tmp, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs[service] = proc
        return proc

    def output(self, service: str) -> str:
        return (self.tmp / f"{service}.out").read_text(errors="replace")

    def healthy(self, service: str) -> bool:
        proc = self.procs[service]
        if proc.poll() is not None:
            raise AssertionError(f"{service} exited with {proc.returncode}:\n{self.output(service)[-3000:]}")
        try:
            return http("GET", self.url(service, "/healthz"), timeout=2)[0] == 200
        except OSError:
            return False


def start_redis(tmp: Path) -> tuple[subprocess.Popen[bytes], int]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed: run `make setup` (it installs redis-server)")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--requirepass", REDIS_PASSWORD, "--dir", str(tmp)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    return proc, port


def start_postgres() -> tuple[subprocess.Popen[bytes], int, Path]:
    initdbs = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not initdbs:
        pytest.fail("PostgreSQL is not installed: run `make setup` (it installs postgresql)")
    bindir = Path(initdbs[-1]).parent
    user = "postgres" if os.geteuid() == 0 else None  # PostgreSQL refuses to run as root
    pgdir = Path(tempfile.mkdtemp(prefix="shop-pg-"))
    if user is not None:
        shutil.chown(pgdir, user, user)
    (pgdir / "pwfile").write_text(PG_SUPERUSER_PASSWORD + "\n")
    if user is not None:
        shutil.chown(pgdir / "pwfile", user, user)
    # password authentication over TCP, as in the deployed environment
    subprocess.run([str(bindir / "initdb"), "-D", str(pgdir / "data"), "-U", "postgres", "--auth-local=trust",
                    "--auth-host=scram-sha-256", f"--pwfile={pgdir / 'pwfile'}", "-E", "UTF8", "--no-sync"],
                   user=user, check=True, capture_output=True, cwd=pgdir)
    port = free_port()
    proc = subprocess.Popen([str(bindir / "postgres"), "-D", str(pgdir / "data"), "-p", str(port), "-k", str(pgdir),
                             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
                             "-c", "full_page_writes=off"],
                            user=user, cwd=pgdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    return proc, port, pgdir


def pg_admin(port: int) -> psycopg2.extensions.connection:
    conn = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", password=PG_SUPERUSER_PASSWORD,
                            dbname="postgres", connect_timeout=2)
    conn.autocommit = True
    return conn


def pg_ready(port: int) -> bool:
    try:
        pg_admin(port).close()
    except psycopg2.OperationalError:
        return False
    return True


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    tmp = Path(tempfile.mkdtemp(prefix="shop-e2e-"))
    cleanups: list[Callable[[], None]] = [lambda: shutil.rmtree(tmp, ignore_errors=True)]
    try:
        redis_proc, redis_port = start_redis(tmp)
        cleanups.append(lambda: stop(redis_proc))
        pg_proc, pg_port, pgdir = start_postgres()
        cleanups.append(lambda: shutil.rmtree(pgdir, ignore_errors=True))
        cleanups.append(lambda: stop(pg_proc, signal.SIGINT))  # fast shutdown
        ports = {name: free_port() for name in SERVICES}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(APP_DIR),
               "LANG": "C.UTF-8", "SHOP_HOST": "127.0.0.1", "TELEMETRY_DIR": str(tmp / "telemetry"),
               "FLAGS_FILE": str(tmp / "flags.json"),
               "PG_DSN": f"host=127.0.0.1 port={pg_port} dbname=shop user=shop", "PG_PASSWORD": PG_SHOP_PASSWORD,
               "REDIS_ADDR": f"127.0.0.1:{redis_port}", "REDIS_PASSWORD": REDIS_PASSWORD,
               **{var: f"127.0.0.1:{ports[name]}" for name, var in ADDR_VARS.items()}}
        st = Stack(tmp, tmp / "telemetry", tmp / "flags.json", ports, env, pg_port, redis_port)

        def stop_services() -> None:
            for proc in st.procs.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in st.procs.values():
                stop(proc, signal.SIGKILL, 3)  # no-op for those that already exited

        cleanups.append(stop_services)
        st.set_flags()  # every flag off
        for name in SERVICES:  # the catalog starts before its database is ready on purpose: it must retry
            st.start(name)
        wait_for(lambda: pg_ready(pg_port), 20, "PostgreSQL")
        conn = pg_admin(pg_port)
        with conn.cursor() as cur:  # like the deployed database: an unprivileged owner, password auth
            cur.execute(f"CREATE ROLE shop LOGIN PASSWORD '{PG_SHOP_PASSWORD}'")
            cur.execute("CREATE DATABASE shop OWNER shop")
        conn.close()
        for name in SERVICES:
            wait_for(lambda n=name: st.healthy(n), 30, f"{name} /healthz")  # type: ignore[misc]
        yield st
    finally:
        for cleanup in reversed(cleanups):
            cleanup()


def add_to_cart(st: Stack, user: str, product_id: str, quantity: int = 1) -> None:
    status, body, _ = http("POST", st.url("frontend", "/api/cart"),
                           {"user": user, "product_id": product_id, "quantity": quantity})
    assert status == 200, body


def checkout_body(user: str, currency: str = "EUR") -> dict[str, Any]:
    return {"user": user, "currency": currency, "email": f"{user}@example.com", "address": ADDRESS,
            "card": "4432-8015-6152-0454"}


def test_pages_and_api_through_frontend(stack: Stack) -> None:
    status, page, ctype = http("GET", stack.url("frontend", "/?currency=EUR"))
    assert status == 200 and ctype.startswith("text/html")
    assert "National Park Foundation Explorascope" in page and "EUR" in page
    status, page, _ = http("GET", stack.url("frontend", "/product/66VCHSJNUP"))
    assert status == 200 and "Starsense Explorer Refractor Telescope" in page
    assert page.count('href="/product/') >= 1  # recommendations (and ads) link to other products

    status, body, _ = http("GET", stack.url("frontend", "/api/products"))
    assert status == 200 and len(body["products"]) == 10
    assert {"id", "name", "description", "price_usd", "categories", "picture"} <= set(body["products"][0])
    status, body, _ = http("GET", stack.url("catalog", "/search?q=telescope"))
    assert status == 200 and "66VCHSJNUP" in {p["id"] for p in body["products"]}
    status, body, _ = http("GET", stack.url("frontend", "/api/products/NOSUCHITEM"))
    assert status == 404 and "not found" in body["error"]
    status, body, _ = http("GET", stack.url("frontend", "/api/recommendations?product_ids=OLJCESPC7Z"))
    assert status == 200 and body["product_ids"] and "OLJCESPC7Z" not in body["product_ids"]
    status, body, _ = http("GET", stack.url("frontend", "/api/ads?context=binoculars"))
    assert status == 200 and body["ads"][0]["redirect_url"] == "/product/2ZYFJ3GM2N"
    status, body, _ = http("GET", stack.url("currency", "/convert?from=USD&to=JPY&amount=10"))
    assert status == 200 and body["result"] == 1495.0


BROWSER_PAGES = {"/": ("home", ("product-list", "product-card", "product-link", "product-price", "ads")),
                 "/product/66VCHSJNUP": ("product", ("product-name", "product-price", "quantity", "add-to-cart",
                                                     "add-status", "add-error", "recommendations", "recommendation")),
                 "/cart": ("cart", ("cart-items", "cart-total", "checkout-link", "empty-cart", "cart-empty",
                                    "cart-error")),
                 "/checkout": ("checkout", ("checkout-form", "email", "street", "city", "state", "country", "zip",
                                            "card-number", "place-order", "order-confirmation", "order-id",
                                            "order-total", "checkout-error"))}


def test_browser_pages_carry_their_scripts_testids_and_assets(stack: Stack) -> None:
    """What a browser gets: each page in the cookie's currency, with app.js, its own script and every data-testid
    of the contract; each asset it references answers 200, uncached."""
    assets: set[str] = set()
    for path, (page, ids) in BROWSER_PAGES.items():
        status, html, ctype = http("GET", stack.url("frontend", path), headers={"Cookie": "shop_currency=EUR"})
        assert status == 200 and ctype.startswith("text/html"), (path, html)
        assert f'<body data-page="{page}" data-currency="EUR">' in html
        assert '<script src="/static/app.js" defer></script>' in html
        assert f'<script src="/static/{page}.js" defer></script>' in html
        found = set(re.findall(r'data-testid="([^"]+)"', html))
        assert {"home-link", "currency-select", "cart-link", "cart-count", *ids} <= found, (path, found)
        assert '<option value="EUR" selected>EUR</option>' in html
        assets |= set(re.findall(r'(?:src|href)="(/static/[^"]+)"', html))
    assert {"/static/app.js", "/static/style.css", "/static/cart.js"} <= assets
    for asset in sorted(assets):
        with urllib.request.urlopen(stack.url("frontend", asset), timeout=5) as resp:
            assert resp.status == 200 and resp.headers["Cache-Control"] == "no-store", asset
            assert resp.read()
    status, body, _ = http("GET", stack.url("frontend", "/static/..%2Fweb.py"))
    assert status == 400 and "invalid static file name" in body["error"]
    status, body, _ = http("GET", stack.url("frontend", "/static/nope.js"))
    assert status == 404 and body["error"] == "no such static file: nope.js"


def test_browser_traceparent_becomes_the_backend_trace(stack: Stack) -> None:
    """tracedFetch() in app.js sends a traceparent: the backend's spans join the browser span's trace, and a page
    names its own server span in <meta name="traceparent"> for the browser's documentLoad span."""
    user = "browser-user"
    add_to_cart(stack, user, "OLJCESPC7Z", 2)
    trace_id, browser_span = secrets.token_hex(16), secrets.token_hex(8)
    status, cart, _ = http("GET", stack.url("frontend", "/api/cart"),
                           headers={"traceparent": f"00-{trace_id}-{browser_span}-01", "x-shop-user": user})
    assert status == 200 and cart["items"] == [{"product_id": "OLJCESPC7Z", "quantity": 2}]

    def spans(tid: str) -> list[dict[str, Any]]:
        return [s for s in read_jsonl(stack.telemetry / "traces") if s["traceId"] == tid]

    wait_for(lambda: {"frontend", "cart"} <= {s["resource"]["service.name"] for s in spans(trace_id)}, 5,
             "the backend spans of the browser's trace")
    trace = spans(trace_id)
    root = next(s for s in trace if s["kind"] == "SERVER" and s["resource"]["service.name"] == "frontend")
    assert root["name"] == "GET /api/cart" and root["parentSpanId"] == browser_span
    client = next(s for s in trace if s["kind"] == "CLIENT" and s["parentSpanId"] == root["spanId"])
    cart_server = next(s for s in trace if s["resource"]["service.name"] == "cart")
    assert client["attributes"]["peer.service"] == "cart" and cart_server["parentSpanId"] == client["spanId"]
    assert cart_server["attributes"]["url.path"] == f"/cart/{user}"

    _, html, _ = http("GET", stack.url("frontend", "/?currency=EUR"))
    m = re.search(r'<meta name="traceparent" content="00-([0-9a-f]{32})-([0-9a-f]{16})-01">', html)
    assert m is not None
    wait_for(lambda: any(s["spanId"] == m.group(2) for s in spans(m.group(1))), 5, "the home page's server span")
    page_span = next(s for s in spans(m.group(1)) if s["spanId"] == m.group(2))
    assert page_span["name"] == "GET /" and page_span["resource"]["service.name"] == "frontend"


def test_checkout_journey_is_one_trace_across_services(stack: Stack) -> None:
    user = "trace-user"
    add_to_cart(stack, user, "OLJCESPC7Z", 2)
    add_to_cart(stack, user, "HQTGWGPNH4", 1)
    trace_id, root_span = secrets.token_hex(16), secrets.token_hex(8)
    status, order, _ = http("POST", stack.url("frontend", "/api/checkout"), checkout_body(user),
                            headers={"traceparent": f"00-{trace_id}-{root_span}-01"})
    assert status == 200, order
    assert order["total"]["currency"] == "EUR" and order["total"]["amount"] > 0
    assert order["tracking_id"].startswith("1Z") and order["transaction_id"]
    assert {i["product_id"]: i["quantity"] for i in order["items"]} == {"OLJCESPC7Z": 2, "HQTGWGPNH4": 1}
    status, cart, _ = http("GET", stack.url("frontend", f"/api/cart?user={user}"))
    assert status == 200 and cart["items"] == []  # emptied by checkout

    expected = {"frontend", "checkout", "cart", "catalog", "currency", "payment", "shipping", "email"}

    def spans() -> list[dict[str, Any]]:
        return [s for s in read_jsonl(stack.telemetry / "traces") if s["traceId"] == trace_id]

    def complete(trace: list[dict[str, Any]]) -> bool:
        """Root present, every client span has its server span and vice versa (spans are exported in batches)."""
        ids = {s["spanId"] for s in trace}
        parents = {s["parentSpanId"] for s in trace}
        return (expected <= {s["resource"]["service.name"] for s in trace}
                and any(s["parentSpanId"] == root_span for s in trace)
                and all(s["spanId"] in parents for s in trace if s["kind"] == "CLIENT")
                and all(s["parentSpanId"] in ids for s in trace if s["kind"] == "SERVER"
                        and s["parentSpanId"] != root_span))

    wait_for(lambda: complete(spans()), 5, "the complete checkout trace")
    trace = spans()
    by_id = {s["spanId"]: s for s in trace}
    assert len(by_id) == len(trace), "span ids must be unique"
    root = [s for s in trace if s["parentSpanId"] == root_span]
    assert len(root) == 1 and root[0]["resource"]["service.name"] == "frontend"
    assert root[0]["kind"] == "SERVER" and root[0]["name"] == "POST /api/checkout"
    assert root[0]["attributes"]["http.response.status_code"] == 200 and root[0]["status"]["code"] == "UNSET"
    for span in trace:
        if span is root[0]:
            continue
        parent = by_id.get(span["parentSpanId"])
        assert parent is not None, f"span {span['name']} of {span['resource']['service.name']} has no parent"
        if span["kind"] == "SERVER":
            # a server span's parent is the caller's client span, in another service, naming this service as peer
            assert parent["kind"] == "CLIENT"
            assert parent["attributes"]["peer.service"] == span["resource"]["service.name"]
            assert parent["resource"]["service.name"] != span["resource"]["service.name"]
            assert parent["startTimeUnixNano"] <= span["startTimeUnixNano"] <= span["endTimeUnixNano"] \
                <= parent["endTimeUnixNano"] + 5_000_000  # allow clock jitter between processes
        else:
            assert span["kind"] == "CLIENT" and parent["kind"] == "SERVER"
            assert parent["resource"]["service.name"] == span["resource"]["service.name"]
    checkout_server = next(s for s in trace if s["resource"]["service.name"] == "checkout" and s["kind"] == "SERVER")
    assert by_id[checkout_server["parentSpanId"]]["parentSpanId"] == root[0]["spanId"]
    peers = {s["attributes"]["peer.service"] for s in trace if s["kind"] == "CLIENT"
             and s["parentSpanId"] == checkout_server["spanId"]}
    assert peers == {"cart", "catalog", "currency", "payment", "shipping", "email"}
    cart_server = [s for s in trace if s["resource"]["service.name"] == "cart" and s["kind"] == "SERVER"]
    assert {s["name"] for s in cart_server} == {"GET /cart/{user}", "DELETE /cart/{user}"}
    assert all(s["attributes"]["http.route"] == "/cart/{user}" and s["attributes"]["url.path"] == f"/cart/{user}"
               for s in cart_server)

    # every service logged its request line with this trace id and the span id of its server span
    def logged() -> set[str]:
        return {rec["resource"]["service.name"] for rec in read_jsonl(stack.telemetry / "logs")
                if rec["traceId"] == trace_id}

    wait_for(lambda: expected <= logged(), 3, "log lines with the trace id from every service")
    server_ids = {s["spanId"] for s in trace if s["kind"] == "SERVER"}
    request_lines = [r for r in read_jsonl(stack.telemetry / "logs")
                     if r["traceId"] == trace_id and "duration_ms" in r["attributes"]]
    assert request_lines and all(r["spanId"] in server_ids for r in request_lines)
    line = next(r for r in request_lines if r["resource"]["service.name"] == "payment")
    assert line["severityText"] == "INFO" and line["severityNumber"] == 9
    assert line["attributes"]["http.route"] == "/charge" and line["attributes"]["http.response.status_code"] == 200
    assert line["resource"]["service.instance.id"] == "payment-1"
    assert "POST /charge" in stack.output("payment")  # the same lines go to stdout


def test_metrics_count_requests(stack: Stack) -> None:
    user = "metrics-user"
    add_to_cart(stack, user, "L9ECAV7KIM")
    status, _, _ = http("POST", stack.url("frontend", "/api/checkout"), checkout_body(user, "USD"))
    assert status == 200
    status, text, ctype = http("GET", stack.url("frontend", "/metrics"))
    assert status == 200 and ctype.startswith("text/plain")
    assert metric_value(text, "http_server_requests_total", service="frontend", route="/api/checkout",
                        method="POST", code="200") >= 1
    assert metric_value(text, "http_server_request_duration_seconds_count", service="frontend",
                        route="/api/checkout") >= 1
    assert metric_value(text, "process_resident_memory_bytes") > 0
    assert metric_value(text, "process_cpu_seconds_total") > 0
    assert 'route="/api/cart"' in text and "metrics-user" not in text  # templated routes, never raw ids
    assert "shop_recommendation_cache_items" not in text and "loadgen_requests" not in text  # not theirs
    _, text, _ = http("GET", stack.url("checkout", "/metrics"))
    assert metric_value(text, "http_client_requests_total", service="checkout", peer="payment", code="200") >= 1
    assert metric_value(text, "http_client_request_duration_seconds_count", service="checkout", peer="cart") >= 2
    _, text, _ = http("GET", stack.url("catalog", "/metrics"))
    assert metric_value(text, "http_server_requests_total", service="catalog", route="/products/{id}",
                        code="200") >= 1
    assert "/products/L9ECAV7KIM" not in text
    _, text, _ = http("GET", stack.url("recommendation", "/metrics"))
    assert metric_value(text, "shop_recommendation_cache_items") == 10


def test_dropped_database_connections_are_replaced(stack: Stack) -> None:
    """A restart of PostgreSQL or Redis drops pooled connections: the next request still succeeds."""
    add_to_cart(stack, "reconnect-user", "L9ECAV7KIM")
    assert http("GET", stack.url("catalog", "/products/L9ECAV7KIM"))[0] == 200
    conn = pg_admin(stack.pg_port)
    with conn.cursor() as cur:
        cur.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = 'shop-catalog'")
        row = cur.fetchone()
        assert row is not None and row[0] >= 1
    conn.close()
    killed = redis.Redis(host="127.0.0.1", port=stack.redis_port, password=REDIS_PASSWORD).client_kill_filter(
        _type="normal", skipme=True)
    assert killed >= 1
    status, body, _ = http("GET", stack.url("catalog", "/products/L9ECAV7KIM"))
    assert status == 200, body
    status, body, _ = http("GET", stack.url("frontend", "/api/cart?user=reconnect-user"))
    assert status == 200 and body["items"] == [{"product_id": "L9ECAV7KIM", "quantity": 1}], body


def test_flags_switch_failures_on_and_off(stack: Stack) -> None:
    user = "flag-user"

    def checkout_status() -> int:
        add_to_cart(stack, user, "2ZYFJ3GM2N")
        status, body, _ = http("POST", stack.url("frontend", "/api/checkout"), checkout_body(user))
        if status >= 500:
            assert "payment" in body["error"], body
        return status

    assert checkout_status() == 200
    stack.set_flags(paymentServiceFailure=1.0)
    took = wait_for(lambda: checkout_status() >= 500, 4, "checkout to fail with paymentServiceFailure", 0.2)
    assert took < 2.5
    _, text, _ = http("GET", stack.url("payment", "/metrics"))
    assert metric_value(text, "http_server_requests_total", service="payment", route="/charge", code="500") >= 1
    assert any(r["severityText"] == "ERROR" and r["attributes"].get("http.route") == "/charge"
               for r in read_jsonl(stack.telemetry / "logs") if r["resource"]["service.name"] == "payment")
    flag_logs = [r for r in read_jsonl(stack.telemetry / "logs") if "feature_flag.key" in r["attributes"]]
    assert [(r["resource"]["service.name"], r["severityText"], r["attributes"]["feature_flag.value"])
            for r in flag_logs if r["resource"]["service.name"] == "payment"] == [("payment", "WARN", 1.0)]
    assert {r["attributes"]["feature_flag.key"] for r in flag_logs} == {"paymentServiceFailure"}

    stack.set_flags(paymentServiceUnreachable=True)  # payment recovers, checkout now calls a dead address

    def payment_unreachable() -> bool:
        add_to_cart(stack, user, "2ZYFJ3GM2N")
        status, body, _ = http("POST", stack.url("frontend", "/api/checkout"), checkout_body(user))
        return status == 502 and "payment: connection to" in body["error"]

    wait_for(payment_unreachable, 4, "checkout to fail with paymentServiceUnreachable", 0.2)

    stack.set_flags(productCatalogFailure=True)
    wait_for(lambda: http("GET", stack.url("frontend", "/api/products/OLJCESPC7Z"))[0] == 502, 4,
             "productCatalogFailure to fail OLJCESPC7Z")
    assert http("GET", stack.url("frontend", "/api/products/66VCHSJNUP"))[0] == 200

    stack.set_flags()
    took = wait_for(lambda: checkout_status() == 200, 4, "checkout to recover")
    assert took < 2.5
    wait_for(lambda: http("GET", stack.url("frontend", "/api/products/OLJCESPC7Z"))[0] == 200, 3,
             "the catalog to recover")


def test_loadgen_drives_traffic_and_stops_on_sigterm(stack: Stack) -> None:
    proc = stack.start("loadgen", LOADGEN_TARGET=stack.url("frontend", ""), LOADGEN_RPS="10", LOADGEN_SEED="7")
    try:
        def ok_requests() -> float:
            try:
                _, text, _ = http("GET", stack.url("loadgen", "/metrics"), timeout=2)
            except OSError:
                return 0.0
            return metric_value(text, "loadgen_requests_total", code="200")

        wait_for(lambda: ok_requests() >= 10, 15, "loadgen requests to succeed")
        _, text, _ = http("GET", stack.url("loadgen", "/metrics"))
        assert metric_value(text, "loadgen_requests_total", step="home", code="200") >= 1
        assert metric_value(text, "loadgen_requests_total", code="error") == 0
        _, front, _ = http("GET", stack.url("frontend", "/metrics"))
        assert metric_value(front, "http_server_requests_total", service="frontend", route="/product/{id}") >= 1
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0
        assert time.monotonic() - start < 2.0, "loadgen must stop within 2 s of SIGTERM"
    finally:
        stop(proc, signal.SIGKILL)
    journeys = [s for s in read_jsonl(stack.telemetry / "traces")
                if s["resource"]["service.name"] == "loadgen" and s["name"].startswith("journey ")]
    assert journeys, "journey spans flushed on shutdown"


def test_service_stops_on_sigterm_and_flushes_spans(stack: Stack) -> None:
    trace_id = secrets.token_hex(16)
    status, _, _ = http("POST", stack.url("email", "/send"), {"email": "a@example.com", "order": {"order_id": "x"}},
                        headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"})
    assert status == 200
    proc = stack.procs["email"]
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(5) == 0
    assert time.monotonic() - start < 2.0, "a service must stop within 2 s of SIGTERM"
    spans = [s for s in read_jsonl(stack.telemetry / "traces") if s["traceId"] == trace_id]
    assert [s["name"] for s in spans] == ["POST /send"]
    assert '"body":"email shutting down"' in stack.output("email")
