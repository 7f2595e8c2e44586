"""``opsbench generate``: instances drawn from templates (library: `orchestrator.generation`; docs/generation.md)."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.cli.common import emit_json
from orchestrator.draw import generate_into


def read_seed(seed: str | None, seed_file: Path | None) -> str:
    """The seed given on the command line or the first line of the seed file (kept private: never printed)."""
    if (seed is None) == (seed_file is None):
        raise click.UsageError("give exactly one of --seed and --seed-file")
    if seed_file is None:
        assert seed is not None
        return seed
    try:
        text = seed_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read {seed_file}: {getattr(exc, 'strerror', None) or exc}",
                                 param_hint="--seed-file") from exc
    if not text:
        raise click.BadParameter(f"{seed_file} is empty: write the seed on its first line", param_hint="--seed-file")
    return text.splitlines()[0].strip()


@click.command()
@click.argument("templates", nargs=-1)
@click.option("--all-templates", "every", is_flag=True,
              help="Draw from every template whose instances can be frozen (as `corpus build --all-templates`).")
@click.option("--seed", help="The seed (a published one for a dev split).")
@click.option("--seed-file", type=click.Path(path_type=Path, dir_okay=False),
              help="A file whose first line is the seed (a private one for a held-out split; never printed).")
@click.option("--count", required=True, type=click.IntRange(1, 100000), help="Instances to draw in all.")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False),
              help="Where instances are written, one folder each (default: <state dir>/generated).")
@click.option("--exclude", "exclude", multiple=True, type=click.Path(path_type=Path, exists=True),
              help="A public split's folder, or a file of its incident digests: no instance drawn is an incident there "
                   "(as `corpus build --exclude`). Repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def generate(templates: tuple[str, ...], every: bool, seed: str | None, seed_file: Path | None, count: int,
             out: Path | None, exclude: tuple[Path, ...], as_json: bool) -> None:
    """Draw COUNT incidents from TEMPLATES (scenario ids or paths of specs with a `vary` section).

    The same templates, seed and count give byte-identical files. Each instance gets an opaque id and a ground
    truth derived from its fault's effect model and the topology; every instance is validated before any is
    written. Verify them live with `opsbench verify-scenarios <out>/<id> ...`."""
    from orchestrator import paths
    from orchestrator.draw import excluded_incidents
    from orchestrator.harness.record import replayable_templates

    if every == bool(templates):
        raise click.UsageError("give TEMPLATES or --all-templates (one of them)")
    names = replayable_templates() if every else templates
    result = generate_into(names, read_seed(seed, seed_file), count, out or paths.state_dir() / "generated",
                           excluded_incidents(exclude))
    if as_json:
        emit_json(result)
        return
    for inst in result["instances"]:
        click.echo(f"{inst['id']}  {inst['level']:<6}  {inst['template']}  {inst['draw']}")
    for drop in result["dropped"]:
        click.echo(f"dropped {drop['template']} {drop['draw']}: {drop['reason']}")
    short = f" ({result['requested']} asked; the rest of the draws were dropped)" \
        if result["count"] < result["requested"] else ""
    click.echo(f"{result['count']} instance(s) written to {result['out']}{short}")


COMMANDS = (generate,)
