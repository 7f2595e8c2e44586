"""Commands on single runs: run, runs, show, cleanup, topology (library: `orchestrator.runs`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator import store
from orchestrator.cli.common import agent_network_option, echo_err, emit_json, progress


@click.command()
@agent_network_option
@click.argument("scenario")
@click.option("--agent", help="Agent command, run with OPSBENCH_MANIFEST set, or a preset (`opsbench agents`) "
                             "(default: the heuristic baseline agent).")
@click.option("--keep", is_flag=True, help="Leave the environment deployed after the run.")
@click.option("--tool-profile", default="full", show_default=True,
              type=click.Choice(["full", "no-traces", "metrics-only", "observe-only"]),
              help="Which tools the gateway offers the agent (evidence ablations, as in CUJBench).")
@click.option("--remote-agent", "remote_port", type=click.IntRange(0, 65535), default=None, metavar="PORT",
              help="Serve the HTTP agent API on PORT for a remote agent instead of running a command; the key is "
                   "OPSBENCH_AGENT_API_KEY (or the file in OPSBENCH_AGENT_API_KEY_FILE).")
@click.option("--backend", type=click.Choice(["local", "kubernetes"]), default=None,
              help="Expect the scenario's backend to be this one (kubernetes: the cluster of KUBECONFIG).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (progress stays on stderr).")
@click.option("--quiet", is_flag=True, help="No progress output.")
def run(scenario: str, agent: str | None, keep: bool, tool_profile: str, remote_port: int | None,
        backend: str | None, as_json: bool, quiet: bool) -> None:
    """Run SCENARIO (an id or a path) end to end: deploy, inject, agent, evaluate, clean up."""
    from orchestrator.agents.presets import resolve
    from orchestrator.run_views import render_summary
    from orchestrator.runs import exit_code, run_scenario

    summary = run_scenario(scenario, resolve(agent), keep=keep, tool_profile=tool_profile, remote_port=remote_port,
                           backend=backend, progress=progress(quiet), echo=echo_err(quiet))
    if as_json:
        emit_json(summary)
    else:
        click.echo(render_summary(summary))
    sys.exit(exit_code(summary))


@click.command()
@click.option("--scenario", help="Only runs of this scenario.")
@click.option("--limit", default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def runs(scenario: str | None, limit: int, as_json: bool) -> None:
    """List recorded runs, newest first."""
    from orchestrator.run_views import render_runs

    rows = store.list_runs(limit=limit, scenario=scenario)
    if as_json:
        emit_json(rows)
        return
    click.echo(render_runs(rows))


@click.command()
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True)
@click.option("--atif", is_flag=True, help="Print the run's trajectory in ATIF (Agent Trajectory Interchange Format, "
              "as Harbor uses it): model turns, tool calls with arguments and answers, timings, tokens.")
@click.option("--html", "html_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the run's page to FILE: the timeline of its model turns and tool calls (tokens, cost, "
                   "latency per call), its answer beside the ground truth, each score with its reason.")
def show(run_id: str, as_json: bool, atif: bool, html_file: Path | None) -> None:
    """Show one run: its phase timeline and outcome."""
    from orchestrator.run_views import render_run
    from orchestrator.runs import load_run

    run = load_run(run_id)
    if html_file is not None:
        from orchestrator import run_page
        from orchestrator.cli.common import writable

        out = writable(html_file, "--html")
        try:
            run_page.write(Path(str(run["run_dir"])), out)
        except OSError as exc:
            raise click.BadParameter(f"cannot write {out}: {exc.strerror}", param_hint="--html") from exc
        if not (as_json or atif):
            click.echo(f"wrote {out}")
    if atif:
        from orchestrator.atif import build

        emit_json(build(Path(str(run["run_dir"]))))
        return
    if as_json:
        emit_json(run)
        return
    if html_file is None:
        click.echo(render_run(run))


@click.command()
@click.argument("run_ids", nargs=-1)
@click.option("--teardown", is_flag=True, help="Also tear down environments kept with `run --keep`.")
@click.option("--json", "as_json", is_flag=True)
def cleanup(run_ids: tuple[str, ...], teardown: bool, as_json: bool) -> None:
    """Finish removal and teardown of interrupted runs (default: every run whose process is gone)."""
    from orchestrator.runs import cleanup_runs

    results = cleanup_runs(list(run_ids), teardown, lambda: progress(False))
    if as_json:
        emit_json(results)
    else:
        for r in results:
            click.echo(f"{r['run_id']}: ran {', '.join(r['steps']) or 'nothing'}; cleanup {r['cleanup']}")
        if not results:
            click.echo("nothing to clean up")
    sys.exit(0 if all(r["cleanup"] == "done" for r in results) else 1)


@click.command()
@click.argument("run_id")
def topology(run_id: str) -> None:
    """Print a deployed run's topology (declared entities and edges + calls measured from traces) as JSON."""
    from orchestrator import paths
    from orchestrator.jsonfile import read_json
    from orchestrator.topology import deployed_run_topology

    environment = paths.runs_dir() / run_id / "environment.json"
    if environment.is_file():
        read_json(environment)  # not UTF-8, malformed or nested too deep: one error naming the file
    emit_json(deployed_run_topology(run_id))


COMMANDS = (run, runs, show, cleanup, topology)
