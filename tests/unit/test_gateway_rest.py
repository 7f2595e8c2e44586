"""The gateway's REST API and OpenAPI document (FastAPI TestClient, fakes behind)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from gateway_fixtures import TOKEN, FakeObservability, make_gateway, make_run_dir, trajectory

from orchestrator.gateway import TOOLS
from orchestrator.gateway.rest import create_app

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def obs() -> Iterator[FakeObservability]:
    fake = FakeObservability()
    yield fake
    fake.close()


@pytest.fixture
def run_dir(tmp_path: Path, obs: FakeObservability) -> Path:
    return make_run_dir(tmp_path, obs.url)


def client_for(run_dir: Path, **options: object) -> TestClient:
    return TestClient(create_app(make_gateway(run_dir, **options)))


@pytest.fixture
def client(run_dir: Path) -> Iterator[TestClient]:
    with client_for(run_dir) as c:
        yield c


def test_health_needs_no_token(client: TestClient) -> None:
    assert client.get("/v1/health").json() == {"ok": True}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
                                     {"Authorization": "Bearer "}])
@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/tools"), ("POST", "/v1/tools/get_topology"),
                                              ("GET", "/openapi.json"), ("POST", "/mcp")])
def test_everything_else_needs_the_token(client: TestClient, run_dir: Path, caplog: pytest.LogCaptureFixture,
                                         headers: dict[str, str], method: str, path: str) -> None:
    with caplog.at_level("WARNING", logger="opsbench.gateway"):
        resp = client.request(method, path, headers=headers, json={})
    assert resp.status_code == 401
    assert resp.json()["error"]["code"] == "unauthorized"
    assert resp.headers["www-authenticate"].startswith("Bearer")
    assert f"refused {method} {path}" in caplog.text
    assert TOKEN not in caplog.text
    assert trajectory(run_dir) == []  # not a tool call: nothing reached the dispatch


def test_revoked_token_is_refused_at_once(client: TestClient, run_dir: Path) -> None:
    assert client.get("/v1/tools", headers=AUTH).status_code == 200
    (run_dir / "secrets" / "agent_token").unlink()
    resp = client.get("/v1/tools", headers=AUTH)
    assert resp.status_code == 401 and "revoked" in resp.json()["error"]["message"]


def test_list_tools_of_the_profile(run_dir: Path) -> None:
    with client_for(run_dir, profile="observe-only", max_calls=50) as c:
        body = c.get("/v1/tools", headers=AUTH).json()
    assert body["profile"] == "observe-only"
    assert body["budget"] == {"max_calls": 50, "calls": 0, "deadline": None}
    names = [t["name"] for t in body["tools"]]
    assert names == ["get_alerts", "query_metrics", "get_error_rate", "search_logs", "get_traces", "get_topology"]
    logs = next(t for t in body["tools"] if t["name"] == "search_logs")
    assert logs["family"] == "logs" and logs["category"] == "observe"
    assert logs["input_schema"]["properties"]["severity"]["anyOf"][0]["enum"][0] == "TRACE"
    assert logs["input_schema"]["additionalProperties"] is False


def test_call_ok_and_paged(client: TestClient) -> None:
    resp = client.post("/v1/tools/search_logs", headers=AUTH, json={"service": "checkout", "limit": 20})
    assert resp.status_code == 200
    body = resp.json()
    assert body["ok"] is True and body["result"]["total"] == 25 and body["next_page"]
    rest = client.post("/v1/tools/search_logs", headers=AUTH,
                       json={"service": "checkout", "limit": 20, "page": body["next_page"]}).json()
    assert rest["result"]["returned"] == 5 and rest["next_page"] is None


def test_empty_body_means_no_arguments(client: TestClient) -> None:
    resp = client.post("/v1/tools/get_topology", headers=AUTH)
    assert resp.status_code == 200 and resp.json()["result"]["entities"]


@pytest.mark.parametrize(("tool", "body", "status", "code", "field"), [
    ("search_logs", b"{not json", 422, "invalid", "body"),
    ("search_logs", b'{"limit": "ten"}', 422, "invalid", "limit"),
    ("search_logs", b'{"severity": "LOUD"}', 422, "invalid", "severity"),
    ("restart", b'{"service": "prometheus"}', 403, "denied", "service"),
    ("restart", b'{"service": "nothing"}', 404, "not_found", "service"),
    ("no_such_tool", b"{}", 404, "not_found", None),
    ("scale", b'{"service": "checkout", "replicas": 2}', 200, None, None),
])
def test_errors_have_one_shape(client: TestClient, run_dir: Path, tool: str, body: bytes, status: int,
                               code: str | None, field: str | None) -> None:
    resp = client.post(f"/v1/tools/{tool}", headers={**AUTH, "Content-Type": "application/json"}, content=body)
    assert resp.status_code == status, resp.text
    if code is None:
        assert resp.json()["ok"] is True
        return
    error = resp.json()["error"]
    assert resp.json()["ok"] is False and error["code"] == code and error.get("field") == field
    assert trajectory(run_dir)[-1]["tool"] == tool


def test_denied_outside_profile_and_budget(run_dir: Path) -> None:
    with client_for(run_dir, profile="metrics-only", max_calls=1) as c:
        resp = c.post("/v1/tools/search_logs", headers=AUTH, json={})
        assert (resp.status_code, resp.json()["error"]["code"]) == (403, "denied")
        resp = c.post("/v1/tools/get_topology", headers=AUTH, json={})
        assert (resp.status_code, resp.json()["error"]["code"]) == (429, "budget_exhausted")


def test_backend_down_is_backend_error(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path, "http://127.0.0.1:9")  # discard port: nothing listens
    with client_for(run_dir) as c:
        resp = c.post("/v1/tools/get_alerts", headers=AUTH, json={})
    assert resp.status_code == 502
    assert resp.json()["error"]["code"] == "backend_error" and "unreachable" in resp.json()["error"]["message"]
    assert trajectory(run_dir)[-1]["status"] == "error"


def test_openapi_is_generated_from_the_tools(run_dir: Path) -> None:
    with client_for(run_dir, profile="no-traces") as c:
        doc = c.get("/openapi.json", headers=AUTH).json()
    operations = {path: ops["post"] for path, ops in doc["paths"].items() if "post" in ops}
    # This run publishes no billing data, no cost section and no workspace, so those families are not offered either.
    skipped = ("traces", "billing", "cost", "changes", "browser", "terminal")
    expected = {f"/v1/tools/{t.name}" for t in TOOLS if t.family not in skipped}
    assert set(operations) == expected
    metrics = operations["/v1/tools/query_metrics"]
    schema = metrics["requestBody"]["content"]["application/json"]["schema"]
    assert schema == next(t for t in TOOLS if t.name == "query_metrics").input_schema()
    assert {"200", "401", "403", "404", "422", "429", "501", "502"} <= set(metrics["responses"])
    assert metrics["security"] == [{"HTTPBearer": []}]
    assert "/v1/health" in doc["paths"]


def test_masked_evidence_families_are_neither_listed_nor_callable(run_dir: Path) -> None:
    # A scenario variant with traces and logs off (e.g. shop-redis-out-of-memory-no-logs).
    with client_for(run_dir, hidden_families=("traces", "logs")) as c:
        names = [t["name"] for t in c.get("/v1/tools", headers=AUTH).json()["tools"]]
        assert "get_traces" not in names and "search_logs" not in names and "query_metrics" in names
        resp = c.post("/v1/tools/get_traces", headers=AUTH, json={})
        assert (resp.status_code, resp.json()["error"]["code"]) == (403, "denied")
