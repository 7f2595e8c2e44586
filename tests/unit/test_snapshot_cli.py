"""`opsbench snapshot export|import|verify|list` through the command line: the round trip, and every bad input
giving one clear error (snapshot, file, problem), a non-zero exit and nothing left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from snapshot_fixtures import make_snapshot

from orchestrator import paths, store
from orchestrator.cli import main
from orchestrator.snapshots import format as fmt

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)
SAMPLE = next((paths.PROJECT_ROOT / "tests" / "data" / "snapshots").glob("shop-cart-down-*.tar.gz"))


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, ["snapshot", *args])


def exported(tmp_path: Path) -> tuple[fmt.SnapshotInfo, Path]:
    info = make_snapshot(tmp_path / "snap")
    res = cli("export", str(info.path), "--out", str(tmp_path / "s.tar.gz"))
    assert res.exit_code == 0, res.output
    return info, tmp_path / "s.tar.gz"


def edit_index(root: Path, **fields: object) -> None:
    data = json.loads((root / fmt.INDEX).read_text())
    data.update(fields)
    (root / fmt.INDEX).write_text(json.dumps(data))


def test_export_import_list_verify_round_trip(tmp_path: Path, home: Path) -> None:
    info, archive = exported(tmp_path)
    res = cli("import", str(archive))
    assert res.exit_code == 0, res.output
    imported = home / "snapshots" / info.snapshot_id
    assert (imported / fmt.INDEX).is_file() and info.snapshot_id in res.output
    listing = cli("list", "--json")
    assert listing.exit_code == 0
    rows = json.loads(listing.output)
    assert [(r["snapshot_id"], r["scenario"], r["files"], r["problem"]) for r in rows] == \
        [(info.snapshot_id, "shop-cart-down", 3, "")]
    assert rows[0]["window_s"] == 600.0 and rows[0]["families"] == ["alerts", "logs"]
    assert info.snapshot_id in cli("list").output
    res = cli("verify", "--no-replay", str(imported), str(archive))  # a made-up snapshot: no TSDB to replay
    assert res.exit_code == 0, res.output
    assert res.output.count(f"ok {info.snapshot_id}") == 2
    # Verifying an archive extracts it privately and keeps nothing.
    assert sorted(p.name for p in (home / "snapshots").iterdir()) == [info.snapshot_id]


def test_export_defaults_to_the_snapshot_id_in_the_working_directory(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    info = make_snapshot(tmp_path / "snap")
    monkeypatch.chdir(tmp_path)
    res = cli("export", str(info.path))
    assert res.exit_code == 0, res.output
    assert (tmp_path / f"{info.snapshot_id}.tar.gz").is_file()


def test_import_into_another_corpus_and_refuse_a_second_import(tmp_path: Path) -> None:
    info, archive = exported(tmp_path)
    assert cli("import", str(archive), "--into", str(tmp_path / "c")).exit_code == 0
    again = cli("import", str(archive), "--into", str(tmp_path / "c"))
    assert again.exit_code != 0 and "already exists" in again.output
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [info.snapshot_id]


def test_truncated_archive_import_and_verify(tmp_path: Path) -> None:
    _, archive = exported(tmp_path)
    archive.write_bytes(archive.read_bytes()[:200])
    for res in (cli("import", str(archive), "--into", str(tmp_path / "c")), cli("verify", str(archive))):
        assert res.exit_code != 0
        assert f"snapshot {archive}" in res.output and "truncated or corrupt archive" in res.output
    assert list((tmp_path / "c").iterdir()) == []


def test_checksum_mismatch_is_named_and_export_writes_nothing(tmp_path: Path) -> None:
    info = make_snapshot(tmp_path / "snap")
    alerts = info.path / fmt.ALERTS
    alerts.write_text(alerts.read_text().replace("ServiceDown", "ServiceDowm"))  # same size, other bytes
    res = cli("verify", str(info.path))
    assert res.exit_code != 0
    assert f"snapshot {info.path}: alerts.json: checksum mismatch" in res.output
    res = cli("export", str(info.path), "--out", str(tmp_path / "x.tar.gz"))
    assert res.exit_code != 0 and "checksum mismatch" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap"]


def test_missing_file(tmp_path: Path) -> None:
    info = make_snapshot(tmp_path / "snap")
    (info.path / "telemetry" / "logs" / "cart-1.jsonl").unlink()
    res = cli("verify", str(info.path))
    assert res.exit_code != 0
    assert "telemetry/logs/cart-1.jsonl: missing (listed in snapshot.json)" in res.output


def test_missing_snapshot_and_not_a_snapshot(tmp_path: Path) -> None:
    res = cli("verify", str(tmp_path / "nowhere"))
    assert res.exit_code != 0 and "no such snapshot directory or archive" in res.output
    (tmp_path / "notes.txt").write_text("x")
    res = cli("verify", str(tmp_path / "notes.txt"))
    assert res.exit_code != 0 and "neither a snapshot directory nor an archive" in res.output
    (tmp_path / "empty").mkdir()
    res = cli("export", str(tmp_path / "empty"))
    assert res.exit_code != 0 and "snapshot.json: missing" in res.output
    res = cli("import", str(tmp_path / "nowhere.tar.gz"))
    assert res.exit_code != 0 and "no such archive" in res.output


def test_unknown_format_version(tmp_path: Path) -> None:
    info = make_snapshot(tmp_path / "snap")
    edit_index(info.path, format_version=99)
    res = cli("verify", str(info.path))
    assert res.exit_code != 0 and "snapshot.json: unknown format version 99" in res.output


def test_incompatible_opsbench(tmp_path: Path) -> None:
    info = make_snapshot(tmp_path / "snap")
    edit_index(info.path, opsbench_version="99.0.0")
    res = cli("verify", str(info.path))
    assert res.exit_code != 0 and "recorded by OpsBench 99.0.0" in res.output


def test_scenario_gone_in_an_archive_leaves_the_corpus_empty(tmp_path: Path) -> None:
    info = make_snapshot(tmp_path / "snap", scenario="shop-retired-long-ago")
    # Export checks the scenario too: pack it the way another OpsBench (which had the scenario) would have.
    from orchestrator.snapshots import archive as arch

    packed = arch.export(info.path, tmp_path / "old.tar.gz", check_scenario=False)
    res = cli("import", str(packed), "--into", str(tmp_path / "c"))
    assert res.exit_code != 0
    assert "scenario 'shop-retired-long-ago' no longer exists" in res.output
    assert list((tmp_path / "c").iterdir()) == []
    assert "no longer exists" in cli("verify", str(info.path)).output


def test_verify_checks_every_path_and_fails_when_any_is_bad(tmp_path: Path) -> None:
    good = make_snapshot(tmp_path / "good")
    bad = make_snapshot(tmp_path / "bad")
    edit_index(bad.path, format_version=2)
    res = CliRunner().invoke(main, ["snapshot", "verify", str(bad.path), str(good.path), "--json"])
    assert res.exit_code != 0
    rows = json.loads(res.output)
    assert [r["ok"] for r in rows] == [False, True]
    assert "unknown format version 2" in rows[0]["error"]


def test_export_needs_an_archive_suffix(tmp_path: Path) -> None:
    info = make_snapshot(tmp_path / "snap")
    res = cli("export", str(info.path), "--out", str(tmp_path / "x.zip"))
    assert res.exit_code != 0 and "must end in .tar.xz" in res.output
    assert not (tmp_path / "x.zip").exists()


def test_list_shows_unreadable_snapshots_with_their_problem(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    good = make_snapshot(corpus / "good")
    (corpus / "half").mkdir()
    (corpus / ".import-123").mkdir()  # an import under way: not listed
    rows = json.loads(cli("list", str(corpus), "--json").output)
    assert [(Path(r["path"]).name, r["snapshot_id"]) for r in rows] == [("good", good.snapshot_id), ("half", "")]
    assert "snapshot.json: missing" in rows[1]["problem"]
    assert "unreadable" in cli("list", str(corpus)).output
    res = cli("list", str(tmp_path / "none"))
    assert res.exit_code != 0 and "no such corpus directory" in res.output


@pytest.mark.e2e
def test_verify_replays_the_baseline_agent_on_a_sample_snapshot() -> None:
    res = cli("verify", str(SAMPLE), "--json")
    assert res.exit_code == 0, res.output
    [result] = json.loads(res.output)
    replay = result["replay"]
    assert result["ok"] and replay["status"] == "completed" and replay["problem"] == "", replay
    assert replay["scores"]["diagnosis"]["status"] == "scored" and replay["scores"]["diagnosis"]["fl_pass"] == 1.0
    runs = {r["id"]: r for r in store.list_runs()}
    assert (runs[replay["run_id"]]["purpose"], runs[replay["run_id"]]["mode"]) == ("verify", "replay")
    assert [r["id"] for r in store.list_runs() if r["purpose"] == "agent"] == []  # results count agents only


@pytest.mark.e2e
def test_a_replay_that_scores_nothing_fails_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("orchestrator.run_vars.default_agent", lambda scn: "exit 3")  # a baseline agent that fails
    res = cli("verify", str(SAMPLE))
    assert res.exit_code == 2, res.output
    assert "the baseline agent's replay was not scored: diagnosis no_submission" in res.output, res.output
    assert f"error: {SAMPLE.name.removesuffix('.tar.gz')}" in res.output
