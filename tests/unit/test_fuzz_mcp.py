"""Hypothesis over the gateway's MCP endpoint on its own (issue 11, item 3), over real Streamable HTTP.

The gateway (the real ASGI app: auth, MCP server, dispatch, tools, trajectory) is served by uvicorn in a thread on a
run directory like a deployed shop's, with the fake Prometheus/Alertmanager and the fake container control of the
gateway tests behind it (full tool profile, no call budget). Each generated case is one raw JSON-RPC POST to /mcp,
as an MCP client sends it in the stateless JSON-response mode the gateway uses: mostly `tools/call` with a tool name
(a real one, a known tool the run does not offer, or any text) and arguments built from the tool's own input schema
(well-typed values, wrong types, out-of-range numbers, unknown keys), some with a broken envelope (arguments that are
not an object, a name that is not a string, no params, an unknown method).

Checked for every case: no 5xx, a JSON-RPC 2.0 answer to the request's id; a JSON-RPC error only with a standard
client-error code (never -32603, an internal error); a tool result whose structured content is its text content and
whose `isError` says the call failed; a failed call has a known code that is not `backend_error`/`not_supported`
(nothing fails behind the fakes, so those would be our bug), and names what was wrong: the argument (`field`, an
argument of the call or of the tool's schema, also quoted in the message) for a call of an offered tool, the tool's
name otherwise. At the end: every `tools/call` that reached the tools is in the trajectory, and the server still
answers. `pytest -s` prints the counts. OPSBENCH_MCP_FUZZ_CASES sets the number of cases (default 600).
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fuzzing import cases
from gateway_fixtures import TOKEN, FakeObservability, make_gateway, make_run_dir, serve_gateway, trajectory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.gateway.dispatch import Gateway
from orchestrator.gateway.tools import BY_NAME

CASES = cases("OPSBENCH_MCP_FUZZ_CASES", 600)
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream",
           "Content-Type": "application/json"}
RPC_CLIENT_ERRORS = {-32700, -32600, -32601, -32602}  # parse error, invalid request, no such method, bad params
REFUSALS = {"invalid", "not_found", "denied"}  # budget_exhausted cannot happen: no budget here
COUNT: Counter[str] = Counter()


class Served:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.gateway: Gateway = make_gateway(run_dir)
        self.server, self.thread, base = serve_gateway(self.gateway)
        self.url = f"{base}/mcp"
        self.http = httpx.Client(headers=HEADERS, timeout=30)

    def post(self, body: Any) -> httpx.Response:
        return self.http.post(self.url, content=json.dumps(body))

    def stop(self) -> None:
        self.http.close()
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    obs = FakeObservability()
    with tempfile.TemporaryDirectory() as tmp:
        s = Served(make_run_dir(Path(tmp), obs.url))
        yield s
        s.stop()
    obs.close()


# -- strategies --------------------------------------------------------------------------------------------------
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)
WORDS = ["cart", "frontend", "checkout", "payment", "redis", "loadgen", "prometheus", "cart-1", "frontend-2", "up",
         "rate(shop_requests_total[5m])", "bad(", "15m", "now", "now-1h", "-1h", "2024-05-01T12:00:00Z", "1e300",
         "paymentServiceFailure", "loadgeneratorFloodHomepage", "on", "off", "ERROR", "INFO", "a" * 32, ""]


def typed(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the types the property schema allows, including ones just outside its bounds."""
    options = schema.get("anyOf", [schema])
    out: list[st.SearchStrategy[Any]] = []
    for opt in options:
        kind = opt.get("type")
        if "enum" in opt:
            out.append(st.sampled_from(opt["enum"]))
        if kind == "string":
            out.append(st.sampled_from(WORDS) | st.text(max_size=30))
        elif kind == "integer":
            lo, hi = opt.get("minimum", -1000), opt.get("maximum", 10**6)
            out.append(st.integers(lo - 2, hi + 2) | st.integers())
        elif kind == "number":
            out.append(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-10**12, 10**12))
        elif kind == "boolean":
            out.append(st.booleans())
        elif kind == "null":
            out.append(st.none())
        elif kind == "object":
            out.append(st.dictionaries(st.sampled_from(["A", "B", ""]) | st.text(max_size=8),
                                       st.text(max_size=8) | JSON, max_size=3))
    return st.one_of(out) if out else JSON


@st.composite
def arguments(draw: st.DrawFn, props: dict[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []:
        args[name] = draw(typed(props[name]) if draw(st.integers(0, 9)) else JSON)  # 1 in 10: any JSON at all
    if draw(st.integers(0, 7)) == 0:
        args[draw(st.text(min_size=1, max_size=12))] = draw(JSON)  # an argument the tool does not have
    return args


@st.composite
def request(draw: st.DrawFn, tools: list[str], schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One JSON-RPC request (without id): mostly tools/call, some with a broken envelope."""
    kind = draw(st.sampled_from(["call"] * 16 + ["non_object_args", "bad_name", "no_params", "bad_method"]))
    unoffered = sorted(set(BY_NAME) - set(tools)) or tools
    name = draw(st.sampled_from(tools) | st.sampled_from(unoffered) | st.text(max_size=30)
                if kind == "call" else st.sampled_from(tools))
    if kind == "call":
        props = schemas.get(name, {}).get("properties", {})
        return {"method": "tools/call", "params": {"name": name, "arguments": draw(arguments(props))}}
    if kind == "non_object_args":
        bad = draw(st.lists(JSON, max_size=2) | st.text(max_size=10) | st.integers() | st.booleans())
        return {"method": "tools/call", "params": {"name": name, "arguments": bad}}
    if kind == "bad_name":
        return {"method": "tools/call", "params": {"name": draw(st.integers() | st.none() | st.lists(JSON, max_size=2)),
                                                   "arguments": {}}}
    if kind == "no_params":
        return {"method": "tools/call"}
    return {"method": draw(st.sampled_from(["tools/cal", "resources/read", "prompts/get", "sampling/createMessage"])
                           | st.text(max_size=20)), "params": {}}


# -- the checks --------------------------------------------------------------------------------------------------
def well_formed(req: dict[str, Any]) -> bool:
    """A tools/call whose envelope MCP accepts: it must reach the gateway's dispatch and get a tool result."""
    params = req.get("params")
    return (req.get("method") == "tools/call" and isinstance(params, dict) and isinstance(params.get("name"), str)
            and isinstance(params.get("arguments"), dict))


def check_tool_error(name: str, args: dict[str, Any], error: dict[str, Any], offered: set[str],
                     schemas: dict[str, dict[str, Any]]) -> None:
    assert error["code"] in REFUSALS, error  # backend_error / not_supported: nothing fails behind the fakes
    assert error["message"].strip(), error
    if name not in offered:  # refused for the tool itself: the answer names the tool
        assert error["code"] == ("denied" if name in BY_NAME else "not_found"), error
        assert repr(name) in error["message"], error
        return
    field = error.get("field")
    assert field, f"{name}({args}) refused without naming the argument: {error}"
    top = field.split(".")[0]
    assert top in set(args) | set(schemas[name].get("properties", {})) | {"arguments"}, (name, args, error)
    assert field in error["message"], error


@pytest.fixture(scope="module")
def tool_schemas(served: Served) -> dict[str, dict[str, Any]]:
    return {t.name: t.input_schema() for t in served.gateway.tools}


def test_mcp_endpoint_fuzzed(served: Served, tool_schemas: dict[str, dict[str, Any]]) -> None:
    tools = list(tool_schemas)
    assert len(tools) >= 10  # the full profile: observation and control tools
    offered = set(tools)
    ids = iter(range(1, 10**9))

    @settings(max_examples=CASES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(req=request(tools, tool_schemas))
    def one(req: dict[str, Any]) -> None:
        rid = next(ids)
        resp = served.post({"jsonrpc": "2.0", "id": rid, **req})
        COUNT["cases"] += 1
        assert resp.status_code < 500, (req, resp.status_code, resp.text)
        body = resp.json()
        assert body.get("jsonrpc") == "2.0" and body.get("id") == rid, body
        if "error" in body:
            assert resp.status_code in (200, 400) and body["error"]["code"] in RPC_CLIENT_ERRORS, (req, body)
            assert not well_formed(req), ("a well-formed call got a JSON-RPC error, not a tool result", req, body)
            COUNT["rpc_error"] += 1
            return
        assert resp.status_code == 200 and req["method"] == "tools/call", (req, body)
        result = body["result"]
        assert [c["type"] for c in result["content"]] == ["text"], result
        structured = result["structuredContent"]
        assert json.loads(result["content"][0]["text"]) == structured
        assert result.get("isError", False) is (not structured["ok"]), result
        COUNT["tool_calls"] += 1
        if structured["ok"]:
            COUNT["ok"] += 1
            return
        COUNT[f"refused:{structured['error']['code']}"] += 1
        check_tool_error(req["params"]["name"], req["params"]["arguments"], structured["error"], offered,
                         tool_schemas)

    one()
    print(f"mcp fuzz: {dict(sorted(COUNT.items()))}")
    assert COUNT["cases"] >= min(CASES, 300) and COUNT["ok"] > 0 and COUNT["rpc_error"] > 0, COUNT
    assert COUNT["tool_calls"] - COUNT["ok"] > 0, COUNT
    # Every call that reached the tools was recorded, once; and the server still answers.
    assert len(trajectory(served.run_dir)) == COUNT["tool_calls"]
    listed = served.post({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}).json()
    assert [t["name"] for t in listed["result"]["tools"]] == tools
