"""recommendation: ``/recommendations?product_ids=a,b`` suggests other products from the catalog.

The product list is cached in-process (refreshed every CACHE_TTL seconds). Flag
recommendationServiceCacheFailure makes every request miss the cache and *append* the fresh list
plus ballast to it (a leak: 1 MB per request for true, or the variant's number in MB), and scans
the whole cache per request, so memory grows with every request and latency grows with it. When
the flag is off again the next request replaces the leaked cache with a fresh list.
"""

from __future__ import annotations

import random
import threading
import time
import zlib
from collections.abc import Mapping
from typing import Any

from .. import metrics
from ..client import Upstream
from ..web import App, HTTPError, Request
from .common import upstream

CACHE_TTL = 60.0
LEAK_MB_DEFAULT = 1.0
MAX_RECOMMENDATIONS = 4


class ProductCache:
    def __init__(self, catalog: Upstream, ttl: float = CACHE_TTL) -> None:
        self.catalog = catalog
        self.ttl = ttl
        self.lock = threading.Lock()
        self.products: list[dict[str, Any]] = []
        self.ballast: list[bytes] = []
        self.fetched_at = 0.0

    def _fetch(self) -> list[dict[str, Any]]:
        data = self.catalog.get("/products", route="/products")
        products = data.get("products") if isinstance(data, dict) else None
        if not isinstance(products, list):
            raise HTTPError(502, "catalog returned no product list")
        return [p for p in products if isinstance(p, dict) and "id" in p]

    def get(self, leak_bytes: int) -> list[dict[str, Any]]:
        """The cached products (with duplicates while leaking ``leak_bytes`` per call)."""
        now = time.monotonic()
        if leak_bytes > 0:
            fresh = self._fetch()
            with self.lock:
                self.products.extend(fresh)
                self.ballast.append(b"x" * leak_bytes)  # filled, so the pages are really resident
                ballast = list(self.ballast)
                products = list(self.products)
            checksum = 0
            for block in ballast:  # "validate" every cached block: slower the more has leaked
                checksum = zlib.crc32(block, checksum)
        else:
            with self.lock:
                stale = not self.products or now - self.fetched_at > self.ttl or bool(self.ballast)
            if stale:
                fresh = self._fetch()
                with self.lock:
                    self.products = fresh
                    self.ballast = []
                    self.fetched_at = now
            with self.lock:
                products = list(self.products)
        metrics.RECOMMENDATION_CACHE_ITEMS.set(len(products))
        return products


def recommend(products: list[dict[str, Any]], exclude: set[str], rng: random.Random,
              limit: int = MAX_RECOMMENDATIONS) -> list[dict[str, Any]]:
    unique: dict[str, dict[str, Any]] = {}
    for p in products:
        if p["id"] not in exclude:
            unique.setdefault(p["id"], p)
    picks = rng.sample(sorted(unique), min(limit, len(unique)))
    return [{k: unique[pid].get(k) for k in ("id", "name", "price_usd", "picture")} for pid in picks]


def build(app: App, env: Mapping[str, str]) -> None:
    cache = ProductCache(upstream(app, "catalog", env))
    rng = random.Random()
    flags = app.flags
    metrics.register(metrics.RECOMMENDATION_CACHE_ITEMS)
    metrics.RECOMMENDATION_CACHE_ITEMS.set(0)

    @app.route("GET", "/recommendations")
    def recommendations(req: Request) -> dict[str, Any]:
        exclude = {p.strip() for p in req.query.get("product_ids", "").split(",") if p.strip()}
        leak_mb = flags.number("recommendationServiceCacheFailure", LEAK_MB_DEFAULT) or 0.0
        products = cache.get(int(min(max(leak_mb, 0.0), 100.0) * 1_000_000))
        recs = recommend(products, exclude, rng)
        return {"product_ids": [r["id"] for r in recs], "products": recs}
