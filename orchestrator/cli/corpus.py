"""`opsbench corpus`: build a corpus of incidents proven live and frozen, and write its dataset card (library:
`orchestrator.harness.corpus_build` and `orchestrator.corpus`; docs/generation.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator.cli.common import echo_err, emit_json, progress, written
from orchestrator.cli.generate import read_seed


@click.group()
def corpus() -> None:
    """Corpora of frozen incidents: drawn from templates (or fixed scenarios), proven live, recorded, carded."""


@corpus.command()
@click.argument("folders", nargs=-1, required=True, type=click.Path(path_type=Path, file_okay=False, exists=True))
def incidents(folders: tuple[Path, ...]) -> None:
    """Print the incident digests of generated FOLDERS (what `opsbench generate` writes, or built corpora), sorted,
    one per line: the form a published split is kept in once its templates change, for `--exclude FILE`."""
    from orchestrator.draw import excluded_incidents

    for digest in sorted(excluded_incidents(folders)):
        click.echo(digest)


@corpus.command()
@click.option("--templates", "templates", multiple=True, metavar="TEMPLATE",
              help="A template to draw from (repeat the option, or give them space-separated in one value).")
@click.option("--all-templates", "every", is_flag=True,
              help="Draw from every template of the catalog whose instances can be frozen (diagnosis tasks).")
@click.option("--scenarios", "scenarios", multiple=True, metavar="SCENARIO",
              help="Instead of templates: fixed scenarios to freeze as a corpus (to compare against).")
@click.option("--reuse-snapshots", "reuse", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="With --scenarios: a folder of snapshots already recorded (e.g. by `snapshot record --check`); "
                   "a scenario with a verified one there is not recorded again.")
@click.option("--seed", help="The seed (a published one for a dev split).")
@click.option("--seed-file", type=click.Path(path_type=Path, dir_okay=False),
              help="A file whose first line is the seed (a private one for a held-out split; never printed or "
                   "written).")
@click.option("--count", default=0, type=click.IntRange(0, 100000), help="Instances to draw in all.")
@click.option("--exclude", "exclude", multiple=True, type=click.Path(path_type=Path, exists=True),
              help="A public split's folder (what `opsbench generate` writes, or a built corpus) or a file of its "
                   "incident digests (`opsbench corpus incidents`): no instance drawn is an incident there (the same "
                   "faults, arguments, distractors, offset and load). Repeatable.")
@click.option("--out", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="The corpus folder: new or empty, or one this build started (to resume it).")
@click.option("--parallel", default=1, show_default=True, type=click.IntRange(1, 8),
              help="Environments recording (and frozen environments replaying) at once.")
@click.option("--replays", default=1, show_default=True, type=click.IntRange(0, 20),
              help="Baseline-agent replays per instance: its measured difficulty.")
@click.option("--window-cap", default=30.0, show_default=True, type=click.FloatRange(1, 24 * 60),
              help="Longest evidence window before handover, in minutes.")
@click.option("--retry-dropped", is_flag=True,
              help="Resuming: record again the instances an earlier run dropped (a build disturbed by its machine); "
                   "their earlier reasons stay in build.json and the card counts the retried ones.")
@click.option("--json", "as_json", is_flag=True, help="Print the build record as JSON (progress stays on stderr).")
@click.option("--quiet", is_flag=True, help="No progress output.")
def build(templates: tuple[str, ...], every: bool, scenarios: tuple[str, ...], reuse: Path | None,
          seed: str | None, seed_file: Path | None, count: int, exclude: tuple[Path, ...], out: Path, parallel: int,
          replays: int, window_cap: float, retry_dropped: bool, as_json: bool, quiet: bool) -> None:
    """Draw COUNT instances from TEMPLATES with a seed, prove each live and record it as a snapshot in one trial,
    drop what does not manifest or recover, replay the baseline agent on each, check that nothing an agent reads
    names a template, mechanism or fault, and index the corpus. Run it again with the same arguments to resume.
    Exit 1 when an instance was dropped or a leak was found (the record says which)."""
    from orchestrator.corpus.card import card, render
    from orchestrator.draw import excluded_incidents
    from orchestrator.harness.corpus_build import BuildRequest
    from orchestrator.harness.corpus_build import build as build_corpus
    from orchestrator.harness.record import replayable_templates

    names = tuple(n for value in templates for n in value.split())
    if every:
        if names:
            raise click.UsageError("give --templates or --all-templates, not both")
        names = replayable_templates()
    fixed = tuple(n for value in scenarios for n in value.split())
    the_seed = read_seed(seed, seed_file) if names else None
    if fixed and (seed or seed_file):
        raise click.UsageError("--seed and --seed-file draw from templates: give none with --scenarios")
    req = BuildRequest(templates=names, scenarios=fixed, seed=the_seed, count=count, replays=replays,
                       parallel=parallel, window_cap_s=window_cap * 60, reuse=reuse, retry_dropped=retry_dropped,
                       exclude=excluded_incidents(exclude))
    record = build_corpus(req, out, progress(quiet), echo_err(quiet))
    dropped = [i for i in record["instances"] if i["status"] == "dropped"]
    leaks = record["leak_check"]["leaks"]
    if as_json:
        emit_json({"ok": not dropped and not leaks, "out": str(out), **record})
    else:
        click.echo(render([card(out)]))
    sys.exit(0 if not dropped and not leaks else 1)


@corpus.command("card")
@click.argument("corpus_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--compare", multiple=True, type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="Another built corpus whose baseline pass@1 per level is shown beside this one's (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the card(s) as JSON.")
def card_cmd(corpus_dir: Path, compare: tuple[Path, ...], as_json: bool) -> None:
    """Write CORPUS_DIR's dataset card (card.md and card.json in it) and print it: counts by domain, class, level
    and mechanism, yields and verification figures, sizes, the OpsBench version, the checksum, and the baseline's
    pass@1 per level beside each --compare corpus's."""
    import json

    from orchestrator.corpus import layout
    from orchestrator.corpus.card import card, render

    cards = [card(corpus_dir), *(card(c) for c in compare)]
    text = render(cards)
    written("CORPUS_DIR", corpus_dir / layout.CARD_MD, lambda p: p.write_text(text))
    written("CORPUS_DIR", corpus_dir / layout.CARD_JSON,
            lambda p: p.write_text(json.dumps({"card": cards[0], "compared": cards[1:]}, indent=2, sort_keys=True)
                                   + "\n"))
    if as_json:
        emit_json({"card": cards[0], "compared": cards[1:]})
    else:
        click.echo(text, nl=False)


COMMANDS = (corpus,)
