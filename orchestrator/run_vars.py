"""What a run's steps get: a scenario spec turned into each step's extra vars, and the agent's manifest.

The one place that knows which step reads which part of a run's state (`step_extravars`), so a playbook run from
`make`, AWX or the orchestrator sees the same inputs. Nothing here changes the world or touches the store.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from orchestrator import paths
from orchestrator.argspecs import resolve_role_vars
from orchestrator.evaluation.outputs import SCHEMAS
from orchestrator.spec import Scenario

DEFAULT_AGENT = f"{sys.executable} -m orchestrator.agents.heuristic"
# The baseline agent when a run names none: by task kind (the heuristic SRE agent cannot assess), else by domain.
KIND_AGENTS = {"assess": f"{sys.executable} -m orchestrator.agents.ciso"}
DOMAIN_AGENTS = {"FinOps": f"{sys.executable} -m orchestrator.agents.finops",
                 "DevOps": f"{sys.executable} -m orchestrator.agents.devops"}
CHECK_PHASES = ("baseline", "manifestation", "recovery")
FROZEN_ROLE = "env_snapshot"
"""The environment role of a replay (trials.SNAPSHOT_ROLE): its incident was recorded after the start offset, so its
handover does not wait again."""


def default_agent(scn: Scenario) -> str:
    """The baseline agent for the scenario: what runs when none is named."""
    kinds = {t["kind"] for t in scn.data["tasks"]}
    by_kind = next((KIND_AGENTS[k] for k in sorted(kinds) if k in KIND_AGENTS), None)
    return by_kind or DOMAIN_AGENTS.get(scn.data["metadata"]["domain"], DEFAULT_AGENT)


def new_run_id() -> str:
    """Sortable by start time, unique across concurrent runs."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def run_state(scn: Scenario, run_id: str, run_dir: Path, *, agent: str | None, purpose: str, keep: bool,
              tool_profile: str, common: dict[str, Any], environment: dict[str, Any]) -> dict[str, Any]:
    """A new run's state (run.json): the scenario's step inputs on `environment`, nothing started yet."""
    return {
        "id": run_id,
        "scenario_id": scn.id,
        "spec_path": str(scn.path),
        "spec_version": scn.version,
        "spec_digest": scn.digest,
        "run_dir": str(run_dir),
        "agent": agent or default_agent(scn),
        "purpose": purpose,
        "keep": keep,
        "tool_profile": tool_profile,
        "status": "running",
        "started": [],
        "done": [],
        "pid": os.getpid(),
        "common": common,
        "vars": {"environment": environment, **scenario_vars(scn, run_id, run_dir)},
        "budget": scn.data["budget"],
        "timeouts": scn.data.get("timeouts", {}),
        "results": {},
    }


def environment_vars(role: str, args: dict[str, Any]) -> dict[str, Any]:
    """The environment entry of a run's vars: the role that deploys it and its resolved deploy arguments."""
    return {"name": "environment", "role": role, "vars": resolve_role_vars(role, "deploy", args)}


def trial_vars(scn: Scenario) -> dict[str, Any]:
    """The inputs of a trial's fault, check, reference and evaluation steps (`scenario_vars` without the manifest):
    what changes when a kept environment moves on to another scenario."""
    return {
        "faults": [
            {"name": f["name"], "role": f["role"], "vars": resolve_role_vars(f["role"], "inject", f["args"])}
            for f in scn.faults
        ],
        # Started after the faults, removed before them (playbooks/inject.yml, remove.yml).
        "noise": [
            {"name": n["name"], "role": n["role"], "vars": resolve_role_vars(n["role"], "inject", n["args"])}
            for n in scn.noise
        ],
        "checks": {
            phase: [{"name": c["name"], "role": c["role"], "timeout": c["timeout"],
                     "vars": resolve_role_vars(c["role"], "main", c["args"])}
                    for c in scn.checks(phase)]
            for phase in CHECK_PHASES
        },
        "evaluators": evaluator_vars(scn),
        "reference": reference_vars(scn),
        "ground_truth": str(scn.ground_truth_path.resolve()),
        # Seconds the handover waits after the incident manifested (spec `timing.startOffsetSeconds`).
        "start_offset": int((scn.data.get("timing") or {}).get("startOffsetSeconds", 0)),
    }


def scenario_vars(scn: Scenario, run_id: str, run_dir: Path) -> dict[str, Any]:
    """The steps' inputs that come from the scenario (everything but the environment's)."""
    return {**trial_vars(scn), "manifest": build_manifest(scn, run_id, run_dir)}


def evaluator_vars(scn: Scenario) -> list[dict[str, Any]]:
    return [{"name": e["role"].removeprefix("evaluate_"), "role": e["role"],
             "vars": resolve_role_vars(e["role"], "main", e["params"])}
            for e in with_process_evaluator(scn.evaluators)]


def reference_vars(scn: Scenario) -> list[dict[str, Any]]:
    return [{"name": r["name"], "role": r["role"], "vars": resolve_role_vars(r["role"], "main", r["args"])}
            for r in scn.reference]


def with_process_evaluator(evaluators: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scenario's evaluators, then evaluate_process (process metrics for every run) unless listed."""
    if any(e["role"] == "evaluate_process" for e in evaluators):
        return evaluators
    return [*evaluators, {"role": "evaluate_process", "params": {}}]


def build_manifest(scn: Scenario, run_id: str, run_dir: Path) -> dict[str, Any]:
    """What the agent gets: goal, tasks, budget, where to write. Nothing about the fault."""
    budget = scn.data["budget"]
    kinds = [t["kind"] for t in scn.data["tasks"]]
    schemas = {k: str(paths.SCHEMAS_DIR / f"{SCHEMAS[k]}.schema.json") for k in kinds}
    return {
        "manifest_version": "opsbench/manifest/v1",
        "run": run_id,
        "tasks": [{"id": t["id"], "kind": t["kind"], "goal": t["goal"]} for t in scn.data["tasks"]],
        "budget": budget,
        "observability": scn.environment["observability"],
        "output": {
            "path": str(run_dir / "agent" / "output.json"),
            # One JSON file answers every task: it must match the schema of each task's kind.
            "schema": schemas[kinds[0]] if kinds else None,
            "schemas": schemas,
        },
        "trajectory": str(run_dir / "agent" / "trajectory.jsonl"),
    }


def step_extravars(state: dict[str, Any], step: str) -> dict[str, Any]:
    """The extra vars of `step` for the run whose state is `state`: the run's common vars plus the part of its
    vars the step's playbook reads. A step with inputs of its own (the snapshot step's window) finds them in
    ``vars.steps.<step>``."""
    v = state["vars"]
    ev: dict[str, Any] = dict(state["common"])
    if step in ("deploy", "teardown", "pristine"):
        ev["opsbench_environment"] = v["environment"]
    elif step in CHECK_PHASES:
        ev["opsbench_checks"] = v["checks"][step]
    elif step in ("inject", "remove"):
        ev["opsbench_faults"] = v["faults"]
        ev["opsbench_noise"] = v.get("noise", [])  # a run.json from before noise existed has none
    elif step == "handover":
        ev["opsbench_manifest"] = v["manifest"]
        ev["opsbench_tool_profile"] = state.get("tool_profile", "full")
        if state.get("visible_since") is not None:
            ev["opsbench_visible_since"] = state["visible_since"]
        if v.get("start_offset") and v["environment"].get("role") != FROZEN_ROLE:
            ev["opsbench_start_offset"] = v["start_offset"]
    elif step == "solve":
        ev["opsbench_reference"] = v.get("reference", [])
    elif step in ("evaluate_untouched", "evaluate_reference"):
        # The scenario's own evaluators: the process metrics need an agent's trajectory, which a check has not.
        ev["opsbench_evaluators"] = [e for e in v["evaluators"] if e["role"] != "evaluate_process"]
        ev["opsbench_ground_truth"] = v["ground_truth"]
        ev["opsbench_timeline"] = {}
    elif step in ("evaluate", "finish"):
        ev["opsbench_evaluators"] = v["evaluators"]
        ev["opsbench_ground_truth"] = v["ground_truth"]
        # When each phase ran and how the agent ended: MTTD/MTTR and the process metrics.
        ev["opsbench_timeline"] = {
            k: {f: r[f] for f in ("status", "started_at", "ended_at", "exit_code", "budget") if f in r}
            for k, r in state["results"].items()}
    ev.update(v.get("steps", {}).get(step, {}))
    return ev
