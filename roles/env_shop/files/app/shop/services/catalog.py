"""catalog: products in PostgreSQL (PG_DSN, PG_PASSWORD optional); creates and seeds its table on start when empty.

Pooled connections are recycled after PG_CONN_MAX_AGE seconds (default 20, 0 = never), so a database that
stops accepting connections (slots exhausted, credential revoked) shows up as 503s within about that time.

CATALOG_SCHEMA (default 1) is the table layout this release reads: 2 also reads ``products.stock``, the column
release 2 expects from its migration (not applied by the deploy: the seed creates layout 1). A replica started with
layout 2 against a database without the column answers 500 on every product read; its /healthz stays 200.

Flags: productCatalogFailure (500 for one product id: the variant string, else OLJCESPC7Z),
catalogSlowResponse / imageSlowLoad (added latency: the variant in ms, default 1500).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import psycopg2
from psycopg2.extensions import connection as Connection
from psycopg2.extras import execute_values
from psycopg2.pool import PoolError, ThreadedConnectionPool

from ..data import PRODUCTS
from ..telemetry import JsonLogger
from ..web import App, HTTPError, Request

FAILING_PRODUCT_DEFAULT = "OLJCESPC7Z"
SLOW_DEFAULT_MS = 1500.0
SEED_LOCK_ID = 7243001
CONN_MAX_AGE_DEFAULT = 20.0
COLUMNS = "id, name, description, picture, price_usd, categories"
SCHEMA_COLUMNS = {"1": COLUMNS, "2": COLUMNS + ", stock"}

SCHEMA = """
CREATE TABLE IF NOT EXISTS products (
    id          text PRIMARY KEY,
    name        text NOT NULL,
    description text NOT NULL DEFAULT '',
    picture     text NOT NULL DEFAULT '',
    price_usd   numeric(12, 2) NOT NULL,
    categories  text[] NOT NULL DEFAULT '{}'
)
"""


class TimedConnection(Connection):
    """A psycopg2 connection that remembers when it was opened (``opened_at``, time.monotonic)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # psycopg2 passes (dsn, async) positionally
        super().__init__(*args, **kwargs)
        self.opened_at = time.monotonic()


def row_to_product(row: Sequence[Any]) -> dict[str, Any]:
    pid, name, description, picture, price, categories = row[:6]
    product = {"id": pid, "name": name, "description": description, "picture": picture,
               "price_usd": float(price) if isinstance(price, Decimal) else price,
               "categories": list(categories or [])}
    if len(row) > 6:
        product["stock"] = row[6]
    return product


class CatalogStore:
    def __init__(self, dsn: str, log: JsonLogger, password: str | None = None, minconn: int = 4,
                 maxconn: int = 10, max_age: float = CONN_MAX_AGE_DEFAULT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.dsn = dsn
        self.password = password
        self.log = log
        self.minconn = minconn  # psycopg2's pool keeps at most minconn idle connections, closes the rest
        self.maxconn = maxconn
        self.max_age = max_age  # seconds; 0 = connections are never recycled
        self.clock = clock
        self.pool: ThreadedConnectionPool | None = None
        self.ready = threading.Event()
        self.last_error = "not initialised yet"

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for psycopg2.connect on top of the DSN (they override its keys)."""
        kwargs: dict[str, Any] = {"connect_timeout": 3, "options": "-c statement_timeout=3000",
                                  "application_name": "shop-catalog"}
        if self.password:
            kwargs["password"] = self.password
        return kwargs

    def seed(self) -> int:
        """Create the table and insert the seed products if it is empty; returns rows inserted."""
        conn = psycopg2.connect(self.dsn, **self.connect_kwargs())
        try:
            with conn, conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (SEED_LOCK_ID,))  # replicas start together
                cur.execute(SCHEMA)
                cur.execute("SELECT count(*) FROM products")
                row = cur.fetchone()
                if row is not None and row[0] > 0:
                    return 0
                execute_values(cur, f"INSERT INTO products ({COLUMNS}) VALUES %s ON CONFLICT (id) DO NOTHING",
                               [(p["id"], p["name"], p["description"], p["picture"], p["price_usd"],
                                 p["categories"]) for p in PRODUCTS])
                return len(PRODUCTS)
        finally:
            conn.close()

    def init_loop(self, stopping: threading.Event) -> None:
        """Retry until the database is reachable and seeded (the catalog may start before PostgreSQL)."""
        delay = 0.5
        while not stopping.is_set():
            try:
                inserted = self.seed()
                self.pool = ThreadedConnectionPool(self.minconn, self.maxconn, self.dsn,
                                                   connection_factory=TimedConnection, **self.connect_kwargs())
            except psycopg2.Error as exc:
                self.last_error = f"database unavailable: {str(exc).strip()}"
                self.log.warn(f"catalog cannot initialise the database, retrying in {delay:g}s: {self.last_error}")
                stopping.wait(delay)
                delay = min(delay * 2, 5.0)
                continue
            self.log.info(f"catalog database ready ({inserted} products seeded)", **{"db.rows_inserted": inserted})
            self.ready.set()
            return

    def expired(self, conn: Connection) -> bool:
        """True when ``conn`` is older than ``max_age`` (never for max_age 0 or an untimed connection)."""
        opened_at: float | None = getattr(conn, "opened_at", None)
        return self.max_age > 0 and opened_at is not None and self.clock() - opened_at >= self.max_age

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if not self.ready.is_set() or self.pool is None:
            raise HTTPError(503, f"catalog database not ready: {self.last_error}")
        # Pooled connections the server dropped (a restart, pg_terminate_backend) and idle ones past max_age
        # are discarded one by one; a failing fresh connection ends the loop in getconn (503, and the next
        # request tries again). A connection past max_age is also closed when it is returned.
        for _ in range(self.maxconn + 1):
            try:
                conn = self.pool.getconn()
            except PoolError as exc:
                raise HTTPError(503, f"database connection pool exhausted: {exc}") from None
            except psycopg2.Error as exc:
                raise HTTPError(503, f"database unavailable: {str(exc).strip()}") from None
            if self.expired(conn):
                self.pool.putconn(conn, close=True)
                continue
            broken = False
            try:
                conn.autocommit = True
                with conn.cursor() as cur:
                    cur.execute(sql, args)
                    return list(cur.fetchall())
            except (psycopg2.OperationalError, psycopg2.InterfaceError) as exc:
                broken = True
                if conn.closed:
                    continue
                raise HTTPError(503, f"database error: {str(exc).strip()}") from None
            except psycopg2.Error as exc:
                raise HTTPError(500, f"database error: {str(exc).strip()}") from None
            finally:
                self.pool.putconn(conn, close=broken or self.expired(conn))
        raise HTTPError(503, "database unavailable: every pooled connection was dropped")

    def health(self) -> tuple[bool, str]:
        if not self.ready.is_set():
            return False, self.last_error
        try:
            self.query("SELECT 1")
        except HTTPError as exc:
            return False, exc.message
        return True, "database ok"

    def close(self) -> None:
        if self.pool is not None:
            self.pool.closeall()


def build(app: App, env: Mapping[str, str]) -> None:
    store = CatalogStore(env.get("PG_DSN") or "dbname=shop", app.log, password=env.get("PG_PASSWORD") or None,
                         max_age=max(0.0, float(env.get("PG_CONN_MAX_AGE") or CONN_MAX_AGE_DEFAULT)))
    threading.Thread(target=store.init_loop, args=(app.stopping,), name="catalog-init", daemon=True).start()
    app.readiness = store.health
    schema = (env.get("CATALOG_SCHEMA") or "1").strip()
    if schema not in SCHEMA_COLUMNS:
        raise ValueError(f"CATALOG_SCHEMA must be one of {', '.join(SCHEMA_COLUMNS)}, got {schema!r}")
    columns = SCHEMA_COLUMNS[schema]
    app.shutdown_hooks.append(store.close)
    flags = app.flags

    def slow_down() -> None:
        delays = [flags.number(name, SLOW_DEFAULT_MS) for name in ("catalogSlowResponse", "imageSlowLoad")]
        delay_ms = max([d for d in delays if d is not None] or [0.0])
        if delay_ms > 0:
            time.sleep(min(delay_ms, 60000.0) / 1000.0)

    @app.route("GET", "/products")
    def list_products(req: Request) -> dict[str, Any]:
        slow_down()
        rows = store.query(f"SELECT {columns} FROM products ORDER BY id")
        return {"products": [row_to_product(r) for r in rows]}

    @app.route("GET", "/products/{id}")
    def get_product(req: Request) -> dict[str, Any]:
        slow_down()
        product_id = req.params["id"]
        failing = flags.text("productCatalogFailure", FAILING_PRODUCT_DEFAULT)
        if failing is not None and product_id == failing:
            raise HTTPError(500, f"internal error loading product {product_id}")
        rows = store.query(f"SELECT {columns} FROM products WHERE id = %s", (product_id,))
        if not rows:
            raise HTTPError(404, f"product not found: {product_id}")
        return row_to_product(rows[0])

    @app.route("GET", "/search")
    def search(req: Request) -> dict[str, Any]:
        slow_down()
        q = req.query.get("q", "").strip()
        if len(q) > 100:
            raise HTTPError(400, "query too long")
        pattern = "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = store.query(f"SELECT {columns} FROM products WHERE name ILIKE %s OR description ILIKE %s "
                           "OR %s = ANY(categories) ORDER BY id", (pattern, pattern, q.lower()))
        return {"query": q, "products": [row_to_product(r) for r in rows]}
