"""Commands on the scenario catalog: list, validate, docs (libraries: `catalog`, `validate`, `docgen`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator.cli.common import emit_json


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print problems as JSON.")
def validate(paths: tuple[Path, ...], as_json: bool) -> None:
    """Validate scenario specs (default: all under scenario_specs/)."""
    from orchestrator.spec import spec_files
    from orchestrator.validate import validate_paths

    roots = list(paths) or None
    problems = validate_paths(roots)
    count = len(spec_files(roots))
    if as_json:
        emit_json({"specs": count, "problems": [p.__dict__ for p in problems]})
    else:
        for p in problems:
            click.echo(f"{p}", err=True)
        click.echo(f"{count} spec(s) checked, {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def list_(as_json: bool) -> None:
    """List the scenarios."""
    from orchestrator.catalog import render_scenario_rows, scenario_rows

    rows = scenario_rows()
    if as_json:
        emit_json(rows)
        return
    click.echo(render_scenario_rows(rows))


@click.command()
@click.option("--check", is_flag=True, help="Fail if the generated docs are stale instead of writing them.")
def docs(check: bool) -> None:
    """Generate the reference docs and catalogs.

    docs/scenario-spec.md and docs/ground-truth.md from the JSON Schemas, docs/faults.md from
    every fault role's argument spec, docs/scenarios.md from every scenario spec and ground truth.
    """
    from orchestrator.docgen import write_docs

    stale = write_docs(check=check)
    if check and stale:
        click.echo(f"stale generated docs: {', '.join(stale)}; run `opsbench docs`", err=True)
        sys.exit(1)
    click.echo("generated docs are current" if check else "docs written")


COMMANDS = (validate, list_, docs)
