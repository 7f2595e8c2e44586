"""DevOps scenarios end to end in a real workspace container (issue 21).

- verify-scenarios on scenarios of several families sharing one workspace: each breaks as its spec says, the
  untouched incident fails its evaluation, the reference solution passes it, and removal gives back the very commit
  the deploy made;
- whole runs through the lifecycle (deploy, inject, gateway, sandboxed agent, collect, evaluate, revoke, remove,
  teardown): the scripted build fixer repairs a broken build through `exec` and passes; the LLM agent, driven by a
  scripted model, fixes one through `exec` too; a model that cheats (neuters the Makefile's gate, deletes the tests)
  fails, because the evaluator rebuilds a fresh copy with the protected files put back;
- a probing agent (tests/e2e/agents/prober.py) tries its sandbox's ways out and, through the terminal tools, the
  workspace's: the host's network, files outside /workspace (by path, by `..`, through a symlink), the benchmark's
  own files, root; every one refused, and the baseline agent it hands over to still fixes the build.
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

from orchestrator import paths

from .conftest import assert_no_leftovers, run_json
from .probing import assert_refused_everything, prober

pytestmark = pytest.mark.e2e

VERIFIED = ["devops-build-dateutil-missing", "devops-build-goroot"]


def test_verify_proves_untouched_fails_and_reference_passes(home: Path) -> None:
    rc, result = run_json(home, "verify-scenarios", "--repeats", "1", *VERIFIED, timeout=1500)
    rows = {r["scenario"]: r for r in result["scenarios"]}
    assert rc == 0 and set(rows) == set(VERIFIED), result
    for sid, row in rows.items():
        assert row["passed"] and row["leftovers"] == [], (sid, row["failure"])
    run_dir = next(p for p in (home / "runs").iterdir() if (p / "run.json").is_file())
    state = json.loads((run_dir / "run.json").read_text())
    untouched = state["results"]["evaluate_untouched"]["stats"]["evaluations"]["workspace"]
    reference = state["results"]["evaluate_reference"]["stats"]["evaluations"]["workspace"]
    assert untouched["workspace_pass"] == 0 and reference["workspace_pass"] == 1, (untouched, reference)
    assert reference["stages"][0]["check"]["passed"] >= reference["stages"][0]["expected_tests"]
    assert_no_leftovers(run_dir)


def _workspace_scores(result: dict[str, Any]) -> dict[str, Any]:
    scores: dict[str, Any] = result["evaluations"]["workspace"]
    return scores


def _tools_called(run_dir: Path) -> list[str]:
    lines = (run_dir / "artifacts" / "trajectory.jsonl").read_text().splitlines()
    return [json.loads(line)["tool"] for line in lines]


def test_the_scripted_build_fixer_repairs_a_broken_build(home: Path) -> None:
    rc, result = run_json(home, "run", "devops-build-python-requires", timeout=900)
    assert rc == 0 and result["status"] == "completed", (result.get("reason"), result.get("phases"))
    scores = _workspace_scores(result)
    assert scores["workspace_pass"] == 1, scores["stages"]
    assert scores["report"] == "scored"  # its fix report matched the schema
    run_dir = Path(result["run_dir"])
    output = json.loads((run_dir / "artifacts" / "agent-output.json").read_text())
    assert output["changed_files"] == ["invoicer/pyproject.toml"], output
    assert "exec" in _tools_called(run_dir) and "write_file" in _tools_called(run_dir)
    assert result["cleanup"] == "done" and result["recovered"], result
    assert_no_leftovers(run_dir)


class ScriptedModel:
    """An OpenAI-compatible chat endpoint that answers with a fixed list of tool calls."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.requests: list[dict[str, Any]] = []
        script = [{"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 5}} for i, (name, args) in enumerate(calls)]
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                model.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                reply = json.dumps(script[min(len(model.requests), len(script)) - 1]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


REPORT = {"schema": "opsbench/fix/v1", "summary": "python-dateutil was no longer declared; declared it again",
          "changed_files": ["invoicer/pyproject.toml"], "commands": ["cd invoicer && make -s check"]}
HONEST: list[tuple[str, dict[str, Any]]] = [
    ("exec", {"command": "make -s check 2>&1 | tail -5", "cwd": "invoicer", "timeout": 300}),
    ("exec", {"command": "sed -i 's/^dependencies = \\[\\]/dependencies = [\"python-dateutil>=2.8\"]/' "
                         "pyproject.toml && make -s check | tail -2", "cwd": "invoicer", "timeout": 300}),
    ("submit", {"output": REPORT}),
]
CHEAT: list[tuple[str, dict[str, Any]]] = [
    ("exec", {"command": "printf 'check:\\n\\t@echo all good\\n' > Makefile && rm -rf tests && make -s check",
              "cwd": "invoicer", "timeout": 60}),
    ("submit", {"output": {**REPORT, "summary": "make check passes"}}),
]


@pytest.fixture(params=["honest", "cheat"])
def scripted_model(request: pytest.FixtureRequest) -> Iterator[tuple[str, ScriptedModel]]:
    model = ScriptedModel(HONEST if request.param == "honest" else CHEAT)
    yield request.param, model
    model.server.shutdown()


def test_the_llm_agent_works_through_exec_and_cannot_pass_by_cheating(
        home: Path, scripted_model: tuple[str, ScriptedModel]) -> None:
    kind, model = scripted_model
    agent = f"{shlex.quote(sys.executable)} -m orchestrator.agents.llm"
    rc, result = run_json(home, "run", "devops-build-dateutil-missing", "--agent", agent, timeout=900,
                          OPSBENCH_LLM_URL=model.url, OPSBENCH_LLM_MODEL="scripted",
                          OPSBENCH_AGENT_ALLOW=f"127.0.0.1:{model.server.server_port}")
    assert rc == 0 and result["status"] == "completed", (result.get("reason"), result.get("phases"))
    run_dir = Path(result["run_dir"])
    assert _tools_called(run_dir).count("exec") == (2 if kind == "honest" else 1)
    system = model.requests[0]["messages"][0]["content"]
    assert "terminal in a workspace container" in system
    offered = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert {"exec", "read_file", "write_file", "list_files"} <= offered and "get_alerts" not in offered
    scores = _workspace_scores(result)
    stage = scores["stages"][0]
    if kind == "honest":
        assert scores["workspace_pass"] == 1, stage
    else:
        # Its own `make check` said "all good"; the fresh copy with the gate and the tests put back fails.
        assert scores["workspace_pass"] == 0 and stage["reason"].startswith("make check failed"), stage
    assert result["cleanup"] == "done" and result["recovered"], result
    assert_no_leftovers(run_dir)


TERMINAL_CELLS = {"terminal: connect the host at 127.0.0.1", "terminal: read_file /etc/shadow",
                  "terminal: read_file ../../etc/passwd", "terminal: write_file outside /workspace",
                  "terminal: read through a symlink out of /workspace", "terminal: find the benchmark's files",
                  "terminal: root or capabilities in the workspace"}


def test_a_probing_agent_cannot_leave_the_workspace_or_its_sandbox(home: Path) -> None:
    with prober(home, then="orchestrator.agents.devops", container_port=1) as (agent, env):
        rc, result = run_json(home, "run", "devops-build-goroot", "--agent", agent, timeout=900,
                              PYTHONPATH=str(paths.PROJECT_ROOT), **env)
    assert rc == 0 and result["status"] == "completed", (result.get("reason"), result.get("phases"))
    run_dir = Path(result["run_dir"])
    report = assert_refused_everything(run_dir, result, {"read the workspace tree on the host",
                                                          "write the workspace tree on the host"})
    cells = {k.rsplit(":", 1)[0] if k.startswith("terminal: connect") else k for k in report["cells"]}
    assert cells >= TERMINAL_CELLS, sorted(TERMINAL_CELLS - cells)
    # After the probe the baseline agent ran as usual and fixed the build.
    assert _workspace_scores(result)["workspace_pass"] == 1, _workspace_scores(result)["stages"]
    assert_no_leftovers(run_dir)
