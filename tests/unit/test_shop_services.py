"""Shop services in-process: request handling and every flag-driven failure mode that needs no database."""

from __future__ import annotations

import ctypes
import errno
import gc
import io
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from prometheus_client import REGISTRY
from psycopg2.pool import ThreadedConnectionPool

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "env_shop" / "files" / "app"))

from shop.flags import Flags
from shop.services import SERVICE_NAMES, builder
from shop.services.catalog import CatalogStore, TimedConnection
from shop.services.loadgen import Loadgen, plan_journey
from shop.telemetry import Telemetry
from shop.web import App, HTTPError, Request, Response


class FlagFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.set()

    def set(self, **flags: object) -> None:
        self.path.write_text(json.dumps({"flags": {
            name: {"state": "ENABLED", "variants": {"on": value, "off": False}, "defaultVariant": "on"}
            for name, value in flags.items()}}))


@pytest.fixture
def flag_file(tmp_path: Path) -> FlagFile:
    return FlagFile(tmp_path / "flags.json")


@pytest.fixture
def apps() -> Iterator[list[App]]:
    """Apps built by the test; their background threads are stopped and servers closed afterwards."""
    made: list[App] = []
    yield made
    for app in made:
        app.stopping.set()
        if app.server is not None:
            app.server.shutdown()
            app.server.server_close()


def build(apps: list[App], service: str, flag_file: FlagFile | None = None, **env: str) -> App:
    app = App(service, Telemetry(service, f"{service}-t", None, stream=io.StringIO()))
    app.flags = Flags(str(flag_file.path) if flag_file else None, min_interval=0.0)
    builder(service)(app, env)
    apps.append(app)
    return app


def serve(app: App) -> int:
    server = app.make_server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return int(server.server_address[1])


def call(app: App, method: str, path: str, body: object = None) -> tuple[int, Any]:
    resp = app.handle(method, path, {}, json.dumps(body).encode() if body is not None else b"")
    return resp.status, json.loads(resp.body) if resp.content_type == "application/json" else resp.body.decode()


def rss_kb() -> int:
    """Current resident set size of this process (Linux)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def settled_rss_kb() -> int:
    """The resident set size once freed memory has gone back to the system: what earlier tests in this worker freed
    (glibc keeps freed heap pages resident and raises its mmap threshold after large frees) is reused by the next
    allocations without growing the RSS, which would hide a leak that the measurement after it is meant to show."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def dead_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_every_service_builds(apps: list[App]) -> None:
    for service in SERVICE_NAMES:
        if service == "loadgen":
            continue  # starts traffic threads; covered below
        app = build(apps, service, PG_DSN=f"host=127.0.0.1 port={dead_port()} connect_timeout=1",
                    REDIS_ADDR=f"127.0.0.1:{dead_port()}")
        assert {r.template for r in app.router.routes} >= {"/healthz", "/metrics"}
    with pytest.raises(KeyError):
        builder("nope")


def test_payment_validates_cards_and_fails_at_the_flag_rate(apps: list[App], flag_file: FlagFile) -> None:
    app = build(apps, "payment", flag_file)
    good = {"amount": 12.5, "currency": "eur", "card": {"number": "4432-8015-6152-0454"}}
    status, body = call(app, "POST", "/charge", good)
    assert status == 200 and len(body["transaction_id"]) == 36 and body["currency"] == "EUR"
    assert call(app, "POST", "/charge", {**good, "card": "4432801561520454"})[0] == 200
    status, body = call(app, "POST", "/charge", {**good, "card": "4432-8015-6152-0455"})
    assert status == 400 and body["error"] == "invalid card number"
    assert call(app, "POST", "/charge", {**good, "amount": -1})[0] == 400
    assert call(app, "POST", "/charge", {**good, "currency": "EURO"})[0] == 400
    assert call(app, "POST", "/charge", {**good, "card": None})[0] == 400

    flag_file.set(paymentServiceFailure=1.0)
    status, body = call(app, "POST", "/charge", good)
    assert status == 500 and "charge failed" in body["error"]
    flag_file.set(paymentServiceFailure=True)
    assert all(call(app, "POST", "/charge", good)[0] == 500 for _ in range(20))
    flag_file.set(paymentServiceFailure=0.5)
    codes = [call(app, "POST", "/charge", good)[0] for _ in range(400)]
    assert 120 < codes.count(500) < 280 and codes.count(200) + codes.count(500) == 400
    flag_file.set(paymentServiceFailure=0)
    assert all(call(app, "POST", "/charge", good)[0] == 200 for _ in range(20))


def test_currency_service(apps: list[App]) -> None:
    app = build(apps, "currency")
    assert call(app, "GET", "/convert?from=USD&to=EUR&amount=100") == (
        200, {"from": "USD", "to": "EUR", "amount": 100.0, "result": 92.0})
    assert call(app, "GET", "/currencies")[1]["currencies"][:3] == ["AUD", "BRL", "CAD"]
    assert call(app, "GET", "/convert?from=USD&to=XXX&amount=1")[0] == 400
    assert call(app, "GET", "/convert?from=USD&to=EUR&amount=abc")[0] == 400
    assert call(app, "GET", "/convert?from=USD&to=EUR&amount=-5")[0] == 400


def test_shipping_and_email(apps: list[App]) -> None:
    ship = build(apps, "shipping")
    req = {"address": {"city": "Paris", "country": "France"}, "items": [{"product_id": "A", "quantity": 2},
                                                                        {"product_id": "B", "quantity": 1}]}
    assert call(ship, "POST", "/quote", req) == (200, {"cost_usd": 8.99, "items": 3})
    status, body = call(ship, "POST", "/ship", req)
    assert status == 200 and body["tracking_id"].startswith("1Z") and len(body["tracking_id"]) == 18
    assert call(ship, "POST", "/quote", {**req, "items": []})[0] == 400
    assert call(ship, "POST", "/ship", {**req, "address": {"city": "Paris"}})[0] == 400
    email = build(apps, "email")
    status, body = call(email, "POST", "/send", {"email": "a@b.c", "order": {"order_id": "o1", "items": [
        {"name": "<script>", "quantity": 1}], "total": {"amount": 1, "currency": "USD"}}})
    assert status == 200 and body["status"] == "rendered" and body["bytes"] > 50
    assert call(email, "POST", "/send", {"email": "not-an-email"})[0] == 400


SPOOL_NAME = re.compile(r"^(?P<key>[A-Za-z0-9_-]+)-\d{8}T\d{6}\.\d{9}Z\.html$")


def send_order(app: App, order_id: str | None) -> tuple[int, Any]:
    order = {"items": [{"name": "Comet Book", "quantity": 2}], "total": {"amount": 2, "currency": "USD"}}
    return call(app, "POST", "/send", {"email": "a@b.c", "order": order if order_id is None
                                       else {**order, "order_id": order_id}})


def test_email_spool_writes_each_confirmation_and_keeps_the_newest(apps: list[App], tmp_path: Path) -> None:
    spool = tmp_path / "spool"  # created on the first write
    app = build(apps, "email", EMAIL_SPOOL_DIR=str(spool), EMAIL_SPOOL_KEEP="3")
    assert send_order(app, "o1")[0] == 200
    (first,) = spool.iterdir()
    assert SPOOL_NAME.match(first.name)["key"] == "o1"  # type: ignore[index]
    assert "Comet Book" in first.read_text() and first.stat().st_mode & 0o777 == 0o644
    (spool / "filler.bin").write_bytes(b"x")  # not a confirmation: never pruned
    for order_id in ("o2", "../../etc/passwd", None, "o5"):
        assert send_order(app, order_id)[0] == 200
    names = sorted(p.name for p in spool.iterdir())
    assert "filler.bin" in names and len(names) == 4 and not [n for n in names if n.startswith(".")]
    keys = {SPOOL_NAME.match(n)["key"] for n in names if n != "filler.bin"}  # type: ignore[index]
    assert len(keys) == 3 and "o5" in keys and "etc_passwd" in keys and not {"o1", "o2"} & keys
    assert len([k for k in keys if re.fullmatch(r"[0-9a-f]{32}", k)]) == 1  # no order id: a uuid


def test_email_without_spool_dir_writes_nothing(apps: list[App], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = build(apps, "email")
    status, body = send_order(app, "o1")
    assert status == 200 and set(body) == {"status", "bytes"}
    assert list(tmp_path.iterdir()) == []


def test_email_spool_failure_answers_500_with_the_os_error(apps: list[App], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    spool = tmp_path / "spool"
    app = build(apps, "email", EMAIL_SPOOL_DIR=str(spool))
    assert send_order(app, "o1")[0] == 200
    real_write = os.write

    def full_disk(fd: int, data: bytes) -> int:  # ENOSPC for files in the spool only
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(spool)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_disk)
    status, body = send_order(app, "o2")
    assert (status, body["error"]) == (500, "cannot spool confirmation: [Errno 28] No space left on device")
    assert [p.name.split("-")[0] for p in spool.iterdir()] == ["o1"]  # the temporary file was removed
    errors = [json.loads(line) for line in app.log.stream.getvalue().splitlines()  # type: ignore[attr-defined]
              if json.loads(line)["severityText"] == "ERROR"]
    assert len(errors) == 1 and "No space left on device" in errors[0]["body"]
    assert call(app, "GET", "/healthz")[0] == 200  # a full disk is not a liveness failure
    monkeypatch.setattr(os, "write", real_write)
    assert send_order(app, "o3")[0] == 200 and len(list(spool.iterdir())) == 2  # recovers by itself

    (tmp_path / "not-a-dir").write_text("")
    blocked = build(apps, "email", EMAIL_SPOOL_DIR=str(tmp_path / "not-a-dir"))
    status, body = send_order(blocked, "o4")
    assert status == 500 and body["error"].startswith("cannot spool confirmation: [Errno 17] File exists")


def test_ads_failure_flag_rates(apps: list[App], flag_file: FlagFile) -> None:
    app = build(apps, "ads", flag_file)
    status, body = call(app, "GET", "/ads?context=books")
    assert status == 200 and body["ads"] == [{"text": "The Comet Book: 99 cents of wonder.",
                                              "redirect_url": "/product/HQTGWGPNH4"}]
    assert len(call(app, "GET", "/ads")[1]["ads"]) == 2
    flag_file.set(adServiceFailure=True)  # default: 10 %
    codes = [call(app, "GET", "/ads")[0] for _ in range(2000)]
    assert 100 < codes.count(500) < 300
    flag_file.set(adServiceFailure=1)
    status, body = call(app, "GET", "/ads")
    assert status == 500 and body["error"].startswith("failed to retrieve ads")


def test_ads_high_cpu_burns_cpu_per_request(apps: list[App], flag_file: FlagFile) -> None:
    app = build(apps, "ads", flag_file)
    start, cpu = time.perf_counter(), time.process_time()
    call(app, "GET", "/ads")
    assert time.perf_counter() - start < 0.05
    flag_file.set(adServiceHighCpu=True)
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(3):
        assert call(app, "GET", "/ads")[0] == 200
    wall, used = time.perf_counter() - start, time.process_time() - cpu
    assert 0.3 <= wall < 3.0 and used >= 0.3  # 100-200 ms of CPU per request: busy, not sleeping


def test_ads_high_cpu_number_is_ms_of_cpu_per_request(apps: list[App], flag_file: FlagFile) -> None:
    app = build(apps, "ads", flag_file)
    for value, ms in ((400, 400), ("250", 250)):  # more than the 200 ms maximum of `true`
        flag_file.set(adServiceHighCpu=value)
        start, cpu = time.perf_counter(), time.process_time()
        assert call(app, "GET", "/ads")[0] == 200
        wall, used = time.perf_counter() - start, time.process_time() - cpu
        assert used >= ms / 1000 and wall < 3.0, (value, wall, used)  # CPU time, not wall time
    flag_file.set(adServiceHighCpu=0)  # a zero is off
    start = time.perf_counter()
    call(app, "GET", "/ads")
    assert time.perf_counter() - start < 0.05


def test_ads_manual_gc_stops_the_world(apps: list[App], flag_file: FlagFile) -> None:
    app = build(apps, "ads", flag_file)
    flag_file.set(adServiceManualGc=True)
    durations = []
    for _ in range(4):
        start = time.perf_counter()
        assert call(app, "GET", "/ads")[0] == 200
        durations.append(time.perf_counter() - start)
    assert max(durations) < 0.2
    # the 5th request pauses ~1 s holding the global lock; a concurrent request waits for it
    pauser = threading.Thread(target=call, args=(app, "GET", "/ads"))
    start = time.perf_counter()
    pauser.start()
    time.sleep(0.2)
    assert call(app, "GET", "/ads")[0] == 200
    blocked = time.perf_counter() - start
    pauser.join()
    assert 0.9 <= blocked < 2.0
    for _ in range(5):  # at most one pause per 2 s, so the next few requests pass
        start = time.perf_counter()
        assert call(app, "GET", "/ads")[0] == 200
        assert time.perf_counter() - start < 0.2


def test_catalog_flags_and_unready_database(apps: list[App], flag_file: FlagFile) -> None:
    app = build(apps, "catalog", flag_file, PG_DSN=f"host=127.0.0.1 port={dead_port()} connect_timeout=1")
    status, body = call(app, "GET", "/healthz")
    assert status == 503 and body["status"] == "unavailable"
    status, body = call(app, "GET", "/products/66VCHSJNUP")
    assert status == 503 and "database not ready" in body["error"]
    flag_file.set(productCatalogFailure=True)
    status, body = call(app, "GET", "/products/OLJCESPC7Z")
    assert status == 500 and "OLJCESPC7Z" in body["error"]
    assert call(app, "GET", "/products/66VCHSJNUP")[0] == 503  # other ids untouched by the flag
    flag_file.set(productCatalogFailure="66VCHSJNUP")
    assert call(app, "GET", "/products/66VCHSJNUP")[0] == 500
    assert call(app, "GET", "/products/OLJCESPC7Z")[0] == 503
    flag_file.set(catalogSlowResponse=300)
    start = time.perf_counter()
    call(app, "GET", "/products")
    assert 0.3 <= time.perf_counter() - start < 0.6
    flag_file.set(imageSlowLoad=200, catalogSlowResponse=100)
    start = time.perf_counter()
    call(app, "GET", "/products")
    assert 0.2 <= time.perf_counter() - start < 0.3  # the larger of the two


class FakeCursor:
    def __init__(self, conn: FakeConn) -> None:
        self.conn = conn

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str, args: object = ()) -> None:
        if self.conn.closed:
            raise psycopg2.InterfaceError("connection already closed")
        self.conn.queries += 1

    def fetchall(self) -> list[tuple[Any, ...]]:
        return [(1,)]


class FakeConn:
    """Just enough of a psycopg2 connection for psycopg2.pool and CatalogStore.query."""

    def __init__(self, opened_at: float) -> None:
        self.opened_at = opened_at
        self.closed = 0
        self.autocommit = False
        self.queries = 0
        self.info = type("Info", (), {"transaction_status": psycopg2.extensions.TRANSACTION_STATUS_IDLE})()

    def cursor(self) -> FakeCursor:
        return FakeCursor(self)

    def close(self) -> None:
        self.closed = 1


class FakeServer:
    """Stands in for psycopg2.connect: counts connections, or refuses them like a full PostgreSQL."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.refuse: str | None = None
        self.opened: list[FakeConn] = []

    def connect(self, *args: object, **kwargs: object) -> FakeConn:
        if self.refuse:
            raise psycopg2.OperationalError(f'connection to server at "db", port 5432 failed: {self.refuse}\n')
        self.opened.append(FakeConn(self.now))
        return self.opened[-1]


@pytest.fixture
def fake_pg(monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    server = FakeServer()
    monkeypatch.setattr(psycopg2, "connect", server.connect)
    return server


def fake_store(server: FakeServer, max_age: float, minconn: int = 2) -> CatalogStore:
    store = CatalogStore("dbname=shop", Telemetry("catalog", "catalog-t", None, stream=io.StringIO()).logger,
                         minconn=minconn, maxconn=4, max_age=max_age, clock=lambda: server.now)
    store.pool = ThreadedConnectionPool(store.minconn, store.maxconn, store.dsn,
                                        connection_factory=TimedConnection, **store.connect_kwargs())
    store.ready.set()
    return store


def test_catalog_recycles_pooled_connections_older_than_max_age(fake_pg: FakeServer) -> None:
    store = fake_store(fake_pg, max_age=20)
    assert len(fake_pg.opened) == 2  # minconn opened up front
    for _ in range(5):
        assert store.query("SELECT 1") == [(1,)]
    assert len(fake_pg.opened) == 2 and not any(c.closed for c in fake_pg.opened)
    fake_pg.now += 19.9
    assert store.query("SELECT 1") == [(1,)] and len(fake_pg.opened) == 2
    fake_pg.now += 0.1  # 20 s: idle connections are replaced before use, used ones closed on return
    for _ in range(3):
        assert store.query("SELECT 1") == [(1,)]
    assert all(c.closed for c in fake_pg.opened[:2]) and len(fake_pg.opened) == 3
    assert fake_pg.opened[2].queries == 3 and not fake_pg.opened[2].closed
    assert not store.expired(fake_pg.opened[2])  # type: ignore[arg-type]
    fake_pg.now += 20
    assert store.expired(fake_pg.opened[2])  # type: ignore[arg-type]


def test_catalog_conn_max_age_zero_never_recycles(fake_pg: FakeServer) -> None:
    store = fake_store(fake_pg, max_age=0)
    fake_pg.now += 1e6
    for _ in range(3):
        assert store.query("SELECT 1") == [(1,)]
    assert len(fake_pg.opened) == 2 and not any(c.closed for c in fake_pg.opened)


def test_catalog_failing_reconnect_is_503_and_recovers(fake_pg: FakeServer) -> None:
    store = fake_store(fake_pg, max_age=20)
    assert store.health() == (True, "database ok")
    fake_pg.refuse = "FATAL:  sorry, too many clients already"
    assert store.query("SELECT 1") == [(1,)]  # pooled connections still work until they age out
    fake_pg.now += 20
    for _ in range(3):
        with pytest.raises(HTTPError) as err:
            store.query("SELECT 1")
        assert err.value.status == 503
        assert err.value.message.startswith("database unavailable: connection to server at")
        assert err.value.message.endswith("FATAL:  sorry, too many clients already")
    ok, detail = store.health()
    assert not ok and "too many clients" in detail
    fake_pg.refuse = 'FATAL:  password authentication failed for user "shop"'
    with pytest.raises(HTTPError, match=r"database unavailable: .*password authentication failed"):
        store.query("SELECT 1")
    fake_pg.refuse = None
    assert store.query("SELECT 1") == [(1,)] and store.health() == (True, "database ok")


def test_catalog_pg_conn_max_age_from_env(apps: list[App]) -> None:
    for env, expected in (({}, 20.0), ({"PG_CONN_MAX_AGE": "5"}, 5.0), ({"PG_CONN_MAX_AGE": "0"}, 0.0)):
        app = build(apps, "catalog", PG_DSN=f"host=127.0.0.1 port={dead_port()} connect_timeout=1", **env)
        store = app.readiness.__self__  # type: ignore[attr-defined]
        assert isinstance(store, CatalogStore) and store.max_age == expected


def test_cart_failure_flag_and_unreachable_redis(apps: list[App], flag_file: FlagFile) -> None:
    app = build(apps, "cart", flag_file, REDIS_ADDR=f"127.0.0.1:{dead_port()}")
    status, body = call(app, "GET", "/cart/u1")
    assert status == 503 and "redis unavailable" in body["error"]
    assert call(app, "GET", "/healthz")[0] == 503
    assert call(app, "GET", "/cart/bad%20user")[0] == 400
    flag_file.set(cartServiceFailure=True)
    for method, body in (("GET", None), ("POST", {"product_id": "A", "quantity": 1}), ("DELETE", None)):
        status, data = call(app, method, "/cart/u1", body)
        assert status == 500 and "cart" in data["error"]


def test_recommendation_cache_leak(apps: list[App], flag_file: FlagFile) -> None:
    catalog = App("catalog", Telemetry("catalog", "catalog-t", None, stream=io.StringIO()))
    apps.append(catalog)
    fetches = []

    @catalog.route("GET", "/products")
    def products(req: Request) -> Response:
        fetches.append(1)
        return Response.json({"products": [{"id": f"P{i}", "name": f"n{i}", "price_usd": 1.0, "picture": "x"}
                                           for i in range(10)]})

    port = serve(catalog)
    app = build(apps, "recommendation", flag_file, CATALOG_ADDR=f"127.0.0.1:{port}")

    def gauge() -> float:
        return REGISTRY.get_sample_value("shop_recommendation_cache_items") or 0.0

    status, body = call(app, "GET", "/recommendations?product_ids=P1,P2")
    assert status == 200 and len(body["product_ids"]) == 4 and not {"P1", "P2"} & set(body["product_ids"])
    for _ in range(5):
        call(app, "GET", "/recommendations")
    assert gauge() == 10 and len(fetches) == 1  # cached

    flag_file.set(recommendationServiceCacheFailure=True)
    rss_before = settled_rss_kb()
    for _ in range(40):
        status, body = call(app, "GET", "/recommendations?product_ids=P0")
        assert status == 200 and len(set(body["product_ids"])) == 4 and "P0" not in body["product_ids"]
    assert gauge() == 10 + 40 * 10 and len(fetches) == 41  # every request misses and appends
    grown_kb = rss_kb() - rss_before
    assert grown_kb >= 30_000, f"expected ~40 MB of leaked cache, RSS grew {grown_kb} kB"

    flag_file.set()
    assert call(app, "GET", "/recommendations")[0] == 200
    assert gauge() == 10 and len(fetches) == 42  # the leaked cache is replaced by a fresh list

    flag_file.set(recommendationServiceCacheFailure=3)  # a number: MB leaked per request
    rss_before = settled_rss_kb()
    for _ in range(10):
        assert call(app, "GET", "/recommendations")[0] == 200
    assert gauge() == 10 + 10 * 10
    assert rss_kb() - rss_before >= 25_000
    flag_file.set()
    call(app, "GET", "/recommendations")
    assert gauge() == 10


def test_recommendation_propagates_catalog_failure(apps: list[App]) -> None:
    app = build(apps, "recommendation", CATALOG_ADDR=f"127.0.0.1:{dead_port()}")
    status, body = call(app, "GET", "/recommendations")
    assert status == 503 and body["error"].startswith("catalog: connection to")


def test_loadgen_plans_are_reproducible() -> None:
    import random
    first = [plan_journey(rng, n, 7) for rng in [random.Random(7)] for n in range(200)]
    again = [plan_journey(rng, n, 7) for rng in [random.Random(7)] for n in range(200)]
    other = [plan_journey(rng, n, 8) for rng in [random.Random(8)] for n in range(200)]
    assert first == again and first != other
    assert {j.kind for j in first} == {"browse", "cart", "checkout"}
    assert len({j.user for j in first}) == 200
    for journey in first:
        names = [s.name for s in journey.steps]
        assert names[0] == "home" and "product" in names
        if journey.kind == "checkout":
            assert names[-1] == "checkout" and "add_to_cart" in names
            assert journey.steps[-1].body is not None and journey.steps[-1].body["user"] == journey.user
        if journey.kind == "browse":
            assert set(names) == {"home", "product"}


def test_loadgen_rate_and_homepage_flood(apps: list[App], flag_file: FlagFile) -> None:
    front = App("frontend", Telemetry("frontend", "frontend-t", None, stream=io.StringIO()))
    apps.append(front)
    hits: list[str] = []
    ok = {"products": []}

    for method, route in (("GET", "/"), ("GET", "/product/{id}"), ("POST", "/api/cart"), ("GET", "/api/cart"),
                          ("POST", "/api/checkout")):
        front.route(method, route)(lambda req: hits.append(req.route) or ok)  # type: ignore[func-returns-value]
    port = serve(front)

    app = App("loadgen", Telemetry("loadgen", "loadgen-t", None, stream=io.StringIO()))
    app.flags = Flags(str(flag_file.path), min_interval=0.0)
    apps.append(app)
    loadgen = Loadgen(app, f"http://127.0.0.1:{port}", rps=20, seed=3)

    def count(**labels: str) -> float:
        return REGISTRY.get_sample_value("loadgen_requests_total", labels) or 0.0

    before = count(journey="browse", step="home", code="200")
    loadgen.start()
    time.sleep(1.0)
    journeys_home = hits.count("/")
    assert 8 <= journeys_home <= 40, journeys_home  # ~20 journeys at 20/s, each starting at the home page
    assert count(journey="browse", step="home", code="200") > before
    flag_file.set(loadgeneratorFloodHomepage=100)
    time.sleep(0.4)  # the flood thread polls the flag every 0.25 s while off
    flood_before = count(journey="flood", step="home", code="200")
    time.sleep(0.5)
    flooded = count(journey="flood", step="home", code="200") - flood_before
    assert 30 <= flooded <= 70, flooded  # ~50 in 0.5 s at 100/s
    flag_file.set()
    time.sleep(0.3)
    settled = count(journey="flood", step="home", code="200")
    time.sleep(0.3)
    assert count(journey="flood", step="home", code="200") - settled <= 2
