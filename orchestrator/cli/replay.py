"""``opsbench replay``: agents on recorded snapshots (library: `orchestrator.harness.replay`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator.cli.common import agent_network_option, echo_err, emit_json, progress


@click.command()
@agent_network_option
@click.argument("snapshots", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True))
@click.option("--agent", help="Agent command or preset (`opsbench agents`) (default: the scenario's baseline agent).")
@click.option("--trials", default=1, show_default=True, type=click.IntRange(1, 1000), help="Trials per snapshot.")
@click.option("--parallel", default=1, show_default=True, type=click.IntRange(1, 8),
              help="Frozen environments at once (a snapshot's trials are split among them).")
@click.option("--tool-profile", default="full", show_default=True,
              type=click.Choice(["full", "no-traces", "metrics-only", "observe-only"]),
              help="The tools the agent gets.")
@click.option("--json", "as_json", is_flag=True, help="Print the trials as JSON (progress stays on stderr).")
@click.option("--quiet", is_flag=True, help="No progress output.")
def replay(snapshots: tuple[Path, ...], agent: str | None, trials: int, parallel: int, tool_profile: str,
           as_json: bool, quiet: bool) -> None:
    """Replay frozen incidents: run an agent on each SNAPSHOT (a directory, or an archive from `snapshot export`).

    Each trial is handover -> agent -> collect -> evaluate -> revoke on a frozen environment that serves the
    snapshot through the usual gateway (same tools, REST + MCP, budgets, trajectory; control tools absent; every
    relative time resolved against the recorded "now"), scored by the scenario's evaluators. Runs are recorded
    with mode `replay` and the snapshot id. Exits 1 when a trial did not complete."""
    from orchestrator.agents.presets import resolve
    from orchestrator.harness.replay import as_dicts, render
    from orchestrator.harness.replay import replay as run_replay

    echo = echo_err(quiet)
    records = run_replay(list(snapshots), resolve(agent), trials, parallel, tool_profile, progress(quiet),
                         on_record=lambda r: echo(f"{r.snapshot_id} trial {r.trial}: {r.status}"
                                                  + (f" pass={r.passed}" if r.passed is not None else "")))
    if as_json:
        emit_json({"trials": as_dicts(records)})
    else:
        click.echo(render(records))
    sys.exit(0 if records and all(r.status == "completed" for r in records) else 1)


COMMANDS = [replay]
