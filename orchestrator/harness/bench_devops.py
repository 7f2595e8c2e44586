"""Benchmark the DevOps tasks: how fast a workspace starts, how long a trial of each family takes, and
the baseline agents' pass@1 per family.

1. ``repeats`` times: deploy a workspace and tear it down (the harness's own runs, purpose ``bench``): the deploy
   step's time (copy the projects, start the container, wait for its first command, make each project a git
   repository) and the teardown's;
2. one agent trial of each scenario (default: every DevOps scenario) with its baseline agent (``default_agent``:
   the scripted build fixer, the process monitor), as a campaign runs them (``Run.trial_on``), on one workspace per
   environment (the hand-written scenarios share one; a generated task's workspace holds its upstream project, so
   the tasks of one project share one): the trial's wall time and its agent and evaluate steps, whether it passed;
   per class, per language and per class x language, pass@1 and the median times; each workspace's deploy time.

SCENARIOS may name folders of generated tasks (`opsbench devops generate --out DIR`): each holds scenario folders.
``families`` keeps the scenarios of those classes (a scripted baseline is meant for some only: ``BASELINES``);
``per_cell`` draws a stratified sample, that many scenarios per class x language cell, by a fixed ``seed``.

``opsbench bench --devops [--trials N] [--family CLASS]... [--per-cell N --seed S] [SCENARIOS]``; see
docs/devops.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.catalog import domain_scenarios, find_scenario
from orchestrator.errors import OpsBenchError
from orchestrator.interrupts import Interrupts
from orchestrator.lifecycle import Run
from orchestrator.progress import Progress
from orchestrator.spec import SPEC_FILENAME as SPEC
from orchestrator.spec import Scenario
from orchestrator.trials import agent_trial, decided_pass, trial_on

LANGUAGES = ("go", "java", "python")
BASELINES = {"build-config": "build fixer", "pipeline": "build fixer (build stage)", "monitoring": "monitor"}
"""The families each scripted baseline (`orchestrator.agents.devops`, `orchestrator.agents.devops_monitor`) is meant
for. Issue resolving and test generation have none: the build fixer finds nothing its rulebook knows and says so."""


def expand(names: Sequence[str]) -> list[str]:
    """`names` with every folder of generated tasks (a folder holding no scenario spec but scenario folders)
    replaced by its scenario folders, sorted; a folder with neither is bad input, named."""
    out: list[str] = []
    for name in names:
        folder = Path(name)
        if folder.is_dir() and not (folder / SPEC).is_file():
            found = sorted(str(d) for d in folder.iterdir() if (d / SPEC).is_file())
            if not found:
                raise OpsBenchError(f"{name}: a folder with no {SPEC} and no scenario folders in it")
            out.extend(found)
        else:
            out.append(name)
    return out


def language(scn: Scenario) -> str:
    """The language of a scenario's project: its upstream project's (generated tasks), else the one of go, java,
    python among its technologies, else ``mixed``."""
    upstream = ((scn.data.get("environment") or {}).get("args") or {}).get("upstream") or []
    langs = {str(u.get("language")) for u in upstream if isinstance(u, dict) and u.get("language")}
    if not langs:
        techs = scn.data["metadata"].get("complexity", {}).get("technologies") or []
        langs = {t for t in techs if t in LANGUAGES}
    return langs.pop() if len(langs) == 1 else "mixed"


def select(scenarios: list[Scenario], families: Sequence[str] = (), per_cell: int | None = None,
           seed: str = "opsbench-bench-1") -> list[Scenario]:
    """One scenario per id (the first; generated batches may hold the same instance twice), those of `families`
    (all when empty; an unknown class is bad input), then, with `per_cell`, at most
    that many of each class x language cell, drawn by `seed` from the cell's scenarios sorted by id (the same
    scenarios for the same seed and pool, whatever order they came in); the result sorted by class, language, id."""
    known = {s.data["metadata"]["class"] for s in scenarios}
    unknown = sorted(set(families) - known)
    if unknown:
        raise OpsBenchError(f"--family {', '.join(unknown)}: no such class among the scenarios "
                            f"(classes: {', '.join(sorted(known))})")
    unique: dict[str, Scenario] = {}
    for scn in scenarios:
        unique.setdefault(scn.id, scn)
    kept = [s for s in unique.values() if not families or s.data["metadata"]["class"] in families]
    cells: dict[tuple[str, str], list[Scenario]] = {}
    for scn in sorted(kept, key=lambda s: s.id):
        cells.setdefault((scn.data["metadata"]["class"], language(scn)), []).append(scn)
    out: list[Scenario] = []
    for (cls, lang), mine in sorted(cells.items()):
        if per_cell is not None and len(mine) > per_cell:
            mine = sorted(random.Random(f"{seed}/{cls}/{lang}").sample(mine, per_cell), key=lambda s: s.id)
        out.extend(mine)
    return out


def environment_key(scn: Scenario) -> str:
    """Scenarios with equal keys run on one workspace: the same environment (backend, application, args)."""
    env = scn.data.get("environment") or {}
    return hashlib.sha256(json.dumps(env, sort_keys=True, default=str).encode()).hexdigest()


def by_environment(scenarios: Sequence[Scenario]) -> list[list[Scenario]]:
    """`scenarios` grouped by `environment_key`, groups in the order of their first scenario."""
    groups: dict[str, list[Scenario]] = {}
    for scn in scenarios:
        groups.setdefault(environment_key(scn), []).append(scn)
    return list(groups.values())


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.mean(values), 2) if values else None


def _elapsed(run: Run, step: str) -> float | None:
    value = run.state["results"].get(step, {}).get("elapsed")
    return round(float(value), 2) if isinstance(value, (int, float)) else None


def bench_start(scn: Scenario, repeats: int, progress: Progress,
                interrupts: Interrupts | None = None) -> dict[str, Any]:
    """A workspace's deploy and teardown, `repeats` times; an interrupt stops the repeats (the workspace up at the
    time is torn down)."""
    deploys: list[float] = []
    teardowns: list[float] = []
    for i in range(repeats):
        if interrupts is not None and interrupts.set:
            break
        run = Run.create(scn, agent=None, keep=False, progress=progress, purpose="bench")
        run.interrupts = interrupts
        try:
            result = run.step("deploy", 1, 1)
            if result.status == "canceled":
                break
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


def _trial_row(host: Run, scn: Scenario, healthy: bool, progress: Progress) -> tuple[dict[str, Any], bool]:
    progress.message(f"{scn.id}: one trial with its baseline agent")
    start = time.monotonic()
    trial = trial_on(host, scn, None, purpose="bench")
    summary = agent_trial(trial, healthy)
    wall = round(time.monotonic() - start, 2)
    healthy = summary.get("recovered") is True and not summary.get("leftovers") \
        and summary.get("cleanup") == "done"
    workspace = (summary.get("evaluations") or {}).get("workspace") or {}
    cls = scn.data["metadata"]["class"]
    row = {"scenario": scn.id, "class": cls, "language": language(scn), "baseline": BASELINES.get(cls, "none"),
           "status": summary["status"], "passed": decided_pass(summary.get("evaluations") or {}) is True,
           "wall_s": wall, "stage_pass_rate": workspace.get("stage_pass_rate"),
           "agent_s": _elapsed(trial, "agent"), "evaluate_s": _elapsed(trial, "evaluate"), "run_id": trial.id}
    progress.message(f"  {'passed' if row['passed'] else 'failed'} in {wall} s")
    return row, healthy


def _unrun(scn: Scenario, status: str, error: str) -> dict[str, Any]:
    """The row of a scenario whose trial did not run: ``error`` (its workspace did not deploy) or ``interrupted``."""
    return {"scenario": scn.id, "class": scn.data["metadata"]["class"], "language": language(scn),
            "baseline": BASELINES.get(scn.data["metadata"]["class"], "none"), "status": status, "error": error,
            "passed": False, "wall_s": None, "stage_pass_rate": None, "agent_s": None, "evaluate_s": None,
            "run_id": None}


def bench_trials(scenarios: list[Scenario], progress: Progress, workspaces: list[dict[str, Any]] | None = None,
                 interrupts: Interrupts | None = None) -> list[dict[str, Any]]:
    """One trial per scenario, on one workspace per environment (`by_environment`). A workspace that does not
    deploy gives its scenarios rows with status ``error`` (not counted in pass@1) and the others go on. Each
    workspace's deploy and teardown times are appended to `workspaces`. After an interrupt (Ctrl-C, SIGTERM) the
    trial in flight ends through its own clean-up, its workspace is torn down, and every scenario not run yet
    gets a row with status ``interrupted`` (not counted either)."""
    rows: list[dict[str, Any]] = []

    def stopped() -> bool:
        return interrupts is not None and interrupts.set

    for group in by_environment(scenarios):
        if stopped():
            rows.extend(_unrun(scn, "interrupted", "interrupted before its workspace") for scn in group)
            continue
        host = Run.create(group[0], agent=None, keep=False, progress=progress, purpose="bench")
        host.interrupts = interrupts
        host.state["status"] = "hosting"
        error = ""
        try:
            deploy = host.step("deploy", 1, 1)
            if deploy.status != "successful":
                error = f"deploy {deploy.status}: {'; '.join(deploy.failures)[:300]}"
                progress.message(f"{group[0].id}: workspace {error}")
            else:
                healthy = False
                for scn in group:
                    if stopped():
                        rows.append(_unrun(scn, "interrupted", "interrupted before its trial"))
                        continue
                    row, healthy = _trial_row(host, scn, healthy, progress)
                    rows.append(row)
        finally:
            host.state["status"] = "hosted"
            host.cleanup()
        if error:
            status = "interrupted" if deploy.status == "canceled" else "error"
            rows.extend(_unrun(scn, status, error) for scn in group)
        if workspaces is not None:
            workspaces.append({"scenarios": [s.id for s in group], "language": language(group[0]),
                               "deploy_s": _elapsed(host, "deploy"), "teardown_s": _elapsed(host, "teardown"),
                               "run_id": host.id, "error": error})
    return rows


def _summary(mine: list[dict[str, Any]]) -> dict[str, Any]:
    ran = [r for r in mine if r["status"] not in ("error", "interrupted")]
    passed = sum(r["passed"] for r in ran)
    return {"scenarios": len(ran), "errors": sum(r["status"] == "error" for r in mine),
            "interrupted": sum(r["status"] == "interrupted" for r in mine), "passed": passed,
            "pass_at_1": round(passed / len(ran), 2) if ran else None,
            "median_trial_s": _median([r["wall_s"] for r in ran if r["wall_s"] is not None]),
            "median_agent_s": _median([r["agent_s"] for r in ran if r["agent_s"] is not None]),
            "median_evaluate_s": _median([r["evaluate_s"] for r in ran if r["evaluate_s"] is not None]),
            "stages_passed": _mean([r["stage_pass_rate"] for r in ran if r.get("stage_pass_rate") is not None])}


def by_class(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per class: trials run (errors apart), passed, pass@1, median trial, agent and evaluate times, mean stages."""
    return {cls: {**_summary([r for r in rows if r["class"] == cls]),
                  "baseline": BASELINES.get(cls, "none")} for cls in sorted({r["class"] for r in rows})}


def by_language(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per language, as `by_class`."""
    return {lang: _summary([r for r in rows if r.get("language") == lang])
            for lang in sorted({str(r.get("language")) for r in rows})}


def by_cell(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per class x language (keys ``class/language``), as `by_class`."""
    cells = sorted({(r["class"], str(r.get("language"))) for r in rows})
    return {f"{cls}/{lang}": {**_summary([r for r in rows if r["class"] == cls and r.get("language") == lang]),
                              "baseline": BASELINES.get(cls, "none")} for cls, lang in cells}


def bench_devops(repeats: int, progress: Progress, scenario_ids: Sequence[str] = (), families: Sequence[str] = (),
                 per_cell: int | None = None, seed: str = "opsbench-bench-1") -> dict[str, Any]:
    pool = [find_scenario(s) for s in expand(scenario_ids)] if scenario_ids else domain_scenarios("DevOps")
    scenarios = select(pool, families, per_cell, seed)
    if not scenarios:
        raise RuntimeError("no DevOps scenario to measure")
    report: dict[str, Any] = {"repeats": repeats, "load": {"start": [round(x, 2) for x in os.getloadavg()]},
                              "selection": {"pool": len(pool), "selected": len(scenarios),
                                            "families": list(families), "per_cell": per_cell,
                                            "seed": seed if per_cell is not None else None,
                                            "sources": list(scenario_ids)},
                              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    workspaces: list[dict[str, Any]] = []
    with Interrupts(progress.message) as interrupts:
        report["start"] = bench_start(scenarios[0], repeats, progress, interrupts)
        report["trials"] = bench_trials(scenarios, progress, workspaces, interrupts)
    report["interrupted"] = interrupts.set
    report["workspaces"] = workspaces
    report["classes"] = by_class(report["trials"])
    report["languages"] = by_language(report["trials"])
    report["cells"] = by_cell(report["trials"])
    report["load"]["end"] = [round(x, 2) for x in os.getloadavg()]
    report["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return report


def _load(value: Any) -> str:
    return "/".join(map(str, value)) if isinstance(value, list) else str(value)


def _line(name: str, row: dict[str, Any]) -> str:
    rate = "-" if row["pass_at_1"] is None else f"{row['pass_at_1']:.2f}"
    passed = f"{rate} ({row['passed']}/{row['scenarios']})"
    stages = "-" if row.get("stages_passed") is None else f"{row['stages_passed']:.2f}"
    errors = f"  {row['errors']} not run (workspace error)" if row.get("errors") else ""
    return (f"    {name:<24} {passed:<13} {stages:>6} {row['median_trial_s']!s:>8} {row['median_agent_s']!s:>8} "
            f"{row['median_evaluate_s']!s:>7}  {row.get('baseline', '')}{errors}")


def render(report: dict[str, Any]) -> str:
    s = report["start"]
    sel = report.get("selection") or {}
    lines = [f"DevOps workspaces: load (1/5/15 min) {_load(report['load']['start'])} -> {_load(report['load']['end'])}"]
    if sel.get("per_cell") is not None:
        lines.append(f"  stratified sample: {sel['selected']} of {sel['pool']} scenarios, at most {sel['per_cell']} "
                     f"per class x language, seed {sel['seed']}")
    lines += [f"  workspace start (deploy step, {report['repeats']}x): median {s['median_deploy_s']} s "
              f"(runs {', '.join(map(str, s['deploy_s']))}); teardown median {s['median_teardown_s']} s",
              "  per family (one trial per scenario, baseline agent; times are medians, stages the mean share of "
              "stages passed):",
              f"    {'CLASS':<24} {'PASS@1':<13} {'STAGES':>6} {'TRIAL s':>8} {'AGENT s':>8} {'EVAL s':>7}  BASELINE"]
    lines += [_line(cls, row) for cls, row in report["classes"].items()]
    if "languages" in report:
        lines.append("  per language:")
        lines += [_line(lang, row) for lang, row in report["languages"].items()]
    if "cells" in report:
        lines.append("  per family x language:")
        lines += [_line(cell, row) for cell, row in report["cells"].items()]
    unrun = [r for r in report["trials"] if r["status"] == "interrupted"]
    if report.get("interrupted"):
        lines.append(f"  interrupted: {len(unrun)} scenario(s) not run and not counted; every workspace was torn "
                     "down")
    failed = [r for r in report["trials"] if not r["passed"] and r["status"] != "interrupted"]
    if failed:
        lines.append("  not passed: " + ", ".join(r["scenario"] + ("" if r["status"] == "completed" else
                                                                 f" ({r['status']})") for r in failed))
    return "\n".join(lines)
