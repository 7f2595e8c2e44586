"""Baseline agents in real runs: the LLM agent against a scripted chat-completions server, and the
heuristic agent taking its tools over MCP.

The scripted model is a test double for the endpoint, not for the environment: its tool calls go
through the run's real gateway to the real environment, and the test checks that the live
observations came back to it. What it submits is fixed (the test knows the scenario), so the
score proves the plumbing (submit, schema check, collection, scoring, token accounting), not skill.
"""

from __future__ import annotations

import json
import shlex
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .conftest import assert_no_leftovers, run_json

pytestmark = pytest.mark.e2e

ANSWER = {"schema": "opsbench/diagnosis/v1", "incident": True,
          "entities": [{"id": "web", "root_cause": True, "layer": "runtime", "fault_type": "process_down"},
                       {"id": "gateway", "root_cause": False}],
          "propagations": [{"source": "web", "target": "gateway"}]}
USAGE = {"prompt_tokens": 300, "completion_tokens": 20}


def _call(i: int, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": f"chatcmpl-{i}", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None,
                "tool_calls": [{"id": f"call{i}", "type": "function",
                                "function": {"name": name, "arguments": json.dumps(arguments)}}]}}],
            "usage": USAGE}


SCRIPT = [
    _call(1, "get_topology", {}),
    _call(2, "search_logs", {"service": "gateway", "limit": 20}),  # loopweb keeps no logs: an error comes back
    _call(3, "get_topology", {}),  # a repeat: the agent answers it without calling the gateway
    _call(4, "submit", {"output": ANSWER}),
]


class ScriptedModel:
    """An OpenAI-compatible `/v1/chat/completions` endpoint that plays SCRIPT turn by turn."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                model.requests.append(body)
                reply = json.dumps(SCRIPT[min(len(model.requests), len(SCRIPT)) - 1]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def scripted_model() -> Iterator[ScriptedModel]:
    model = ScriptedModel()
    yield model
    model.server.shutdown()


def _trajectory(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "artifacts" / "trajectory.jsonl").read_text().splitlines()]


def test_llm_agent_runs_a_live_scenario_against_a_scripted_model(home: Path, scripted_model: ScriptedModel) -> None:
    agent = f"{shlex.quote(sys.executable)} -m orchestrator.agents.llm"
    # The model listens on the host's loopback: the agent's network lets it through only when allowed.
    rc, result = run_json(home, "run", "loopweb-web-down", "--agent", agent, timeout=400,
                          OPSBENCH_LLM_URL=scripted_model.url, OPSBENCH_LLM_MODEL="scripted",
                          OPSBENCH_AGENT_ALLOW=f"127.0.0.1:{scripted_model.server.server_port}")
    assert rc == 0, (result.get("reason"), result.get("phases"))
    run_dir = Path(result["run_dir"])

    # The model saw the live environment: the topology the gateway served names the real entities.
    requests = scripted_model.requests
    assert len(requests) == 4 and all(r["temperature"] == 0 and r["model"] == "scripted" for r in requests)
    observations = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert '"web"' in observations[0]["content"] and '"gateway"' in observations[0]["content"]
    assert "records no logs" in requests[2]["messages"][-1]["content"]
    assert "already made this exact call" in requests[3]["messages"][-1]["content"]
    offered = {f["function"]["name"] for f in requests[0]["tools"]}
    assert {"get_topology", "search_logs", "submit", "read_observation"} <= offered

    # Only two calls reached the gateway (the repeat was answered by the agent); both recorded.
    assert [(r["tool"], r["status"]) for r in _trajectory(run_dir)] == [("get_topology", "ok"),
                                                                         ("search_logs", "error")]
    output = json.loads((run_dir / "artifacts" / "agent-output.json").read_text())
    assert output["usage"] == {"input_tokens": 1200, "output_tokens": 80, "model": "scripted"}

    diagnosis, process = result["evaluations"]["diagnosis"], result["evaluations"]["process"]
    assert diagnosis["status"] == "scored" and diagnosis["fl_pass"] == 1.0
    assert (process["calls"], process["submitted"]) == (2, 1.0)
    assert (process["input_tokens"], process["output_tokens"]) == (1200, 80)
    assert result["cleanup"] == "done"
    assert_no_leftovers(run_dir)
    network = result["agent"]["isolation"]["network"]
    assert network["mode"] == "egress" and scripted_model.server.server_port in network["host_ports"]


def test_heuristic_agent_diagnoses_a_shop_incident_over_mcp(home: Path) -> None:
    agent = f"{shlex.quote(sys.executable)} -m orchestrator.agents.heuristic --mcp"
    rc, result = run_json(home, "run", "shop-cart-down", "--agent", agent, timeout=600)
    assert rc == 0, (result.get("reason"), result.get("phases"))
    run_dir = Path(result["run_dir"])
    records = _trajectory(run_dir)
    # The alerts, the topology, then the browser's view (nothing journeyed in this scenario: an empty answer).
    assert [r["tool"] for r in records] == ["get_alerts", "get_topology", "get_cuj_report"]
    assert {r["transport"] for r in records} == {"mcp"} and {r["status"] for r in records} == {"ok"}
    assert result["evaluations"]["diagnosis"]["fl_pass"] == 1.0
    assert result["cleanup"] == "done" and result["recovered"] is True
    assert_no_leftovers(run_dir)
