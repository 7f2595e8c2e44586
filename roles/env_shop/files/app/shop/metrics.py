"""Prometheus metrics shared by every service (default registry: includes the process collector)."""

from __future__ import annotations

import contextlib

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram, generate_latest
from prometheus_client.registry import Collector

# 5 ms .. 10 s
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

SERVER_REQUESTS = Counter("http_server_requests", "HTTP requests handled, by templated route and status code.",
                          ["service", "route", "method", "code"])
SERVER_DURATION = Histogram("http_server_request_duration_seconds", "Time to handle an HTTP request.",
                            ["service", "route"], buckets=LATENCY_BUCKETS)
CLIENT_REQUESTS = Counter("http_client_requests", "HTTP calls to other services; code is 'error' when no response.",
                          ["service", "peer", "code"])
CLIENT_DURATION = Histogram("http_client_request_duration_seconds", "Duration of HTTP calls to other services.",
                            ["service", "peer"], buckets=LATENCY_BUCKETS)
# Service-specific metrics: created unregistered, registered only by the service that uses them, so other
# services do not expose them.
RECOMMENDATION_CACHE_ITEMS = Gauge("shop_recommendation_cache_items", "Product entries in the recommendation cache.",
                                   registry=None)
LOADGEN_REQUESTS = Counter("loadgen_requests", "Requests sent by the load generator, by journey, step and code.",
                           ["journey", "step", "code"], registry=None)
LOADGEN_DURATION = Histogram("loadgen_request_duration_seconds", "Latency seen by the load generator.",
                             ["journey", "step"], buckets=LATENCY_BUCKETS, registry=None)
LOADGEN_JOURNEYS = Counter("loadgen_journeys", "User journeys run by the load generator, by outcome.",
                           ["journey", "outcome"], registry=None)
LOADGEN_DROPPED = Counter("loadgen_dropped_journeys", "Journeys not started because every worker was busy.",
                          ["journey"], registry=None)


def register(*collectors: Collector) -> None:
    """Register collectors with the default registry; registering one twice is a no-op."""
    for collector in collectors:
        with contextlib.suppress(ValueError):  # already registered (a second build in one process, e.g. tests)
            REGISTRY.register(collector)


def exposition() -> tuple[bytes, str]:
    """The /metrics body and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
