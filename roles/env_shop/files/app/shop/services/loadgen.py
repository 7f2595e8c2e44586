"""loadgen: user journeys against LOADGEN_TARGET at ~LOADGEN_RPS journeys/s, reproducible via LOADGEN_SEED.

Not a web service, but it serves /healthz and /metrics on SHOP_PORT. Journeys (browse, cart,
checkout) and their arrival times (exponential inter-arrival, open loop) all come from
``random.Random(LOADGEN_SEED)`` in one scheduler thread, so a seed always yields the same sequence
of requests. Journeys that find every worker busy are dropped and counted, never queued.

Flag loadgeneratorFloodHomepage: an extra flood of ``GET /`` at the variant's rate (requests per
second; default 50), on its own workers.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import metrics
from ..client import Upstream
from ..data import PRODUCT_IDS
from ..web import App

JOURNEY_WEIGHTS = {"browse": 5, "cart": 2, "checkout": 3}
CURRENCIES = ("USD", "USD", "EUR", "GBP", "CAD", "JPY")
REQUEST_TIMEOUT = 10.0
FLOOD_DEFAULT_RPS = 50.0
CARD = "4432-8015-6152-0454"
ADDRESSES = (
    {"street_address": "1600 Amphitheatre Parkway", "city": "Mountain View", "state": "CA", "country": "USA",
     "zip_code": "94043"},
    {"street_address": "10 Downing Street", "city": "London", "state": "", "country": "UK", "zip_code": "SW1A 2AA"},
    {"street_address": "1 Rue de Rivoli", "city": "Paris", "state": "", "country": "France", "zip_code": "75001"},
)


@dataclass
class Step:
    name: str
    method: str
    path: str
    route: str
    query: dict[str, str] | None = None
    body: dict[str, Any] | None = None


@dataclass
class Journey:
    number: int
    kind: str
    user: str
    steps: list[Step] = field(default_factory=list)


def plan_journey(rng: random.Random, number: int, seed: int) -> Journey:
    """The next journey; every random choice comes from ``rng`` (in a fixed order)."""
    kind = rng.choices(list(JOURNEY_WEIGHTS), weights=list(JOURNEY_WEIGHTS.values()))[0]
    user = f"lg{seed}-{number}"
    currency = rng.choice(CURRENCIES)
    journey = Journey(number, kind, user)
    journey.steps.append(Step("home", "GET", "/", "/", query={"currency": currency}))
    views = rng.randint(1, 3) if kind == "browse" else rng.randint(1, 2)
    for _ in range(views):
        pid = rng.choice(PRODUCT_IDS)
        journey.steps.append(Step("product", "GET", f"/product/{pid}", "/product/{id}", query={"currency": currency}))
        if kind != "browse":
            journey.steps.append(Step("add_to_cart", "POST", "/api/cart", "/api/cart",
                                      body={"user": user, "product_id": pid, "quantity": rng.randint(1, 3)}))
    if kind == "cart":
        journey.steps.append(Step("view_cart", "GET", "/api/cart", "/api/cart", query={"user": user}))
    elif kind == "checkout":
        journey.steps.append(Step("checkout", "POST", "/api/checkout", "/api/checkout", body={
            "user": user, "currency": currency, "email": f"{user}@example.com",
            "address": dict(rng.choice(ADDRESSES)), "card": CARD}))
    return journey


class WorkerPool:
    """Fixed daemon workers; ``submit`` refuses work when every worker is busy (no queue build-up)."""

    def __init__(self, size: int, name: str) -> None:
        self._slots = threading.BoundedSemaphore(size)
        self._tasks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        for i in range(size):
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True).start()

    def submit(self, fn: Callable[[], None]) -> bool:
        if not self._slots.acquire(blocking=False):
            return False
        self._tasks.put(fn)
        return True

    def _work(self) -> None:
        while True:
            fn = self._tasks.get()
            try:
                fn()
            except Exception:  # a journey must never kill a worker
                pass
            finally:
                self._slots.release()


class Loadgen:
    def __init__(self, app: App, target: str, rps: float, seed: int, workers: int = 32,
                 flood_workers: int = 64) -> None:
        metrics.register(metrics.LOADGEN_REQUESTS, metrics.LOADGEN_DURATION, metrics.LOADGEN_JOURNEYS,
                         metrics.LOADGEN_DROPPED)
        self.app = app
        self.rps = rps
        self.seed = seed
        self.client = Upstream(app.service, "frontend", target, app.tracer, timeout=REQUEST_TIMEOUT)
        self.pool = WorkerPool(workers, "journey")
        self.flood_pool = WorkerPool(flood_workers, "flood")
        self.stopping = app.stopping

    def record(self, journey: str, step: Step) -> bool:
        result = self.client.call(step.method, step.path, route=step.route, json_body=step.body, query=step.query)
        code = str(result.status) if result.status is not None else "error"
        metrics.LOADGEN_REQUESTS.labels(journey, step.name, code).inc()
        return result.status is not None and result.status < 400

    def run_journey(self, journey: Journey) -> None:
        start = time.perf_counter()
        with self.app.tracer.start_as_current_span(f"journey {journey.kind}", kind=SpanKind.INTERNAL, attributes={
                "loadgen.journey": journey.kind, "loadgen.user": journey.user,
                "loadgen.journey_number": journey.number}) as span:
            outcome = "ok"
            for step in journey.steps:
                step_start = time.perf_counter()
                ok = self.record(journey.kind, step)
                metrics.LOADGEN_DURATION.labels(journey.kind, step.name).observe(time.perf_counter() - step_start)
                if not ok:
                    outcome = "failed"
                    span.set_status(Status(StatusCode.ERROR, f"step {step.name} failed"))
                    break
        metrics.LOADGEN_JOURNEYS.labels(journey.kind, outcome).inc()
        if outcome != "ok":
            self.app.log.warn(f"journey {journey.kind} #{journey.number} failed after "
                              f"{(time.perf_counter() - start) * 1000:.0f} ms", **{"loadgen.journey": journey.kind})

    def schedule(self) -> None:
        """Open-loop arrivals at ~rps journeys/s, exponential inter-arrival times from the seeded rng."""
        rng = random.Random(self.seed)
        number = 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            if self.rps <= 0:
                self.stopping.wait(1.0)
                continue
            delay = next_at - time.monotonic()
            if delay > 0 and self.stopping.wait(delay):
                return
            journey = plan_journey(rng, number, self.seed)
            number += 1
            next_at = max(next_at + rng.expovariate(self.rps), time.monotonic() - 1.0)  # no burst after a stall
            if not self.pool.submit(lambda j=journey: self.run_journey(j)):  # type: ignore[misc]
                metrics.LOADGEN_DROPPED.labels(journey.kind).inc()

    def flood(self) -> None:
        step = Step("home", "GET", "/", "/")
        next_at = time.monotonic()
        while not self.stopping.is_set():
            rate = self.app.flags.number("loadgeneratorFloodHomepage", FLOOD_DEFAULT_RPS)
            if not rate or rate <= 0:
                self.stopping.wait(0.25)
                next_at = time.monotonic()
                continue
            delay = next_at - time.monotonic()
            if delay > 0 and self.stopping.wait(delay):
                return
            next_at = max(next_at + 1.0 / rate, time.monotonic() - 1.0)
            if not self.flood_pool.submit(lambda: self.flood_one(step)):
                metrics.LOADGEN_DROPPED.labels("flood").inc()

    def flood_one(self, step: Step) -> None:
        start = time.perf_counter()
        self.record("flood", step)
        metrics.LOADGEN_DURATION.labels("flood", step.name).observe(time.perf_counter() - start)

    def start(self) -> None:
        threading.Thread(target=self.schedule, name="loadgen-scheduler", daemon=True).start()
        threading.Thread(target=self.flood, name="loadgen-flood", daemon=True).start()


def build(app: App, env: Mapping[str, str]) -> None:
    target = env.get("LOADGEN_TARGET") or "http://frontend:8080"
    rps = float(env.get("LOADGEN_RPS") or 5)
    seed = int(env.get("LOADGEN_SEED") or 1)
    loadgen = Loadgen(app, target, rps, seed)
    app.log.info(f"loadgen targeting {target} at {rps:g} journeys/s, seed {seed}",
                 **{"loadgen.target": target, "loadgen.rps": rps, "loadgen.seed": seed})
    loadgen.start()
