"""``opsbench export``: recorded runs as files another tool reads, in a folder or one archive.

What is exported: the runs named, a campaign's trials (``--campaign NAME``: the run ids in its ``trials.jsonl``),
or every agent run the filters select (``--agent``, ``--scenario``, ``--since``, as ``opsbench results``). Layout::

    index.json                     format, when, by which OpsBench, the selection; per run its scenario, agent,
                                   model, mode, outcome, model turns, tokens, cost, tool calls and its files;
                                   the runs that could not be exported and why
    results.json                   `opsbench results --json` and `leaderboard --json` over the exported runs
    report.html                    the HTML report of those runs, a Runs section linking each run's page
    runs/<run id>/trajectory.atif.json   the trajectory in ATIF (validated, as `opsbench show RUN --atif`)
    runs/<run id>/page.html        the run's page (timeline, answer beside ground truth, scores)
    runs/<run id>/output.json      the agent's answer, when it wrote one
    runs/<run id>/scores.json      every evaluator's scores
    campaign-trials.jsonl          with --campaign: the campaign's own record

``--out`` ending in ``.tar.gz`` or ``.tgz`` writes one archive (its entries under a folder named like it); any
other path is a folder that must not exist or be empty. Nothing is written when the selection is bad.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator import __version__, atif, paths, report, results, run_page, store
from orchestrator.errors import OpsBenchError
from orchestrator.results import Trial

FORMAT = "opsbench-export/v1"
ARCHIVES = (".tar.gz", ".tgz")


def _archive_name(out: Path) -> str | None:
    """The folder name inside the archive `out`, or None when `out` is a folder."""
    for suffix in ARCHIVES:
        if out.name.endswith(suffix) and len(out.name) > len(suffix):
            return out.name[: -len(suffix)]
    return None


def check_out(out: Path) -> None:
    """Refuse an `out` that would overwrite something, before anything is read or written."""
    if _archive_name(out) is not None:
        if out.exists():
            raise OpsBenchError(f"--out {out}: the archive exists already; give a new name")
        if out.parent.exists() and not out.parent.is_dir():
            raise OpsBenchError(f"--out {out}: {out.parent} is not a folder")
        return
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise OpsBenchError(f"--out {out}: exists and is not an empty folder; give a new folder, or a name ending "
                            "in .tar.gz for an archive")


def campaign_runs(name: str) -> list[str]:
    """The run ids a campaign's trials.jsonl records, in order (an unknown campaign names the known ones)."""
    folder = paths.state_dir() / "campaigns"
    file = folder / name / "trials.jsonl"
    if "/" in name or name.startswith(".") or not file.is_file():
        known = sorted(p.name for p in folder.iterdir() if (p / "trials.jsonl").is_file()) if folder.is_dir() else []
        raise OpsBenchError(f"--campaign {name}: no such campaign in {folder} (known: {', '.join(known) or 'none'})")
    ids: list[str] = []
    for line in file.read_text(errors="replace").splitlines():
        try:
            run_id = json.loads(line).get("run_id")
        except (ValueError, AttributeError):
            continue
        if isinstance(run_id, str) and run_id and run_id not in ids:
            ids.append(run_id)
    return ids


def select(run_ids: Sequence[str], campaign: str | None, agent: str | None, scenario: str | None,
           since: float | None, include_harness: bool) -> tuple[list[Trial], list[dict[str, str]], dict[str, Any]]:
    """(trials, skipped, selection): the runs to export. Named runs (and a campaign's) must be recorded agent
    trials; a campaign's trial the index does not hold is skipped with its reason."""
    selection: dict[str, Any] = {k: v for k, v in (("run_ids", list(run_ids)), ("campaign", campaign),
                                                    ("agent", agent), ("scenario", scenario), ("since", since))
                                 if v}
    if run_ids and campaign:
        raise OpsBenchError("give run ids or --campaign, not both")
    skipped: list[dict[str, str]] = []
    if run_ids or campaign:
        wanted = list(run_ids) if run_ids else campaign_runs(str(campaign))
        if campaign and not wanted:
            raise OpsBenchError(f"--campaign {campaign}: its trials.jsonl records no run yet")
        every = {t.run_id: t for t in results.load(agent, scenario, since, include_harness=True).trials}
        trials = []
        for run_id in wanted:
            if run_id in every:
                trials.append(every[run_id])
                continue
            why = ("not an agent trial (an environment or a verify run), or the filters leave it out"
                   if store.get_run(run_id) else "not in the run index (see `opsbench runs`)")
            if run_ids:
                raise OpsBenchError(f"run {run_id}: {why}")
            skipped.append({"run_id": run_id, "reason": why})
        return trials, skipped, selection
    loaded = results.load(agent, scenario, since, include_harness)
    return loaded.trials, skipped, selection


def _run_files(trial: Trial, folder: Path) -> dict[str, Any]:
    """Write one run's files into `folder`; its index entry. OpsBenchError when its records cannot be read."""
    row = store.get_run(trial.run_id) or {}
    run_dir = Path(str(row.get("run_dir") or ""))
    if not (run_dir / "run.json").is_file():
        raise OpsBenchError(f"its directory {run_dir} is gone (no run.json)")
    doc = atif.build(run_dir)
    folder.mkdir(parents=True)
    files = {"trajectory": "trajectory.atif.json", "page": "page.html"}
    (folder / files["trajectory"]).write_text(json.dumps(doc, indent=2) + "\n")
    (folder / files["page"]).write_text(run_page.render(run_dir, back="../../report.html"))
    ops = doc["extra"]["opsbench"]
    if ops.get("output") is not None:
        files["output"] = "output.json"
        (folder / "output.json").write_text(json.dumps(ops["output"], indent=2) + "\n")
    files["scores"] = "scores.json"
    (folder / "scores.json").write_text(json.dumps(ops.get("evaluations") or {}, indent=2, sort_keys=True) + "\n")
    final = doc["final_metrics"]
    counted = bool(final["extra"]["model_calls"])
    return {
        "run_id": trial.run_id, "scenario": trial.scenario, "agent": trial.agent, "agent_name": trial.agent_name,
        "model": trial.model, "mode": trial.mode, "snapshot_id": trial.snapshot_id, "outcome": trial.outcome,
        "status": trial.run_status, "started": trial.created,
        "model_calls": final["extra"]["model_calls"] if counted else None,
        "input_tokens": final["total_prompt_tokens"] if counted else None,
        "output_tokens": final["total_completion_tokens"] if counted else None,
        "cached_tokens": final["total_cached_tokens"] if counted else None,
        "cost_usd": final.get("total_cost_usd"), "tool_calls": final["extra"]["tool_calls"],
        "agent_seconds": trial.agent_elapsed,
        "files": {k: f"runs/{trial.run_id}/{v}" for k, v in files.items()},
    }


def export(out: Path, trials: list[Trial], skipped: list[dict[str, str]], selection: dict[str, Any],
           campaign: str | None = None) -> dict[str, Any]:
    """Write the export (see the module docstring); its summary: where, how many runs, what was skipped."""
    check_out(out)
    if not trials:
        raise OpsBenchError("nothing to export: the selection holds no agent run"
                            + (f" ({len(skipped)} skipped: {skipped[0]['reason']})" if skipped else
                               " (`opsbench runs` lists the runs, `opsbench leaderboard` the agents)"))
    name = _archive_name(out)
    with tempfile.TemporaryDirectory(prefix="opsbench-export-") as tmp:
        root = Path(tmp) / (name or "export")
        (root / "runs").mkdir(parents=True)
        entries, exported = [], []
        for t in trials:
            try:
                entries.append(_run_files(t, root / "runs" / t.run_id))
                exported.append(t)
            except OpsBenchError as exc:
                shutil.rmtree(root / "runs" / t.run_id, ignore_errors=True)
                skipped.append({"run_id": t.run_id, "reason": str(exc)})
        if not exported:
            raise OpsBenchError(f"nothing to export: none of the {len(trials)} selected run(s) could be read "
                                f"(run {skipped[-1]['run_id']}: {skipped[-1]['reason']})")
        index = {"format": FORMAT, "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                 "opsbench_version": __version__, "selection": selection, "runs": entries, "skipped": skipped,
                 "atif_schema_version": atif.VERSION}
        (root / "index.json").write_text(json.dumps(index, indent=2, default=str) + "\n")
        (root / "results.json").write_text(json.dumps(
            {"leaderboard": results.leaderboard(exported), "scenarios": results.scenario_results(exported)},
            indent=2, default=str) + "\n")
        (root / "report.html").write_text(report.render(
            exported, title="OpsBench export", pages={t.run_id: f"runs/{t.run_id}/page.html" for t in exported}))
        if campaign:
            shutil.copyfile(paths.state_dir() / "campaigns" / campaign / "trials.jsonl",
                            root / "campaign-trials.jsonl")
        files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        out.parent.mkdir(parents=True, exist_ok=True)
        if name is not None:
            partial = out.with_name(out.name + ".partial")
            with tarfile.open(partial, "w:gz") as tar:
                tar.add(root, arcname=name)
            partial.replace(out)
        else:
            out.mkdir(exist_ok=True)
            for item in root.iterdir():
                shutil.move(str(item), out / item.name)
    return {"out": str(out), "archive": name is not None, "runs": len(entries), "skipped": skipped,
            "files": len(files), "index": (f"{name}/" if name else "") + "index.json"}
