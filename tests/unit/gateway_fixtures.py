"""Helpers for the gateway tests: a fake Prometheus + Alertmanager, and a run directory like a deployed shop's.

The run directory holds what the gateway reads and nothing more: environment.json (endpoints pointing at the fake
server, the shop's topology plus some machinery entities to be hidden, telemetry and flags paths inside the run),
a flagd file, OTel-shaped JSONL logs and spans, and the agent token.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import jsonschema
import uvicorn
import yaml

from orchestrator import paths
from orchestrator.gateway import FakeControl, Gateway, GatewayOptions, load_context
from orchestrator.gateway.rest import create_app
from orchestrator.generation.effects import MODEL_FACTS
from orchestrator.schemacheck import load_schema

TOKEN = "tok3nS3cretValue0123456789abcdef"
RUN_ID = "r1"
PREFIX = f"ob-{RUN_ID}-"
S = 1_000_000_000
NOW = 1_700_000_100.0  # the tests' "now" (Unix seconds)
T0 = 1_700_000_000 * S  # telemetry starts 100 s before NOW
TRACE_OK = "a" * 32
TRACE_ERR = "b" * 32

FLAGS = {
    "paymentServiceFailure": {"state": "ENABLED", "variants": {"on": 1.0, "off": 0}, "defaultVariant": "on"},
    "cartServiceFailure": {"state": "ENABLED", "variants": {"on": True, "off": False}, "defaultVariant": "off"},
    "loadgeneratorFloodHomepage": {"state": "ENABLED", "variants": {"on": 50, "off": 0}, "defaultVariant": "off"},
}

ALERTS = [
    {"labels": {"alertname": "ServiceErrorRateHigh", "service": "checkout", "severity": "critical"},
     "annotations": {"summary": "checkout answers 40% of requests with 5xx"}, "startsAt": "2023-11-14T22:13:30Z",
     "status": {"state": "active"}, "fingerprint": "f1", "generatorURL": "http://ob-r1-prometheus:9090/graph"},
    {"labels": {"alertname": "ServiceErrorRateHigh", "service": "payment", "severity": "critical"},
     "annotations": {"summary": "payment answers 100% of requests with 5xx"}, "startsAt": "2023-11-14T22:13:20Z",
     "status": {"state": "active"}, "fingerprint": "f2"},
    {"labels": {"alertname": "ServiceLatencyHigh", "service": "frontend", "severity": "warning"},
     "annotations": {"summary": "frontend p95 latency is 2s"}, "startsAt": "2023-11-14T22:13:40Z",
     "status": {"state": "active"}, "fingerprint": "f3"},
]


ERROR_RATES: dict[str, dict[str, float]] = {
    "": {"frontend": 4.0, "cart": 2.0, "checkout": 0.5, "loadgen": 9.0},
    "5": {"frontend": 1.0, "cart": 2.0},
    "4": {"checkout": 0.25},
}
"""Requests per second by service for get_error_rate: all (""), 5xx ("5") and 4xx ("4")."""

LABEL_VALUES = {
    "__name__": ["up", "prometheus_http_requests_total", "shop_requests_total", "container_pids"],
    "service": ["cart", "frontend", "loadgen", "redis-exporter"],
    "container": ["cart-1", "loadgen-1", "fault-latency"],
    "instance_id": ["cart-1", "loadgen-1"],
    "job": ["shop", "containers", "prometheus"],
}


class FakeObservability:
    """One HTTP server answering Prometheus's query APIs and Alertmanager's /api/v2/alerts.

    `series` sets how many series an instant or range query returns; a query containing `bad(` is answered like
    Prometheus answers a parse error. Every request path with its query is kept in `requests`."""

    def __init__(self) -> None:
        self.series = 3
        self.requests: list[tuple[str, dict[str, str]]] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                url = urllib.parse.urlparse(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                fake.requests.append((url.path, query))
                status, body = fake.answer(url.path, query)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, Any]:
        if path == "/api/v2/alerts":
            return 200, ALERTS
        if path.startswith("/api/v1/label/") and path.endswith("/values"):
            return 200, {"status": "success", "data": LABEL_VALUES.get(path.split("/")[4], [])}
        if path in ("/api/v1/query", "/api/v1/query_range"):
            if "rejected_by_prometheus" in query.get("query", ""):
                return 400, {"status": "error", "errorType": "bad_data",
                             "error": 'parse error: unexpected "(" in aggregation'}
            if path == "/api/v1/query" and "sum by (service) (rate(http_server_requests_total" in query["query"]:
                # get_error_rate's three queries: requests, 5xx and 4xx per second by service (loadgen: machinery)
                code = "5" if 'code=~"5' in query["query"] else "4" if 'code=~"4' in query["query"] else ""
                rates = ERROR_RATES[code]
                return 200, {"status": "success", "data": {"resultType": "vector", "result": [
                    {"metric": {"service": svc}, "value": [float(query["time"]), str(v)]} for svc, v in rates.items()]}}
            if path == "/api/v1/query":
                result = [{"metric": {"service": f"svc{i:02d}"}, "value": [float(query["time"]), str(i)]}
                          for i in range(self.series)]
                if "machinery" in query["query"]:  # series a broad selector would also bring back
                    result += [{"metric": {"service": "loadgen", "instance_id": "loadgen-1"}, "value": [0, "1"]},
                               {"metric": {"container": "fault-latency"}, "value": [0, "1"]},
                               {"metric": {"job": "prometheus"}, "value": [0, "1"]},
                               {"metric": {"__name__": "prometheus_tsdb_head_series"}, "value": [0, "1"]}]
                return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}
            result = [{"metric": {"service": f"svc{i:02d}"}, "values": [[float(query["start"]), "1"],
                                                                       [float(query["end"]), "2"]]}
                      for i in range(self.series)]
            return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}
        return 404, {"error": "not found"}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def shop_topology() -> dict[str, Any]:
    """The shop's real topology plus entities of the machinery that the gateway must hide."""
    topology: dict[str, Any] = yaml.safe_load((paths.ROLES_DIR / "env_shop" / "files" / "topology.yml").read_text())
    # As the deploy publishes it: without the keys only the generator's effect models read.
    topology = {key: [{k: v for k, v in item.items() if k not in MODEL_FACTS} for item in items]
                if key in ("entities", "edges") else items for key, items in topology.items()}
    topology["entities"] += [{"id": "prometheus", "kind": "service"}, {"id": "alertmanager", "kind": "service"},
                             {"id": "redis-exporter", "kind": "service"}]
    topology["edges"] += [{"source": "prometheus", "target": "redis-exporter", "type": "calls"},
                          {"source": "redis-exporter", "target": "redis", "type": "calls"}]
    return topology


def _log(service: str, time_ns: int, severity: str, body: str, trace_id: str = "") -> str:
    number = {"INFO": 9, "WARN": 13, "ERROR": 17}[severity]
    return json.dumps({"resource": {"service.name": service, "service.instance.id": f"{PREFIX}{service}-1"},
                       "timeUnixNano": time_ns, "severityText": severity, "severityNumber": number, "body": body,
                       "attributes": {}, "traceId": trace_id, "spanId": ""}) + "\n"


def _span(service: str, trace_id: str, span_id: str, parent: str, name: str, kind: str, start: int, ms: int,
          status: int = 200) -> str:
    return json.dumps({"resource": {"service.name": service, "service.instance.id": f"{PREFIX}{service}-1"},
                       "traceId": trace_id, "spanId": span_id, "parentSpanId": parent, "name": name, "kind": kind,
                       "startTimeUnixNano": start, "endTimeUnixNano": start + ms * 1_000_000,
                       "attributes": {"http.response.status_code": status},
                       "status": {"code": "ERROR" if status >= 500 else "UNSET", "message": ""}}) + "\n"


def write_telemetry(root: Path) -> None:
    """25 checkout log records (5 of them errors), 3 loadgen records, and two traces of three spans each."""
    (root / "logs").mkdir(parents=True)
    (root / "traces").mkdir(parents=True)
    with (root / "logs" / f"{PREFIX}checkout-1.jsonl").open("w") as fh:
        for i in range(25):
            severity = "ERROR" if i % 5 == 4 else "INFO"
            fh.write(_log("checkout", T0 + i * S, severity, f"checkout step {i:02d}" + (" failed" if i % 5 == 4
                                                                                         else "")))
    with (root / "logs" / f"{PREFIX}loadgen-1.jsonl").open("w") as fh:
        for i in range(3):
            fh.write(_log("loadgen", T0 + i * S, "WARN", f"journey {i} got 502"))
    with (root / "traces" / f"{PREFIX}all.jsonl").open("w") as fh:
        for n, (trace, status) in enumerate(((TRACE_OK, 200), (TRACE_ERR, 500))):
            start = T0 + n * 10 * S
            fh.write(_span("frontend", trace, f"{n}000000000000001", "", "GET /", "SERVER", start, 30, status))
            fh.write(_span("checkout", trace, f"{n}000000000000002", f"{n}000000000000001", "POST /checkout",
                           "SERVER", start + 1_000_000, 20, status))
            fh.write(_span("payment", trace, f"{n}000000000000003", f"{n}000000000000002", "POST /pay", "SERVER",
                           start + 2_000_000, 10, status))


def make_run_dir(root: Path, backend_url: str) -> Path:
    run_dir = root / RUN_ID
    env_dir = run_dir / "env"
    (env_dir / "flags").mkdir(parents=True)
    (env_dir / "flags" / "flags.json").write_text(json.dumps({"flags": FLAGS}, indent=2))
    write_telemetry(env_dir / "telemetry")
    (run_dir / "secrets").mkdir(mode=0o700)
    (run_dir / "secrets" / "agent_token").write_text(TOKEN)
    environment = {
        "application": "shop",
        "endpoints": {"gateway": "http://127.0.0.1:1", "prometheus": backend_url, "alertmanager": backend_url},
        "telemetry": str(env_dir / "telemetry"),
        "topology": shop_topology(),
        "control": {"network": f"ob-{RUN_ID}", "container_prefix": PREFIX,
                    "flags_file": str(env_dir / "flags" / "flags.json"), "helper_image": "x"},
    }
    (run_dir / "environment.json").write_text(json.dumps(environment, indent=2))
    return run_dir


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def fake_control() -> FakeControl:
    return FakeControl({"checkout": ["checkout-1"], "frontend": ["frontend-1", "frontend-2"],
                        "payment": ["payment-1"], "loadgen": ["loadgen-1"]},
                       {"paymentServiceFailure": "on", "cartServiceFailure": "off",
                        "loadgeneratorFloodHomepage": "off"})


def make_gateway(run_dir: Path, clock: Clock | None = None, **options: Any) -> Gateway:
    ctx = load_context(run_dir, GatewayOptions(**options), control=fake_control())
    ctx.clock = clock or Clock()
    return Gateway(ctx)


def trajectory(run_dir: Path) -> list[dict[str, Any]]:
    """The run's trajectory records, each checked against the trajectory record schema."""
    validator = jsonschema.Draft202012Validator(load_schema("trajectory_record"))
    path = run_dir / "gateway" / "trajectory.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    for record in records:
        validator.validate(record)
    return records


def serve_gateway(gateway: Gateway) -> tuple[uvicorn.Server, threading.Thread, str]:
    """The gateway's app served for real (uvicorn in a thread, a free loopback port), for MCP and HTTP clients:
    (server, thread, base URL). Stop with ``server.should_exit = True`` and ``thread.join()``."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(gateway), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "gateway did not start"
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


def ok_result(gw: Gateway, tool: str, **args: Any) -> Any:
    """Call `tool` in-process; it must answer, and its result is returned."""
    outcome = gw.call(tool, args)
    assert outcome.ok, outcome.body()
    return outcome.result


def refusal(gw: Gateway, tool: str, args: dict[str, Any], code: str) -> str:
    """Call `tool` in-process; it must refuse with `code`, and the message is returned."""
    outcome = gw.call(tool, args)
    assert not outcome.ok and outcome.error is not None and outcome.error.code == code, outcome.body()
    return outcome.error.message
