"""The DuckDB telemetry query engine over synthetic OTel-shaped JSONL files."""

from __future__ import annotations

import io
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from orchestrator.telemetry import MAX_LIMIT, Page, TelemetryStore
from orchestrator.telemetry.__main__ import main as cli_main

S = 1_000_000_000  # one second in ns
MS = 1_000_000
T0 = 1_700_000_000 * S

TRACE_OK = "a" * 32  # frontend -> checkout -> cart, all fine
TRACE_ERR = "b" * 32  # frontend -> checkout -> payment, payment fails with 500
TRACE_PARTIAL = "c" * 32  # checkout calls inventory; only the CLIENT span is written so far (no root, no child)


class Telemetry:
    """Writes span and log lines into <root>/traces and <root>/logs, one file per service instance."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "traces").mkdir(parents=True)
        (root / "logs").mkdir(parents=True)

    def _append(self, kind: str, service: str, line: str) -> None:
        with (self.root / kind / f"ob-r1-{service}-1.jsonl").open("a") as fh:
            fh.write(line)

    def span(
        self,
        service: str,
        trace_id: str,
        span_id: str,
        parent: str,
        name: str,
        kind: str,
        start: int,
        duration_ms: int,
        status: int = 200,
        error: bool = False,
        peer: str | None = None,
    ) -> None:
        attributes: dict[str, Any] = {"http.request.method": name.split()[0], "url.path": name.split()[1],
                                      "http.route": name.split()[1], "http.response.status_code": status}
        if peer is not None:
            attributes["peer.service"] = peer
        line = {"resource": {"service.name": service, "service.instance.id": f"ob-r1-{service}-1"},
                "traceId": trace_id, "spanId": span_id, "parentSpanId": parent, "name": name, "kind": kind,
                "startTimeUnixNano": start, "endTimeUnixNano": start + duration_ms * MS, "attributes": attributes,
                "status": {"code": "ERROR" if error else "UNSET", "message": "upstream failed" if error else ""}}
        self._append("traces", service, json.dumps(line) + "\n")

    def log(self, service: str, time_ns: int, severity: str, body: str, trace_id: str = "", span_id: str = "") -> None:
        number = {"INFO": 9, "WARN": 13, "ERROR": 17}[severity]
        line = {"resource": {"service.name": service, "service.instance.id": f"ob-r1-{service}-1"},
                "timeUnixNano": time_ns, "severityText": severity, "severityNumber": number, "body": body,
                "attributes": {"user": "u1"}, "traceId": trace_id, "spanId": span_id}
        self._append("logs", service, json.dumps(line) + "\n")

    def raw(self, kind: str, service: str, text: str) -> None:
        self._append(kind, service, text)


def sid(n: int) -> str:
    return f"{n:016x}"


@pytest.fixture
def tel(tmp_path: Path) -> Telemetry:
    t = Telemetry(tmp_path / "telemetry")
    # TRACE_OK at T0: frontend SERVER -> frontend CLIENT -> checkout SERVER -> checkout CLIENT -> cart SERVER.
    # checkout's CLIENT span names a stale peer.service: the child SERVER span's service must win.
    t.span("cart", TRACE_OK, sid(5), sid(4), "GET /cart/u1", "SERVER", T0 + 4 * MS, 5)
    t.span("checkout", TRACE_OK, sid(4), sid(3), "GET /cart/u1", "CLIENT", T0 + 3 * MS, 8, peer="cart-legacy")
    t.span("checkout", TRACE_OK, sid(3), sid(2), "POST /checkout", "SERVER", T0 + 2 * MS, 12)
    t.span("frontend", TRACE_OK, sid(2), sid(1), "POST /checkout", "CLIENT", T0 + 1 * MS, 14, peer="checkout")
    t.span("frontend", TRACE_OK, sid(1), "", "GET /buy", "SERVER", T0, 20)
    # TRACE_ERR at T0+10s: payment fails; checkout's CLIENT span only carries the 500 (status UNSET).
    e = T0 + 10 * S
    t.span("payment", TRACE_ERR, sid(15), sid(14), "POST /pay", "SERVER", e + 4 * MS, 30, status=500, error=True)
    t.span("checkout", TRACE_ERR, sid(14), sid(13), "POST /pay", "CLIENT", e + 3 * MS, 40, status=500, peer="payment")
    t.span("checkout", TRACE_ERR, sid(13), sid(12), "POST /checkout", "SERVER", e + 2 * MS, 45, status=500, error=True)
    t.span("frontend", TRACE_ERR, sid(12), sid(11), "POST /checkout", "CLIENT", e + 1 * MS, 50, status=500,
           peer="checkout")
    t.span("frontend", TRACE_ERR, sid(11), "", "GET /buy", "SERVER", e, 60, status=502, error=True)
    # TRACE_PARTIAL at T0+20s: a CLIENT span whose parent (checkout SERVER) is not written yet, no child either.
    t.span("checkout", TRACE_PARTIAL, sid(22), sid(21), "GET /stock", "CLIENT", T0 + 20 * S, 7, peer="inventory")
    # A CLIENT span with neither child nor peer.service: no edge can be drawn.
    t.span("frontend", "d" * 32, sid(31), "", "GET /nowhere", "CLIENT", T0 + 30 * S, 3)
    # Garbage and a partially written last line: skipped, not fatal.
    t.raw("traces", "checkout", "not json at all\n")
    no_trace_id = {"resource": {"service.name": "frontend"}, "spanId": sid(99), "name": "GET /x", "kind": "SERVER",
                   "startTimeUnixNano": T0 + 5 * S}
    t.raw("traces", "frontend", json.dumps(no_trace_id) + "\n")
    t.raw("traces", "payment", '{"resource": {"service.name": "payment"}, "traceId": "' + "e" * 32 + '", "spa')

    t.log("frontend", T0 + 1 * MS, "INFO", "GET /buy started", TRACE_OK, sid(1))
    t.log("checkout", T0 + 3 * MS, "INFO", "cart loaded for u1", TRACE_OK, sid(3))
    t.log("checkout", e + 40 * MS, "WARN", "Payment slow, retrying", TRACE_ERR, sid(13))
    t.log("payment", e + 30 * MS, "ERROR", "card processor unreachable: connection refused", TRACE_ERR, sid(15))
    t.log("checkout", e + 50 * MS, "ERROR", "checkout failed: PAYMENT returned 500", TRACE_ERR, sid(13))
    t.log("frontend", T0 + 40 * S, "INFO", "health ok")
    t.raw("logs", "frontend", "{oops}\n")
    t.raw("logs", "payment", '{"resource": {"service.name": "payment"}, "timeUnixNano": 17')
    return t


@pytest.fixture
def store(tel: Telemetry) -> TelemetryStore:
    return TelemetryStore(tel.root)


def bodies(page: Page[Any]) -> list[str]:
    return [item["body"] for item in page.items]


# -- missing / empty input --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["missing", "empty_dirs", "empty_files"])
def test_missing_or_empty_input_gives_empty_results(tmp_path: Path, layout: str) -> None:
    root = tmp_path / "telemetry"
    if layout != "missing":
        (root / "traces").mkdir(parents=True)
        (root / "logs").mkdir()
    if layout == "empty_files":
        (root / "traces" / "a.jsonl").touch()
        (root / "logs" / "a.jsonl").touch()
    store = TelemetryStore(root)

    logs = store.search_logs()
    assert (logs.items, logs.total, logs.offset, logs.next_offset) == ([], 0, 0, None)
    traces = store.get_traces()
    assert (traces.items, traces.total, traces.next_offset) == ([], 0, None)
    assert store.get_trace(TRACE_OK) == []
    assert store.service_calls() == []
    assert store.error_summary() == []


# -- logs -------------------------------------------------------------------------------------------------------------


def test_logs_newest_first_and_invalid_lines_skipped(store: TelemetryStore) -> None:
    page = store.search_logs()
    assert page.total == 6
    assert bodies(page) == [
        "health ok",
        "checkout failed: PAYMENT returned 500",
        "Payment slow, retrying",
        "card processor unreachable: connection refused",
        "cart loaded for u1",
        "GET /buy started",
    ]
    first = page.items[1]
    assert first["service"] == "checkout"
    assert first["instance"] == "ob-r1-checkout-1"
    assert (first["severity"], first["severity_number"]) == ("ERROR", 17)
    assert first["attributes"] == {"user": "u1"}
    assert (first["trace_id"], first["span_id"]) == (TRACE_ERR, sid(13))
    assert page.items[0]["trace_id"] is None  # empty string in the file means no trace


def test_partial_line_appears_once_completed(tel: Telemetry, store: TelemetryStore) -> None:
    assert store.search_logs(service="payment").total == 1
    tel.raw("logs", "payment", '00000000000000000, "severityText": "WARN", "body": "finished late"}\n')
    page = store.search_logs(service="payment")
    assert page.total == 2
    assert bodies(page) == ["card processor unreachable: connection refused", "finished late"]  # the latter at T0
    assert page.items[1]["severity_number"] == 13  # derived from severityText when the number is missing


def test_logs_paging(store: TelemetryStore) -> None:
    everything = bodies(store.search_logs())
    seen: list[str] = []
    offset: int | None = 0
    pages = 0
    while offset is not None:
        page = store.search_logs(limit=4, offset=offset)
        assert (page.total, page.limit, page.offset) == (6, 4, offset)
        seen += bodies(page)
        offset = page.next_offset
        pages += 1
    assert pages == 2
    assert seen == everything

    last = store.search_logs(limit=3, offset=3)
    assert (len(last.items), last.next_offset) == (3, None)
    past = store.search_logs(limit=3, offset=50)
    assert (past.items, past.total, past.next_offset) == ([], 6, None)


def test_logs_paging_limits(store: TelemetryStore) -> None:
    with pytest.raises(ValueError):
        store.search_logs(limit=0)
    with pytest.raises(ValueError):
        store.search_logs(offset=-1)
    assert store.search_logs(limit=MAX_LIMIT + 5).limit == MAX_LIMIT


def test_logs_time_window_is_half_open(store: TelemetryStore) -> None:
    e = T0 + 10 * S
    page = store.search_logs(since_ns=e + 30 * MS, until_ns=e + 50 * MS)
    assert bodies(page) == ["Payment slow, retrying", "card processor unreachable: connection refused"]
    assert bodies(store.search_logs(since_ns=T0 + 40 * S)) == ["health ok"]
    assert store.search_logs(until_ns=T0 + 1 * MS).total == 0


def test_logs_severity_filter(store: TelemetryStore) -> None:
    errors = ["checkout failed: PAYMENT returned 500", "card processor unreachable: connection refused"]
    assert bodies(store.search_logs(severity_min="ERROR")) == errors
    assert bodies(store.search_logs(severity_min=17)) == errors
    assert store.search_logs(severity_min="warning").total == 3
    assert store.search_logs(severity_min="WARN", service="checkout").total == 2
    with pytest.raises(ValueError, match="unknown severity"):
        store.search_logs(severity_min="LOUD")


def test_logs_contains_service_and_trace_filters(store: TelemetryStore) -> None:
    assert bodies(store.search_logs(contains="payment")) == [
        "checkout failed: PAYMENT returned 500",
        "Payment slow, retrying",
    ]
    assert store.search_logs(contains="100%_no_such").total == 0
    assert bodies(store.search_logs(service="frontend")) == ["health ok", "GET /buy started"]
    assert store.search_logs(trace_id=TRACE_ERR.upper()).total == 3
    assert bodies(store.search_logs(trace_id=TRACE_OK, contains="CART")) == ["cart loaded for u1"]


# -- traces -----------------------------------------------------------------------------------------------------------


def test_trace_summaries(store: TelemetryStore) -> None:
    page = store.get_traces()
    assert page.total == 4
    assert [t["trace_id"] for t in page.items] == ["d" * 32, TRACE_PARTIAL, TRACE_ERR, TRACE_OK]
    by_id = {t["trace_id"]: t for t in page.items}
    assert by_id[TRACE_ERR] == {
        "trace_id": TRACE_ERR,
        "root_name": "GET /buy",
        "root_service": "frontend",
        "start_ns": T0 + 10 * S,
        "end_ns": T0 + 10 * S + 60 * MS,
        "duration_ms": 60.0,
        "span_count": 5,
        "error_count": 5,  # ERROR status or an HTTP 5xx (checkout's CLIENT span has only the 500)
        "services": ["checkout", "frontend", "payment"],
    }
    assert by_id[TRACE_OK]["error_count"] == 0
    assert by_id[TRACE_OK]["services"] == ["cart", "checkout", "frontend"]
    # the root of TRACE_PARTIAL is not written yet: its earliest span stands in
    assert (by_id[TRACE_PARTIAL]["root_name"], by_id[TRACE_PARTIAL]["span_count"]) == ("GET /stock", 1)


def test_trace_filters_and_paging(store: TelemetryStore) -> None:
    assert [t["trace_id"] for t in store.get_traces(errors_only=True).items] == [TRACE_ERR]
    assert [t["trace_id"] for t in store.get_traces(service="cart").items] == [TRACE_OK]
    assert store.get_traces(service="payment", errors_only=True).total == 1
    window = store.get_traces(since_ns=T0 + 1, until_ns=T0 + 20 * S)  # TRACE_OK starts at T0, PARTIAL at T0+20s
    assert [t["trace_id"] for t in window.items] == [TRACE_ERR]

    first = store.get_traces(limit=3)
    assert (len(first.items), first.total, first.next_offset) == (3, 4, 3)
    rest = store.get_traces(limit=3, offset=3)
    assert ([t["trace_id"] for t in rest.items], rest.next_offset) == ([TRACE_OK], None)


def test_get_trace_with_parent_links(store: TelemetryStore) -> None:
    spans = store.get_trace(TRACE_ERR.upper())
    assert [s["span_id"] for s in spans] == [sid(11), sid(12), sid(13), sid(14), sid(15)]  # by start time
    assert [s["parent_span_id"] for s in spans] == [None, sid(11), sid(12), sid(13), sid(14)]
    assert [s["depth"] for s in spans] == [0, 1, 2, 3, 4]
    assert [s["service"] for s in spans] == ["frontend", "frontend", "checkout", "checkout", "payment"]
    payment = spans[-1]
    assert (payment["kind"], payment["status_code"], payment["status_message"]) == ("SERVER", "ERROR",
                                                                                    "upstream failed")
    assert (payment["http_status"], payment["error"], payment["duration_ms"]) == (500, True, 30.0)
    assert payment["attributes"]["http.route"] == "/pay"
    assert spans[3]["error"] is True and spans[3]["status_code"] == "UNSET"  # 500 without ERROR status
    assert store.get_trace(TRACE_OK)[0]["error"] is False

    orphan = store.get_trace(TRACE_PARTIAL)
    assert [(s["parent_span_id"], s["depth"]) for s in orphan] == [(sid(21), 0)]
    assert store.get_trace("f" * 32) == []


def test_hidden_services_leave_logs_and_traces(store: TelemetryStore) -> None:
    # frontend plays the load generator here: the caller at the top of every trace.
    hidden = ["frontend"]
    logs = store.search_logs(hidden_services=hidden)
    assert logs.total == 4 and {r["service"] for r in logs.items} == {"checkout", "payment"}
    summaries = {t["trace_id"]: t for t in store.get_traces(hidden_services=hidden).items}
    assert set(summaries) == {TRACE_PARTIAL, TRACE_ERR, TRACE_OK}  # the frontend-only trace is gone
    assert (summaries[TRACE_ERR]["root_service"], summaries[TRACE_ERR]["root_name"]) == ("checkout", "POST /checkout")
    assert summaries[TRACE_ERR]["services"] == ["checkout", "payment"] and summaries[TRACE_ERR]["span_count"] == 3
    assert store.get_traces(service="frontend", hidden_services=hidden).total == 0
    spans = store.get_trace(TRACE_ERR, hidden_services=hidden)
    assert [(s["service"], s["depth"]) for s in spans] == [("checkout", 0), ("checkout", 1), ("payment", 2)]


# -- aggregates -------------------------------------------------------------------------------------------------------


def test_service_calls_edges(store: TelemetryStore) -> None:
    edges = {(e["source"], e["target"]): e for e in store.service_calls()}
    assert set(edges) == {
        ("frontend", "checkout"),
        ("checkout", "cart"),  # the child SERVER span's service beats the CLIENT span's stale peer.service
        ("checkout", "payment"),
        ("checkout", "inventory"),  # no child span: fall back to peer.service
    }
    assert (edges["frontend", "checkout"]["calls"], edges["frontend", "checkout"]["errors"]) == (2, 1)
    assert (edges["checkout", "cart"]["calls"], edges["checkout", "cart"]["errors"]) == (1, 0)
    assert (edges["checkout", "payment"]["calls"], edges["checkout", "payment"]["errors"]) == (1, 1)
    assert (edges["checkout", "inventory"]["calls"], edges["checkout", "inventory"]["errors"]) == (1, 0)
    assert edges["checkout", "payment"]["p95_ms"] == pytest.approx(40.0)
    assert edges["frontend", "checkout"]["p95_ms"] == pytest.approx(14 + 0.95 * (50 - 14))


def test_service_calls_window_and_server_side_errors(tel: Telemetry, store: TelemetryStore) -> None:
    late = T0 + 10 * S
    assert {(e["source"], e["target"]) for e in store.service_calls(since_ns=late, until_ns=late + S)} == {
        ("frontend", "checkout"),
        ("checkout", "payment"),
    }
    assert store.service_calls(until_ns=T0) == []
    # A call whose CLIENT span looks fine but whose SERVER child failed counts as an error.
    t = T0 + 50 * S
    tel.span("cart", "9" * 32, sid(42), sid(41), "GET /cart/u2", "SERVER", t + MS, 2, status=200, error=True)
    tel.span("checkout", "9" * 32, sid(41), "", "GET /cart/u2", "CLIENT", t, 4, peer="cart")
    edge = store.service_calls(since_ns=t)
    assert edge == [{"source": "checkout", "target": "cart", "calls": 1, "errors": 1, "p95_ms": 4.0}]


def test_error_summary(store: TelemetryStore) -> None:
    summary = {s["service"]: s for s in store.error_summary()}
    assert set(summary) == {"frontend", "checkout", "cart", "payment"}
    assert (summary["frontend"]["requests"], summary["frontend"]["errors"]) == (2, 1)
    assert summary["frontend"]["error_rate"] == pytest.approx(0.5)
    assert (summary["payment"]["requests"], summary["payment"]["error_rate"]) == (1, 1.0)
    assert (summary["cart"]["errors"], summary["cart"]["error_rate"]) == (0, 0.0)
    assert summary["cart"]["p95_ms"] == pytest.approx(5.0)
    windowed = store.error_summary(since_ns=T0, until_ns=T0 + S)
    assert {s["service"]: s["errors"] for s in windowed} == {"frontend": 0, "checkout": 0, "cart": 0}


# -- concurrency, serialisation, CLI ----------------------------------------------------------------------------------


def test_concurrent_queries_from_threads(store: TelemetryStore) -> None:
    expected = (store.search_logs().to_dict(), store.get_traces().to_dict(), store.service_calls())
    barrier = threading.Barrier(8)

    def query(_: int) -> tuple[Any, ...]:
        barrier.wait()
        return store.search_logs().to_dict(), store.get_traces().to_dict(), store.service_calls()

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(query, range(8)))
    assert all(r == expected for r in results)


def test_page_to_dict_is_json(store: TelemetryStore) -> None:
    data = json.loads(json.dumps(store.get_traces(limit=1).to_dict()))
    assert (data["total"], data["limit"], data["next_offset"]) == (4, 1, 1)
    assert data["items"][0]["trace_id"] == "d" * 32


def test_cli(tel: Telemetry) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli_main([str(tel.root), "logs", "--severity-min", "ERROR", "--limit", "1"]) == 0
    data = json.loads(out.getvalue())
    assert (data["total"], data["next_offset"], data["items"][0]["service"]) == (2, 1, "checkout")
