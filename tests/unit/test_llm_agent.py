"""The LLM baseline agent end to end against a scripted OpenAI-compatible server and a fake gateway.

Both servers speak the real protocols over HTTP (chat completions with tool calls; the
gateway's REST contract), so this runs the agent's own code path: tool listing, the ReAct
loop, argument repair, repeated-call rejection, observations behind keys, schema-checked submit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from orchestrator import paths
from orchestrator.agents.llm import repair_json

TOKEN = "tok-123"
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
ANSWER = {"schema": "opsbench/diagnosis/v1",
          "entities": [{"id": "cart-1", "root_cause": True, "layer": "runtime", "fault_type": "process_down"}],
          "propagations": [{"source": "cart-1", "target": "frontend"}]}


def tool_call(i: int, name: str, arguments: str) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}]}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10}}


SCRIPT = [
    tool_call(1, "get_alerts", "{}"),
    tool_call(2, "search_logs", "```json\n{'service': 'frontend', 'limit': 5,}\n```"),  # repaired
    tool_call(3, "get_alerts", "{}"),  # identical: rejected, never reaches the gateway
    tool_call(4, "get_traces", '{"service": "cart"}'),  # long: kept behind a key
    tool_call(5, "read_observation", '{"key": "obs1", "offset": 2000}'),
    tool_call(6, "submit", json.dumps({"output": {"entities": [{"root_cause": True}]}})),  # invalid
    tool_call(7, "submit", json.dumps({"output": ANSWER})),
]


class Servers:
    def __init__(self) -> None:
        self.script = SCRIPT
        self.llm_requests: list[dict[str, Any]] = []
        self.gateway_calls: list[tuple[str, dict[str, Any]]] = []
        self.tools = ["get_alerts", "search_logs", "get_traces", "get_topology"]


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


@pytest.fixture
def servers() -> Iterator[tuple[Servers, str, str]]:
    state = Servers()

    class LLM(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert self.path == "/v1/chat/completions"
            state.llm_requests.append(body)
            reply = json.dumps(state.script[min(len(state.llm_requests), len(state.script)) - 1]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(reply)

    class Gateway(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def reply(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self.reply(401, {"ok": False})
            names = state.tools
            return self.reply(200, {"tools": [{"name": n, "description": n, "input_schema": {"type": "object"}}
                                              for n in names]})

        def do_POST(self) -> None:
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self.reply(401, {"ok": False, "error": {"code": "denied", "message": "bad token"}})
            args = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
            name = self.path.rsplit("/", 1)[-1]
            state.gateway_calls.append((name, args))
            result: Any = {"get_alerts": [{"labels": {"alertname": "ServiceDown", "service": "cart"}}],
                           "get_traces": {"items": ["span-" + "x" * 60] * 100},
                           "exec": {"exit_code": 2, "stdout": "", "stderr": "ModuleNotFoundError: dateutil"},
                           "view_screenshot": {"journey": "checkout", "step": "add-to-cart", "mime_type": "image/png",
                                               "data": PNG_B64, "evidence_id": "screenshot:checkout:add-to-cart"},
                           }.get(name, {"items": []})
            return self.reply(200, {"ok": True, "result": result, "next_page": None})

    llm, llm_url = serve(LLM)
    gateway, gateway_url = serve(Gateway)
    try:
        yield state, llm_url + "/v1", gateway_url
    finally:
        llm.shutdown()
        gateway.shutdown()


def test_repair_json_fixes_the_usual_slips_only() -> None:
    assert repair_json("```json\n{'a': [1, 2,],}\n```") == {"a": [1, 2]}
    assert repair_json("") == {}
    with pytest.raises(ValueError):
        repair_json("look at the cart service")


def test_agent_investigates_and_submits_a_valid_diagnosis(servers: tuple[Servers, str, str], tmp_path: Path) -> None:
    state, llm_url, gateway_url = servers
    proc = run_agent(tmp_path, llm_url, gateway_url, model="scripted-1",
                     alerts=[{"labels": {"alertname": "ServiceDown", "service": "cart"}}],
                     OPSBENCH_TRAJECTORY=str(tmp_path / "trajectory.jsonl"))
    assert proc.returncode == 0, proc.stderr

    output = json.loads((tmp_path / "output.json").read_text())
    assert output["entities"] == ANSWER["entities"]
    assert output["usage"] == {"input_tokens": 700, "output_tokens": 70, "model": "scripted-1"}
    # Greedy decoding, the gateway's tools plus read_observation and submit offered every turn.
    assert all(r["temperature"] == 0 and r["model"] == "scripted-1" for r in state.llm_requests)
    offered = {t["function"]["name"] for t in state.llm_requests[0]["tools"]}
    assert offered == {"get_alerts", "search_logs", "get_traces", "get_topology", "read_observation", "submit"}
    # The repaired call reached the gateway; the repeated one did not.
    assert state.gateway_calls == [("get_alerts", {}), ("search_logs", {"service": "frontend", "limit": 5}),
                                   ("get_traces", {"service": "cart"})]
    tool_msgs = [m["content"] for m in state.llm_requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_msgs[2].startswith("rejected: you already made this exact call")
    assert "kept under key obs1" in tool_msgs[3] and len(tool_msgs[3]) < 2300
    assert tool_msgs[4].startswith("x" * 10) or "span-" in tool_msgs[4]
    assert tool_msgs[5].startswith("error: the output does not match its schema") and "id" in tool_msgs[5]
    records = [json.loads(line) for line in (tmp_path / "trajectory.jsonl").read_text().splitlines()]
    assert len(records) == 7 and all(r["tool"] == "llm" and r["input_tokens"] == 100 for r in records)


def run_agent(tmp_path: Path, llm_url: str, gateway_url: str, model: str = "scripted-vision",
              alerts: list[dict[str, Any]] | None = None, kind: str = "diagnose",
              **extra_env: str) -> subprocess.CompletedProcess[str]:
    """The agent as a command, with a manifest for one task of `kind` against these servers."""
    (tmp_path / "token").write_text(TOKEN)
    schema = {"diagnose": "diagnosis_output", "fix": "fix_output"}[kind]
    goal = {"diagnose": "Find the root cause of the errors.",
            "fix": "CI is red for /workspace/invoicer: make check fails. Fix it."}[kind]
    manifest = {"manifest_version": "opsbench/manifest/v1", "run": "r1",
                "tasks": [{"id": kind, "kind": kind, "goal": goal}],
                "alerts": alerts or [], "budget": {"wallClockSeconds": 60}, "token_file": str(tmp_path / "token"),
                "tools": {"url": gateway_url},
                "output": {"path": str(tmp_path / "output.json"),
                           "schemas": {kind: str(paths.SCHEMAS_DIR / f"{schema}.schema.json")}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    env = {**os.environ, "OPSBENCH_MANIFEST": str(tmp_path / "manifest.json"), "OPSBENCH_LLM_URL": llm_url,
           "OPSBENCH_LLM_MODEL": model, **extra_env}
    return subprocess.run([sys.executable, "-m", "orchestrator.agents.llm"], env=env, capture_output=True,
                          text=True, timeout=60, cwd=paths.PROJECT_ROOT, check=False)


@pytest.mark.parametrize("images", ["1", "0"])
def test_a_screenshot_reaches_the_model_as_image_url_content(servers: tuple[Servers, str, str], tmp_path: Path,
                                                             images: str) -> None:
    state, llm_url, gateway_url = servers
    state.script = [tool_call(1, "view_screenshot", '{"journey": "checkout", "step": "add-to-cart"}'),
                    tool_call(2, "submit", json.dumps({"output": ANSWER}))]
    proc = run_agent(tmp_path, llm_url, gateway_url, OPSBENCH_LLM_IMAGES=images)
    assert proc.returncode == 0, proc.stderr
    messages = state.llm_requests[1]["messages"]
    tool_msg = next(m for m in messages if m["role"] == "tool")
    assert PNG_B64 not in tool_msg["content"] and "screenshot:checkout:add-to-cart" in tool_msg["content"]
    after = messages[messages.index(tool_msg) + 1]
    assert after["role"] == "user"
    if images == "1":
        text, image = after["content"]
        assert text["type"] == "text" and "view_screenshot" in text["text"]
        assert image == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}
    else:
        assert isinstance(after["content"], str) and "takes no images" in after["content"]
        assert PNG_B64 not in json.dumps(messages)


def test_missing_endpoint_configuration_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSBENCH_LLM")}
    proc = subprocess.run([sys.executable, "-m", "orchestrator.agents.llm"], capture_output=True, text=True,
                          env={**env, "OPSBENCH_MANIFEST": str(tmp_path / "manifest.json")}, timeout=60,
                          cwd=paths.PROJECT_ROOT, check=False)
    assert proc.returncode == 2 and "OPSBENCH_LLM_URL" in proc.stderr


def test_a_devops_fix_task_gets_a_terminal_prompt_and_works_through_exec(servers: tuple[Servers, str, str],
                                                                         tmp_path: Path) -> None:
    state, llm_url, gateway_url = servers
    state.tools = ["exec", "read_file", "write_file", "list_files", "get_topology"]
    report = {"schema": "opsbench/fix/v1", "summary": "declared python-dateutil again",
              "changed_files": ["invoicer/pyproject.toml"], "commands": ["cd invoicer && make check"]}
    state.script = [tool_call(1, "exec", '{"command": "make -s check", "cwd": "invoicer", "timeout": 300}'),
                    tool_call(2, "write_file", '{"path": "invoicer/pyproject.toml", "content": "[project]"}'),
                    tool_call(3, "submit", json.dumps({"output": {**report, "entities": []}})),  # not a fix field
                    tool_call(4, "submit", json.dumps({"output": report}))]
    proc = run_agent(tmp_path, llm_url, gateway_url, kind="fix")
    assert proc.returncode == 0, proc.stderr
    system = state.llm_requests[0]["messages"][0]["content"]
    assert "terminal in a workspace container" in system and "on-call SRE" not in system
    assert "CI is red for /workspace/invoicer" in system and "Never weaken, skip or delete existing tests" in system
    assert state.gateway_calls == [("exec", {"command": "make -s check", "cwd": "invoicer", "timeout": 300}),
                                   ("write_file", {"path": "invoicer/pyproject.toml", "content": "[project]"})]
    tool_msgs = [m["content"] for m in state.llm_requests[-1]["messages"] if m["role"] == "tool"]
    assert "ModuleNotFoundError" in tool_msgs[0]
    assert tool_msgs[2].startswith("error: the output does not match its schema") and "entities" in tool_msgs[2]
    output = json.loads((tmp_path / "output.json").read_text())
    assert {k: output[k] for k in report} == report and output["usage"]["model"] == "scripted-vision"
