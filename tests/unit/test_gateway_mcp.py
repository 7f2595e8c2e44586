"""The gateway's MCP endpoint, spoken to by the `mcp` SDK's client over real Streamable HTTP (uvicorn in a thread)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from gateway_fixtures import TOKEN, FakeObservability, make_gateway, make_run_dir, serve_gateway, trajectory
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Served:
    def __init__(self, run_dir: Path, **options: Any) -> None:
        self.run_dir = run_dir
        self.server, self.thread, self.url = serve_gateway(make_gateway(run_dir, **options))

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def obs() -> Iterator[FakeObservability]:
    fake = FakeObservability()
    yield fake
    fake.close()


@pytest.fixture
def served(tmp_path: Path, obs: FakeObservability) -> Iterator[Served]:
    s = Served(make_run_dir(tmp_path, obs.url), profile="observe-only", max_calls=4)
    yield s
    s.stop()


async def session(url: str, mode: str, token: str = TOKEN) -> dict[str, Any]:
    """List the tools, then make three calls: one fine, one denied by scope, one outside the profile."""
    async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
                Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client):
        listed = await client.list_tools()
        alerts = await client.call_tool("get_alerts", {"limit": 2})
        scoped = await client.call_tool("search_logs", {"service": "loadgen"})
        control = await client.call_tool("restart", {"service": "checkout"})
        version = client.protocol_version
    return {"tools": listed.tools, "alerts": alerts, "scoped": scoped, "control": control, "version": version}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_mcp_tools_share_dispatch_with_rest(served: Served, mode: str) -> None:
    out = asyncio.run(session(served.url, mode))
    assert out["version"] == {"auto": "2026-07-28", "legacy": "2025-11-25"}[mode]

    names = [t.name for t in out["tools"]]
    assert names == ["get_alerts", "query_metrics", "get_error_rate", "search_logs", "get_traces", "get_topology"]
    logs = next(t for t in out["tools"] if t.name == "search_logs")
    assert logs.input_schema["properties"]["limit"]["maximum"] == 1000

    alerts = out["alerts"]
    assert not alerts.is_error
    assert alerts.structured_content["ok"] is True
    assert alerts.structured_content["result"]["total"] == 3 and alerts.structured_content["next_page"]
    assert '"fingerprint": "f2"' in alerts.content[0].text

    assert out["scoped"].is_error and out["scoped"].structured_content["error"]["code"] == "denied"
    assert out["control"].is_error and out["control"].structured_content["error"]["code"] == "denied"

    # One budget for both transports: 3 MCP calls so far, the 4th (REST) is the last one allowed.
    assert httpx.post(f"{served.url}/v1/tools/get_topology", headers=AUTH, json={}).status_code == 200
    resp = httpx.post(f"{served.url}/v1/tools/get_topology", headers=AUTH, json={})
    assert resp.status_code == 429

    records = trajectory(served.run_dir)
    assert [(r["tool"], r["status"], r["transport"]) for r in records] == [
        ("get_alerts", "ok", "mcp"), ("search_logs", "denied", "mcp"), ("restart", "denied", "mcp"),
        ("get_topology", "ok", "rest"), ("get_topology", "denied", "rest")]


def test_mcp_without_the_token_is_refused(served: Served) -> None:
    with pytest.raises(ExceptionGroup) as caught:  # the SDK's task groups wrap the error the 401 became
        asyncio.run(session(served.url, "auto", token="wrong"))
    assert caught.group_contains(MCPError, depth=None)
    assert trajectory(served.run_dir) == []


def test_the_synchronous_mcp_client_pages_and_raises_on_refusals(served: Served) -> None:
    from orchestrator.agents.gateway_client import ToolError
    from orchestrator.agents.mcp_client import MCPGatewayClient

    with MCPGatewayClient(f"{served.url}/mcp", TOKEN) as call:
        assert call.tools == ["get_alerts", "query_metrics", "get_error_rate", "search_logs", "get_traces",
                              "get_topology"]
        first = call("get_alerts", limit=2)
        assert first["total"] == 3 and call.next_page
        rest = call("get_alerts", limit=2, page=call.next_page)
        assert len(first["items"]) + len(rest["items"]) == 3 and call.next_page is None
        with pytest.raises(ToolError, match="restart"):
            call("restart", service="checkout")
    assert [(r["tool"], r["status"], r["transport"]) for r in trajectory(served.run_dir)] == [
        ("get_alerts", "ok", "mcp"), ("get_alerts", "ok", "mcp"), ("restart", "denied", "mcp")]


def test_mcp_accepts_a_contained_agents_host_and_refuses_a_rebound_name(served: Served) -> None:
    """A contained agent reaches the host's loopback as 10.0.2.2 (orchestrator/sandbox/network.py); a DNS
    rebinding page sends its own name as Host and is refused."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    port = served.url.rsplit(":", 1)[1]
    headers = {**AUTH, "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    ok = httpx.post(f"{served.url}/mcp", headers={**headers, "Host": f"10.0.2.2:{port}"}, json=init)
    bad = httpx.post(f"{served.url}/mcp", headers={**headers, "Host": f"evil.example:{port}"}, json=init)
    assert ok.status_code == 200, ok.text
    assert bad.status_code == 421, bad.text
