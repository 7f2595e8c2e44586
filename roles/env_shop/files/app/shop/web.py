"""A tiny HTTP framework on the stdlib: routing with templates, JSON errors, tracing, metrics, logs."""

from __future__ import annotations

import json
import math
import re
import signal
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any
from urllib.parse import parse_qs, unquote

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from . import metrics
from .client import UpstreamError
from .flags import Flags, FlagValue, is_on
from .telemetry import PROPAGATOR, Telemetry

MAX_BODY = 1 << 20
KNOWN_METHODS = frozenset({"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"})
UNMATCHED_ROUTE = "unmatched"
QUIET_ROUTES = frozenset({"/healthz", "/metrics"})  # no spans, no per-request log lines


class RateLimiter:
    """A token bucket: ``rate`` requests per second on average, bursts of up to ``burst``; thread-safe.

    Configured per process from SHOP_RATE_LIMIT_RPS (unset, empty or 0: no limit) and SHOP_RATE_LIMIT_BURST
    (default: the rate, at least 1), like a sidecar's local rate limit: every replica limits on its own.
    """

    def __init__(self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if not rate > 0 or math.isinf(rate):
            raise ValueError(f"rate must be a positive finite number of requests per second, got {rate!r}")
        self.rate = float(rate)
        self.burst = max(1.0, float(burst) if burst is not None and burst > 0 else self.rate)
        self.clock = clock
        self.tokens = self.burst
        self.updated = clock()
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RateLimiter | None:
        """The limiter SHOP_RATE_LIMIT_RPS / SHOP_RATE_LIMIT_BURST describe, None when unlimited."""
        raw = (env.get("SHOP_RATE_LIMIT_RPS") or "").strip()
        if not raw:
            return None
        try:
            rate = float(raw)
            burst_raw = (env.get("SHOP_RATE_LIMIT_BURST") or "").strip()
            burst = float(burst_raw) if burst_raw else None
        except ValueError:
            raise ValueError(f"SHOP_RATE_LIMIT_RPS and SHOP_RATE_LIMIT_BURST must be numbers, got {raw!r}, "
                             f"{env.get('SHOP_RATE_LIMIT_BURST')!r}") from None
        return None if rate == 0 else cls(rate, burst)

    def acquire(self) -> float:
        """Take one token: 0.0 when the request may pass, else the seconds until a token is free."""
        with self._lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
            if self.tokens >= 1.0:
                self.tokens -= 1.0
                return 0.0
            return (1.0 - self.tokens) / self.rate


class HTTPError(Exception):
    """Raise from a handler to answer with a JSON error body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class RateLimited(HTTPError):
    """429 from the service's own rate limiter; ``retry_after`` seconds until a request may pass."""

    def __init__(self, service: str, limiter: RateLimiter, retry_after: float) -> None:
        super().__init__(429, f"rate limit exceeded: {service} accepts {limiter.rate:g} requests/s "
                              f"(burst {limiter.burst:g}) per instance")
        self.retry_after = retry_after


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    params: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes = b""
    route: str = UNMATCHED_ROUTE

    def json(self) -> dict[str, Any]:
        if not self.body:
            return {}
        try:
            data = json.loads(self.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise HTTPError(400, f"invalid JSON body: {exc}") from None
        if not isinstance(data, dict):
            raise HTTPError(400, "JSON body must be an object")
        return data


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    error: str = ""

    @classmethod
    def json(cls, data: object, status: int = 200) -> Response:
        return cls(status, (json.dumps(data, separators=(",", ":")) + "\n").encode())

    @classmethod
    def html(cls, text: str, status: int = 200) -> Response:
        return cls(status, text.encode(), "text/html; charset=utf-8")

    @classmethod
    def text(cls, text: str, status: int = 200) -> Response:
        return cls(status, text.encode(), "text/plain; charset=utf-8")


Handler = Callable[[Request], "Response | Mapping[str, Any] | list[Any]"]

_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def compile_template(template: str) -> re.Pattern[str]:
    """'/product/{id}' -> a regex with one named group per parameter (a parameter is one path segment)."""
    pos = 0
    parts: list[str] = []
    for m in _PARAM.finditer(template):
        parts.append(re.escape(template[pos:m.start()]))
        parts.append(f"(?P<{m.group(1)}>[^/]+)")
        pos = m.end()
    parts.append(re.escape(template[pos:]))
    return re.compile("^" + "".join(parts) + "$")


@dataclass
class Route:
    method: str
    template: str
    handler: Handler
    pattern: re.Pattern[str]


class Router:
    def __init__(self) -> None:
        self.routes: list[Route] = []

    def add(self, method: str, template: str, handler: Handler) -> None:
        self.routes.append(Route(method.upper(), template, handler, compile_template(template)))

    def match(self, method: str, path: str) -> tuple[Route | None, dict[str, str], str]:
        """(route or None, path params, templated route label). Label is the template even on 405."""
        label = UNMATCHED_ROUTE
        for route in self.routes:
            m = route.pattern.match(path)
            if m is None:
                continue
            if route.method == method.upper():
                return route, {k: unquote(v) for k, v in m.groupdict().items()}, route.template
            label = route.template
        return None, {}, label

    def route_label(self, path: str) -> str:
        """The templated route for a raw path (never the raw path itself)."""
        for route in self.routes:
            if route.pattern.match(path):
                return route.template
        return UNMATCHED_ROUTE


class App:
    """One service process: routes, flags, telemetry, the HTTP server and graceful shutdown."""

    def __init__(self, service: str, telemetry: Telemetry, flags: Flags | None = None) -> None:
        self.service = service
        self.telemetry = telemetry
        self.log = telemetry.logger
        self.tracer = telemetry.tracer
        self.flags = flags if flags is not None else Flags(None)
        self.router = Router()
        self.readiness: Callable[[], tuple[bool, str]] = lambda: (True, "ok")
        self.rate_limiter: RateLimiter | None = None  # every route but /healthz and /metrics
        self.shutdown_hooks: list[Callable[[], None]] = []
        self.stopping = threading.Event()
        self.server: ThreadingHTTPServer | None = None
        self.router.add("GET", "/healthz", self._healthz)
        self.router.add("GET", "/metrics", self._metrics)

    def on_flag_change(self, name: str, old: FlagValue, new: FlagValue) -> None:
        """Log a flag that was switched on, changed value or was switched off (WARN while on)."""
        self.log.log("WARN" if is_on(new) else "INFO", f"feature flag {name} changed: {old!r} -> {new!r}",
                     {"feature_flag.key": name, "feature_flag.old": old, "feature_flag.value": new})

    def on_flag_error(self, message: str) -> None:
        self.log.error(message)

    def route(self, method: str, template: str) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.router.add(method, template, handler)
            return handler
        return register

    # -- built-in routes -----------------------------------------------------------------
    def _healthz(self, req: Request) -> Response:
        try:
            ok, detail = self.readiness()
        except Exception as exc:  # a readiness probe must answer, whatever broke
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        return Response.json({"status": "ok" if ok else "unavailable", "service": self.service, "detail": detail},
                             200 if ok else 503)

    def _metrics(self, req: Request) -> Response:
        body, ctype = metrics.exposition()
        return Response(200, body, ctype)

    # -- request handling ------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, headers: Mapping[str, str], body: bytes = b"") -> Response:
        """Route, trace, measure and log one request; never raises."""
        method = method.upper()
        path, _, qs = raw_path.partition("?")
        path = path or "/"
        query = {k: v[0] for k, v in parse_qs(qs, keep_blank_values=True).items()}
        route, params, label = self.router.match(method, path)
        req = Request(method, path, query, params, {k.lower(): v for k, v in headers.items()}, body, label)
        start = time.perf_counter()
        quiet = label in QUIET_ROUTES
        token = None
        span = None
        if not quiet:
            parent = PROPAGATOR.extract(req.headers)
            span = self.tracer.start_span(f"{method} {label}", context=parent, kind=SpanKind.SERVER, attributes={
                "http.request.method": method, "url.path": path, "http.route": label})
            token = otel_context.attach(trace.set_span_in_context(span, parent))
        try:
            try:
                if route is None:
                    raise HTTPError(405 if label != UNMATCHED_ROUTE else 404,
                                    f"{'method not allowed' if label != UNMATCHED_ROUTE else 'not found'}: "
                                    f"{method} {path}")
                if self.rate_limiter is not None and not quiet:
                    wait = self.rate_limiter.acquire()
                    if wait > 0:
                        raise RateLimited(self.service, self.rate_limiter, wait)
                result = route.handler(req)
                resp = result if isinstance(result, Response) else Response.json(result)
            except HTTPError as exc:
                resp = Response.json({"error": exc.message, "service": self.service}, exc.status)
                resp.error = exc.message
                if isinstance(exc, RateLimited):
                    resp.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
            except UpstreamError as exc:
                resp = Response.json({"error": exc.message, "service": self.service}, exc.status)
                resp.error = exc.message
            except Exception as exc:
                resp = Response.json({"error": f"internal error: {type(exc).__name__}: {exc}",
                                      "service": self.service}, 500)
                resp.error = f"{type(exc).__name__}: {exc}"
                if span is not None:
                    span.record_exception(exc)
                self.log.error(f"unhandled exception in {method} {label}: {type(exc).__name__}: {exc}",
                               **{"exception.type": type(exc).__name__, "exception.message": str(exc),
                                  "exception.stacktrace": traceback.format_exc(limit=8)})
            duration = time.perf_counter() - start
            if span is not None:
                span.set_attribute("http.response.status_code", resp.status)
                if resp.status >= 500:
                    span.set_status(Status(StatusCode.ERROR, resp.error or f"HTTP {resp.status}"))
                severity = "ERROR" if resp.status >= 500 else "WARN" if resp.status >= 400 else "INFO"
                body_text = f"{method} {label} -> {resp.status} in {duration * 1000:.1f} ms"
                attrs: dict[str, Any] = {"http.request.method": method, "http.route": label, "url.path": path,
                                         "http.response.status_code": resp.status,
                                         "duration_ms": round(duration * 1000, 3)}
                if resp.error:
                    body_text += f": {resp.error}"
                    attrs["error"] = resp.error
                self.log.log(severity, body_text, attrs)
        finally:
            if span is not None:
                span.end()
            if token is not None:
                otel_context.detach(token)
        method_label = method if method in KNOWN_METHODS else "OTHER"
        metrics.SERVER_REQUESTS.labels(self.service, label, method_label, str(resp.status)).inc()
        metrics.SERVER_DURATION.labels(self.service, label).observe(duration)
        return resp

    # -- serving ---------------------------------------------------------------------------
    def make_server(self, host: str, port: int) -> ThreadingHTTPServer:
        app = self

        class _Handler(BaseHTTPRequestHandler):
            server_version = f"shop-{app.service}"
            sys_version = ""
            timeout = 30

            def _serve(self) -> None:
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    length = -1
                if length < 0 or length > MAX_BODY:
                    resp = Response.json({"error": "invalid or too large request body", "service": app.service},
                                         400 if length < 0 else 413)
                else:
                    body = self.rfile.read(length) if length > 0 else b""
                    resp = app.handle(self.command, self.path, {k: v for k, v in self.headers.items()}, body)
                try:
                    self.send_response(resp.status)
                    self.send_header("Content-Type", resp.content_type)
                    self.send_header("Content-Length", str(len(resp.body)))
                    self.send_header("Connection", "close")
                    for key, value in resp.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(resp.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (e.g. its timeout); the request was logged and counted already

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass  # requests are logged as JSON by App.handle

        class _Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256
            allow_reuse_address = True

        self.server = _Server((host, port), _Handler)
        return self.server

    def run(self, host: str, port: int) -> None:
        """Serve until SIGTERM/SIGINT, then stop within ~1 s and flush telemetry."""
        server = self.make_server(host, port)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                  name="http-server", daemon=True)

        def _stop(signum: int, frame: FrameType | None) -> None:
            self.stopping.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        thread.start()
        attrs: dict[str, Any] = {"server.port": port}
        if self.rate_limiter is not None:
            attrs["rate_limit.rps"] = self.rate_limiter.rate
            attrs["rate_limit.burst"] = self.rate_limiter.burst
        self.log.info(f"{self.service} listening on {host}:{port}"
                      + (f", rate limit {self.rate_limiter.rate:g}/s (burst {self.rate_limiter.burst:g})"
                         if self.rate_limiter is not None else ""), **attrs)
        self.stopping.wait()
        self.log.info(f"{self.service} shutting down")
        server.shutdown()
        server.server_close()
        for hook in self.shutdown_hooks:
            try:
                hook()
            except Exception as exc:
                self.log.error(f"shutdown hook failed: {type(exc).__name__}: {exc}")
        self.telemetry.shutdown()
