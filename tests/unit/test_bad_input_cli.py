"""Bad input on the command line: one error, exit 2, no traceback, the path or option named; JSON with --json.

Covers the state folder (garbage index, index that is a folder, OPSBENCH_HOME a file) for every command that reads
it, the one error path (`cli.common.GuardedGroup`), long fault names, unwritable --output, and `new scenario`
refusing (writing nothing) what `opsbench validate` would reject."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from orchestrator import paths
from orchestrator.cli import main

STATE_COMMANDS = (["runs"], ["runs", "--json"], ["show", "x"], ["show", "x", "--json"], ["cleanup"],
                  ["cleanup", "--json"], ["topology", "x"], ["results"], ["results", "--json"], ["leaderboard"],
                  ["leaderboard", "--json"], ["report", "--out", "{tmp}/r.html"], ["snapshot", "list"],
                  ["snapshot", "list", "--json"])


def invoke(args: list[str], home: Path) -> Result:
    return CliRunner().invoke(main, args, env={"OPSBENCH_HOME": str(home)})


def assert_one_error(got: Result, named: str) -> None:
    assert got.exit_code == 2, got.output
    assert "Traceback" not in got.output and isinstance(got.exception, SystemExit), got.exception
    assert named in got.output, got.output


def broken_state(kind: str, tmp_path: Path) -> tuple[Path, str]:
    """An OPSBENCH_HOME of this kind, and the path its error must name."""
    home = tmp_path / "home"
    home.mkdir()
    if kind == "garbage index":
        (home / "opsbench.db").write_bytes(b"\x00garbage, not SQLite\xff" * 300)
        return home, str(home / "opsbench.db")
    if kind == "index is a folder":
        (home / "opsbench.db").mkdir()
        return home, str(home / "opsbench.db")
    file = tmp_path / "home-file"
    file.write_text("not a folder")
    return file, str(file)


@pytest.mark.parametrize("kind", ["garbage index", "index is a folder", "home is a file"])
@pytest.mark.parametrize("command", STATE_COMMANDS, ids=" ".join)
def test_a_broken_state_folder_is_one_error_naming_it(tmp_path: Path, kind: str, command: list[str]) -> None:
    home, named = broken_state(kind, tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    got = invoke(args, home)
    if command[0] in ("snapshot", "topology") and kind != "home is a file":
        assert got.exit_code in (0, 2) and "Traceback" not in got.output, got.output  # they read no run index
        return
    assert_one_error(got, named)
    if "--json" in command:
        error = json.loads(got.stdout)
        assert set(error) == {"error", "problems"} and named in error["error"]


def test_json_errors_are_one_object_on_stdout(tmp_path: Path) -> None:
    got = invoke(["runs", "--json", "--limit", "abc"], tmp_path)  # a usage error click finds
    assert got.exit_code == 2
    assert json.loads(got.stdout)["error"].startswith("Invalid value for '--limit'")
    plain = invoke(["runs", "--limit", "abc"], tmp_path)
    assert plain.exit_code == 2 and "Invalid value for '--limit'" in plain.output
    missing = invoke(["snapshot", "list", "--json", str(tmp_path / "nope")], tmp_path)
    assert missing.exit_code == 2 and json.loads(missing.stdout)["error"].endswith("no such corpus directory")


def test_spec_problems_come_out_as_json_problems(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"name: caf\xe9\n")
    got = invoke(["campaign", "--json", "--file", str(bad)], tmp_path)
    assert got.exit_code == 2
    error = json.loads(got.stdout)
    assert error["problems"] == [{"file": str(bad), "path": "byte 9", "message": "not UTF-8 text: save the file "
                                                                                 "as UTF-8"}]


@pytest.mark.parametrize("content", [b"scenarios: [caf\xe9]\n", ("[" * 5000 + "]" * 5000).encode()])
def test_a_campaign_file_that_cannot_be_read_is_one_error(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "campaign.yaml"
    bad.write_bytes(content)
    assert_one_error(invoke(["campaign", "--file", str(bad)], tmp_path), str(bad))


@pytest.mark.parametrize("name", ["x" * 300, "fault_" + "a" * 61])
def test_a_fault_name_too_long_is_refused(tmp_path: Path, name: str) -> None:
    got = invoke(["new", "fault", name], tmp_path)
    assert_one_error(got, "characters long")
    assert not any(p.name.startswith("fault_aaaa") or p.name.startswith("fault_xxx") for p in paths.ROLES_DIR.iterdir())


@pytest.mark.parametrize("command", [["awx", "export", "-o", "{file}/x.yml"], ["awx", "ee", "-o", "{file}/x.yml"],
                                     ["report", "--out", "{file}/r.html"], ["results", "--csv", "{file}/r.csv"]])
def test_an_output_path_that_cannot_be_written_is_a_usage_error(tmp_path: Path, command: list[str]) -> None:
    file = tmp_path / "a-file"
    file.write_text("x")
    got = invoke([a.replace("{file}", str(file)) for a in command], tmp_path / "home")
    assert_one_error(got, str(file))


def test_deep_json_given_to_score_is_one_error(tmp_path: Path) -> None:
    gt = next(paths.SPECS_DIR.glob("*/ground_truth.yaml"))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 20000 + "]" * 20000)
    fine = tmp_path / "out.json"
    fine.write_text("{}")
    for extra in (["--output", str(deep)], ["--output", str(fine), "--trajectory", str(deep)]):
        assert_one_error(invoke(["score", "--ground-truth", str(gt), *extra], tmp_path), str(deep))


# --- new scenario refuses what validate rejects ---------------------------------------------------------------


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project root with the real roles (symlinked), two real specs and their registry (as test_scaffold's)."""
    root = tmp_path / "project"
    roles = root / "roles"
    roles.mkdir(parents=True)
    for role in paths.ROLES_DIR.iterdir():
        if role.is_dir():
            (roles / role.name).symlink_to(role, target_is_directory=True)
    specs = root / "scenario_specs"
    for sid in ("shop-healthy-baseline", "loopweb-web-down"):
        shutil.copytree(paths.SPECS_DIR / sid, specs / sid)
    real = yaml.safe_load(paths.ID_REGISTRY.read_text())["ids"]
    (specs / "REGISTRY.yaml").write_text("# test copy\n" + yaml.safe_dump(
        {"ids": {sid: real[sid] for sid in ("shop-healthy-baseline", "loopweb-web-down")}}))
    monkeypatch.setattr(paths, "PROJECT_ROOT", root)
    monkeypatch.setattr(paths, "ROLES_DIR", roles)
    monkeypatch.setattr(paths, "SPECS_DIR", specs)
    monkeypatch.setattr(paths, "ID_REGISTRY", specs / "REGISTRY.yaml")
    return root


@pytest.mark.parametrize("options, field", [(["--propagation-length", "1000000"], "propagationLength"),
                                            (["--resolution-steps", "1000000"], "resolutionSteps")])
def test_new_scenario_refuses_what_validate_rejects_and_writes_nothing(sandbox: Path, options: list[str],
                                                                       field: str) -> None:
    registry = paths.ID_REGISTRY.read_text()
    listing = sorted(p.name for p in paths.SPECS_DIR.iterdir())
    got = CliRunner().invoke(main, ["new", "scenario", "shop-too-much", "--fault", "fault_loopweb_stop", *options])
    assert_one_error(got, field)
    assert "nothing was written" in got.output and f"({options[0]})" in got.output
    assert paths.ID_REGISTRY.read_text() == registry
    assert sorted(p.name for p in paths.SPECS_DIR.iterdir()) == listing
    as_json = CliRunner().invoke(main, ["new", "scenario", "shop-too-much", "--fault", "fault_loopweb_stop",
                                        *options, "--json"])
    assert as_json.exit_code == 2  # --json is no option of new scenario: click's usage error, as JSON
    assert "no such option" in json.loads(as_json.stdout)["error"].lower()


def test_new_scenario_still_writes_a_scaffold_validate_accepts(sandbox: Path) -> None:
    got = CliRunner().invoke(main, ["new", "scenario", "shop-fine", "--fault", "fault_loopweb_stop"])
    assert got.exit_code == 0, got.output
    assert "opsbench validate: 0 problem(s)" in got.output
    assert (paths.SPECS_DIR / "shop-fine" / "scenario.yaml").is_file()


def test_snapshot_export_to_an_unwritable_out_is_a_usage_error(tmp_path: Path) -> None:
    from orchestrator.snapshots.corpus import import_snapshot

    sample = sorted((Path(__file__).resolve().parents[1] / "data" / "snapshots").glob("*.tar.gz"))[0]
    snapshot = import_snapshot(sample, tmp_path / "corpus").path
    file = tmp_path / "a-file"
    file.write_text("x")
    for out in (file / "x.tar.gz", Path("/proc/opsbench-x.tar.gz")):
        got = invoke(["snapshot", "export", str(snapshot), "--out", str(out)], tmp_path / "home")
        assert_one_error(got, "--out")
        assert str(out.parent if out.parent == file else out) in got.output


@pytest.mark.parametrize("content", [b'{"topology": "caf\xe9"}', b"[" * 5000 + b"]" * 5000, b"{not json"])
def test_topology_of_a_run_with_an_unreadable_environment_names_it(tmp_path: Path, content: bytes) -> None:
    environment = tmp_path / "home" / "runs" / "r1" / "environment.json"
    environment.parent.mkdir(parents=True)
    environment.write_bytes(content)
    assert_one_error(invoke(["topology", "r1"], tmp_path / "home"), str(environment))
