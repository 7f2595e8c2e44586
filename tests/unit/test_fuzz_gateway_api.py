"""Schemathesis over the tool gateway's OpenAPI document (issue 11, item 3).

The gateway is the real ASGI app (REST, auth, dispatch, tools) on a run directory like a deployed shop's, with the
fake Prometheus/Alertmanager and the fake container control of the gateway tests behind it. Schemathesis generates
requests for every operation of the document (valid and invalid bodies) and checks: no 5xx from our own code, status
codes and content types the document declares, bodies that match the declared response schemas; our own check adds
that every refusal has the gateway's one error shape, a known code and, for an invalid argument, the field it names.

A 502 `backend_error` is the gateway's correct answer when a backend fails (not a crash of ours), but with the fakes
behind nothing fails, so any 5xx here is a bug.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from fuzzing import cases
from gateway_fixtures import TOKEN, FakeObservability, make_gateway, make_run_dir
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis import checks as st_checks

from orchestrator.gateway.errors import HTTP_STATUS
from orchestrator.gateway.rest import create_app

AUTH = {"Authorization": f"Bearer {TOKEN}"}
PER_OPERATION = cases("OPSBENCH_SCHEMATHESIS_CASES", 50)  # per operation and mode
COUNT = {"cases": 0, "ok": 0, "refused": 0}


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[TestClient, Any]]:
    """(client of the running app, its OpenAPI document loaded by schemathesis)."""
    obs = FakeObservability()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = make_run_dir(Path(tmp), obs.url)
        with TestClient(create_app(make_gateway(run_dir))) as client:  # runs the lifespan (MCP session manager)
            doc = client.get("/openapi.json", headers=AUTH).json()
            yield client, schemathesis.openapi.from_dict(doc)
    obs.close()


def send(client: TestClient, case: Any) -> Any:
    """Send a generated case through the in-process client, with the run's token."""
    kw = case.as_transport_kwargs(base_url="http://testserver")
    headers = {k: v for k, v in kw["headers"].items() if k.lower() != "authorization"} | AUTH
    body: dict[str, Any] = {"json": kw["json"]} if "json" in kw else {"content": kw.get("data")}
    return client.request(kw["method"], kw["url"], headers=headers, params=kw.get("params") or None,
                          cookies=kw.get("cookies") or None, **body)


def assert_one_error_shape(status: int, body: Any) -> None:
    """A refusal: {"ok": false, "error": {"code", "message"[, "field"]}} with the status its code maps to."""
    assert isinstance(body, dict) and body.get("ok") is False, body
    error = body["error"]
    assert set(error) <= {"code", "message", "field"} and error["message"].strip(), body
    if status == 401:
        assert error["code"] == "unauthorized", body
        return
    assert HTTP_STATUS[error["code"]] == status, (status, body)
    if error["code"] == "invalid":
        assert error.get("field"), body  # names the offending argument (or `body`/`arguments`)


CHECKS = [st_checks.not_a_server_error, st_checks.status_code_conformance, st_checks.content_type_conformance,
          st_checks.response_schema_conformance]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_gateway_api_never_crashes_and_refuses_precisely(gateway: tuple[TestClient, Any],
                                                         mode: GenerationMode) -> None:
    client, schema = gateway
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10  # health, tool list and one operation per tool of the full profile
    if mode is GenerationMode.NEGATIVE:  # the GETs take no input at all: there is nothing to get wrong
        operations = [op for op in operations if op.method.upper() == "POST"]

    for operation in operations:
        @settings(max_examples=PER_OPERATION, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy(generation_mode=mode))
        def one(case: Any) -> None:
            response = send(client, case)
            case.validate_response(response, checks=CHECKS)
            COUNT["cases"] += 1
            body = response.json()
            if response.status_code == 200:
                COUNT["ok"] += 1
                assert body.get("ok", True) is True
            else:
                COUNT["refused"] += 1
                assert_one_error_shape(response.status_code, body)

        one()


def test_counted() -> None:
    """Runs after the generated tests (file order): prints and checks how many requests were made."""
    if COUNT["cases"] == 0:
        pytest.skip("the schemathesis tests were not selected in this session (e.g. -k), nothing to count")
    assert COUNT["ok"] > 0 and COUNT["refused"] > 0, COUNT
    print(f"gateway schemathesis: {COUNT}")


@pytest.mark.parametrize(("tool", "body", "field"), [
    ("search_logs", b'{"until": 6.634457319734977e+255}', "until"),  # found by schemathesis: was a 502 from DuckDB
    ("search_logs", b'{"since": Infinity}', "since"),  # Python's JSON decoder accepts Infinity
    ("get_traces", b'{"until": "99999999999999999999d"}', "until"),
    ("query_metrics", b'{"query": "up", "start": "1h", "step": 1e300}', "step"),
])
def test_out_of_range_times_are_invalid_not_backend_errors(gateway: tuple[TestClient, Any], tool: str, body: bytes,
                                                           field: str) -> None:
    client, _ = gateway
    resp = client.post(f"/v1/tools/{tool}", headers={**AUTH, "Content-Type": "application/json"}, content=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["field"] == field
