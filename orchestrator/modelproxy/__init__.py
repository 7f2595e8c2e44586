"""The recording model proxy: the one model endpoint a preset agent reaches, so every model call is counted.

It runs in the orchestrator, outside the agent's sandbox, on the host's loopback; the sandbox allows its port and
the agent gets its URL as the vendor's base URL. The agent authenticates with a per-run token (its "API key");
the proxy checks it, puts the real key (which never enters the sandbox) on the request and forwards it to the
upstream model server unchanged, streaming the answer back as it arrives. Per call it appends one record to
``<run dir>/gateway/model-calls.jsonl`` (out of the agent's sight): model, input/output/cached tokens (``usage.py``),
latency, time to first byte, cost from the price table (``prices.py``) and what the model answered (its text and
the tool calls it asked for, shortened: ``reply.py``).

A run's budget may cap its model use (``budget.tokens``, ``budget.costUsd`` in the scenario; ``Caps``): once the
calls so far have spent a cap, the proxy answers every further call itself, in the shape the vendor uses for an
account that cannot pay (``refusal``), without forwarding it, and records it (``status: refused``). The cap is
checked before each call, so the call that crosses it completes: the total may pass the cap by one call.

Standard library only (``http.server`` and ``http.client``): a forwarding proxy for a handful of calls per run
needs no more, and a model-gateway library would bring a large dependency tree for the same few lines.
"""

from __future__ import annotations

import contextlib
import hmac
import http.client
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from orchestrator.modelproxy import reply as reply_mod
from orchestrator.modelproxy import usage as usage_mod
from orchestrator.modelproxy.prices import Price, lookup

HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding"}
AUTH_HEADERS = {"authorization", "x-api-key", "api-key", "x-goog-api-key"}
GENERATION = ("/messages", "/responses", "/chat/completions", "/completions", ":generateContent",
              ":streamGenerateContent")
GEMINI_MODEL = re.compile(r"/models/([^/:]+):")
MAX_KEPT = 64 << 20  # bytes of one answer kept to read its usage (the stream itself is never cut)


@dataclass(frozen=True)
class Caps:
    """A run's model budget: total tokens (input, cached included, plus output) and dollars; None: no cap."""

    tokens: int | None = None
    cost_usd: float | None = None

    @classmethod
    def of(cls, budget: Mapping[str, Any]) -> Caps:
        """The caps of a manifest's or scenario's ``budget`` (``tokens``, ``costUsd``)."""
        tokens, cost = budget.get("tokens"), budget.get("costUsd")
        return cls(tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
                   float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None)

    def spent(self, calls: list[dict[str, Any]]) -> str | None:
        """The cap ``calls`` have reached (``tokens`` or ``cost_usd``), else None. Unpriced calls cost nothing
        here (their cost is unknown; the run's own model is always priced)."""
        if self.tokens is not None and sum(int(c.get("input_tokens") or 0) + int(c.get("output_tokens") or 0)
                                           for c in calls) >= self.tokens:
            return "tokens"
        if self.cost_usd is not None and sum(float(c.get("cost_usd") or 0.0) for c in calls) >= self.cost_usd:
            return "cost_usd"
        return None


def refusal(path: str, message: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of a budget refusal in the vendor's own error shape, the one it sends an account that
    cannot pay, so the CLI reports it as such and does not retry: Anthropic's 400 ``invalid_request_error`` (as
    for a credit balance too low), OpenAI's ``insufficient_quota`` (429 on Responses, which Codex takes as final;
    400 on Chat Completions, whose usual clients, the AI SDK among them, retry every 429 until their deadline),
    Gemini's 400 ``FAILED_PRECONDITION`` (as for billing not enabled)."""
    if path.endswith("/messages"):
        return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    if ":" in path.rsplit("/", 1)[-1]:
        return 400, {"error": {"code": 400, "message": message, "status": "FAILED_PRECONDITION"}}
    quota = {"error": {"message": message, "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}
    return (429 if path.endswith("/responses") else 400), quota


class ModelProxy:
    """One run's proxy: ``start()``, give the agent ``base_url`` and ``token``, ``close()`` on every path."""

    def __init__(self, upstream: str, api_key: str, token: str, record: Path, prices: Mapping[str, Price],
                 key_header: str = "x-api-key", upstream_timeout: float = 600.0, caps: Caps | None = None) -> None:
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
        self.caps = caps or Caps()
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
        if entry.get("status") == "ok":
            entry["reply"] = reply_mod.parse(str(entry.get("path", "")), body, content_type).record()
        self._append(entry)
        return entry

    def over_budget(self) -> str | None:
        """The cap the calls so far have reached, if any."""
        with self._lock:
            return self.caps.spent(self.calls)

    def refused(self, entry: dict[str, Any], cap: str, status: int) -> None:
        """Record a call refused for the budget: nothing forwarded, nothing spent."""
        entry.update(status="refused", refused="budget", budget=cap, http_status=status, latency=0.0,
                     model=entry.get("requested_model"), input_tokens=0, output_tokens=0, cached_tokens=0,
                     cache_write_tokens=0, cost_usd=0.0)
        self._append(entry)

    def _append(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.calls.append(entry)
            with self.record.open("a") as fh:
                fh.write(json.dumps(entry, sort_keys=True) + "\n")


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

        def refuse(self, status: int, message: str, doc: dict[str, Any] | None = None) -> None:
            body = json.dumps(doc or {"error": {"type": "opsbench_model_proxy", "message": message}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def forward(self, body: bytes) -> None:
            if not proxy.authorised(dict(self.headers.items())):
                self.refuse(401, "not this run's model key")
                return
            path = self.path.split("?")[0].rstrip("/")
            generation = self.command == "POST" and path.endswith(GENERATION)
            requested = None
            stream = path.endswith(":streamGenerateContent")  # Gemini: the model and streaming are in the path
            if generation:
                in_path = GEMINI_MODEL.search(path)
                requested = in_path.group(1) if in_path else None
                try:
                    request = json.loads(body or b"{}")
                    if isinstance(request, dict):
                        requested = request.get("model") or requested
                        stream = stream or bool(request.get("stream"))
                except ValueError:
                    pass
            entry: dict[str, Any] = {"ts": round(time.time(), 3), "tool": "model", "path": path,
                                     "requested_model": requested, "stream": stream}
            cap = proxy.over_budget() if generation else None
            if cap is not None:
                limit = proxy.caps.tokens if cap == "tokens" else proxy.caps.cost_usd
                status, doc = refusal(path, f"OpsBench budget: this run's model {cap.replace('_usd', '')} "
                                            f"budget ({limit}) is spent; no more model calls are accepted")
                self.refuse(status, "", doc)
                proxy.refused(entry, cap, status)
                return
            start = time.monotonic()
            conn = proxy.connect()
            kept = bytearray()
            accounted = False
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
                    last = data
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    while chunk := resp.read1(65536):
                        if len(kept) < MAX_KEPT:
                            kept += chunk
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    last = b"0\r\n\r\n"
                entry["status"] = "ok" if resp.status < 400 else "error"
                entry["http_status"] = resp.status
                content_type = resp.getheader("Content-Type") or ""
                # Counted before the client sees the reply end: its next call then meets the spent budget (a
                # sequential agent could otherwise slip one call past a cap while the count was still pending).
                entry["latency"] = round(time.monotonic() - start, 3)
                if generation:
                    proxy.account(entry, bytes(kept), content_type)
                    accounted = True
                self.wfile.write(last)
            except (OSError, http.client.HTTPException) as exc:
                entry.update(status="error", http_status=None, error=f"{type(exc).__name__}: {exc}"[:300])
                content_type = ""
                if "ttfb" not in entry:  # nothing was sent yet: say why
                    with contextlib.suppress(OSError):
                        self.refuse(502, f"the model server did not answer: {exc}")
                self.close_connection = True
            finally:
                proxy.release(conn)
            if generation and not accounted:  # the reply failed on its way: still a call the run made
                entry["latency"] = round(time.monotonic() - start, 3)
                proxy.account(entry, bytes(kept), content_type)

    return Handler
