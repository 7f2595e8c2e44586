"""HTTP client for calls between services: client-side load balancing, tracing, metrics, JSON errors.

Every call resolves the upstream host with ``socket.getaddrinfo`` and picks one of the returned
addresses at random, so replicas sharing one DNS name (a podman network alias) share the load.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from . import metrics
from .telemetry import PROPAGATOR

DEFAULT_TIMEOUT = 3.0


class UpstreamError(Exception):
    """A failed call to another service; ``status`` is what the calling handler should answer."""

    def __init__(self, status: int, message: str, peer: str, upstream_status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.peer = peer
        self.upstream_status = upstream_status


def parse_addr(addr: str, default_port: int = 8080) -> tuple[str, int]:
    """'host:port', '[v6]:port', 'host' or 'http://host:port/...' -> (host, port)."""
    addr = addr.strip()
    if "://" in addr:
        addr = addr.split("://", 1)[1]
    addr = addr.split("/", 1)[0]
    if addr.startswith("["):
        host, _, rest = addr[1:].partition("]")
        port = rest.lstrip(":")
    elif addr.count(":") == 1:
        host, port = addr.split(":")
    else:
        host, port = addr, ""
    if not host:
        raise ValueError(f"no host in address {addr!r}")
    return host, int(port) if port else default_port


def client_timeout() -> float:
    try:
        return float(os.environ.get("SHOP_CLIENT_TIMEOUT", DEFAULT_TIMEOUT))
    except ValueError:
        return DEFAULT_TIMEOUT


@dataclass
class CallResult:
    status: int | None  # None: no HTTP response (connection error, timeout)
    data: Any
    error: str = ""
    timed_out: bool = False


class Upstream:
    """Calls one peer service (possibly many replicas behind one name)."""

    def __init__(self, service: str, peer: str, addr: str, tracer: Tracer, timeout: float | None = None,
                 rng: random.Random | None = None) -> None:
        self.service = service
        self.peer = peer
        self.addr = addr
        self.host, self.port = parse_addr(addr)
        self.tracer = tracer
        self.timeout = timeout if timeout is not None else client_timeout()
        self.rng = rng or random.Random()

    def addresses(self) -> list[tuple[str, int]]:
        """Every address the name resolves to right now, deduplicated, in resolver order."""
        infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        if any(info[0] == socket.AF_INET for info in infos):
            infos = [info for info in infos if info[0] == socket.AF_INET]  # services listen on IPv4 0.0.0.0
        seen: list[tuple[str, int]] = []
        for info in infos:
            sockaddr = info[4]
            pair = (str(sockaddr[0]), int(sockaddr[1]))
            if pair not in seen:
                seen.append(pair)
        if not seen:
            raise OSError(f"{self.host} resolved to no address")
        return seen

    def pick(self) -> tuple[str, int]:
        """Resolve now and choose one address at random."""
        return self.rng.choice(self.addresses())

    def call(self, method: str, path: str, *, route: str | None = None, json_body: object = None,
             query: dict[str, Any] | None = None, timeout: float | None = None,
             headers: dict[str, str] | None = None) -> CallResult:
        """One traced, measured HTTP call; never raises for transport or HTTP errors."""
        method = method.upper()
        route = route or path
        timeout = timeout if timeout is not None else self.timeout
        target = path + ("?" + urlencode(query) if query else "")
        start = time.perf_counter()
        code = "error"
        with self.tracer.start_as_current_span(
                f"{method} {route}", kind=SpanKind.CLIENT, record_exception=False, set_status_on_exception=False,
                attributes={"http.request.method": method, "url.path": path, "http.route": route,
                            "peer.service": self.peer}) as span:
            address = f"{self.host}:{self.port}"
            try:
                ip, port = self.pick()
                address = f"{ip}:{port}"
                span.set_attribute("server.address", ip)
                span.set_attribute("server.port", port)
                sent = {**(headers or {}), "Accept": "application/json", "Host": f"{self.host}:{self.port}"}
                PROPAGATOR.inject(sent)
                body = None
                if json_body is not None:
                    body = json.dumps(json_body).encode()
                    sent["Content-Type"] = "application/json"
                conn = http.client.HTTPConnection(ip, port, timeout=timeout)
                try:
                    conn.request(method, target, body=body, headers=sent)
                    resp = conn.getresponse()
                    raw = resp.read()
                    status = resp.status
                    ctype = resp.getheader("Content-Type", "")
                finally:
                    conn.close()
            except TimeoutError:
                result = CallResult(None, None, f"timeout after {timeout:g}s calling {method} {route} at {address}",
                                    timed_out=True)
            except (OSError, http.client.HTTPException) as exc:
                reason = str(exc) or type(exc).__name__
                result = CallResult(None, None, f"connection to {address} failed: {reason}")
            else:
                code = str(status)
                data: Any
                try:
                    data = json.loads(raw) if "json" in ctype else raw.decode("utf-8", "replace")
                except ValueError:
                    data = raw.decode("utf-8", "replace")
                error = ""
                if status >= 400:
                    error = str(data.get("error", "")) if isinstance(data, dict) else str(data)[:200]
                    error = error or f"HTTP {status}"
                result = CallResult(status, data, error)
                span.set_attribute("http.response.status_code", status)
            if result.status is None or result.status >= 500:
                span.set_status(Status(StatusCode.ERROR, result.error))
        duration = time.perf_counter() - start
        metrics.CLIENT_REQUESTS.labels(self.service, self.peer, code).inc()
        metrics.CLIENT_DURATION.labels(self.service, self.peer).observe(duration)
        return result

    def request(self, method: str, path: str, *, route: str | None = None, json_body: object = None,
                query: dict[str, Any] | None = None, timeout: float | None = None,
                headers: dict[str, str] | None = None) -> Any:
        """Call and return the parsed JSON body; raise :class:`UpstreamError` on any failure.

        Upstream 4xx keeps its status (the caller's request was bad), upstream 5xx becomes 502,
        a timeout 504, a connection or resolution failure 503.
        """
        result = self.call(method, path, route=route, json_body=json_body, query=query, timeout=timeout,
                           headers=headers)
        if result.status is None:
            raise UpstreamError(504 if result.timed_out else 503, f"{self.peer}: {result.error}", self.peer)
        if result.status >= 500:
            raise UpstreamError(502, f"{self.peer} returned {result.status}: {result.error}", self.peer,
                                result.status)
        if result.status >= 400:
            raise UpstreamError(result.status, f"{self.peer}: {result.error}", self.peer, result.status)
        return result.data

    def get(self, path: str, *, route: str | None = None, query: dict[str, Any] | None = None,
            timeout: float | None = None) -> Any:
        return self.request("GET", path, route=route, query=query, timeout=timeout)

    def post(self, path: str, body: object, *, route: str | None = None, timeout: float | None = None,
             headers: dict[str, str] | None = None) -> Any:
        return self.request("POST", path, route=route, json_body=body, timeout=timeout, headers=headers)

    def delete(self, path: str, *, route: str | None = None, timeout: float | None = None) -> Any:
        return self.request("DELETE", path, route=route, timeout=timeout)
