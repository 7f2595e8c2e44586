"""Commands on scores: results, leaderboard, report over recorded runs, and score for one output offline
(libraries: `orchestrator.results`, `orchestrator.report`, `orchestrator.evaluation.offline`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from orchestrator.cli.common import DATE, emit_json, writable


def nothing_matches(agent: str | None, scenario: str | None, since: Any, include_harness: bool) -> str:
    """What to say when no trial is selected: "no runs recorded" only when there are none at all; with filters, that
    none matches them, and how many runs there are."""
    from orchestrator import results as res

    filters = [f"--{name} {value}" for name, value in (("agent", agent), ("scenario", scenario), ("since", since))
               if value is not None]
    every = len(res.load(include_harness=include_harness).trials) if filters else 0
    if not every:
        return "no runs recorded (see `opsbench run`)"
    return (f"no runs match {' '.join(filters)} ({every} run{'s' if every != 1 else ''} recorded; "
            "`opsbench leaderboard` lists the agents, `opsbench runs` the runs)")


def write_rows(rows: list[dict[str, Any]], out: Path) -> None:
    from orchestrator import results as res

    try:
        res.write_csv(rows, out)
    except OSError as exc:
        raise click.BadParameter(f"cannot write {out}: {exc.strerror}", param_hint="--csv") from exc


@click.command()
@click.option("--agent", help="Only this agent (display name, name, model or exact command).")
@click.option("--scenario", help="Only runs of this scenario.")
@click.option("--since", type=DATE, help="Only runs started at or after DATE (local time).")
@click.option("--json", "as_json", is_flag=True, help="Print per-scenario rows and breakdowns as JSON.")
@click.option("--csv", "csv_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Also write the per-scenario rows to FILE as CSV.")
@click.option("--include-harness", is_flag=True,
              help="Also count the harness's own runs (`opsbench bench`'s no-op agent), left out by default.")
def results(agent: str | None, scenario: str | None, since: Any, as_json: bool, csv_file: Path | None,
            include_harness: bool) -> None:
    """Per (agent, scenario): trials n, correct c, failure kinds, pass@k for k <= n, NTAM, agent time, MTTD."""
    from orchestrator import results as res

    loaded = res.load(agent, scenario, since.timestamp() if since else None, include_harness)
    trials = loaded.trials
    rows = res.scenario_results(trials)
    if csv_file:
        write_rows(rows, writable(csv_file, "--csv"))
    if as_json:
        emit_json({"scenarios": rows, "breakdowns": res.breakdowns(trials),
                   "harness_runs_left_out": loaded.harness_left_out})
        return
    if not trials:
        click.echo(nothing_matches(agent, scenario, since, include_harness))
    else:
        click.echo(res.render_results(rows))
        for dimension in ("complexity", "traces"):
            click.echo("")
            click.echo(res.render_breakdown(res.breakdown(trials, dimension)))
    if loaded.harness_left_out:
        click.echo(loaded.left_out_note())


@click.command()
@click.option("--k", "k", default=1, show_default=True, type=click.IntRange(1, 1000),
              help="pass@k (over each agent's scenarios with at least k trials).")
@click.option("--json", "as_json", is_flag=True)
@click.option("--csv", "csv_file", type=click.Path(path_type=Path, dir_okay=False), help="Also write the rows as CSV.")
@click.option("--include-harness", is_flag=True,
              help="Also count the harness's own runs (`opsbench bench`'s no-op agent), left out by default.")
def leaderboard(k: int, as_json: bool, csv_file: Path | None, include_harness: bool) -> None:
    """One row per agent (and model), ITBench Table 4 style, best pass@k first."""
    from orchestrator import results as res

    loaded = res.load(include_harness=include_harness)
    rows = res.leaderboard(loaded.trials, k)
    if csv_file:
        write_rows(rows, writable(csv_file, "--csv"))
    if as_json:
        emit_json({"agents": rows, "harness_runs_left_out": loaded.harness_left_out})
        return
    click.echo(res.render_leaderboard(rows, k) if rows else "no runs recorded (see `opsbench run`)")
    if loaded.harness_left_out:
        click.echo(loaded.left_out_note())


@click.command()
@click.option("--out", default="report.html", show_default=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--k", "k", default=1, show_default=True, type=click.IntRange(1, 1000))
@click.option("--agent", help="Only this agent.")
@click.option("--scenario", help="Only runs of this scenario.")
@click.option("--since", type=DATE, help="Only runs started at or after DATE.")
@click.option("--include-harness", is_flag=True,
              help="Also count the harness's own runs (`opsbench bench`'s no-op agent), left out by default.")
@click.option("--run-pages", is_flag=True,
              help="Also write a page per run in the folder <OUT's name>-runs/ beside it (timeline of model turns and "
                   "tool calls with tokens, cost and latency; answer beside ground truth; scores), linked from a Runs "
                   "section.")
def report(out: Path, k: int, agent: str | None, scenario: str | None, since: Any, include_harness: bool,
           run_pages: bool) -> None:
    """Write a self-contained static HTML report (inline SVG charts, no scripts, no network)."""
    from orchestrator import report as rep
    from orchestrator import results as res

    loaded = res.load(agent, scenario, since.timestamp() if since else None, include_harness)
    try:
        filters = [f"--{name} {value}" for name, value in (("agent", agent), ("scenario", scenario), ("since", since))
                   if value is not None]
        rep.write(writable(out, "--out"), loaded.trials, k, loaded.harness_left_out, filters, run_pages=run_pages)
    except OSError as exc:
        raise click.BadParameter(f"cannot write {out}: {exc.strerror}", param_hint="--out") from exc
    pages = f" and a page per run in {out.parent / (out.stem + '-runs')}/" if run_pages and loaded.trials else ""
    click.echo(f"wrote {out} ({len(loaded.trials)} run(s)){pages}")
    if loaded.harness_left_out:
        click.echo(loaded.left_out_note())


@click.command()
@click.option("--ground-truth", "gt_path", required=True, type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="The scenario's ground_truth.yaml.")
@click.option("--output", "output_path", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="The agent's output JSON (a missing file scores as no_submission).")
@click.option("--topology", "topo_path", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="topology.yml or a run's environment.json (default: the scenario's environment's topology).")
@click.option("--trajectory", "traj_path", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="The run's trajectory.jsonl: adds the process metrics under 'process'.")
@click.option("--judge", is_flag=True,
              help="Also ask the LLM judge configured by OPSBENCH_JUDGE_URL/_MODEL (never the only score).")
@click.option("--json", "as_json", is_flag=True, help="Print every metric as JSON.")
def score(gt_path: Path, output_path: Path, topo_path: Path | None, traj_path: Path | None, judge: bool,
          as_json: bool) -> None:
    """Score one agent diagnosis offline against a ground truth (deterministic: same input, same score)."""
    from orchestrator.evaluation.offline import render_scores, score_files
    from orchestrator.jsonfile import refuse_deep

    refuse_deep(output_path)  # the scorer parses these itself; input nested thousands deep is refused here
    if traj_path is not None:
        refuse_deep(traj_path, lines=True)
    result = score_files(gt_path, output_path, topo_path, traj_path, judge)
    for warning in result.get("warnings", []) if not as_json else []:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        emit_json(result)
        return
    if result:
        click.echo(render_scores({k: v for k, v in result.items() if k != "warnings"}))


@click.command()
@click.argument("run_ids", nargs=-1)
@click.option("--out", required=True, type=click.Path(path_type=Path),
              help="A new (or empty) folder, or an archive FILE.tar.gz (or .tgz).")
@click.option("--campaign", help="The trials of this campaign (`opsbench campaign --name`).")
@click.option("--agent", help="Only this agent (display name, name, model or exact command).")
@click.option("--scenario", help="Only runs of this scenario.")
@click.option("--since", type=DATE, help="Only runs started at or after DATE (local time).")
@click.option("--include-harness", is_flag=True,
              help="Also export the harness's own runs (`opsbench bench`'s no-op agent), left out by default.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def export(run_ids: tuple[str, ...], out: Path, campaign: str | None, agent: str | None, scenario: str | None,
           since: Any, include_harness: bool, as_json: bool) -> None:
    """Export runs (RUN_IDS, a --campaign, or every agent run the filters select) to a folder or a .tar.gz: each
    run's trajectory in ATIF and its page, the results and leaderboard as JSON, and the HTML report."""
    from orchestrator import export as ex

    ex.check_out(out)
    trials, skipped, selection = ex.select(run_ids, campaign, agent, scenario,
                                           since.timestamp() if since else None, include_harness)
    summary = ex.export(out, trials, skipped, selection, campaign)
    if as_json:
        emit_json(summary)
        return
    click.echo(f"exported {summary['runs']} run(s) to {out} ({summary['files']} files; index: {summary['index']})")
    for s in summary["skipped"]:
        click.echo(f"skipped {s['run_id']}: {s['reason']}", err=True)


COMMANDS = (results, leaderboard, report, score, export)
