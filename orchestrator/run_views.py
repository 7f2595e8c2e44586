"""Plain-text views of runs for the terminal: one run's summary, its phase timeline, the list of recorded runs."""

from __future__ import annotations

import json
import time
from typing import Any


def render_summary(s: dict[str, Any]) -> str:
    """A run's summary (``Run.summary()``): status, agent, scores per evaluator, clean-up."""
    lines = [f"run {s['run_id']}  scenario {s['scenario']}  status {s['status']}"]
    if s["reason"]:
        lines.append(f"  reason: {s['reason']}")
    if s["agent"]:
        lines.append(f"  agent: {s['agent'].get('status')} in {s['agent'].get('elapsed')}s"
                     + (f" ({s['agent']['detail']})" if s["agent"].get("detail") else ""))
        isolation = s["agent"].get("isolation")
        if isolation:  # the full lists are in --json; a run without a sandbox is worth a glance
            from orchestrator.sandbox import summary
            lines.append(f"  agent isolation: {summary(isolation)}")
    for name, scores in s["evaluations"].items():
        if name == "workspace" and isinstance(scores.get("stages"), list):
            lines += _workspace_lines(scores)
            continue
        shown = {k: v for k, v in scores.items() if k not in ("predicted",)}
        lines.append(f"  {name}: {json.dumps(shown, sort_keys=True)}")
    lines.append(f"  cleanup: {s['cleanup']}"
                 + (f", recovered: {s['recovered']}" if s["recovered"] is not None else ""))
    for p in s["cleanup_problems"]:
        lines.append(f"    ! {p}")
    for r in s.get("cleanup_retried", []):
        lines.append(f"    retried: {r}")
    return "\n".join(lines)


def _workspace_lines(scores: dict[str, Any]) -> list[str]:
    """A DevOps score: pass, then one line per stage with its reason (the build logs are in --json and the
    evaluation file)."""
    lines = [f"  workspace: workspace_pass {scores.get('workspace_pass')}, stages {scores.get('stages_passed')}/"
             f"{scores.get('stages_total')}, report {scores.get('report')}"]
    for stage in scores["stages"]:
        changed = stage.get("changed_vs_pristine")
        lines.append(f"    {stage.get('task')} ({stage.get('kind')}, {stage.get('project')}): "
                     f"{'passed' if stage.get('passed') else 'failed'}: {stage.get('reason')}"
                     + (f"; changed vs pristine: {', '.join(changed[:8])}" if changed else ""))
    return lines


def render_run(run: dict[str, Any]) -> str:
    """A recorded run (``runs.load_run``): header, phase timeline relative to its creation, then its summary."""
    lines = [f"run {run['id']}  scenario {run['scenario_id']} v{run['spec_version']} "
             f"({run['spec_digest']})  status {run['status']}  purpose {run['purpose']}  {_mode(run)}"]
    t0 = run["created"]
    for p in run["phases"]:
        ended = f"{p['ended'] - p['started']:6.1f}s" if p["ended"] else "   ...  "
        lines.append(f"  +{p['started'] - t0:7.1f}s {p['phase']:<14} {ended} {p['status']}"
                     + (f"  {p['detail'][:150]}" if p["detail"] else ""))
    if run["outcome"]:
        lines.append(render_summary(run["outcome"]))
    return "\n".join(lines)


def render_runs(rows: list[dict[str, Any]]) -> str:
    """The list of recorded runs (``store.list_runs``), one line each."""
    lines = [f"{'RUN':<24} {'SCENARIO':<36} {'STATUS':<12} {'PURPOSE':<8} {'MODE':<6} CREATED"]
    for r in rows:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["created"]))
        lines.append(f"{r['id']:<24} {r['scenario_id']:<36} {r['status']:<12} {r['purpose']:<8} "
                     f"{r.get('mode') or 'live':<6} {created}")
    return "\n".join(lines)


def _mode(run: dict[str, Any]) -> str:
    """``mode live``, or ``mode replay of <snapshot id>``."""
    mode = run.get("mode") or "live"
    return f"mode {mode}" + (f" of {run['snapshot_id']}" if run.get("snapshot_id") else "")
