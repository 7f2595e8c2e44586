"""The recorded Gemini CLI replay trial (tests/data/runs/gemini-cli-replay, from `make test-agents`) registered in a
private run index, as the lifecycle records a trial, for the run page, report and export tests; and a command
agent's trial without counted model calls (the heuristic agent's files, the same records less the proxy's)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from orchestrator import paths, store

RECORDED = paths.PROJECT_ROOT / "tests" / "data" / "runs" / "gemini-cli-replay"


def register(run_dir: Path, run_id: str | None = None, agent: str | None = None,
             evaluations: dict[str, Any] | None = None) -> str:
    """Index the trial recorded in `run_dir` (its run.json) as a finished run; its id."""
    state = json.loads((run_dir / "run.json").read_text())
    run_id = run_id or str(state["id"])
    if run_id != state["id"]:
        state["id"] = run_id
        (run_dir / "run.json").write_text(json.dumps(state))
    results = state.get("results") or {}
    evaluations = evaluations if evaluations is not None else results["evaluate"]["stats"]["evaluations"]
    store.create_run({"id": run_id, "scenario_id": state["scenario_id"], "spec_version": 1, "spec_digest": "d" * 16,
                      "status": "running", "pid": 1, "run_dir": str(run_dir), "agent": agent or state["agent"],
                      "scenario_meta": {"name": "Cart down", "domain": "SRE", "class": "process-failure",
                                        "complexity": "Easy", "observability": {"metrics": True, "traces": True,
                                                                                "logs": True}},
                      "purpose": "agent", "mode": state.get("mode", "live"), "snapshot_id": state.get("snapshot_id")})
    agent_result = {k: v for k, v in (results.get("agent") or {}).items() if k != "isolation"}
    summary = {"run_id": run_id, "scenario": state["scenario_id"], "status": "completed", "reason": "",
               "agent": agent_result, "evaluations": evaluations, "cleanup": "done", "cleanup_problems": [],
               "recovered": True, "phases": {}, "run_dir": str(run_dir)}
    store.update_run(run_id, status="completed", outcome=json.dumps(summary, sort_keys=True))
    return run_id


def preset_trial(tmp: Path, run_id: str | None = None) -> tuple[str, Path]:
    """A copy of the recorded Gemini CLI trial, indexed; (run id, run dir)."""
    run_dir = tmp / (run_id or "gemini-trial")
    shutil.copytree(RECORDED, run_dir)
    return register(run_dir, run_id), run_dir


def command_trial(tmp: Path, run_id: str = "cmd-trial") -> tuple[str, Path]:
    """The same trial as a command agent's: no model calls counted, no preset record, a wrong answer."""
    run_dir = tmp / run_id
    shutil.copytree(RECORDED, run_dir)
    (run_dir / "gateway" / "model-calls.jsonl").unlink()
    (run_dir / "agent" / "preset.json").unlink()
    output = json.loads((run_dir / "artifacts" / "agent-output.json").read_text())
    output["entities"] = [{"id": "frontend", "root_cause": True}]
    (run_dir / "artifacts" / "agent-output.json").write_text(json.dumps(output))
    state = json.loads((run_dir / "run.json").read_text())
    evaluations = state["results"]["evaluate"]["stats"]["evaluations"]
    evaluations["diagnosis"].update(fl_pass=0.0, fl_precision=0.0, fl_recall=0.0, predicted=["frontend"])
    for key in ("model_calls", "input_tokens", "output_tokens", "cached_tokens", "cost_usd", "model_seconds"):
        evaluations["process"][key] = None
    state["agent"] = "python3 -m orchestrator.agents.heuristic"
    (run_dir / "run.json").write_text(json.dumps(state))
    return register(run_dir, run_id, evaluations=evaluations), run_dir
