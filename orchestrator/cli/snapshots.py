"""`opsbench snapshot`: record, export, import, verify and list frozen incidents (library:
`orchestrator.harness.record` and `orchestrator.snapshots.corpus`; docs/snapshots.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from orchestrator.cli.common import echo_err, emit_json, progress, written

_DIR = click.Path(path_type=Path, file_okay=False)
_PATH = click.Path(path_type=Path)


@click.group()
def snapshot() -> None:
    """Frozen incidents: record a live incident at handover once, share and verify it (see docs/snapshots.md)."""


@snapshot.command()
@click.argument("scenarios", nargs=-1)
@click.option("--out", type=_DIR, help="Where the snapshot directories go.  [default: <state dir>/snapshots]")
@click.option("--repeats", default=1, show_default=True, type=click.IntRange(1, 50),
              help="Snapshots per scenario (each a fresh incident on the shared environment).")
@click.option("--parallel", default=1, show_default=True, type=click.IntRange(1, 8),
              help="Environments recording at once (each its own deployment).")
@click.option("--all", "every", is_flag=True,
              help="Every replayable scenario (diagnosis tasks on the local backend).")
@click.option("--window-cap", default=30.0, show_default=True, type=click.FloatRange(1, 24 * 60),
              help="Longest evidence window before handover, in minutes.")
@click.option("--check", "check_replay", is_flag=True,
              help="Also run the baseline agent live on each recording, then replay it on the new snapshot and "
                   "compare (same diagnosis, same scores); exits 1 on a mismatch.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (progress stays on stderr).")
@click.option("--quiet", is_flag=True, help="No progress output.")
def record(scenarios: tuple[str, ...], out: Path | None, repeats: int, parallel: int, every: bool,
           window_cap: float, check_replay: bool, as_json: bool, quiet: bool) -> None:
    """Record SCENARIOS live as snapshots: deploy, baseline, inject, manifestation, handover, capture, then
    revoke, remove, recovery and teardown as a run does. Scenarios on one environment share one deployment.
    With --check, the live trial of the baseline agent and its replay are compared (docs/snapshots.md)."""
    from orchestrator.harness.record import as_dicts, choose, describe, render
    from orchestrator.harness.record import record as record_all
    from orchestrator.snapshots.corpus import default_corpus

    chosen = choose(scenarios, every)
    target = out or default_corpus()
    echo = echo_err(quiet)
    echo(f"recording {len(chosen)} scenario(s) x {repeats} into {target}")
    made = record_all(chosen, target, repeats, progress(quiet), lambda r: echo(describe(r)), window_cap * 60,
                      live_trial=check_replay, parallel=parallel)
    ok = bool(made) and all(r.ok for r in made)
    checks = []
    if check_replay:
        from orchestrator.harness import record_check as chk

        for rec in made:
            if rec.ok:
                echo(f"checking {rec.snapshot_id}: replaying the baseline agent")
                checks.append(chk.check(rec.scenario, Path(rec.path), rec.snapshot_id, rec.run_id, progress(quiet)))
        ok = ok and all(c.ok for c in checks)
    if as_json:
        emit_json({"ok": ok, "out": str(target), "recordings": as_dicts(made),
                   **({"checks": chk.as_dicts(checks)} if check_replay else {})})
    else:
        click.echo(render(made))
        if check_replay:
            click.echo(chk.render(checks))
    sys.exit(0 if ok else 1)


@snapshot.command("export")
@click.argument("directory", type=_PATH)
@click.option("--out", type=_PATH, help="The archive (.tar.gz, .tgz, .tar.xz, .txz).  "
                                        "[default: ./<snapshot id>.tar.gz]")
def export_command(directory: Path, out: Path | None) -> None:
    """Verify the snapshot DIRECTORY and pack it into one compressed archive to share."""
    from orchestrator.snapshots.corpus import export_snapshot

    made = export_snapshot(directory, None) if out is None else \
        written("--out", out, lambda archive: export_snapshot(directory, archive))
    click.echo(f"{made} ({made.stat().st_size / 1e6:.2f} MB)")


@snapshot.command("import")
@click.argument("archive", type=_PATH)
@click.option("--into", "corpus", type=_DIR, help="The corpus to import into.  [default: <state dir>/snapshots]")
def import_command(archive: Path, corpus: Path | None) -> None:
    """Extract and verify ARCHIVE into the corpus as <corpus>/<snapshot id> (nothing is kept when it fails)."""
    from orchestrator.snapshots.corpus import import_snapshot

    info = import_snapshot(archive, corpus)
    click.echo(f"{info.snapshot_id}: {info.scenario_id}, {len(info.files)} files -> {info.path}")


@snapshot.command("verify")
@click.argument("paths", nargs=-1, required=True, type=_PATH)
@click.option("--no-replay", is_flag=True,
              help="Check only the files (checksums, schema, versions, scenario): no replay, no Prometheus needed.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def verify_command(paths: tuple[Path, ...], no_replay: bool, as_json: bool) -> None:
    """Check snapshot directories or archives: checksums, schema, format and OpsBench version, scenario; then
    replay the scenario's baseline agent once on each good one (a run tagged `verify`, left out of results).

    Every PATH is checked; each bad one gets one error line naming the snapshot, the file and the problem (or what
    went wrong in its replay), and the exit status is non-zero when any is bad."""
    from orchestrator.harness.replay import replay_baseline
    from orchestrator.snapshots.corpus import verify_path
    from orchestrator.snapshots.format import SnapshotError

    results = []
    for path in paths:
        try:
            info = verify_path(path)
        except SnapshotError as exc:
            results.append({"path": str(path), "ok": False, "error": str(exc)})
            if not as_json:
                click.echo(f"error: {exc}", err=True)
            continue
        result: dict[str, Any] = {"path": str(path), "ok": True, "snapshot_id": info.snapshot_id,
                                  "scenario": info.scenario_id, "files": len(info.files)}
        line = f"{info.snapshot_id}: {info.scenario_id}, {len(info.files)} files verified ({path})"
        if not no_replay:
            if not as_json:
                click.echo(f"{info.snapshot_id}: replaying the baseline agent ...", err=True)
            baseline = replay_baseline(path, progress=progress(True))  # one line per snapshot says enough
            result["replay"] = {"run_id": baseline.run_id, "status": baseline.status, "seconds": baseline.seconds,
                                "scores": baseline.scores, "problem": baseline.problem}
            result["ok"] = baseline.ok
            line += f"; baseline agent replayed: {baseline.summary()}"
            if not baseline.ok:
                result["error"] = f"snapshot {path}: {baseline.problem} (run {baseline.run_id})"
        results.append(result)
        if not as_json:
            click.echo(f"ok {line}" if result["ok"] else f"error: {line}", err=not result["ok"])
    if as_json:
        emit_json(results)
    sys.exit(0 if all(r["ok"] for r in results) else 2)


@snapshot.command("list")
@click.argument("corpus", required=False, type=_PATH)
@click.option("--json", "as_json", is_flag=True, help="Print the corpus as JSON.")
def list_command(corpus: Path | None, as_json: bool) -> None:
    """List the snapshots of CORPUS (default: <state dir>/snapshots) from their indexes (see `verify`)."""
    from orchestrator.snapshots.corpus import list_corpus, render_corpus

    entries = list_corpus(corpus)
    if as_json:
        emit_json([e.as_dict() for e in entries])
    else:
        click.echo(render_corpus(entries))


COMMANDS = (snapshot,)
