"""ATIF export (orchestrator/atif.py, `opsbench show RUN --atif`) of a recorded run: the trial directory of a real
Gemini CLI replay, recorded by `make test-agents` (tests/data/runs/gemini-cli-replay: run.json, the manifest, the
preset's record, the gateway's trajectory and answers, the model proxy's calls). Checked against the vendored
JSON Schema of harbor 0.25.0's ATIF models and their cross-field rules."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator import atif, paths, store
from orchestrator.cli import main

RECORDED = paths.PROJECT_ROOT / "tests" / "data" / "runs" / "gemini-cli-replay"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    copy = tmp_path / "trial"
    shutil.copytree(RECORDED, copy)
    return copy


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_preset_run_exports_model_turns_tool_calls_answers_and_tokens(run_dir: Path) -> None:
    doc = atif.build(run_dir)
    assert atif.problems(doc) == []
    models, tools = lines(run_dir / "gateway" / "model-calls.jsonl"), lines(run_dir / "gateway" / "trajectory.jsonl")
    preset = json.loads((run_dir / "agent" / "preset.json").read_text())
    assert doc["schema_version"] == "ATIF-v1.7" and doc["session_id"] == json.loads(
        (run_dir / "run.json").read_text())["id"]
    assert doc["agent"] == {**doc["agent"], "name": "gemini-cli", "version": "0.61.0", "model_name": "scripted-model"}
    user, *agent = doc["steps"]
    assert user["source"] == "user" and user["message"] == preset["prompt"]
    assert [s["llm_call_count"] for s in agent] == [1] * len(models)  # one agent step per counted model call
    assert [s["metrics"]["prompt_tokens"] for s in agent] == [m["input_tokens"] for m in models]
    assert [s["metrics"]["cached_tokens"] for s in agent] == [m["cached_tokens"] for m in models]
    assert [s["metrics"]["cost_usd"] for s in agent] == [m["cost_usd"] for m in models]
    # each step carries what the model asked for: the CLI's own shell (no observation: OpsBench does not see its
    # result), the MCP tool joined to the gateway's call and its answer, then the last text
    asked = [[c["function_name"] for c in s.get("tool_calls") or []] for s in agent]
    assert asked == [["run_shell_command"], ["mcp_opsbench_get_alerts"], ["run_shell_command"], []], asked
    probe, mcp, write, last = agent
    assert "gt-exit=$?" in probe["tool_calls"][0]["arguments"]["command"] and "observation" not in probe
    assert "answer.json" in write["tool_calls"][0]["arguments"]["command"] and last["message"] == "done"
    [call] = mcp["tool_calls"]
    assert call["extra"]["gateway_call"] == 1 and call["extra"]["status"] == "ok" == tools[0]["status"]
    [result] = mcp["observation"]["results"]
    assert result["source_call_id"] == call["tool_call_id"] and "ContainerNotRunning" in result["content"]
    assert json.loads(result["content"])["ok"] is True
    assert models[1]["ts"] < tools[0]["ts"] < models[2]["ts"]  # the second model call asked for it
    final = doc["final_metrics"]
    assert final["total_prompt_tokens"] == sum(m["input_tokens"] for m in models)
    assert final["total_cost_usd"] == pytest.approx(sum(m["cost_usd"] for m in models))
    assert final["total_steps"] == len(doc["steps"]) == 1 + len(models)
    ours = doc["extra"]["opsbench"]
    assert ours["mode"] == "replay" and ours["output"]["entities"][0]["id"] == "cart-1"


def test_model_calls_recorded_without_their_reply_still_carry_the_gateway_calls(run_dir: Path) -> None:
    calls = run_dir / "gateway" / "model-calls.jsonl"
    calls.write_text("".join(json.dumps({k: v for k, v in c.items() if k != "reply"}) + "\n" for c in lines(calls)))
    doc = atif.build(run_dir)
    assert atif.problems(doc) == []
    called = [(s["step_id"], c["tool_call_id"], c["function_name"]) for s in doc["steps"] for c in
              s.get("tool_calls") or []]
    assert called == [(3, "call-1", "get_alerts")] and all(s["message"] == "" for s in doc["steps"][1:])


def test_an_agent_without_model_calls_gets_one_step_per_tool_call(run_dir: Path) -> None:
    (run_dir / "gateway" / "model-calls.jsonl").unlink()
    (run_dir / "agent" / "preset.json").unlink()
    trajectory = run_dir / "gateway" / "trajectory.jsonl"
    [ok] = lines(trajectory)
    refused = {"ts": ok["ts"] + 1, "tool": "restart_service", "args": {"service": "cart"}, "status": "denied",
               "elapsed": 0.001, "transport": "rest", "result_bytes": 0, "result_sha256": "0" * 64,
               "error": {"code": "denied", "message": "control tools are not available in a replay"}}
    unkept = {**ok, "ts": ok["ts"] + 2, "result_sha256": "f" * 64, "result_bytes": 123}
    trajectory.write_text("\n".join(json.dumps(r) for r in (ok, refused, unkept)) + "\n")
    doc = atif.build(run_dir)
    assert atif.problems(doc) == []
    user, *agent = doc["steps"]
    assert "[diagnose]" in user["message"] and "ContainerNotRunning" in user["message"]  # from the manifest
    assert [s["llm_call_count"] for s in agent] == [0, 0, 0] and all("metrics" not in s for s in agent)
    contents = [s["observation"]["results"][0]["content"] for s in agent]
    assert "ContainerNotRunning" in contents[0]
    assert json.loads(contents[1])["error"]["code"] == "denied"
    assert contents[2].startswith("(answer not recorded: 123 bytes")
    assert "total_cost_usd" not in doc["final_metrics"]


def test_the_rules_beyond_the_schema_are_checked(run_dir: Path) -> None:
    doc = atif.build(run_dir)
    broken = json.loads(json.dumps(doc))
    broken["steps"][1]["step_id"] = 7
    broken["steps"][0]["metrics"] = {"prompt_tokens": 1}
    broken["steps"][2]["timestamp"] = "yesterday"
    found = " ".join(atif.problems(broken))
    for expected in ("expected 2 (sequential from 1), got 7", "steps[0].metrics: only applicable when source is "
                     "'agent'", "steps[2].timestamp: not ISO 8601"):
        assert expected in found, found
    assert atif.problems({"steps": []})  # the schema: agent, schema fields and at least one step
    (run_dir / "run.json").unlink()
    with pytest.raises(atif.AtifError, match="not a run directory"):
        atif.build(run_dir)


def test_show_atif_prints_the_export(run_dir: Path, home: Path) -> None:
    state = json.loads((run_dir / "run.json").read_text())
    store.create_run({"id": state["id"], "scenario_id": state["scenario_id"], "spec_version": 1, "spec_digest": "d",
                      "status": "completed", "pid": 1, "run_dir": str(run_dir), "mode": "replay"})
    done = CliRunner().invoke(main, ["show", state["id"], "--atif"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output) == atif.build(run_dir)
