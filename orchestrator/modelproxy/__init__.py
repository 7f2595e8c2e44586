"""The recording model proxy: the one model endpoint a preset agent reaches, so every model call is counted.

It runs in the orchestrator, outside the agent's sandbox, on the host's loopback; the sandbox allows its port and
the agent gets its URL as the vendor's base URL. The agent authenticates with a per-run token (its "API key");
the proxy checks it, puts the real key (which never enters the sandbox) on the request and forwards it to the
upstream model server unchanged, streaming the answer back as it arrives. Per call it appends one record to
``<run dir>/gateway/model-calls.jsonl`` (out of the agent's sight): model, input/output/cached tokens (``usage.py``),
latency, time to first byte and cost from the price table (``prices.py``).

Standard library only (``http.server`` and ``http.client``): a forwarding proxy for a handful of calls per run
needs no more, and a model-gateway library would bring a large dependency tree for the same few lines.
"""

from __future__ import annotations

import contextlib
import hmac
import http.client
import json
import threading
import time
import urllib.parse
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from orchestrator.modelproxy import usage as usage_mod
from orchestrator.modelproxy.prices import Price, lookup

HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding"}
AUTH_HEADERS = {"authorization", "x-api-key", "api-key", "x-goog-api-key"}
GENERATION = ("/messages", "/responses", "/chat/completions", "/completions")
MAX_KEPT = 64 << 20  # bytes of one answer kept to read its usage (the stream itself is never cut)


class ModelProxy:
    """One run's proxy: ``start()``, give the agent ``base_url`` and ``token``, ``close()`` on every path."""

    def __init__(self, upstream: str, api_key: str, token: str, record: Path, prices: Mapping[str, Price],
                 key_header: str = "x-api-key", upstream_timeout: float = 600.0) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"the model server's base URL {upstream!r} is not an http(s) URL")
        self.upstream = parsed
        self.api_key = api_key
        self.token = token
        self.record = record
        self.prices = dict(prices)
        self.key_header = key_header.lower()
        self.upstream_timeout = upstream_timeout
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._open: set[http.client.HTTPConnection] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle -------------------------------------------------------------------------------------------
    def start(self) -> ModelProxy:
        self.record.parent.mkdir(parents=True, exist_ok=True)
        self.record.touch()
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="opsbench-model-proxy", daemon=True)
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        assert self._server is not None, "start() first"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The upstream base URL with the proxy in its place (same path: ``/v1`` stays ``/v1``)."""
        return f"http://127.0.0.1:{self.port}{self.upstream.path.rstrip('/')}"

    def close(self) -> None:
        """Stop serving and cut the calls still waiting on the upstream (a model server that never answers)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            for conn in list(self._open):
                try:
                    if conn.sock is not None:
                        conn.sock.shutdown(2)
                except OSError:
                    pass
                conn.close()
            self._open.clear()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def __enter__(self) -> ModelProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one call ---------------------------------------------------------------------------------------------
    def authorised(self, headers: Mapping[str, str]) -> bool:
        given = [v.removeprefix("Bearer ").strip() for k, v in headers.items() if k.lower() in AUTH_HEADERS]
        return any(hmac.compare_digest(g.encode(), self.token.encode()) for g in given)

    def connect(self) -> http.client.HTTPConnection:
        host, port = self.upstream.hostname or "", self.upstream.port
        conn: http.client.HTTPConnection = (
            http.client.HTTPSConnection(host, port, timeout=self.upstream_timeout) if self.upstream.scheme == "https"
            else http.client.HTTPConnection(host, port, timeout=self.upstream_timeout))
        with self._lock:
            self._open.add(conn)
        return conn

    def release(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._open.discard(conn)
        conn.close()

    def upstream_headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        out = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP | AUTH_HEADERS}
        out["Accept-Encoding"] = "identity"  # the proxy reads the usage out of the answer
        if self.api_key:
            out[self.key_header] = f"Bearer {self.api_key}" if self.key_header == "authorization" else self.api_key
        return out

    def account(self, entry: dict[str, Any], body: bytes, content_type: str) -> dict[str, Any]:
        """Fill ``entry`` with the usage and cost of an answer and append it to the record."""
        found = usage_mod.parse(body, content_type)
        model = found.model or entry.get("requested_model")
        entry.update(model=model, input_tokens=found.input_tokens, output_tokens=found.output_tokens,
                     cached_tokens=found.cached_tokens, cache_write_tokens=found.cache_write_tokens,
                     usage_reported=found.found)
        price = lookup(self.prices, model) if isinstance(model, str) else None
        entry["cost_usd"] = None if price is None else round(
            price.cost(found.input_tokens, found.output_tokens, found.cached_tokens, found.cache_write_tokens), 8)
        if price is None:
            entry["unpriced"] = True
        with self._lock:
            self.calls.append(entry)
            with self.record.open("a") as fh:
                fh.write(json.dumps(entry, sort_keys=True) + "\n")
        return entry


def _handler(proxy: ModelProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # the record is the log
            return

        def do_GET(self) -> None:
            self.forward(b"")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.forward(self.rfile.read(length) if length else b"")

        def refuse(self, status: int, message: str) -> None:
            body = json.dumps({"error": {"type": "opsbench_model_proxy", "message": message}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def forward(self, body: bytes) -> None:
            if not proxy.authorised(dict(self.headers.items())):
                self.refuse(401, "not this run's model key")
                return
            generation = self.command == "POST" and self.path.split("?")[0].rstrip("/").endswith(GENERATION)
            requested = None
            stream = False
            if generation:
                try:
                    request = json.loads(body or b"{}")
                    requested = request.get("model") if isinstance(request, dict) else None
                    stream = bool(request.get("stream")) if isinstance(request, dict) else False
                except ValueError:
                    pass
            entry: dict[str, Any] = {"ts": round(time.time(), 3), "tool": "model", "path": self.path.split("?")[0],
                                     "requested_model": requested, "stream": stream}
            start = time.monotonic()
            conn = proxy.connect()
            kept = bytearray()
            try:
                conn.request(self.command, self.path, body=body or None,
                             headers=proxy.upstream_headers(dict(self.headers.items())))
                resp = conn.getresponse()
                entry["ttfb"] = round(time.monotonic() - start, 3)
                self.send_response(resp.status, resp.reason)
                for key, value in resp.getheaders():
                    if key.lower() not in HOP_BY_HOP:
                        self.send_header(key, value)
                length = resp.getheader("Content-Length")
                if length is not None:
                    data = resp.read()
                    kept += data[:MAX_KEPT]
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    while chunk := resp.read1(65536):
                        if len(kept) < MAX_KEPT:
                            kept += chunk
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                entry["status"] = "ok" if resp.status < 400 else "error"
                entry["http_status"] = resp.status
                content_type = resp.getheader("Content-Type") or ""
            except (OSError, http.client.HTTPException) as exc:
                entry.update(status="error", http_status=None, error=f"{type(exc).__name__}: {exc}"[:300])
                content_type = ""
                if "ttfb" not in entry:  # nothing was sent yet: say why
                    with contextlib.suppress(OSError):
                        self.refuse(502, f"the model server did not answer: {exc}")
                self.close_connection = True
            finally:
                proxy.release(conn)
            entry["latency"] = round(time.monotonic() - start, 3)
            if generation:
                proxy.account(entry, bytes(kept), content_type)

    return Handler
