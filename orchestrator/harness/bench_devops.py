"""Benchmark the DevOps tasks: how fast a workspace starts, how long a trial of each family takes, and
the baseline agents' pass@1 per family.

1. ``repeats`` times: deploy a workspace and tear it down (the harness's own runs, purpose ``bench``): the deploy
   step's time (copy the projects, start the container, wait for its first command, make each project a git
   repository) and the teardown's;
2. on one more workspace, one agent trial of each scenario (default: every DevOps scenario) with its baseline agent
   (``default_agent``: the scripted build fixer, the process monitor), as a campaign runs them (``Run.trial_on``):
   the trial's wall time and its agent and evaluate steps, whether it passed; per class, pass@1 and the median times.

``opsbench bench --devops [--trials N] [SCENARIOS]``; see docs/devops.md.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

from orchestrator.catalog import domain_scenarios, find_scenario
from orchestrator.lifecycle import Run
from orchestrator.progress import Progress
from orchestrator.spec import Scenario
from orchestrator.trials import agent_trial, decided_pass, trial_on


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.mean(values), 2) if values else None


def _elapsed(run: Run, step: str) -> float | None:
    value = run.state["results"].get(step, {}).get("elapsed")
    return round(float(value), 2) if isinstance(value, (int, float)) else None


def bench_start(scn: Scenario, repeats: int, progress: Progress) -> dict[str, Any]:
    deploys: list[float] = []
    teardowns: list[float] = []
    for i in range(repeats):
        run = Run.create(scn, agent=None, keep=False, progress=progress, purpose="bench")
        try:
            result = run.step("deploy", 1, 1)
            if result.status != "successful":
                raise RuntimeError(f"deploy {result.status}: {'; '.join(result.failures)[:300]}")
        finally:
            run.state["status"] = "hosted"
            run.cleanup()
        deploys.append(_elapsed(run, "deploy") or 0.0)
        teardowns.append(_elapsed(run, "teardown") or 0.0)
        progress.message(f"workspace start {i + 1}/{repeats}: deploy {deploys[-1]} s, teardown {teardowns[-1]} s")
    return {"deploy_s": deploys, "median_deploy_s": _median(deploys), "teardown_s": teardowns,
            "median_teardown_s": _median(teardowns)}


def bench_trials(scenarios: list[Scenario], progress: Progress) -> list[dict[str, Any]]:
    host = Run.create(scenarios[0], agent=None, keep=False, progress=progress, purpose="bench")
    host.state["status"] = "hosting"
    rows: list[dict[str, Any]] = []
    try:
        deploy = host.step("deploy", 1, 1)
        if deploy.status != "successful":
            raise RuntimeError(f"deploy {deploy.status}: {'; '.join(deploy.failures)[:300]}")
        healthy = False
        for scn in scenarios:
            progress.message(f"{scn.id}: one trial with its baseline agent")
            start = time.monotonic()
            trial = trial_on(host, scn, None, purpose="bench")
            summary = agent_trial(trial, healthy)
            wall = round(time.monotonic() - start, 2)
            healthy = summary.get("recovered") is True and not summary.get("leftovers") \
                and summary.get("cleanup") == "done"
            workspace = (summary.get("evaluations") or {}).get("workspace") or {}
            rows.append({"scenario": scn.id, "class": scn.data["metadata"]["class"], "status": summary["status"],
                         "passed": decided_pass(summary.get("evaluations") or {}) is True, "wall_s": wall,
                         "stage_pass_rate": workspace.get("stage_pass_rate"),
                         "agent_s": _elapsed(trial, "agent"), "evaluate_s": _elapsed(trial, "evaluate"),
                         "run_id": trial.id})
            progress.message(f"  {'passed' if rows[-1]['passed'] else 'failed'} in {wall} s")
    finally:
        host.state["status"] = "hosted"
        host.cleanup()
    return rows


def by_class(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for cls in sorted({r["class"] for r in rows}):
        mine = [r for r in rows if r["class"] == cls]
        out[cls] = {"scenarios": len(mine), "passed": sum(r["passed"] for r in mine),
                    "pass_at_1": round(sum(r["passed"] for r in mine) / len(mine), 2),
                    "median_trial_s": _median([r["wall_s"] for r in mine]),
                    "median_agent_s": _median([r["agent_s"] for r in mine if r["agent_s"] is not None]),
                    "median_evaluate_s": _median([r["evaluate_s"] for r in mine if r["evaluate_s"] is not None]),
                    "stages_passed": _mean([r["stage_pass_rate"] for r in mine
                                            if r.get("stage_pass_rate") is not None])}
    return out


def bench_devops(repeats: int, progress: Progress, scenario_ids: Sequence[str] = ()) -> dict[str, Any]:
    scenarios = [find_scenario(s) for s in scenario_ids] if scenario_ids else domain_scenarios("DevOps")
    if not scenarios:
        raise RuntimeError("no DevOps scenario to measure")
    report: dict[str, Any] = {"repeats": repeats, "load": {"start": round(os.getloadavg()[0], 2)}}
    report["start"] = bench_start(scenarios[0], repeats, progress)
    report["trials"] = bench_trials(scenarios, progress)
    report["classes"] = by_class(report["trials"])
    report["load"]["end"] = round(os.getloadavg()[0], 2)
    return report


def render(report: dict[str, Any]) -> str:
    s = report["start"]
    lines = [f"DevOps workspaces: load {report['load']['start']} -> {report['load']['end']}",
             f"  workspace start (deploy step, {report['repeats']}x): median {s['median_deploy_s']} s "
             f"(runs {', '.join(map(str, s['deploy_s']))}); teardown median {s['median_teardown_s']} s",
             "  per family (one trial per scenario, baseline agent; times are medians, stages the mean share of stages "
             "passed):",
             f"    {'CLASS':<16} {'PASS@1':<13} {'STAGES':>6} {'TRIAL s':>8} {'AGENT s':>8} {'EVAL s':>7}"]
    for cls, row in report["classes"].items():
        passed = f"{row['pass_at_1']:.2f} ({row['passed']}/{row['scenarios']})"
        stages = "-" if row.get("stages_passed") is None else f"{row['stages_passed']:.2f}"
        lines.append(f"    {cls:<16} {passed:<13} {stages:>6} {row['median_trial_s']!s:>8} "
                     f"{row['median_agent_s']!s:>8} {row['median_evaluate_s']!s:>7}")
    failed = [r for r in report["trials"] if not r["passed"]]
    if failed:
        lines.append("  not passed: " + ", ".join(r["scenario"] + ("" if r["status"] == "completed" else
                                                                 f" ({r['status']})") for r in failed))
    return "\n".join(lines)
