"""The HTTP agent API for remote agents, following ITBench's flow.

A remote agent does not run on this machine under our control: it polls for a manifest, which
becomes ready once the fault has manifested (handover), reports that it started, does its work
through the run's tool gateway, uploads its output and reports that it finished. The runner
waits for the finish (or the output) within the budget, exactly as it waits for a command agent.

Served by the orchestrator process for the duration of one run on a fixed port, protected by a
key the operator chose (``OPSBENCH_AGENT_API_KEY`` or a key file), because the per-run gateway
token does not exist yet when the agent starts polling; the ready manifest carries that token.

    GET  /v1/health                 {"ok": true}                       (no key)
    GET  /openapi.json              this API's OpenAPI document        (no key)
    GET  /v1/manifest               200 manifest + "token" | 409 {"state": "waiting"} | 410 after the run
    POST /v1/status  {"state": "started" | "finished", "detail"?}
    PUT  /v1/output  <the output JSON document>                        (at most 4 MiB)
"""

from __future__ import annotations

import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from orchestrator import paths

MAX_OUTPUT = 4 * 1024 * 1024


@dataclass
class RemoteAgentState:
    """What the runner and the HTTP handler share (guarded by ``lock``)."""

    key: str
    phase: str = "waiting"  # waiting -> ready -> closed
    manifest: dict[str, Any] | None = None
    output_path: Path | None = None
    started: float | None = None
    finished: float | None = None
    detail: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def log(self, event: str, **data: Any) -> None:
        self.events.append({"ts": time.time(), "event": event, **data})


def _handler(state: RemoteAgentState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "opsbench-agent-api"

        def log_message(self, *args: Any) -> None:  # events are kept in state.events instead
            pass

        def _reply(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            given = self.headers.get("Authorization", "")
            if hmac.compare_digest(given.encode(), f"Bearer {state.key}".encode()):
                return True
            state.log("unauthorized", path=self.path, client=self.client_address[0])
            self._reply(401, {"ok": False, "error": "missing or wrong agent API key"})
            return False

        def _body(self) -> Any:
            raw = (self.headers.get("Content-Length") or "0").strip()
            # A negative length would make read() wait for the client to close the connection.
            if not raw.isdigit():
                raise ValueError(f"Content-Length {raw[:40]!r} is not a non-negative integer")
            length = int(raw)
            if length > MAX_OUTPUT:
                raise ValueError(f"body of {length} bytes is over the {MAX_OUTPUT}-byte limit")
            try:
                return json.loads(self.rfile.read(length) or b"null")
            except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
                raise ValueError(f"body is not JSON: {exc}") from None

        def do_GET(self) -> None:
            if self.path == "/v1/health":
                return self._reply(200, {"ok": True})
            if self.path == "/openapi.json":
                return self._reply(200, openapi_document())
            if not self._authorized():
                return None
            if self.path != "/v1/manifest":
                return self._reply(404, {"ok": False, "error": f"no route {self.path}"})
            with state.lock:
                if state.phase == "closed":
                    return self._reply(410, {"ok": False, "state": "closed", "error": "the run's agent phase is over"})
                if state.phase != "ready" or state.manifest is None:
                    return self._reply(409, {"ok": False, "state": "waiting",
                                             "error": "not ready: the incident has not been handed over yet"})
                state.log("manifest")
                return self._reply(200, state.manifest)

        def do_POST(self) -> None:
            if not self._authorized():
                return None
            if self.path != "/v1/status":
                return self._reply(404, {"ok": False, "error": f"no route {self.path}"})
            try:
                body = self._body()
            except ValueError as exc:
                return self._reply(400, {"ok": False, "error": str(exc)})
            new = body.get("state") if isinstance(body, dict) else None
            if new not in ("started", "finished"):
                return self._reply(400, {"ok": False, "error": "state must be 'started' or 'finished'"})
            with state.lock:
                if state.phase != "ready":
                    return self._reply(409, {"ok": False, "error": f"the run is {state.phase}"})
                if new == "started":
                    state.started = state.started or time.time()
                else:
                    state.finished = time.time()
                    state.detail = str(body.get("detail", ""))[:500]
                state.log(new)
            return self._reply(200, {"ok": True})

        def do_PUT(self) -> None:
            if not self._authorized():
                return None
            if self.path != "/v1/output":
                return self._reply(404, {"ok": False, "error": f"no route {self.path}"})
            try:
                body = self._body()
            except ValueError as exc:
                return self._reply(400, {"ok": False, "error": str(exc)})
            with state.lock:
                if state.phase != "ready" or state.output_path is None:
                    return self._reply(409, {"ok": False, "error": f"the run is {state.phase}"})
                # Stored as sent: the evaluators score a malformed document as `malformed`.
                state.output_path.write_text(json.dumps(body))
                state.log("output", bytes=state.output_path.stat().st_size)
            return self._reply(200, {"ok": True})

    return Handler


def openapi_document() -> dict[str, Any]:
    """The API's OpenAPI document (orchestrator/schemas/agent_api.openapi.json), served at /openapi.json."""
    doc: dict[str, Any] = json.loads((paths.SCHEMAS_DIR / "agent_api.openapi.json").read_text())
    return doc


class AgentAPI:
    """One run's agent API server, on a background thread of the orchestrator."""

    def __init__(self, key: str, host: str = "127.0.0.1", port: int = 0) -> None:
        if len(key) < 16:
            raise ValueError("the agent API key must be at least 16 characters")
        self.state = RemoteAgentState(key=key)
        self.server = ThreadingHTTPServer((host, port), _handler(self.state))
        self.url = f"http://{host}:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="agent-api", daemon=True)
        self._closed = False

    def __enter__(self) -> AgentAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ready(self, manifest: dict[str, Any], token: str, output_path: Path) -> None:
        """Hand over: the manifest (with the gateway token inline) becomes available."""
        with self.state.lock:
            self.state.manifest = {**manifest, "token": token,
                                   "output": {**manifest.get("output", {}), "upload": f"{self.url}/v1/output"}}
            self.state.output_path = output_path
            self.state.phase = "ready"

    def close(self) -> None:
        with self.state.lock:
            if self.state.phase == "closed" and self._closed:
                return
            self.state.phase = "closed"
            self._closed = True
        if self.thread.is_alive():
            self.server.shutdown()
        self.server.server_close()


def wait_for_remote(api: AgentAPI, budget_seconds: int, interrupted: Any, poll: float = 0.2) -> tuple[str, str]:
    """Wait until the remote agent reports finished or the budget ends: (status, detail) as for
    command agents: exited | timeout | interrupted."""
    deadline = time.monotonic() + budget_seconds
    while True:
        with api.state.lock:
            finished, detail, started = api.state.finished, api.state.detail, api.state.started
        if finished is not None:
            return "exited", detail
        if interrupted():
            return "interrupted", "stopped by the user"
        if time.monotonic() > deadline:
            what = "never reported started" if started is None else "did not report finished"
            return "timeout", f"the remote agent {what} within its budget of {budget_seconds}s"
        time.sleep(poll)
