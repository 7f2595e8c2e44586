"""Synthetic recorded runs for the results, leaderboard and report tests: two agents, three
scenarios (Easy/traces on, Medium/traces off, Hard/traces on) and every kind of trial outcome,
written through the store API exactly as the lifecycle writes them (create_run, an agent
phase, update_run with the run's summary as outcome)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from unittest import mock

from orchestrator import store

AGENT_A = "python3 -m orchestrator.agents.probe"
AGENT_B = "/opt/agents/llm-agent --model gpt-4o"
LABEL_A, LABEL_B = "orchestrator.agents.probe", "llm-agent (gpt-4o)"
T0 = 1_700_000_000.0


def _meta(name: str, cls: str, level: str, traces: bool) -> dict[str, Any]:
    return {"name": name, "domain": "SRE", "class": cls, "complexity": level,
            "observability": {"metrics": True, "traces": traces, "logs": True}}


SCENARIOS = {
    "s-easy": _meta("Easy one", "process-failure", "Easy", True),
    "s-med": _meta("Medium one", "network", "Medium", False),
    "s-hard": _meta("Hard one", "resource", "Hard", True),
}
SCORES = {
    "correct": {"status": "scored", "fl_pass": 1.0, "fl_precision": 1.0, "fl_recall": 1.0,
                "ntam_fl": 1.0, "ntam_fpc": 0.8, "predicted": ["web"]},
    "wrong": {"status": "scored", "fl_pass": 0.0, "fl_precision": 0.0, "fl_recall": 0.0,
              "ntam_fl": 0.3, "ntam_fpc": 0.2, "predicted": ["gateway"]},
    "no_submission": {"status": "no_submission", "fl_pass": 0.0, "fl_precision": 0.0, "fl_recall": 0.0,
                      "ntam_fl": 0.0, "ntam_fpc": 0.0, "reason": "the agent wrote no output file"},
    "malformed": {"status": "malformed", "fl_pass": 0.0, "fl_precision": 0.0, "fl_recall": 0.0,
                  "ntam_fl": 0.0, "ntam_fpc": 0.0, "reason": "output is not JSON"},
}
# (agent command, scenario, outcome or a non-completed run status, agent seconds)
PLAN: list[tuple[str, str, str, float]] = [
    (AGENT_A, "s-easy", "correct", 30.0),
    (AGENT_A, "s-easy", "correct", 50.0),
    (AGENT_A, "s-easy", "wrong", 60.0),
    (AGENT_A, "s-easy", "no_submission", 120.0),
    (AGENT_A, "s-med", "correct", 40.0),
    (AGENT_A, "s-med", "malformed", 20.0),
    (AGENT_A, "s-med", "wrong", 70.0),
    (AGENT_A, "s-hard", "wrong", 80.0),
    (AGENT_A, "s-hard", "wrong", 90.0),
    (AGENT_A, "s-hard", "invalid", 0.0),  # fault did not manifest: excluded
    (AGENT_A, "s-hard", "error", 0.0),  # deploy failed: excluded
    (AGENT_B, "s-easy", "correct", 10.0),
    (AGENT_B, "s-easy", "correct", 20.0),
    (AGENT_B, "s-med", "wrong", 100.0),
    (AGENT_B, "s-med", "no_submission", 120.0),
]


class Clock:
    """A settable time.time()."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def record(run_id: str, agent: str, scenario: str, outcome: str, elapsed: float, clock: Clock,
           run_dir: Path | None = None, meta: dict[str, Any] | None = None,
           write_output_after: float | None = None, purpose: str = "agent", mode: str = "live",
           snapshot_id: str | None = None) -> None:
    """One run as the lifecycle records it. A run status (invalid, error) instead of an outcome
    records a run that never reached evaluation. With ``write_output_after``, the agent writes
    run_dir/agent/output.json that many seconds into its phase. ``purpose``: store.PURPOSES; ``mode``: store.MODES."""
    completed = outcome in SCORES
    run_dir = run_dir or Path(f"/nonexistent/runs/{run_id}")
    with mock.patch.object(store.time, "time", clock):
        store.create_run({"id": run_id, "scenario_id": scenario, "spec_version": 1, "spec_digest": "d" * 16,
                          "status": "running", "pid": 1, "run_dir": str(run_dir), "agent": agent,
                          "scenario_meta": meta if meta is not None else SCENARIOS.get(scenario),
                          "purpose": purpose, "mode": mode, "snapshot_id": snapshot_id})
        evaluations: dict[str, Any] = {}
        agent_result: dict[str, Any] = {}
        if completed:
            seq = store.start_phase(run_id, "agent")
            if write_output_after is not None:
                out = run_dir / "agent" / "output.json"
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text("{}")
                stamp = clock.now + write_output_after
                os.utime(out, (stamp, stamp))
            clock.now += elapsed
            store.end_phase(run_id, seq, "exited")
            agent_result = {"status": "exited", "exit_code": 0, "elapsed": elapsed, "detail": ""}
            evaluations = {"diagnosis": dict(SCORES[outcome])}
        clock.now += 100.0
        summary = {"run_id": run_id, "scenario": scenario, "status": "completed" if completed else outcome,
                   "reason": "", "agent": agent_result, "evaluations": evaluations, "cleanup": "done",
                   "cleanup_problems": [], "recovered": True, "phases": {}, "run_dir": str(run_dir)}
        store.update_run(run_id, status=summary["status"], outcome=json.dumps(summary, sort_keys=True))


def populate(clock: Clock | None = None) -> list[str]:
    """Record every run of PLAN; returns the run ids in order."""
    clock = clock or Clock()
    ids = []
    for i, (agent, scenario, outcome, elapsed) in enumerate(PLAN, 1):
        run_id = f"r{i:02d}"
        record(run_id, agent, scenario, outcome, elapsed, clock)
        ids.append(run_id)
    return ids


NOOP = "true"
"""`opsbench bench`'s no-op agent."""


def populate_harness(clock: Clock | None = None, trials: int = 12) -> list[str]:
    """What `opsbench bench` and `opsbench verify-scenarios` leave in the index: `trials` no-op agent trials
    (no submission) tagged bench, the bench's host and a verify-scenarios environment. Returns the trial ids."""
    clock = clock or Clock(T0 + 10_000)
    scenarios = list(SCENARIOS)
    ids = []
    for i in range(trials):
        run_id = f"b{i:02d}"
        record(run_id, NOOP, scenarios[i % len(scenarios)], "no_submission", 1.0, clock, purpose="bench")
        ids.append(run_id)
    record("bhost", NOOP, "s-easy", "hosted", 0.0, clock, purpose="bench")
    record("venv", "python3 -m orchestrator.agents.heuristic", "s-easy", "verified", 0.0, clock, purpose="verify")
    return ids


def populate_wide(scenarios: int = 40, agents: int = 6, trials: int = 1,
                  clock: Clock | None = None) -> tuple[list[str], list[str]]:
    """Enough scenarios with long ids and agents with long names to make the report's tables wide: every
    agent gets `trials` trials of every scenario (outcomes and times vary). Returns (scenario ids, agent labels)."""
    clock = clock or Clock()
    levels = ("Easy", "Medium", "Hard")
    ids = [f"shop-checkout-payment-gateway-latency-under-load-{i:02d}" for i in range(scenarios)]
    commands = [f"python3 -m team_{j}.incident_response_agent --model provider-{j}/model-with-a-long-name-v{j}"
                for j in range(agents)]
    outcomes = ("correct", "wrong", "no_submission", "correct", "malformed")
    n = 0
    for i, sid in enumerate(ids):
        meta = _meta(f"Scenario {i}", "network", levels[i % 3], i % 2 == 0)
        for j, command in enumerate(commands):
            for t in range(trials):
                n += 1
                record(f"w{n:04d}", command, sid, outcomes[(i + j + t) % len(outcomes)], 20.0 + 7 * ((i * j + t) % 9),
                       clock, meta=meta)
    labels = [f"team_{j}.incident_response_agent (provider-{j}/model-with-a-long-name-v{j})" for j in range(agents)]
    return ids, labels
