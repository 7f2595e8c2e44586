"""The gateway's dispatch and tools against fakes: scope, profiles, budgets, validation, paging, trajectory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_fixtures import (
    NOW,
    T0,
    TOKEN,
    TRACE_ERR,
    Clock,
    FakeObservability,
    make_gateway,
    make_run_dir,
    trajectory,
)

from orchestrator.gateway import PROFILES, TOOLS, Gateway, profile_tools
from orchestrator.gateway.paging import Cursor
from orchestrator.gateway.scope import is_internal, visible_topology
from orchestrator.gateway.times import parse_duration, parse_time


@pytest.fixture(scope="module")
def obs() -> Iterator[FakeObservability]:
    fake = FakeObservability()
    yield fake
    fake.close()


@pytest.fixture
def run_dir(tmp_path: Path, obs: FakeObservability) -> Path:
    obs.series = 3
    obs.requests.clear()
    return make_run_dir(tmp_path, obs.url)


@pytest.fixture
def gw(run_dir: Path) -> Gateway:
    return make_gateway(run_dir)


def ok(gw: Gateway, tool: str, **args: Any) -> Any:
    outcome = gw.call(tool, args)
    assert outcome.ok, outcome.body()
    return outcome


def refused(gw: Gateway, tool: str, args: Any, code: str) -> dict[str, Any]:
    outcome = gw.call(tool, args)
    assert not outcome.ok and outcome.error is not None, outcome.body()
    assert outcome.error.code == code, outcome.body()
    error: dict[str, Any] = outcome.body()["error"]
    return error


# -- observation tools ----------------------------------------------------------------------------------------------

def test_alerts_come_from_alertmanager_oldest_first(gw: Gateway, obs: FakeObservability) -> None:
    result = ok(gw, "get_alerts").result
    assert [a["fingerprint"] for a in result["items"]] == ["f2", "f1", "f3"]
    assert result["total"] == 3
    assert result["items"][0]["labels"]["service"] == "payment"
    assert "generatorURL" not in result["items"][1]  # it names the monitoring stack's internal address
    assert obs.requests[-1] == ("/api/v2/alerts", {"active": "true", "silenced": "false", "inhibited": "false"})
    only = ok(gw, "get_alerts", service="checkout").result
    assert [a["fingerprint"] for a in only["items"]] == ["f1"]


def test_instant_and_range_queries(gw: Gateway, obs: FakeObservability) -> None:
    instant = ok(gw, "query_metrics", query="up").result
    assert instant["result_type"] == "vector" and instant["total"] == 3
    assert obs.requests[-1] == ("/api/v1/query", {"query": "up", "time": f"{NOW:.3f}"})

    ranged = ok(gw, "query_metrics", query="rate(x[1m])", start="10m", step="30s").result
    assert ranged["result_type"] == "matrix"
    path, params = obs.requests[-1]
    assert path == "/api/v1/query_range"
    assert (float(params["start"]), float(params["end"]), params["step"]) == (NOW - 600, NOW, "30")

    ok(gw, "query_metrics", query="up", start=NOW - 1000)
    assert obs.requests[-1][1]["step"] == "4"  # about 250 points by default


def test_bad_promql_is_invalid_naming_the_query(gw: Gateway, obs: FakeObservability) -> None:
    asked = len(obs.requests)
    error = refused(gw, "query_metrics", {"query": "sum(bad(x))"}, "invalid")
    assert error["field"] == "query" and "unknown function with name 'bad'" in error["message"]
    assert refused(gw, "query_metrics", {"query": "up{"}, "invalid")["field"] == "query"
    assert len(obs.requests) == asked  # refused before Prometheus was asked
    error = refused(gw, "query_metrics", {"query": "sum(rejected_by_prometheus)"}, "invalid")
    assert "Prometheus rejected it" in error["message"] and "parse error" in error["message"]


def test_range_query_limits(gw: Gateway) -> None:
    assert refused(gw, "query_metrics", {"query": "up", "start": "1h", "step": "100ms"}, "invalid")["field"] == "step"
    assert refused(gw, "query_metrics", {"query": "up", "end": "now"}, "invalid")["field"] == "start"
    assert refused(gw, "query_metrics", {"query": "up", "start": "5m", "end": "10m"}, "invalid")["field"] == "end"
    assert refused(gw, "query_metrics", {"query": "up", "start": "5m", "time": "now"}, "invalid")["field"] == "time"


def test_metrics_of_the_monitoring_stack_are_denied(gw: Gateway) -> None:
    error = refused(gw, "query_metrics", {"query": "rate(prometheus_http_requests_total[1m])"}, "denied")
    assert "monitoring stack" in error["message"]
    ok(gw, "query_metrics", query='up{job="prometheus_like"}')  # inside a string it is only a label value


@pytest.mark.parametrize(("query", "names"), [
    ('{__name__="prometheus_tsdb_head_series"}', "prometheus_tsdb_head_series"),
    ('sum(rate({__name__=~"prom.+"}[1m]))', "prometheus_http_requests_total"),
    ('up{service="loadgen"}', "loadgen"),
    ('container_pids{container=~"fault.*"}', "fault-latency"),
    ('up{instance_id=~"load.*|cart-1"}', "loadgen-1"),
    ('up{job=~"prom.*"}', "prometheus"),
    ('up{job="shop"} or up{service="x" or service="redis-exporter"}', "redis-exporter"),
    ("max_over_time(up{service='loadgen'}[5m:30s])", "loadgen"),
])
def test_regexes_and_nesting_do_not_hide_the_machinery(gw: Gateway, query: str, names: str) -> None:
    error = refused(gw, "query_metrics", {"query": query}, "denied")
    assert error["field"] == "query" and names in error["message"]


def test_application_selectors_pass_and_machinery_series_are_left_out(gw: Gateway) -> None:
    ok(gw, "query_metrics", query='up{job=~"sho.*", service=~"cart|frontend"}')
    ok(gw, "query_metrics", query='sum by (container) (container_pids{container=~"cart.*"})')
    result = ok(gw, "query_metrics", query='machinery{service!="cart"}', limit=500).result
    assert all(s["metric"].get("service", "").startswith("svc") for s in result["items"])
    assert result["total"] == len(result["items"])


def test_search_logs_filters(gw: Gateway) -> None:
    result = ok(gw, "search_logs", service="checkout", severity="ERROR").result
    assert result["total"] == 5
    assert [r["body"] for r in result["items"]][:2] == ["checkout step 24 failed", "checkout step 19 failed"]
    text = ok(gw, "search_logs", contains="STEP 03").result
    assert [r["body"] for r in text["items"]] == ["checkout step 03"]
    window = ok(gw, "search_logs", service="checkout", since=T0 / 1e9 + 10, until=T0 / 1e9 + 12).result
    assert [r["body"] for r in window["items"]] == ["checkout step 11", "checkout step 10"]
    relative = ok(gw, "search_logs", service="checkout", since="95s").result  # NOW - 95 s = T0 + 5 s
    assert relative["total"] == 20
    everything = ok(gw, "search_logs", limit=1000).result  # unfiltered: still only the application's records
    assert everything["total"] == 25 and {r["service"] for r in everything["items"]} == {"checkout"}
    assert ok(gw, "search_logs", contains="journey").result["total"] == 0  # the load generator's records


def test_logs_are_paged_never_truncated(gw: Gateway) -> None:
    first = ok(gw, "search_logs", service="checkout", limit=10)
    assert (first.result["total"], first.result["returned"]) == (25, 10) and first.next_page
    seen = [r["body"] for r in first.result["items"]]
    token = first.next_page
    while token:
        page = ok(gw, "search_logs", service="checkout", limit=10, page=token)
        seen += [r["body"] for r in page.result["items"]]
        token = page.next_page
    assert len(seen) == 25 and len(set(seen)) == 25
    assert seen == sorted(seen, reverse=True)


def test_page_token_of_another_query_is_invalid(gw: Gateway) -> None:
    token = ok(gw, "search_logs", service="checkout", limit=5).next_page
    error = refused(gw, "search_logs", {"service": "payment", "limit": 5, "page": token}, "invalid")
    assert error["field"] == "page" and "different query" in error["message"]
    assert refused(gw, "search_logs", {"page": "garbage!"}, "invalid")["field"] == "page"


def test_page_snapshot_pins_now(gw: Gateway) -> None:
    """Relative times on later pages resolve against the first page's now, not the current clock."""
    first = ok(gw, "search_logs", service="checkout", since="95s", limit=15)
    assert isinstance(gw.ctx.clock, Clock)
    gw.ctx.clock.now += 60  # a minute later, "95s" would mean something else
    second = ok(gw, "search_logs", service="checkout", since="95s", limit=15, page=first.next_page)
    assert first.result["total"] == second.result["total"] == 20
    assert second.result["returned"] == 5 and second.next_page is None


def test_metric_series_are_paged(gw: Gateway, obs: FakeObservability) -> None:
    obs.series = 7
    first = ok(gw, "query_metrics", query="up", limit=3)
    assert (first.result["total"], first.result["returned"]) == (7, 3)
    names = [s["metric"]["service"] for s in first.result["items"]]
    token = first.next_page
    while token:
        page = ok(gw, "query_metrics", query="up", limit=3, page=token)
        names += [s["metric"]["service"] for s in page.result["items"]]
        token = page.next_page
    assert names == [f"svc{i:02d}" for i in range(7)]
    assert {p["time"] for path, p in obs.requests if path == "/api/v1/query"} == {f"{NOW:.3f}"}


def test_traces_and_one_trace(gw: Gateway) -> None:
    errors = ok(gw, "get_traces", errors_only=True).result
    assert [t["trace_id"] for t in errors["items"]] == [TRACE_ERR]
    assert errors["items"][0]["services"] == ["checkout", "frontend", "payment"]
    spans = ok(gw, "get_traces", trace_id=TRACE_ERR, limit=2)
    assert (spans.result["total"], spans.result["returned"]) == (3, 2) and spans.next_page
    assert [s["depth"] for s in spans.result["items"]] == [0, 1]
    assert refused(gw, "get_traces", {"trace_id": "f" * 32}, "not_found")["field"] == "trace_id"
    assert refused(gw, "get_traces", {"trace_id": TRACE_ERR, "service": "checkout"}, "invalid")["field"] == "service"


def test_topology_hides_the_machinery(gw: Gateway) -> None:
    topology = ok(gw, "get_topology").result
    ids = {e["id"] for e in topology["entities"]}
    assert {"checkout", "checkout-1", "redis", "flags", "gateway"} <= ids
    assert not ids & {"loadgen", "loadgen-1", "prometheus", "alertmanager", "redis-exporter"}
    for edge in topology["edges"]:
        assert edge["source"] in ids and edge["target"] in ids
    assert {"source": "gateway", "target": "frontend", "type": "calls"} in topology["edges"]


def test_visible_topology_rules() -> None:
    assert is_internal("loadgen-1") and is_internal("postgres-exporter") and is_internal("Prometheus")
    assert is_internal("fault-latency") and not is_internal("frontend") and not is_internal("flags")
    topo = visible_topology({"entities": [{"id": "a"}, {"id": "alertmanager"}],
                             "edges": [{"source": "a", "target": "alertmanager", "type": "calls"}]})
    assert topo == {"entities": [{"id": "a"}], "edges": []}


# -- scope ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("tool", "args", "field"), [
    ("restart", {"service": "prometheus"}, "service"),
    ("restart", {"service": "loadgen"}, "service"),
    ("restart", {"service": "ob-r1-alertmanager"}, "service"),
    ("restart", {"service": "frontend", "instance": "ob-r1-fault-latency"}, "instance"),
    ("describe_service", {"service": "redis-exporter"}, "service"),
    ("search_logs", {"service": "loadgen"}, "service"),
    ("get_traces", {"service": "loadgen"}, "service"),
    ("get_alerts", {"service": "alertmanager"}, "service"),
    ("toggle_flag", {"flag": "loadgeneratorFloodHomepage", "state": "on"}, "flag"),
])
def test_machinery_is_denied_and_logged(gw: Gateway, run_dir: Path, caplog: pytest.LogCaptureFixture,
                                        tool: str, args: dict[str, Any], field: str) -> None:
    with caplog.at_level("WARNING", logger="opsbench.gateway"):
        error = refused(gw, tool, args, "denied")
    assert error["field"] == field
    assert "denied" in caplog.text
    record = trajectory(run_dir)[-1]
    assert (record["tool"], record["status"], record["error"]["code"]) == (tool, "denied", "denied")
    assert isinstance(gw.ctx.control, object)
    assert getattr(gw.ctx.control, "actions", []) == []  # nothing reached the backend


def test_unknown_service_is_not_found_with_the_list(gw: Gateway) -> None:
    error = refused(gw, "restart", {"service": "chekout"}, "not_found")
    assert error["field"] == "service" and "checkout" in error["message"]


def test_control_through_the_backend(gw: Gateway) -> None:
    assert ok(gw, "restart", service="frontend").result == {"service": "frontend",
                                                             "restarted": ["frontend-1", "frontend-2"]}
    assert ok(gw, "restart", service="frontend", instance="ob-r1-frontend-2").result["restarted"] == ["frontend-2"]
    assert ok(gw, "toggle_flag", flag="paymentServiceFailure", state="off").result == {
        "flag": "paymentServiceFailure", "previous": "on", "current": "off"}
    listed = ok(gw, "list_services").result
    assert "loadgeneratorFloodHomepage" not in listed["feature_flags"]
    assert "loadgen" not in [s["service"] for s in listed["services"]]
    assert getattr(gw.ctx.control, "actions", None) == [
        ("restart", "frontend-1", "frontend-2"), ("restart", "frontend-2"),
        ("toggle_flag", "paymentServiceFailure", "off")]


# -- validation -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "field"), [
    ({"query": 5}, "query"),
    ({"query": "up", "limit": "10"}, "limit"),
    ({"query": "up", "limit": 0}, "limit"),
    ({"query": "up", "bogus": 1}, "bogus"),
    ({}, "query"),
    ([1, 2], "arguments"),
    ({"query": "up", "time": "yesterday"}, "time"),
])
def test_invalid_arguments_name_the_field(gw: Gateway, run_dir: Path, args: Any, field: str) -> None:
    assert refused(gw, "query_metrics", args, "invalid")["field"] == field
    assert trajectory(run_dir)[-1]["status"] == "invalid"


def test_unknown_tool_is_not_found(gw: Gateway, run_dir: Path) -> None:
    refused(gw, "rm_rf", {}, "not_found")
    assert trajectory(run_dir)[-1]["status"] == "invalid"


def test_time_and_duration_forms() -> None:
    assert parse_time("t", 12.5, NOW) == 12.5
    assert parse_time("t", "now", NOW) == NOW
    assert parse_time("t", "15m", NOW) == parse_time("t", "now-15m", NOW) == parse_time("t", "-15m", NOW) == NOW - 900
    assert parse_time("t", "2023-11-14T22:13:20Z", NOW) == 1_700_000_000
    assert parse_duration("d", "500ms") == 0.5 and parse_duration("d", 30) == 30
    with pytest.raises(Exception, match="no time zone"):
        parse_time("t", "2023-11-14T22:13:20", NOW)


def test_page_cursor_round_trip() -> None:
    from orchestrator.gateway.paging import decode

    args = {"service": "x", "limit": 5}
    token = Cursor(10, 99).encode(args)
    assert decode(token, {**args, "limit": 50}) == Cursor(10, 99)  # the page size may change between pages


# -- profiles and budgets -------------------------------------------------------------------------------------------

def test_profiles() -> None:
    names = {p: {t.name for t in profile_tools(p)} for p in PROFILES}
    assert names["full"] == {t.name for t in TOOLS}
    assert "get_traces" not in names["no-traces"] and "restart" in names["no-traces"]
    assert names["metrics-only"] == {"get_alerts", "query_metrics", "get_error_rate", "get_topology"}
    # The billing tools and the cost tools' readers are read-only observations too; the gateway offers them only
    # where billing data or a cost section exists.
    assert names["observe-only"] == {"get_alerts", "query_metrics", "get_error_rate", "search_logs", "get_traces",
                                     "get_topology", "get_recent_changes", "query_sql", "describe_billing_schema",
                                     "get_autoscaler_policy", "get_budgets", "get_cuj_report", "view_screenshot",
                                     "get_browser_console", "get_network_requests", "get_dom_snapshot",
                                     "get_browser_storage", "get_frontend_spans", "list_files", "read_file"}
    with pytest.raises(ValueError, match="unknown tool profile"):
        profile_tools("everything")


def test_tool_outside_the_profile_is_denied(run_dir: Path) -> None:
    gw = make_gateway(run_dir, profile="metrics-only")
    assert "search_logs" not in [t.name for t in gw.tools]
    assert "profile" in refused(gw, "search_logs", {}, "denied")["message"]
    assert trajectory(run_dir)[-1]["status"] == "denied"


def test_call_budget(run_dir: Path) -> None:
    gw = make_gateway(run_dir, max_calls=3)
    ok(gw, "get_topology")
    refused(gw, "query_metrics", {"query": 1}, "invalid")  # an invalid call counts too
    ok(gw, "get_topology")
    error = refused(gw, "get_topology", {}, "budget_exhausted")
    assert "3 tool calls" in error["message"]
    refused(gw, "get_topology", {}, "budget_exhausted")
    assert gw.budget()["calls"] == 3
    assert [r["status"] for r in trajectory(run_dir)] == ["ok", "invalid", "ok", "denied", "denied"]


def test_deadline(run_dir: Path) -> None:
    clock = Clock()
    gw = make_gateway(run_dir, clock, deadline=NOW + 10)
    ok(gw, "get_topology")
    clock.now = NOW + 10
    assert "deadline" in refused(gw, "get_topology", {}, "budget_exhausted")["message"]


# -- trajectory -----------------------------------------------------------------------------------------------------

def test_trajectory_records_every_call_and_redacts(gw: Gateway, run_dir: Path) -> None:
    ok(gw, "get_alerts")
    refused(gw, "search_logs", {"contains": f"Bearer {TOKEN}", "api_key": "k"}, "invalid")
    refused(gw, "restart", {"service": "prometheus"}, "denied")
    refused(gw, "nope", None, "not_found")
    refused(gw, "scale", {"service": "checkout", "replicas": 99}, "invalid")
    records = trajectory(run_dir)
    assert [(r["tool"], r["status"]) for r in records] == [
        ("get_alerts", "ok"), ("search_logs", "invalid"), ("restart", "denied"), ("nope", "invalid"),
        ("scale", "invalid")]
    assert records[0]["result_bytes"] > 100 and records[0]["family"] == "alerts"
    assert records[0]["transport"] == "rest" and records[0]["ts"] == NOW and records[0]["elapsed"] >= 0
    assert records[1]["args"] == {"contains": "Bearer [redacted]", "api_key": "[redacted]"}
    assert records[4]["error"]["field"] == "replicas"
    assert "family" not in records[3]
    text = (run_dir / "gateway" / "trajectory.jsonl").read_text()
    assert TOKEN not in text


def test_visible_window_hides_an_earlier_runs_records(run_dir: Path, obs: FakeObservability) -> None:
    """On a shared environment the gateway shows nothing from before the run's window: logs and traces are
    clamped, a trace or metric time before it is refused, a range query's start is moved up to it."""
    floor = T0 / 1e9 + 12.5  # checkout logs are at T0 + i s; traces start at T0 and T0 + 10 s
    gw = make_gateway(run_dir, visible_since=floor)
    logs = ok(gw, "search_logs", service="checkout", limit=1000).result
    assert logs["total"] == 12 and min(r["time_ns"] for r in logs["items"]) >= T0 + 13 * 10**9
    assert ok(gw, "search_logs", service="checkout", since=T0 / 1e9, limit=1000).result["total"] == 12
    error = refused(gw, "search_logs", {"until": T0 / 1e9 + 5}, "invalid")
    assert error["field"] == "until" and "window" in error["message"]
    assert ok(gw, "get_traces").result["total"] == 0
    refused(gw, "get_traces", {"trace_id": TRACE_ERR}, "not_found")
    error = refused(gw, "query_metrics", {"query": "up", "time": floor - 60}, "invalid")
    assert error["field"] == "time"
    obs.requests.clear()
    ok(gw, "query_metrics", query="up", start=floor - 600, end=floor + 60, step="10s")
    sent = [q for p, q in obs.requests if p.endswith("/query_range")]
    assert sent and float(sent[-1]["start"]) == pytest.approx(floor)
    # A range selector, subquery or offset reaching back before the window: refused for an instant query, a
    # range query's start moved up so that its first evaluation reads nothing older.
    error = refused(gw, "query_metrics", {"query": "rate(up[5m])", "time": floor + 60}, "invalid")
    assert error["field"] == "query" and "reads 300s back" in error["message"] and "[60s]" in error["message"]
    refused(gw, "query_metrics", {"query": "max_over_time(up[1m:10s] offset 10s)", "time": floor + 60}, "invalid")
    refused(gw, "query_metrics", {"query": f"up @ {floor - 1:.0f}"}, "invalid")
    obs.requests.clear()
    ok(gw, "query_metrics", query="rate(up[1m])", time=floor + 60)
    ok(gw, "query_metrics", query="rate(up[5m])", start=floor, end=floor + 600, step="10s")
    sent = [q for p, q in obs.requests if p.endswith("/query_range")]
    assert float(sent[-1]["start"]) == pytest.approx(floor + 300)
    refused(gw, "query_metrics", {"query": "rate(up[5m])", "start": floor, "end": floor + 200, "step": "10s"},
            "invalid")
    unclamped = make_gateway(run_dir)
    assert ok(unclamped, "query_metrics", query="rate(up[1h])", time=floor).ok
    assert ok(unclamped, "search_logs", service="checkout", limit=1000).result["total"] == 25
    assert ok(unclamped, "get_traces").result["total"] == 2
