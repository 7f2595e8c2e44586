"""The gateway on a frozen snapshot: the same tools answer as the live gateway did at handover, "now" is the frozen
now, tools that act are neither listed (REST, MCP) nor runnable, and teardown stops the frozen Prometheus."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from frozen_fixtures import record_fake_run, token_for
from gateway_fixtures import NOW, TOKEN, TRACE_ERR, Clock, FakeObservability, make_gateway, serve_gateway, trajectory
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from orchestrator.gateway import Gateway, GatewayOptions, load_context
from orchestrator.gateway.evidence import FrozenEvidence
from orchestrator.gateway.times import to_ns
from orchestrator.gateway.tools import TOOLS
from orchestrator.snapshots import frozen_env
from orchestrator.snapshots.frozen_prometheus import PID_FILE


@dataclass
class Replay:
    live_dir: Path
    run_dir: Path
    snapshot: Path


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replay]:
    root = tmp_path_factory.mktemp("frozen")
    obs = FakeObservability()
    try:
        live_dir, info = record_fake_run(root, obs)
        run_dir = root / "replay"
        run_dir.mkdir()
        frozen_env.deploy(info.path, run_dir, scenario="shop-cart-down")
        token_for(run_dir)
        yield Replay(live_dir, run_dir, info.path)
        frozen_env.teardown(run_dir)
    finally:
        obs.close()


def frozen_gateway(run_dir: Path, **options: Any) -> Gateway:
    return Gateway(load_context(run_dir, GatewayOptions(**options)))


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_alerts", {}), ("get_alerts", {"service": "payment"}), ("get_alerts", {"service": "prometheus"}),
    ("search_logs", {}), ("search_logs", {"service": "checkout", "severity": "ERROR", "since": "5m"}),
    ("search_logs", {"service": "loadgen"}), ("search_logs", {"limit": 10}),
    ("get_traces", {}), ("get_traces", {"errors_only": True, "since": "now-10m"}),
    ("get_traces", {"trace_id": TRACE_ERR}),
    ("get_topology", {}), ("list_services", {}), ("describe_service", {"service": "checkout"}),
    ("describe_service", {"service": "nosuch"}),
]


def test_frozen_answers_equal_the_live_answers_at_handover(replay: Replay) -> None:
    """Every read tool but metrics (the fake live Prometheus is not the TSDB) answers byte for byte as the live
    gateway did at the frozen now, paging tokens included."""
    live = make_gateway(replay.live_dir, Clock(NOW))
    frozen = frozen_gateway(replay.run_dir)
    assert isinstance(frozen.ctx.evidence, FrozenEvidence) and frozen.ctx.now() == NOW
    for name, args in CALLS:
        expected = json.dumps(live.call(name, args).body(), sort_keys=True, default=str)
        got = json.dumps(frozen.call(name, args).body(), sort_keys=True, default=str)
        assert got == expected, (name, args)
    page = frozen.call("search_logs", {"limit": 10})
    assert page.ok and page.next_page and page.result["until_ns"] == to_ns(NOW)
    later = frozen.call("search_logs", {"limit": 10, "page": page.next_page})
    assert later.ok and later.result["offset"] == 10


def test_promql_is_answered_by_the_frozen_prometheus_at_the_frozen_now(replay: Replay) -> None:
    gw = frozen_gateway(replay.run_dir)
    instant = gw.call("query_metrics", {"query": 'up{service="cart"}'})
    assert instant.ok, instant.body()
    [series] = instant.result["items"]
    assert series["value"] == [NOW, "0"]  # cart was down for the snapshot's last 2 minutes
    ranged = gw.call("query_metrics", {"query": 'rate(http_requests_total{service="cart"}[1m])', "start": "10m",
                                       "step": "60s"})
    assert ranged.ok, ranged.body()
    [series] = ranged.result["items"]
    assert series["values"][-1][0] == NOW and series["values"][0][0] == NOW - 600
    assert float(series["values"][-1][1]) == pytest.approx(2.0)
    # The machinery's series were deleted at record time, and label values come from the frozen Prometheus.
    assert gw.call("query_metrics", {"query": "prometheus_tsdb_head_series"}).error is not None
    loadgen = gw.call("query_metrics", {"query": "http_requests_total"})
    assert [s["metric"]["service"] for s in loadgen.result["items"]] == ["cart"]


def test_tools_that_act_are_absent_and_refused(replay: Replay) -> None:
    gw = frozen_gateway(replay.run_dir)
    names = [t.name for t in gw.tools]
    acting = [t.name for t in TOOLS if t.acts]
    assert set(acting) == {"restart", "scale", "set_env", "rollback", "toggle_flag", "set_autoscaler_policy",
                           "set_budget", "exec", "write_file"}
    assert not set(acting) & set(names)
    assert names == ["get_alerts", "query_metrics", "get_error_rate", "search_logs", "get_traces", "get_topology",
                     "list_services", "describe_service"]
    refused = gw.call("restart", {"service": "cart"})
    assert refused.error is not None and refused.error.code == "denied"
    assert "frozen incident" in refused.error.message
    assert [(r["tool"], r["status"]) for r in trajectory(replay.run_dir)][-1] == ("restart", "denied")

    server, thread, url = serve_gateway(gw)
    try:
        listed = httpx.get(f"{url}/v1/tools", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30).json()
        assert [t["name"] for t in listed["tools"]] == names

        async def mcp_names() -> list[str]:
            async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
                        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client):
                return [t.name for t in (await client.list_tools()).tools]

        assert asyncio.run(mcp_names()) == names
        answer = httpx.post(f"{url}/v1/tools/set_env", json={"service": "cart", "env": {"A": "1"}},
                            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        assert answer.status_code == 403 and "frozen incident" in answer.json()["error"]["message"]
    finally:
        server.should_exit = True
        thread.join(10)


def test_teardown_stops_prometheus_and_removes_the_copies(tmp_path: Path, replay: Replay) -> None:
    run_dir = tmp_path / "again"
    run_dir.mkdir()
    env = frozen_env.deploy(replay.snapshot, run_dir)
    pid = int((run_dir / "prometheus" / PID_FILE).read_text())
    assert Path(f"/proc/{pid}").exists() and env["frozen"]["prometheus"]
    assert frozen_env.teardown(run_dir) is True
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1]
    assert sorted(p.name for p in run_dir.iterdir()) == []
    assert frozen_env.teardown(run_dir) is False  # idempotent
