"""Schemathesis over the agent API's OpenAPI document (issue 11, item 3), against the real HTTP server.

The document (orchestrator/schemas/agent_api.openapi.json, served at /openapi.json) is the contract a remote agent
codes against. Schemathesis generates valid and invalid requests for every operation in each of the API's three
phases (waiting for handover, ready, closed) and checks: no 5xx, only declared status codes and content types,
bodies matching the declared schemas; our own check adds that every refusal is {"ok": false, "error": <message>}.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fuzzing import cases
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis import checks as st_checks

from orchestrator.agent_api import AgentAPI, openapi_document

KEY = "agent-api-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
PER_OPERATION = cases("OPSBENCH_SCHEMATHESIS_CASES", 50)  # per operation, mode and phase
COUNT = {"cases": 0, "ok": 0, "refused": 0}
CHECKS = [st_checks.not_a_server_error, st_checks.status_code_conformance, st_checks.content_type_conformance,
          st_checks.response_schema_conformance]


def _serve(api: AgentAPI, phase: str, tmp_path: Path) -> None:
    if phase in ("ready", "closed"):
        api.ready({"run": "r1", "output": {"path": "/x"}}, "gw-token", tmp_path / "output.json")
    if phase == "closed":
        api.state.phase = "closed"  # what close() sets, with the server still answering


@pytest.mark.parametrize("phase", ["waiting", "ready", "closed"])
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_agent_api_never_crashes_and_refuses_precisely(tmp_path: Path, phase: str, mode: GenerationMode) -> None:
    schema = schemathesis.openapi.from_dict(openapi_document())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} == {"/v1/health", "/v1/manifest", "/v1/status", "/v1/output"}
    if mode is GenerationMode.NEGATIVE:  # the GETs take no input: there is nothing to get wrong
        operations = [op for op in operations if op.method.upper() != "GET"]
    with AgentAPI(KEY) as api:
        _serve(api, phase, tmp_path)
        for operation in operations:
            @settings(max_examples=PER_OPERATION, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode))
            def one(case: Any) -> None:
                headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
                case.headers = headers
                response = case.call(base_url=api.url, headers=AUTH, timeout=10)
                case.validate_response(response, checks=CHECKS)
                COUNT["cases"] += 1
                body = response.json()
                if response.status_code == 200:
                    COUNT["ok"] += 1
                else:
                    COUNT["refused"] += 1
                    assert body["ok"] is False and isinstance(body["error"], str) and body["error"], body

            one()


def _raw(url: str, request: bytes) -> tuple[int, dict[str, Any]]:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


@pytest.mark.parametrize(("length", "why"), [("-1", "not a non-negative integer"),
                                             ("ten", "not a non-negative integer"),
                                             (str(5 * 1024 * 1024), "over the")])
def test_bad_content_length_is_refused_at_once(tmp_path: Path, length: str, why: str) -> None:
    """Found by fuzzing: a negative Content-Length made the handler read until the client hung up (a stuck
    request thread); a non-number was reported as 'not JSON'. The socket timeout (10 s) guards against a hang."""
    with AgentAPI(KEY) as api:
        _serve(api, "ready", tmp_path)
        status, body = _raw(api.url, f"PUT /v1/output HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                                     f"Content-Length: {length}\r\n\r\n{{}}".encode())
    assert status == 400 and why in body["error"], body
    assert not (tmp_path / "output.json").exists()


def test_openapi_is_served_without_the_key() -> None:
    with AgentAPI(KEY) as api, socket.create_connection(("127.0.0.1", int(api.url.rsplit(":", 1)[1]))):
        status, body = _raw(api.url, b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and body["info"]["title"] == "OpsBench agent API"


def test_counted() -> None:
    """Runs after the generated tests (file order): prints and checks how many requests were made."""
    if COUNT["cases"] == 0:
        pytest.skip("the schemathesis tests were not selected in this session (e.g. -k), nothing to count")
    assert COUNT["ok"] > 0 and COUNT["refused"] > 0, COUNT
    print(f"agent API schemathesis: {COUNT}")
