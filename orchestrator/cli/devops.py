"""``opsbench devops``: the DevOps domain's upstream projects (library: `orchestrator.devops_projects`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from orchestrator.cli.common import emit_json


@click.group()
def devops() -> None:
    """The DevOps domain's real upstream projects (docs/devops.md, 'Real projects')."""


@devops.command()
@click.argument("ids", nargs=-1)
@click.option("--fetch", is_flag=True, help="Fetch and verify into the cache what is not there yet (network).")
@click.option("--check", "where", type=click.Choice(["host", "workspace"]), default=None,
              help="Build and test each project offline: with the host's toolchains or in the workspace image.")
@click.option("--record", is_flag=True, help="Keep the passing projects' times in measured.json (needs --check).")
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The cache folder (default: <state dir>/cache/devops-projects).")
@click.option("--all", "include_dropped", is_flag=True, help="List the dropped projects too (never fetched "
                                                             "unless named).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def projects(ids: tuple[str, ...], fetch: bool, where: str | None, record: bool, cache_dir: Path | None,
             include_dropped: bool, as_json: bool) -> None:
    """List the upstream projects, or fetch, verify, build and test them (IDS: some; default all active ones).

    Without --fetch or --check: the catalogue and what the cache holds. With them, one project at a time at the
    lowest CPU priority; a project that fails is reported with its step (fetch, verify, unpack, deps, build,
    test) and the rest go on; the exit status is 1 when any failed. `make devops-projects` runs
    `--fetch --check host` over all of them."""
    from orchestrator.devops_projects import catalogue as cat
    from orchestrator.devops_projects.fetch import Cache
    from orchestrator.devops_projects.run import default_cache, run_projects
    from orchestrator.devops_projects.run import record as record_figures

    catalogue = cat.load()
    cache = Cache(cache_dir.resolve()) if cache_dir else default_cache()
    if record and not where:
        raise click.UsageError("--record keeps measured times: add --check host or --check workspace")
    if not fetch and not where:
        listing = [{"id": p.id, "language": p.language, "coordinates": p.source.coordinates, "licence": p.licence,
                 "fetched": cache.fetched(p), "dropped": p.dropped}
                for p in catalogue.select(ids, include_dropped=include_dropped)]
        if as_json:
            emit_json(listing)
            return
        for row in listing:
            state = (f"dropped: {row['dropped']}" if row["dropped"]
                     else ("fetched" if row["fetched"] else "not fetched"))
            click.echo(f"{row['id']:<24} {row['coordinates']:<44} {row['licence']:<13} {state}")
        return
    def echo(msg: str) -> None:
        click.echo(msg, err=True)

    reports = run_projects(ids, fetch=fetch, check=where, cache=cache, catalogue=catalogue, progress=echo)
    if record and where:
        written = record_figures(reports, where)
        click.echo(f"recorded {len(written)} project(s) in {cat.MEASURED}", err=True)
    failed = [r for r in reports if r.error]
    if as_json:
        emit_json({"cache": str(cache.root), "projects": [r.as_dict() for r in reports], "failed": len(failed)})
    else:
        for r in reports:
            c = r.check or {}
            checked = (f"build {c['build_s']} s, test {c['test_s']} s, {c['passed']} passed, {c['failed']} failed "
                       f"({c['where']})" if c else "")
            fetched = ("cached" if r.cached else f"fetched in {r.fetch_s} s") if r.fetched else "not fetched"
            state = f"FAILED at {r.error['step']}" if r.error else "ok"
            click.echo(f"{r.id:<24} {state:<18} {fetched:<20} {checked}")
        for r in failed:
            click.echo(f"error: {r.error['message'] if r.error else ''}", err=True)
    if failed:
        sys.exit(1)


@devops.command()
@click.option("--project", "project_ids", multiple=True, help="A project id (repeat; default: every active one).")
@click.option("--family", "families", multiple=True,
              type=click.Choice(["issue", "testgen", "build", "monitoring", "pipeline"]),
              help="A task family (repeat; default: all five; pipeline chains instances drawn before).")
@click.option("--from", "sources", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="An output folder of earlier draws whose instances a pipeline may chain (repeat; --out always).")
@click.option("--seed", help="The seed the draw order derives from (with project and family): a published one for the "
                            "dev split.")
@click.option("--seed-file", type=click.Path(path_type=Path, dir_okay=False),
              help="A file whose first line is the seed: a private one for the held-out test split (never printed nor "
                   "written; the files and output carry its sha256 digest).")
@click.option("--exclude", "exclude", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="With --seed-file: an output folder of the public split (repeat); its instances, and pipelines "
                   "chaining one, are taken out of the private split (listed in OUT/split.json).")
@click.option("--count", type=click.IntRange(1, 500), default=5, show_default=True,
              help="Verified instances wanted per project and family.")
@click.option("--max-draws", type=click.IntRange(0, 5000), default=0,
              help="Candidates tried at most per project and family (default 6 x count + 10, 20 x for testgen).")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Where the instances go: one scenario folder each, and yields.json.")
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The projects' cache (default: <state dir>/cache/devops-projects).")
@click.option("--where", type=click.Choice(["host", "workspace"]), default="host", show_default=True,
              help="Prove each instance with the host's toolchains or in the workspace image (where evaluate_workspace "
                   "runs; slower). Screening always runs on the host.")
@click.option("--record", is_flag=True, help="Keep the yields in orchestrator/devops_projects/yields.json (the docs' "
                                           "table).")
@click.option("--json", "as_json", is_flag=True, help="Print the yields as JSON.")
def generate(project_ids: tuple[str, ...], families: tuple[str, ...], seed: str | None, seed_file: Path | None,
             exclude: tuple[Path, ...], count: int, max_draws: int, out: Path, cache_dir: Path | None, where: str,
             record: bool, as_json: bool, sources: tuple[Path, ...]) -> None:
    """Draw DevOps tasks from the fetched upstream projects and keep only the verified ones.

    issue: a mutation of the project's code that tests it already has catch (those tests are hidden, the issue is
    written from what they observed); testgen: a mutation no test catches, with a recorded test that does (Python);
    build: a build cause applied to the real build file; monitoring: a process anomaly beside the project, proven
    live in the workspace image; pipeline: a build instance and an issue or test-generation instance chained. Each
    kept fix or test instance is proven by `make check` on fresh copies (the untouched state fails, the reference
    passes) and written as a scenario folder. Builds and tests
    run on the host, one at a time at the lowest CPU priority. Exit status 1 when a project failed.

    The held-out test split: `--seed-file FILE --exclude <the dev split's folders>` (docs/devops.md)."""
    from orchestrator.cli.generate import read_seed
    from orchestrator.devops_projects.fetch import Cache, StepFailed
    from orchestrator.devops_projects.generate import FAMILIES, YIELDS, record_yields
    from orchestrator.devops_projects.generate import generate as draw
    from orchestrator.devops_projects.tasks import Report

    def echo(msg: str) -> None:
        click.echo(msg, err=True)

    def recorded(report: Report) -> None:
        if record:  # after each project and family: an interrupted run keeps what it finished
            record_yields([report])

    the_seed = read_seed(seed, seed_file)
    if seed_file is None and exclude:
        raise click.UsageError("--exclude goes with --seed-file (the private split is drawn disjoint from the public)")
    if seed_file is not None and record:
        raise click.UsageError("--record keeps the public split's yields for the docs: a private split's stay in "
                               "OUT/yields.json and OUT/split.json")
    options: dict[str, Any] = {"max_draws": max_draws, "cache": Cache(cache_dir.resolve()) if cache_dir else None,
                               "say": echo, "where": where, "sources": [p.resolve() for p in sources]}
    try:
        if seed_file is None:
            reports = draw(list(project_ids), list(families or FAMILIES), the_seed, count, out.resolve(),
                           done=recorded, **options)
            summaries = [r.summary() for r in reports]
            shown, failed = the_seed, any(r.error for r in reports)
        else:
            from orchestrator.devops_projects.split import check_private_seed, generate_private

            check_private_seed(the_seed, str(seed_file))
            split = generate_private(draw, list(project_ids), list(families or FAMILIES), the_seed, count,
                                     out.resolve(), exclude=[p.resolve() for p in exclude], **options)
            summaries, shown = split["yields"], split["seed"]
            failed = any(s["error"] for s in summaries)
            if split["excluded"]:
                echo(f"{len(split['excluded'])} instance(s) taken out as the public split's (see {out}/split.json)")
    except StepFailed as exc:
        raise click.ClickException(str(exc)) from None
    if record:
        click.echo(f"recorded {len(reports)} yield(s) in {YIELDS}", err=True)
    if as_json:
        emit_json({"out": str(out), "seed": shown, "yields": summaries})
    else:
        for s in summaries:
            per = f"{s['seconds_per_kept']} s per kept" if s["seconds_per_kept"] else ""
            state = f"ERROR {s['error']}" if s["error"] else f"kept {s['kept']} of {s['drawn']} drawn"
            click.echo(f"{s['project']:<24} {s['family']:<8} {state} ({s['candidates']} candidates) {per}")
    if failed:
        sys.exit(1)


@devops.command("verify-generated")
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--where", type=click.Choice(["host", "workspace"]), default="host", show_default=True,
              help="Run make check with the host's toolchains or in the workspace image (as evaluate_workspace).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def verify_generated(folders: tuple[Path, ...], where: str, as_json: bool) -> None:
    """Prove generated instances again from their files alone (FOLDERS: instance folders, or output folders of
    `devops generate` holding them): the untouched state must fail, the reference pass. Exit status 1 when any
    is not proven."""
    import time

    from orchestrator.devops_projects.generate import verify_written

    instances = sorted({f for folder in folders for f in ([folder] if (folder / "scenario.yaml").is_file()
                                                          else [p.parent for p in folder.glob("*/scenario.yaml")])})
    results = []
    for folder in instances:
        started = time.monotonic()
        why, proof = verify_written(folder, where)
        results.append({"instance": folder.name, "proven": not why, "reason": why, "proof": proof,
                        "seconds": round(time.monotonic() - started, 1)})
        click.echo(f"{folder.name:<52} {'proven' if not why else 'NOT PROVEN: ' + why} "
                   f"({results[-1]['seconds']} s, {where})", err=True)
    if as_json:
        emit_json({"where": where, "results": results})
    if not instances or any(not r["proven"] for r in results):
        sys.exit(1)


COMMANDS = [devops]
